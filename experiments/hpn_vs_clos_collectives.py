"""HPN 7.0 vs DCN+ (3-tier Clos): collectives on 448-2,048 GPUs spread across segments.

For each fabric (hpn7 with 4 segments, dcn_plus with 8 pods; each with H800-class 400 GB/s
and H100-class 900 GB/s NVLink), routing policy (ECMP and
HPN's dual-plane routing; precise path selection as a reference) and GPU count, runs
- a 1 GiB ring all-reduce and a 1 GiB ring all-gather over the whole group,
- four concurrent 1 GiB hierarchical all-reduces, each over a quarter of the group,
with jobs placed host by host round-robin across segments (the placement a busy cluster
gives), over several seeds. Writes ``results.csv``, ``results.json`` and
``hpn_vs_clos_collectives.png`` into the output directory (default ``experiments/out/``).

Usage: python experiments/hpn_vs_clos_collectives.py [--out DIR] [--seeds 3] [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

from hpnsim.collectives import busbw_factor, compile_into
from hpnsim.collectives.run import network_links
from hpnsim.engine import TaskGraph, simulate
from hpnsim.fabrics import dcn_plus, hpn7

SIZE = 2.0**30
FABRICS = {  # H800-class NVLink (400 GB/s bidirectional), then H100-class (900 GB/s)
    "hpn7": lambda: hpn7(segments=4),          # 4 x 1,024 GPUs, rail-optimized, dual-plane
    "dcn_plus": lambda: dcn_plus(pods=8),      # 32 x 128 GPUs, 3-tier Clos
    "hpn7/nv900": lambda: hpn7(segments=4, nvlink="900GB/s"),
    "dcn_plus/nv900": lambda: dcn_plus(pods=8, nvlink="900GB/s"),
}
ROUTINGS = ("ecmp", "hpn_dual_plane", "precise")
PATTERNS = {  # name -> (op, algo, jobs)
    "allreduce": ("allreduce", "ring", 1),
    "allgather": ("allgather", "ring", 1),
    "4x allreduce": ("allreduce", "hier", 4),
}


def spread_hosts(fabric, n_gpus: int) -> np.ndarray:
    """GPU indices of ``n_gpus / 8`` whole hosts dealt round-robin across segments."""
    gph = fabric.gpus_per_host
    host_node = fabric.gpu_node[::gph]
    seg = (fabric.node_pod[host_node].astype(np.int64) * 1000
           + fabric.node_segment[host_node])
    segments = np.unique(seg)
    per_segment = [np.flatnonzero(seg == s) for s in segments]
    hosts = []
    slot = 0
    while len(hosts) < n_gpus // gph:
        for members in per_segment:
            if slot < members.size and len(hosts) < n_gpus // gph:
                hosts.append(members[slot])
        slot += 1
    hosts = np.array(hosts)
    return (hosts[:, None] * gph + np.arange(gph)).ravel()


def wave_collisions(compiled_jobs, fabric) -> tuple[float, int]:
    """Flows per switch-to-switch link in waves that run together across all jobs."""
    mask = network_links(fabric)
    waves: dict[tuple, np.ndarray] = {}
    for job in compiled_jobs:
        for stage, paths in zip(job.schedule.stages, job.paths, strict=True):
            load = waves.setdefault(stage.deps, np.zeros(fabric.n_links))
            load += np.bincount(paths.links, weights=paths.weight, minlength=fabric.n_links)
    worst, collisions = 0.0, 0.0
    for load in waves.values():
        net = load[mask]
        worst = max(worst, float(net.max()))
        collisions += float(np.clip(net - 1, 0, None).sum())
    return worst, int(round(collisions))


def run_case(fabric, pattern: str, gpus: np.ndarray, routing: str, seed: int) -> dict:
    op, algo, jobs = PATTERNS[pattern]
    graph = TaskGraph()
    compiled = []
    for j, part in enumerate(np.array_split(gpus, jobs)):
        compiled.append(compile_into(graph, fabric, op, part, SIZE, algo=algo,
                                     protocol="simple", routing=routing, seed=seed * 97 + j,
                                     name=f"job{j}"))
    sim = simulate(graph, fabric.link_capacity)
    times = np.array([sim.finish[c.final].max() for c in compiled])
    n_job = gpus.size // jobs
    busbw = SIZE / times * busbw_factor(op, n_job)
    worst, collisions = wave_collisions(compiled, fabric)
    ratio = sim.link_bytes / fabric.link_capacity
    return {"time_ms": float(times.max() * 1e3), "busbw_GBps": float(busbw.min() / 1e9),
            "mean_busbw_GBps": float(busbw.mean() / 1e9), "max_link_flows": worst,
            "hash_collisions": collisions,
            "bottleneck": fabric.link_name(int(np.argmax(ratio)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/out", help="output directory")
    parser.add_argument("--seeds", type=int, default=3, help="ECMP seeds per case")
    parser.add_argument("--quick", action="store_true", help="448 GPUs, one seed")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the figure from OUT/results.json without simulating")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        rows = json.loads((out / "results.json").read_text())
        counts = sorted({r["n_gpus"] for r in rows})
        plot(rows, counts, out / "hpn_vs_clos_collectives.png")
        print(f"wrote {out / 'hpn_vs_clos_collectives.png'}")
        return
    counts = (448,) if args.quick else (448, 1024, 2048)
    seeds = range(1 if args.quick else args.seeds)
    rows = []
    for fname, build in FABRICS.items():
        fabric = build()
        for n in counts:
            gpus = spread_hosts(fabric, n)
            for pattern in PATTERNS:
                for routing in ROUTINGS:
                    for seed in seeds:
                        start = time.perf_counter()
                        row = {"fabric": fname, "n_gpus": n, "pattern": pattern,
                               "routing": routing, "seed": seed}
                        row.update(run_case(fabric, pattern, gpus, routing, seed))
                        row["wall_s"] = round(time.perf_counter() - start, 3)
                        rows.append(row)
                        print(f"{fname:15s} {n:5d} {pattern:13s} {routing:15s} seed {seed}: "
                              f"busbw {row['busbw_GBps']:7.2f} GB/s, collisions "
                              f"{row['hash_collisions']:4d}, max flows/link "
                              f"{row['max_link_flows']:.0f}", flush=True)
    with open(out / "results.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "results.json").write_text(json.dumps(rows, indent=2))
    plot(rows, counts, out / "hpn_vs_clos_collectives.png")
    print(f"wrote {out / 'results.csv'}, {out / 'results.json'}, "
          f"{out / 'hpn_vs_clos_collectives.png'}")


#: one hue per fabric (light: the 900 GB/s NVLink variant), one hatch per routing
COLORS = {"hpn7": "#1f77b4", "hpn7/nv900": "#9ecae1", "dcn_plus": "#d62728",
          "dcn_plus/nv900": "#fcae91"}
HATCHES = {"ecmp": "", "hpn_dual_plane": "//", "precise": "xx"}


def plot(rows: list[dict], counts, path: Path) -> None:
    """Mean (over seeds) bus bandwidth of the slowest job, one panel per pattern."""
    from hpnsim.report.plots import plot_collective_panels

    plot_collective_panels(rows, counts, path, patterns=PATTERNS, fabrics=FABRICS,
                           routings=ROUTINGS, colors=COLORS, hatches=HATCHES)


if __name__ == "__main__":
    main()
