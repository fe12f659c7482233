"""Benchmark: one 4 GB hierarchical all-reduce over every GPU of an HPN 7.0 pod with ECMP.

Full run: the published pod (15 segments, 15,360 GPUs); target under 10 s on 2 cores.
Quick run: 2 segments (2,048 GPUs). The fabric build and a tiny warm-up run (numba's
compiled kernels load once per process) are excluded from the timed figure.
"""

from __future__ import annotations

from hpnsim.benchmarks import Measurement, timed


def run(quick: bool = False) -> list[Measurement]:
    """Time ``run_collective`` on the pod; returns one :class:`Measurement`.

    >>> [m.name for m in run(quick=True)]  # doctest: +SKIP
    ['collective: hier all-reduce 4 GB, 2048 GPUs, ecmp']
    """
    from hpnsim.collectives import run_collective
    from hpnsim.fabrics import hpn7

    warm = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2)
    run_collective(warm, "allreduce", range(warm.n_gpus), 1e6, algo="hier", routing="ecmp")
    fabric = hpn7(segments=2 if quick else 15)
    n, size = fabric.n_gpus, 4e9
    measurement, result = timed(
        f"collective: hier all-reduce 4 GB, {n} GPUs, ecmp",
        lambda: run_collective(fabric, "allreduce", range(n), size, algo="hier",
                               routing="ecmp", seed=0),
        target_seconds=None if quick else 10.0)
    measurement.details.update(
        simulated_time_ms=round(result.time * 1e3, 3), busbw_GBps=round(result.busbw / 1e9, 2),
        groups=result.n_groups, hash_collisions=result.hash_collisions,
        bottleneck=result.bottleneck)
    return [measurement]
