"""Crux in the paper's settings: every scheduler and ablation on its testbed and on a trace.

Two settings (Cao et al., SIGCOMM 2024; reference/crux.md):

- ``testbed``: ``examples/crux_testbed.yaml`` (12 hosts x 8 A100, 800G of NICs per host,
  a 2-layer Clos with ECMP), a GPT-style job beside one, two and three BERT jobs, each spread
  over ToRs; utilization over the scenario's window.
- ``pcie``: ``examples/crux_testbed_pcie.yaml``, the same testbed with the paper's PCIe cases:
  the GPT-style job beside one and two BERT jobs whose GPUs are the PCIe-switch partners of
  its GPUs (two jobs under one switch share its link to one NIC and the NIC's port).
- ``trace``: a 2-layer Clos with ECMP where contention is common (one DCN+ pod: 8 ToRs of 8
  hosts x 8 GPUs, 512 GPUs, 200G per GPU down and 2:1 oversubscribed ToR uplinks), the seeded
  Lingjun-shaped mix (``lingjun_mix``) scaled to its GPUs, random allocation (jobs spread
  over ToRs, as on a busy production cluster), utilization over a window once the cluster is
  warm.

Every scheduler runs on the same jobs, placements and seed; each setting's iterations are
compiled once and shared (one ``TemplateCache``). Writes ``crux_paper.json`` and
``crux_paper.png`` into ``--out`` (default ``experiments/out/``) and, with ``--docs``, the
table between the ``crux_paper`` markers of ``docs/cluster.md``.

Usage: python experiments/crux_paper.py [--jobs 40] [--hours 2] [--seed 0] [--out DIR]
       [--settings testbed,pcie,trace] [--docs]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from hpnsim.fabrics import dcn_plus
from hpnsim.jsonable import to_jsonable
from hpnsim.report.canvas import pyplot, save
from hpnsim.scenario.cluster import run_cluster
from hpnsim.scenario.prepare import build_scenario_fabric
from hpnsim.scenario.spec import JobSpec, parse_scenario
from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster
from hpnsim.sched.cluster.jobs import TemplateCache
from hpnsim.sched.names import SCHEDULERS
from hpnsim.workloads.jobmix import lingjun_mix

ROOT = Path(__file__).resolve().parents[1]
TESTBED = ROOT / "examples" / "crux_testbed.yaml"
TESTBED_PCIE = ROOT / "examples" / "crux_testbed_pcie.yaml"
DOC = ROOT / "docs" / "cluster.md"
BEGIN, END = "<!-- crux_paper:begin -->", "<!-- crux_paper:end -->"


def testbed_runs(n_bert: int, scenario: Path = TESTBED) -> list[dict]:
    """Every scheduler on the testbed ``scenario`` with the GPT job and ``n_bert`` BERT
    jobs."""
    data = yaml.safe_load(scenario.read_text())
    data["jobs"] = data["jobs"][: 1 + n_bert]
    spec = parse_scenario(data)
    fabric = build_scenario_fabric(spec, {})
    templates = TemplateCache(fabric, spec.routing)
    return [run_cluster(spec, fabric, scheduler=s, templates=templates).summary()
            for s in SCHEDULERS]


def clos_trace_fabric():
    """One DCN+ pod as a 2-layer Clos: 8 ToRs x 8 hosts x 8 GPUs at 200G, each ToR's 12.8T
    down over 16 x 400G up (2:1), 8 Aggs."""
    return dcn_plus(pods=1, segments=8, hosts_per_segment=8, gpus_per_host=8,
                    dual_tor="single", ports_per_nic=1, port_speed="200G",
                    uplink_speed="400G", tor_uplinks=16, aggs_per_pod=8)


def trace_runs(n_jobs: int, hours: float, seed: int) -> list[dict]:
    """Every scheduler on the seeded mix over the window [hours / 2, hours]."""
    fabric = clos_trace_fabric()
    mix = lingjun_mix(n_jobs, seed=seed, hours=hours, gpus_available=fabric.n_gpus)
    jobs = [ClusterJob(s.name, s.train_job(), arrival=s.arrival, duration=s.duration)
            for s in (JobSpec(**d) for d in mix)]
    templates = TemplateCache(fabric)
    window = (hours * 1800.0, hours * 3600.0)
    return [simulate_cluster(fabric, jobs, scheduler=s, allocator="random", seed=seed,
                             window=window, templates=templates).summary()
            for s in SCHEDULERS]


def table(results: dict) -> str:
    """The markdown table: per setting and scheduler, both window utilizations and the
    gain over ``none``."""
    lines = ["| setting | scheduler | util. per cluster GPU | vs none | util. per GPU held | "
             "mean slowdown | jobs (GPUs) contended |",
             "|---|---|---|---|---|---|---|"]
    for setting, runs in results.items():
        base = runs[0]["window_utilization"]
        for r in runs:
            gain = "—" if r["scheduler"] == "none" else \
                f"{100 * (r['window_utilization'] / base - 1):+.1f}%"
            lines.append(
                f"| {setting} | {r['scheduler']} | {100 * r['window_utilization']:.2f}% | "
                f"{gain} | {100 * r['window_held_utilization']:.2f}% | "
                f"{r['mean_slowdown']:.3f} | {100 * r['contended_job_share']:.0f}% "
                f"({100 * r['contended_gpu_share']:.0f}%) |")
    return "\n".join(lines)


def figure(results: dict, path: Path) -> Path:
    """Gain over ``none`` of every scheduler, one group of bars per setting."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.8), layout="constrained")
    names = [s for s in SCHEDULERS if s != "none"]
    width = 0.8 / max(len(results), 1)
    for k, (setting, runs) in enumerate(results.items()):
        base = runs[0]["window_utilization"]
        by = {r["scheduler"]: r["window_utilization"] for r in runs}
        ax.bar([i + k * width for i in range(len(names))],
               [100 * (by[s] / base - 1) for s in names], width, label=setting)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(names))], names)
    ax.set_ylabel("utilization over the window vs none (%)")
    ax.set_title("Schedulers in the Crux paper's settings (computation in a period T)")
    ax.legend(fontsize=8, frameon=False)
    return save(fig, path, 120)


