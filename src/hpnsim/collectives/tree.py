"""Double binary tree (NCCL) and halving-doubling (Rabenseifner) all-reduce schedules."""

from __future__ import annotations

import numpy as np

from hpnsim.collectives.schedule import Schedule, Stage
from hpnsim.errors import InputError


def btree_parents(n: int) -> np.ndarray:
    """Parent rank of every rank in NCCL's binary tree (root 0 has parent -1).

    A rank's parent clears its lowest set bit and sets the next one, or just clears it when
    that would leave the range (``ncclGetBtree``).

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


def _deepest(parent: np.ndarray, crosses: np.ndarray) -> tuple[int, int]:
    """(intra, inter) hop counts on the root path with the most network hops, then most hops."""
    n = parent.size
    intra, inter = np.zeros(n, np.int64), np.zeros(n, np.int64)
    node = np.arange(n)
    while True:
        live = parent[node] >= 0
        if not live.any():
            break
        inter[live] += crosses[node[live]]
        intra[live] += ~crosses[node[live]]
        node = np.where(live, parent[node], node)
    best = np.lexsort((intra, inter))[-1]
    return int(intra[best]), int(inter[best])


def tree_stages(sch: Schedule, gpus_per_host: int, channels: int) -> None:
    """Double binary tree all-reduce: per channel, two concurrent stages (one per tree), each
    carrying half the share up (reduce) and down (broadcast), pipelined; latency is two
    traversals of the deepest root path.

    >>> sch = Schedule("allreduce", "tree", np.arange(4), 8.0)
    >>> tree_stages(sch, 1, 1)
    >>> [(s.n_members, s.size, s.inter_steps) for s in sch.stages]
    [(6, 4.0, 4), (6, 4.0, 4)]
    """
    if sch.op != "allreduce":
        raise InputError("algo", f"tree supports allreduce only, got {sch.op!r}")
    gpus, n = sch.gpus, sch.gpus.size
    share = sch.size / channels / 2
    for c in range(channels):
        for t, parent in enumerate(dtree_parents(n)):
            child = np.flatnonzero(parent >= 0)
            up_src, up_dst = gpus[child], gpus[parent[child]]
            crosses = np.zeros(n, dtype=bool)
            crosses[child] = up_src // gpus_per_host != up_dst // gpus_per_host
            intra, inter = _deepest(parent, crosses)
            sch.add(Stage(np.concatenate([up_src, up_dst]), np.concatenate([up_dst, up_src]),
                          share, 2 * intra, 2 * inter, conn=2 * c + t,
                          name=f"allreduce/tree{t}/ch{c}"))


def hd_stages(sch: Schedule, gpus_per_host: int, channels: int) -> None:
    """Halving-doubling: recursive-halving reduce-scatter (distance 1, 2, 4, ... with halves
    S/2, S/4, ...) then recursive-doubling all-gather in reverse (MPICH's order, so the large
    early steps stay inside a host). All-reduce folds the n - p ranks beyond the largest power
    of two p into partners first (whole buffer) and sends them the result last.
    All-gather and reduce-scatter need n a power of two.

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
            crosses = bool(np.any(src // gpus_per_host != dst // gpus_per_host))
            return (sch.add(Stage(src, dst, size, int(not crosses), int(crosses), deps=deps,
                                  conn=c, name=f"{sch.op}/hd/{name}/ch{c}")),)

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
