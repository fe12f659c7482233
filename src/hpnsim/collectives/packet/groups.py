"""Several ring collectives in one packet run, each measured
(:func:`run_groups_packet`): the HPN paper's Multi-AllReduce (one all-reduce per rail, all at
once) and a scenario's ``together:`` collectives under ``engine: packet``.

:func:`~hpnsim.collectives.packet.run.run_together_packet` runs the groups' rings in one
packet simulation, so they meet in the same queues. Each group's time is when the last of
its own rings ended its last step: simulated, or, in the windowed mode, extrapolated from
that ring's own steps (each ring at its own settled per-step time). Each group's result carries the counters, ports and
queues of the shared run; the slowest group is what a synchronous job waits for.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hpnsim.collectives.ops import busbw_factor
from hpnsim.collectives.packet.result import PacketCollectiveResult
from hpnsim.collectives.packet.run import PacketRun, run_together_packet

__all__ = ["group_network_times", "run_groups_packet"]


def group_network_times(shared: PacketCollectiveResult, sizes: list[int]) -> list[float]:
    """Network time of each group of a shared run whose rings are, in order, ``sizes[j]``
    rings per group: its slowest ring's time (``ring_time``: simulated, or extrapolated from
    that ring's own steps, :func:`~hpnsim.packet.ring.simulate_ring`).

    >>> from types import SimpleNamespace as S
    >>> group_network_times(S(ring_time=np.array([5.0, 9.0, 4.0])), [1, 2])
    [5.0, 9.0]
    """
    times = np.asarray(shared.ring_time, dtype=np.float64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [float(times[a:b].max()) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def run_groups_packet(fabric, op: str, groups, size: float, options=None,
                      run: PacketRun = PacketRun(), *, state=None,
                      **keywords) -> list[PacketCollectiveResult]:
    """Ring collectives of one operation and size on ``groups`` (lists of GPUs of one size),
    run together as packets; one result per group, in order, each with its own time, algbw
    and busbw and the shared run's counters (ECN marks, CNPs, PFC pauses, queues, ports).
    Arguments as :func:`~hpnsim.collectives.packet.run.run_together_packet`; the work
    estimate (``run.max_packets``) covers every group together.

    Examples
    --------
    Four hosts of one HPN segment, one all-reduce per rail: rail r uses NIC r and ToR pair
    r only, so every rail runs as fast as one rail alone.

    >>> from hpnsim.collectives.planning.concurrent import rail_groups
    >>> from hpnsim.collectives.packet.run import run_collective_packet
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    >>> groups = [g.tolist() for g in rail_groups(range(32), 8)]
    >>> rails = run_groups_packet(f, "allreduce", groups, 2**26, algo="ring",
    ...                           routing="hpn_dual_plane")
    >>> alone = run_collective_packet(f, "allreduce", groups[0], 2**26, algo="ring",
    ...                               routing="hpn_dual_plane")
    >>> len(rails), max(abs(r.busbw / alone.busbw - 1) for r in rails) < 0.01
    (8, True)
    """
    shared = run_together_packet(fabric, op, groups, size, options, run, state=state,
                                 **keywords)
    per_group = shared.n_groups // len(groups)
    times = group_network_times(shared, [per_group] * len(groups))
    out = []
    for gpus, network in zip(groups, times, strict=True):
        time = network + shared.nccl_latency
        algbw = size / time if time > 0 else np.inf
        out.append(replace(shared, time=time, network_time=network, algbw=algbw,
                           busbw=algbw * busbw_factor(shared.op, len(gpus))))
    return out
