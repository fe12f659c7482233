"""Crux and its rivals on a shared cluster: every scheduler and ablation on one trace.

Two settings, each a seeded synthetic Lingjun-shaped job mix (``lingjun_mix``: LLaMA/BERT
models, 1-512 GPUs, Poisson arrivals) run by ``simulate_cluster`` in steady-state mode with
packed allocation (``--allocator`` to change), until a fixed horizon so every scheduler is
measured over the same period (the utilization is then a computation *rate*, the quantity
Crux's theorem is about):

- ``lingjun``: the Lingjun production topology (847 hosts, 6,776 GPUs);
- ``clos``: a 2-tier Clos, one HPN 7.0 pod cut to 8 segments of 16 hosts (1,024 GPUs;
  rail ToRs with 8 x 400G uplinks to 8 Aggs per plane for 16 x 200G down, one aggregation
  tier), so jobs of more than 16 hosts cross the aggregation tier; the mix is scaled to its
  GPUs.

Writes ``crux_lingjun.json`` (per setting and scheduler: the run's summary and utilization
timeline), ``crux_lingjun.csv`` and ``crux_lingjun.png`` (utilization over time per
scheduler, one panel per setting) into ``--out`` (default ``experiments/out/``).

Usage: python experiments/crux_lingjun.py [--jobs 40] [--hours 2] [--seed 0] [--out DIR]
       [--settings lingjun,clos] [--merge A/crux_lingjun.json B/crux_lingjun.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

from hpnsim.fabrics import hpn7
from hpnsim.fabrics.lingjun import from_lingjun
from hpnsim.jsonable import to_jsonable
from hpnsim.report.canvas import pyplot, save
from hpnsim.scenario.spec import JobSpec
from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster
from hpnsim.sched.policies import SCHEDULERS
from hpnsim.workloads.jobmix import lingjun_mix

SETTINGS = {
    "lingjun": (from_lingjun, 1.0),
    # an HPN 7.0 pod is a 2-tier Clos (ToR, Agg); small segments make jobs cross the Aggs
    "clos": (lambda: hpn7(segments=8, hosts_per_segment=16, backup_hosts=0, tor_uplinks=8,
                          aggs_per_plane=8),
             0.5),
}


def trace(fabric, n_jobs: int, hours: float, seed: int) -> list[ClusterJob]:
    mix = lingjun_mix(n_jobs, seed=seed, hours=hours, gpus_available=fabric.n_gpus)
    specs = [JobSpec(**d) for d in mix]
    return [ClusterJob(s.name, s.train_job(), arrival=s.arrival, duration=s.duration)
            for s in specs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "out"))
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--allocator", default="packed",
                        help="packed, topology_aware or random (random spreads jobs over ToRs)")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="only merge the crux_lingjun.json of separate runs (one per "
                             "setting, e.g. run in parallel) into --out")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        merged = {}
        for path in args.merge:
            merged.update(json.loads(Path(path).read_text()))
        rows = [{"setting": s, "scheduler": n, **{k: r[k] for k in (
            "jobs", "gpu_utilization", "allocated_utilization", "mean_jct", "mean_slowdown",
            "contended_job_share", "contended_gpu_share", "wall_seconds")}}
                for s, runs in merged.items() for n, r in runs.items()]
        _write(merged, rows, out)
        return
    results: dict = {}
    rows = []
    for setting in args.settings.split(","):
        build, share = SETTINGS[setting]
        fabric = build()
        jobs = trace(fabric, max(1, round(args.jobs * share)), args.hours, args.seed)
        horizon = args.hours * 3600.0
        setting = setting if args.allocator == "packed" else f"{setting}/{args.allocator}"
        results[setting] = {}
        for name in SCHEDULERS:
            start = time.perf_counter()
            r = simulate_cluster(fabric, jobs, scheduler=name, horizon=horizon,
                                 seed=args.seed, allocator=args.allocator)
            wall = time.perf_counter() - start
            summary = r.summary()
            results[setting][name] = {**summary, "wall_seconds": wall,
                                      "timeline": r.timeline()}
            rows.append({"setting": setting, "scheduler": name, "jobs": len(jobs),
                         "gpus": fabric.n_gpus, "wall_seconds": round(wall, 1),
                         **{k: summary[k] for k in ("gpu_utilization",
                                                     "allocated_utilization", "mean_jct",
                                                     "mean_slowdown", "contended_job_share",
                                                     "contended_gpu_share")}})
            print(f"{setting:8} {name:10} util {summary['gpu_utilization']:.4%} "
                  f"held {summary['allocated_utilization']:.4%} slowdown "
                  f"{summary['mean_slowdown']:.4f} contended "
                  f"{summary['contended_job_share']:.1%} ({wall:.0f} s)", flush=True)
    _write(results, rows, out)


def _write(results: dict, rows: list, out: Path) -> None:
    _plot(results, out / "crux_lingjun.png")
    (out / "crux_lingjun.json").write_text(json.dumps(to_jsonable(results), indent=1))
    with open(out / "crux_lingjun.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out / 'crux_lingjun.png'}, .json, .csv")


def _plot(results: dict, path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(results), 1, figsize=(9, 3.4 * len(results)), squeeze=False)
    for ax, (setting, runs) in zip(axes[:, 0], results.items(), strict=True):
        for name, run in runs.items():
            xs = [x for row in run["timeline"] for x in (row["start"], row["end"])]
            ys = [row["utilization"] for row in run["timeline"] for _ in range(2)]
            ax.plot([x / 3600 for x in xs], [100 * y for y in ys], lw=1.1,
                    label=f"{name} ({run['gpu_utilization']:.2%})")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("time (h)")
        ax.set_ylabel("GPU utilization (%)")
        ax.set_title(f"{setting}: cluster GPU utilization per scheduler")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=4, fontsize=7,
                  frameon=False)
    fig.tight_layout()
    save(fig, path, 120)


if __name__ == "__main__":
    main()