def merged(path: Path, results: dict) -> dict:
    """The rows of an earlier run at ``path`` whose setting was not run now, and the new
    ones: running some ``--settings`` keeps the other settings' figures (in the table order
    testbed, PCIe cases, trace)."""
    rows = json.loads(path.read_text()) if path.exists() else {}
    rows.update(results)
    rank = ("testbed,", "testbed PCIe", "trace")
    return dict(sorted(rows.items(), key=lambda kv: next(
        (i for i, prefix in enumerate(rank) if kv[0].startswith(prefix)), len(rank))))


def write_docs(text: str) -> None:
    doc = DOC.read_text()
    head, rest = doc.split(BEGIN)
    _, tail = rest.split(END)
    DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "experiments" / "out"))
    parser.add_argument("--settings", default="testbed,pcie,trace")
    parser.add_argument("--docs", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    for setting in args.settings.split(","):
        t0 = time.perf_counter()
        if setting == "testbed":
            for n in (1, 2, 3):
                results[f"testbed, GPT + {n} BERT"] = testbed_runs(n)
        elif setting == "pcie":
            for n in (1, 2):
                results[f"testbed PCIe, GPT + {n} BERT on its switches"] = testbed_runs(
                    n, TESTBED_PCIE)
        elif setting == "trace":
            results[f"trace, 2-layer Clos ({args.jobs} jobs)"] = trace_runs(
                args.jobs, args.hours, args.seed)
        else:
            raise SystemExit(f"--settings: testbed, pcie or trace, got {setting!r}")
        print(f"{setting}: {time.perf_counter() - t0:.1f} s", flush=True)
    results = merged(out / "crux_paper.json", results)
    (out / "crux_paper.json").write_text(json.dumps(to_jsonable(results), indent=1))
    print(table(results))
    print(f"wrote {figure(results, out / 'crux_paper.png')}")
    if args.docs:
        write_docs(table(results))


if __name__ == "__main__":
    main()
