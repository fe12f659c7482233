"""Benchmark: 4 GB all-reduces over every GPU of an HPN 7.0 pod with ECMP, and compile cost.

Full run: the published pod (15 segments, 15,360 GPUs); the hierarchical all-reduce has a
10 s target on 2 cores. Quick run: 2 segments (2,048 GPUs). For each algorithm (hier, the
double binary tree over hosts, the rail-aligned ring, and ``auto``) the simulated time and
bus bandwidth go in the details. The compile case times 1,000 compiles of one 80 MB DP
all-reduce (16 hosts, one GPU each) into a task graph, with and without the plan cache.
The fabric build and a tiny warm-up run (numba's compiled kernels load once per process)
are excluded from the timed figures.
"""

from __future__ import annotations

from hpnsim.benchmarks import Measurement, timed


def _allreduce(fabric, algo: str, size: float, target: float | None) -> Measurement:
    from hpnsim.collectives import run_collective

    n = fabric.n_gpus
    measurement, result = timed(
        f"collective: {algo} all-reduce 4 GB, {n} GPUs, ecmp",
        lambda: run_collective(fabric, "allreduce", range(n), size, algo=algo,
                               routing="ecmp", seed=0),
        target_seconds=target)
    measurement.details.update(
        algo=f"{result.algo}/{result.protocol}", simulated_time_ms=round(result.time * 1e3, 3),
        busbw_GBps=round(result.busbw / 1e9, 2), groups=result.n_groups,
        hash_collisions=result.hash_collisions, bottleneck=result.bottleneck)
    return measurement


def _compile_repeated(fabric, cached: bool, repeats: int = 1000) -> Measurement:
    from hpnsim.collectives import compile_collective, plan_cache
    from hpnsim.engine import TaskGraph

    group = [h * fabric.gpus_per_host for h in range(16)]

    def build():
        graph, done = TaskGraph(), []
        for _ in range(repeats):
            done = compile_collective(graph, fabric, "allreduce", group, 80e6, deps=done)
        return graph

    previous = plan_cache()["enabled"]
    plan_cache(enabled=cached, clear=True)
    try:
        label = "with" if cached else "without"
        measurement, graph = timed(f"collective: compile 1,000 DP all-reduces, {label} cache",
                                   build, None)
    finally:
        plan_cache(enabled=previous)
    measurement.details.update(tasks=len(graph), per_compile_ms=round(
        measurement.seconds / repeats * 1e3, 3))
    return measurement


def run(quick: bool = False) -> list[Measurement]:
    """Time ``run_collective`` per algorithm on the pod, and repeated compiles.

    >>> [m.name for m in run(quick=True)][:1]  # doctest: +SKIP
    ['collective: hier all-reduce 4 GB, 2048 GPUs, ecmp']
    """
    from hpnsim.collectives import run_collective
    from hpnsim.fabrics import hpn7

    warm = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2)
    for algo in ("hier", "tree", "ring"):
        run_collective(warm, "allreduce", range(warm.n_gpus), 1e6, algo=algo, routing="ecmp")
    fabric = hpn7(segments=2 if quick else 15)
    out = [_allreduce(fabric, "hier", 4e9, None if quick else 10.0)]
    out += [_allreduce(fabric, algo, 4e9, None) for algo in ("tree", "ring", "auto")]
    out += [_compile_repeated(fabric, cached) for cached in (False, True)]
    return out
