"""Double binary tree (NCCL, over hosts) and halving-doubling (Rabenseifner) all-reduce schedules."""

from __future__ import annotations

import numpy as np

from hpnsim.collectives.schedules.schedule import (
    SCHEDULE_DOCS,
    ChannelKind,
    Schedule,
    Stage,
    crosses_hosts,
    hd_lane,
    host_groups,
)
from hpnsim.errors import InputError


def btree_parents(n: int) -> np.ndarray:
    """Parent rank of every rank in NCCL's binary tree (root 0 has parent -1).

    A rank's parent clears its lowest set bit and sets the next one, or just clears it when
    that would leave the range (``ncclGetBtree``).

    Parameters
    ----------
    n : int
        Ranks.

    Returns
    -------
    numpy.ndarray
        Parent rank per rank.

    Examples
    --------
    >>> btree_parents(8).tolist()
    [-1, 2, 4, 2, 0, 6, 4, 6]
    """
    ranks = np.arange(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    r = ranks[1:]
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    parent[1:] = np.where(up >= n, r ^ bit, up)
    return parent


def dtree_parents(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parents in NCCL's two complementary trees: the binary tree and its mirror (even n)
    or its shift by one (odd n), so most interior ranks of one tree are leaves of the other.

    Parameters
    ----------
    n : int
        Ranks.

    Returns
    -------
    tuple of numpy.ndarray
        Parent rank per rank in each tree.

    Examples
    --------
    >>> [p.tolist() for p in dtree_parents(4)]
    [[-1, 2, 0, 2], [1, 3, 1, -1]]
    """
    first = btree_parents(n)
    ranks = np.arange(n)
    if n % 2 == 0:
        mapped = first[n - 1 - ranks]
        second = np.where(mapped < 0, -1, n - 1 - mapped)
    else:
        mapped = first[(ranks - 1) % n]
        second = np.where(mapped < 0, -1, (mapped + 1) % n)
    return first, second


def dtree_depth(n: int) -> int:
    """Network hops from the deepest rank to the root in either of the two trees over ``n``
    ranks: ceil(log2 n) (both trees, every n; checked in the tests).

    Parameters
    ----------
    n : int
        Ranks.

    Returns
    -------
    int

    Examples
    --------
    >>> dtree_depth(1), dtree_depth(2), dtree_depth(8), dtree_depth(9)
    (0, 1, 3, 4)
    """
    return int(n - 1).bit_length() if n > 1 else 0


def dtree_load(n: int) -> int:
    """Most tree edges at one rank, summed over the two trees: the members a host's NIC sends
    (and receives) per channel. 4 for n >= 4 (interior with 3 edges in one tree, a leaf in
    the other), 2 for n = 2, 3 for n = 3, 0 for one rank.

    Parameters
    ----------
    n : int
        Ranks.

    Returns
    -------
    int

    Examples
    --------
    >>> [dtree_load(n) for n in (1, 2, 3, 4, 100)]
    [0, 2, 3, 4, 4]
    """
    if n < 2:
        return 0
    degree = np.zeros(n, dtype=np.int64)
    for parent in dtree_parents(n):
        child = np.flatnonzero(parent >= 0)
        degree[child] += 1
        np.add.at(degree, parent[child], 1)
    return int(degree.max())


def host_chains(groups: list[np.ndarray], channel: int) -> list[np.ndarray]:
    """Each host's NVLink chain for ``channel``: its GPUs in index order, rotated so the chain
    head (the GPU that talks to the other hosts) is local position ``channel mod size``; with
    the same GPUs on every host that is rail ``channel mod k`` everywhere, so every network
    hop of the channel stays on one rail.

    Parameters
    ----------
    groups : list of numpy.ndarray
        The group's GPUs per host (:func:`~hpnsim.collectives.schedules.schedule.host_groups`).
    channel : int

    Returns
    -------
    list of numpy.ndarray
        One chain per host, head first.

    Examples
    --------
    >>> [c.tolist() for c in host_chains([np.array([0, 1, 2]), np.array([8, 9, 10])], 1)]
    [[1, 2, 0], [9, 10, 8]]
    """
    return [np.roll(np.sort(g), -(channel % g.size)) for g in groups]


@SCHEDULE_DOCS.fill
def tree_stages(sch: Schedule, gpus_per_host: int, channels: int) -> None:
    """NCCL's double binary tree all-reduce, built over hosts.

    Inside a host the group's GPUs form a chain over NVLink (:func:`host_chains`); across
    hosts, two complementary binary trees over the hosts (:func:`dtree_parents`, hosts in
    order of first appearance) link the chain heads. Per channel, two concurrent stages (one
    per tree) each carry half the channel's share up (reduce) and down (broadcast) every
    edge, pipelined: every member moves S/channels/2 bytes, and the latency is the deepest
    chain tail to the root and back, 2(k-1) NVLink and 2·ceil(log2 H) network hops.

    Parameters
    ----------
    {sch, gpus_per_host, channels}

    Returns
    -------
    {appended}

    Examples
    --------
    >>> sch = Schedule("allreduce", "tree", np.arange(16), 8.0)
    >>> tree_stages(sch, 8, 1)
    >>> [(s.n_members, s.size, s.intra_steps, s.inter_steps) for s in sch.stages]
    [(30, 4.0, 14, 2), (30, 4.0, 14, 2)]
    >>> s = sch.stages[0]; net = s.src // 8 != s.dst // 8    # channel 0: rail 0 between hosts
    >>> s.src[net].tolist(), s.dst[net].tolist()
    ([8, 0], [0, 8])
    """
    if sch.op != "allreduce":
        raise InputError("algo", f"tree supports allreduce only, got {sch.op!r}")
    groups = host_groups(sch.gpus, gpus_per_host)
    hosts = len(groups)
    parents = dtree_parents(hosts) if hosts > 1 else (np.array([-1]), np.array([-1]))
    intra_hops = max(g.size for g in groups) - 1
    inter_hops = dtree_depth(hosts)
    share = sch.size / channels / 2
    for c in range(channels):
        chains = host_chains(groups, c)
        heads = np.array([chain[0] for chain in chains], dtype=np.int64)
        up_src = np.concatenate([chain[1:] for chain in chains])
        up_dst = np.concatenate([chain[:-1] for chain in chains])
        for t, parent in enumerate(parents):
            child = np.flatnonzero(parent >= 0)
            src = np.concatenate([up_src, heads[child]])
            dst = np.concatenate([up_dst, heads[parent[child]]])
            sch.add(Stage(np.concatenate([src, dst]), np.concatenate([dst, src]), share,
                          2 * intra_hops, 2 * inter_hops, conn=2 * c + t,
                          name=f"allreduce/tree{t}/ch{c}", kind=ChannelKind.TREE, lane=t))


@SCHEDULE_DOCS.fill
def hd_stages(sch: Schedule, gpus_per_host: int, channels: int) -> None:
    """Halving-doubling: recursive-halving reduce-scatter (distance 1, 2, 4, ... with halves
    S/2, S/4, ...) then recursive-doubling all-gather in reverse (MPICH's order, so the large
    early steps stay inside a host). All-reduce folds the n - p ranks beyond the largest power
    of two p into partners first (whole buffer) and sends them the result last.
    All-gather and reduce-scatter need n a power of two.

    Parameters
    ----------
    {sch, gpus_per_host, channels}

    Returns
    -------
    {appended}

    Examples
    --------
    >>> sch = Schedule("allreduce", "hd", np.arange(4), 8.0)
    >>> hd_stages(sch, 8, 1)
    >>> [(s.dst.tolist(), s.size) for s in sch.stages]
    [([1, 0, 3, 2], 4.0), ([2, 3, 0, 1], 2.0), ([2, 3, 0, 1], 2.0), ([1, 0, 3, 2], 4.0)]
    """
    gpus, n = sch.gpus, sch.gpus.size
    p = 1 << (n.bit_length() - 1)
    if p != n and sch.op != "allreduce":
        raise InputError("algo", f"hd {sch.op} needs a power-of-two group, got {n} GPUs")
    levels = p.bit_length() - 1
    extra = n - p
    for c in range(channels):
        share = sch.size / channels
        deps: tuple[int, ...] = ()

        def step(src, dst, size, name, deps, c=c):
            crosses = crosses_hosts(src, dst, gpus_per_host)
            return (sch.add(Stage(src, dst, size, int(not crosses), int(crosses), deps=deps,
                                  conn=c, name=f"{sch.op}/hd/{name}/ch{c}",
                                  kind=ChannelKind.HD, lane=hd_lane(name))),)

        if extra and sch.op == "allreduce":
            deps = step(gpus[p:], gpus[:extra], share, "fold", deps)
        ranks = np.arange(p)
        if sch.op in ("allreduce", "reducescatter"):
            for k in range(levels):
                d = 1 << k
                deps = step(gpus[ranks], gpus[ranks ^ d], share / (2 << k), f"rs{d}", deps)
        if sch.op in ("allreduce", "allgather"):
            for k in reversed(range(levels)):
                d = 1 << k
                deps = step(gpus[ranks], gpus[ranks ^ d], share / (2 << k), f"ag{d}", deps)
        if extra and sch.op == "allreduce":
            step(gpus[:extra], gpus[p:], share, "unfold", deps)
