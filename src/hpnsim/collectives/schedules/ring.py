"""Ring algorithms: ring all-reduce/all-gather/reduce-scatter, pipelined chains for
broadcast/reduce, and the hierarchical (rail-aligned) form.

Rings on multi-GPU hosts follow NCCL: when every host holds the same local GPUs, channel c
walks each host's GPUs starting at local id ``c mod k``, so the hop to the next host leaves
from the GPU of rail ``c``: the last GPU of the host hands its chunk over NVLink to that GPU
(PXN) and the network hop stays on one rail. Successive channels use successive rails.
"""

from __future__ import annotations

import numpy as np

from hpnsim.collectives.schedules.schedule import (
    SCHEDULE_DOCS,
    ChannelKind,
    Schedule,
    Stage,
    host_groups,
    host_rails,
    relay_gpu,
    split_steps,
    uniform_hosts,
)
from hpnsim.errors import InputError


def ring_order(gpus: np.ndarray, gpus_per_host: int, channel: int = 0,
               pxn: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Ring of a channel: ``(order, via)`` with ``via[i]`` the relay of hop order[i]->order[i+1].

    Parameters
    ----------
    gpus : numpy.ndarray
        The group, rank order.
    gpus_per_host : int
        GPUs per host of the fabric.
    channel : int
        The channel: its ring starts each host at rail ``channel mod k``.
    pxn : bool
        Relay cross-rail hops over NVLink.

    Returns
    -------
    tuple of numpy.ndarray
        ``(order, via)``; ``via[i]`` is -1 for a direct hop.

    Examples
    --------
    >>> order, via = ring_order(np.arange(16), 8, channel=1)
    >>> order[:9].tolist(), via[7].item(), via[15].item()
    ([1, 2, 3, 4, 5, 6, 7, 0, 9], 1, 9)
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    groups = host_groups(gpus, gpus_per_host)
    n = gpus.size
    via = np.full(n, -1, dtype=np.int64)
    if len(groups) < 2 or not uniform_hosts(groups, gpus_per_host):
        return gpus.copy(), via
    k = groups[0].size
    parts = [np.roll(np.sort(g), -(channel % k)) for g in groups]
    order = np.concatenate(parts)
    if pxn and k > 1:
        for h, part in enumerate(parts):
            last = (h + 1) * k - 1
            nxt = order[(last + 1) % n]
            if nxt % gpus_per_host != part[-1] % gpus_per_host:
                via[last] = part[0]
    return order, via


def _crossings(order: np.ndarray, gpus_per_host: int, closed: bool, steps: int = 0) -> int:
    """Network steps of the slowest chain: on a closed ring, the most host changes in
    ``steps`` consecutive edges (every rank's chunk walks ``steps`` edges from its own rank,
    and the collective waits for the chunk whose walk crosses hosts most: 2 x hosts for an
    all-reduce with three or more GPUs per host, hosts for an all-gather with two or more);
    one per host change on an open chain."""
    hosts = order // gpus_per_host
    if not closed:
        return int((hosts[1:] != hosts[:-1]).sum())
    cross = (hosts != np.roll(hosts, -1)).astype(np.int64)   # edge i: order[i] -> order[i+1]
    if steps <= 0 or not cross.any():
        return 0
    n = cross.size
    walked = np.concatenate(([0], np.cumsum(np.tile(cross, steps // n + 2))))
    start = np.arange(n)
    return int((walked[start + steps] - walked[start]).max())


@SCHEDULE_DOCS.fill
def ring_stages(sch: Schedule, gpus_per_host: int, channels: int, *, pxn: bool = True,
                root: int = 0) -> None:
    """Append one independent ring (or chain) stage per channel, each carrying S/channels.

    All-reduce: every member moves 2(n-1)/n of its share in 2(n-1) steps; all-gather and
    reduce-scatter (n-1)/n in n-1 steps; broadcast and reduce move the whole share down a
    pipelined chain rooted at ``root`` (rank index into the group).

    Parameters
    ----------
    {sch, gpus_per_host, channels, pxn}
    root : int
        Rank index of the broadcast/reduce root.

    Returns
    -------
    {appended}

    Examples
    --------
    >>> sch = Schedule("allreduce", "ring", np.arange(4), 8.0)
    >>> ring_stages(sch, 8, 1)
    >>> st = sch.stages[0]
    >>> st.src.tolist(), st.dst.tolist(), st.size, st.intra_steps
    ([0, 1, 2, 3], [1, 2, 3, 0], 12.0, 6)
    """
    n, share = sch.gpus.size, sch.size / channels
    for c in range(channels):
        order, via = ring_order(sch.gpus, gpus_per_host, c, pxn)
        src, dst = order, np.roll(order, -1)
        if sch.op in ("broadcast", "reduce"):
            start = int(np.flatnonzero(order == sch.gpus[root])[0])
            order, via = np.roll(order, -start), np.roll(via, -start)
            src, dst, via = order[:-1], order[1:], via[:-1]
            crossings = _crossings(order, gpus_per_host, closed=False)
            if sch.op == "reduce":
                # reverse the chain; the relay must sit on the new source's host
                src, dst = dst, src
                via = np.where(via >= 0, relay_gpu(src, dst, gpus_per_host), -1)
            size, steps = share, n - 1
        else:
            rounds = 2 if sch.op == "allreduce" else 1
            size, steps = rounds * (n - 1) / n * share, rounds * (n - 1)
            crossings = _crossings(order, gpus_per_host, closed=True, steps=steps)
        intra, inter = split_steps(steps, crossings)
        sch.add(Stage(src, dst, size, intra, inter, conn=c, via=via,
                      name=f"{sch.op}/ring/ch{c}", kind=ChannelKind.RING))


def _intra_ring(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    src = np.concatenate([np.sort(g) for g in groups])
    dst = np.concatenate([np.roll(np.sort(g), -1) for g in groups])
    return src, dst


@SCHEDULE_DOCS.fill
def hier_stages(sch: Schedule, gpus_per_host: int, channels: int) -> None:
    """Pipelined hierarchical collective: NVLink rings inside hosts, one ring per rail across
    hosts, all phases running at once (NCCL-style chunk pipelining).

    All-reduce = reduce-scatter inside each host (k GPUs) + all-reduce of S/k per rail across
    H hosts (``channels`` rings per rail) + all-gather inside the host. All-gather = per-rail
    all-gather, then inside the host; reduce-scatter the reverse. Chunks flow through the
    phases one after another, so every phase runs while the others do: the stages have no
    dependencies, and a later phase's latency counts the hops of the phases before it (the
    pipeline fill: one chunk's hop latencies; its bandwidth term, at most (k-1)·chunk/B ≈ a
    few µs, is left out). Large buffers then take max(NVLink time, network time), not their
    sum. Needs the same local GPUs on every host.

    Parameters
    ----------
    {sch, gpus_per_host, channels}

    Returns
    -------
    {appended}

    Examples
    --------
    >>> sch = Schedule("allreduce", "hier", np.arange(16), 16.0)
    >>> hier_stages(sch, 8, 1)
    >>> [(s.name, s.n_members, s.size, s.deps) for s in sch.stages][:2]
    [('allreduce/hier/intra-rs', 16, 14.0, ()), ('allreduce/hier/rail0/ch0', 2, 2.0, ())]
    >>> sch.stages[-1].intra_steps, sch.stages[-1].inter_steps     # fill: RS + rail ring
    (14, 2)
    """
    groups = host_groups(sch.gpus, gpus_per_host)
    if not uniform_hosts(groups, gpus_per_host):
        raise InputError("algo", "hier needs the same local GPUs on every host of the group")
    if sch.op not in ("allreduce", "allgather", "reducescatter"):
        raise InputError("algo", f"hier supports allreduce, allgather, reducescatter, got {sch.op!r}")
    k, h, size = groups[0].size, len(groups), sch.size
    rails = host_rails(groups)  # rails[l] = GPU l of every host
    intra_src, intra_dst = _intra_ring(groups)
    intra_size = (k - 1) / k * size
    rounds = 2 if sch.op == "allreduce" else 1
    before = [0, 0]          # (intra, inter) hops of the phases already in the pipeline

    def intra(name: str) -> None:
        if k == 1:
            return
        sch.add(Stage(intra_src, intra_dst, intra_size, before[0] + k - 1, before[1],
                      name=f"{sch.op}/hier/{name}", kind=ChannelKind.HIER_INTRA,
                      lane=int(name == "intra-ag")))
        before[0] += k - 1

    def inter() -> None:
        if h == 1:
            return
        part = rounds * (h - 1) / h * size / k / channels
        for lane, members in enumerate(rails):
            for c in range(channels):
                sch.add(Stage(members, np.roll(members, -1), part, before[0],
                              before[1] + rounds * (h - 1), conn=c,
                              name=f"{sch.op}/hier/rail{lane}/ch{c}",
                              kind=ChannelKind.RAIL, lane=lane))
        before[1] += rounds * (h - 1)

    phases = {"allreduce": ("rs", "net", "ag"), "allgather": ("net", "ag"),
              "reducescatter": ("rs", "net")}[sch.op]
    for phase in phases:
        if phase == "net":
            inter()
        else:
            intra(f"intra-{phase}")
