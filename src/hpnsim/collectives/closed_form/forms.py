"""Closed forms of each simulated algorithm on a group of multi-GPU hosts
(:class:`~hpnsim.collectives.closed_form.shape.GroupShape`): rail-aligned ring, double binary tree,
halving-doubling, pipelined hierarchical, NVLS and NVLS+tree.

Each is what the simulator gives for that group on a non-blocking network with the NIC
ports evenly used; :func:`~hpnsim.collectives.closed_form.model.model_time` picks the one of an
algorithm and supplies NCCL's latencies and protocol efficiency.

Examples
--------
>>> shape = GroupShape(4, 8, 200e9, 50e9)
>>> ring_time("allreduce", shape, 8e9, channels=16, alpha_intra=0.0, alpha_inter=0.0)
0.0775
"""

from __future__ import annotations

import math

import numpy as np

from hpnsim.collectives.closed_form.nvlstree import nvlstree_fill
from hpnsim.collectives.closed_form.shape import GroupShape
from hpnsim.collectives.docfill import DocEntries
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.collectives.schedules.nvls import nvls_loads
from hpnsim.collectives.schedules.tree import dtree_depth, dtree_load

__all__ = ["hd_time", "hier_time", "nvls_time", "ring_time", "tree_time"]

#: Docstring entries the closed forms share (one calling contract: op, shape, size, channels,
#: alphas, efficiency; seconds back).
_FORM_DOCS = DocEntries(
    op="""op : str
    allreduce, allgather or reducescatter (canonical).""",
    shape="""shape : GroupShape
    Hosts, GPUs per host and the bandwidths NCCL sees.""",
    size="""size : float
    Bytes, nccl-tests convention.""",
    channels="""channels : int
    Parallel rings/trees.""",
    alphas="""alpha_intra, alpha_inter : float
    Seconds per step over NVLink and over the network.""",
    efficiency="""efficiency : float
    Protocol payload per wire byte.""",
    seconds="""float
    Seconds.""",
)


def _rail_share(channels: int, k: int) -> float:
    """Most channels on one rail, as a fraction of all (channel c uses rail c mod k)."""
    return math.ceil(channels / k) / channels


@_FORM_DOCS.fill
def ring_time(op: str, shape: GroupShape, size: float, *, channels: int, alpha_intra: float,
              alpha_inter: float, efficiency: float = 1.0) -> float:
    """Rail-aligned ring (all-reduce: 2 rounds, all-gather/reduce-scatter: 1) on ``shape``.

    Channel c walks every host's GPUs from rail c mod k, so its network hop stays on one
    rail; with PXN the last GPU of a host relays its chunk over NVLink, so every GPU sends
    one member per channel over NVLink. Each member moves r(n-1)/n·S/C in r(n-1) steps;
    every rank's chunk walks r(n-1) consecutive edges and the collective waits for the walk
    that crosses hosts most, X = ceil(r(n-1)/k) crossings (2H for an all-reduce with k >= 3,
    H for an all-gather with k >= 2; 0 on one host);
    time = (r(n-1) - X)·α_intra + X·α_inter + r(n-1)/n·S·max(u/B_intra, f/B_inter)/eff, with u
    = 1 (PXN or one host), (k-1)/k without PXN, 0 for one GPU per host, and f the largest
    share of channels on one rail (1/k when C is a multiple of k), 0 on one host.

    Parameters
    ----------
    {op, shape, size, channels, alphas, efficiency}

    Returns
    -------
    {seconds}

    Examples
    --------
    >>> ring_time("allreduce", GroupShape(4, 8, 200e9, 50e9), 8e9, channels=16,
    ...           alpha_intra=0.0, alpha_inter=0.0)
    0.0775
    """
    n, h, k = shape.n, shape.hosts, shape.gpus_per_host
    rounds = 2 if op == "allreduce" else 1
    moved = rounds * (n - 1) / n * size
    nv = 0.0 if k == 1 else (1.0 if (shape.pxn or h == 1) else (k - 1) / k)
    net = 0.0 if h == 1 else _rail_share(channels, k)
    bw = max(nv / shape.bw_intra, net / shape.bw_inter)
    steps = rounds * (n - 1)
    inter = math.ceil(steps / k) if h > 1 else 0    # the slowest chunk's walk
    return (steps - inter) * alpha_intra + inter * alpha_inter + moved * bw / efficiency


@_FORM_DOCS.fill
def tree_time(shape: GroupShape, size: float, *, channels: int, alpha_intra: float,
              alpha_inter: float, efficiency: float = 1.0) -> float:
    """Double binary tree all-reduce over hosts (:func:`~hpnsim.collectives.schedules.tree.tree_stages`).

    Latency: 2(k-1)·α_intra + 2·ceil(log2 H)·α_inter. Bandwidth: all 2C stages run at one
    rate, set by the busiest link. A GPU in the middle of a channel's chain sends 2 members
    per tree (up and down), a chain end 1; a host's NIC sends ``dtree_load(H)`` members per
    channel (4 for H >= 4: 3 in the tree where it is interior, 1 in the other). With C a
    multiple of k this is max(2(k-1)/k·S/B_intra, dtree_load(H)/2·S/(k·B_inter)), i.e.
    2S/(k·B_inter) on the network for H >= 4 — NCCL's "tree algbw = busBw / 2".

    Parameters
    ----------
    {shape, size, channels, alphas, efficiency}

    Returns
    -------
    {seconds}

    Examples
    --------
    >>> tree_time(GroupShape(16, 8, 200e9, 50e9), 8e9, channels=16, alpha_intra=0.0,
    ...           alpha_inter=0.0)
    0.07
    """
    h, k = shape.hosts, shape.gpus_per_host
    share = size / channels / 2
    position = (np.arange(k)[:, None] - np.arange(channels)[None, :]) % k
    sends = (position > 0).astype(np.int64) + (position < k - 1)
    nv_members = 2 * int(sends.sum(axis=1).max()) if k > 1 else 0
    net_members = dtree_load(h) * math.ceil(channels / k)
    bw = max(nv_members / shape.bw_intra, net_members / shape.bw_inter)
    latency = 2 * (k - 1) * alpha_intra + 2 * dtree_depth(h) * alpha_inter
    return latency + share * bw / efficiency


@_FORM_DOCS.fill
def hd_time(op: str, shape: GroupShape, size: float, *, alpha_intra: float,
            alpha_inter: float, efficiency: float = 1.0) -> float:
    """Halving-doubling (:func:`~hpnsim.collectives.schedules.tree.hd_stages`) on ``shape``.

    Step k exchanges S/2^(k+1) with the partner at distance 2^k: over NVLink while every
    pair of the step shares a host, else over the NIC (all ports). Reduce-scatter and
    all-gather take the steps once, all-reduce twice, plus a whole-buffer fold and unfold
    when n is not a power of two. Channels split every step, so they do not change the
    time on evenly used links.

    Parameters
    ----------
    {op, shape, size, alphas, efficiency}

    Returns
    -------
    {seconds}

    Examples
    --------
    >>> round(hd_time("allreduce", GroupShape(4, 8, 200e9, 50e9), 8e9, alpha_intra=0.0,
    ...               alpha_inter=0.0), 4)    # 2·(7/8·S/200e9 + 3/32·S/50e9)
    0.1
    """
    n, k = shape.n, shape.gpus_per_host
    p = 1 << (n.bit_length() - 1)
    ranks = np.arange(p)

    def hop(a, b) -> tuple[float, float]:
        crosses = bool(np.any(a // k != b // k))
        return (alpha_inter, shape.bw_inter) if crosses else (alpha_intra, shape.bw_intra)

    passes = int(op in ("allreduce", "reducescatter")) + int(op in ("allreduce", "allgather"))
    total = 0.0
    for level in range(p.bit_length() - 1):
        alpha, bw = hop(ranks, ranks ^ (1 << level))
        total += passes * (alpha + size / (2 << level) / (bw * efficiency))
    if p != n and op == "allreduce":
        alpha, bw = hop(np.arange(p, n), np.arange(n - p))
        total += 2 * (alpha + size / (bw * efficiency))
    return total


@_FORM_DOCS.fill
def hier_time(op: str, shape: GroupShape, size: float, *, alpha_intra: float,
              alpha_inter: float, efficiency: float = 1.0) -> float:
    """Pipelined hierarchical collective (:func:`~hpnsim.collectives.schedules.ring.hier_stages`).

    All phases run at once: the NVLink rings (reduce-scatter, all-gather: (k-1)/k·S each per
    GPU) share NVLink, the rail rings move r(H-1)/H·S/k per NIC. Each phase ends at its
    phase starts after the hop latencies of the phases up to it (pipeline fill); NVLink is
    then busy from the first NVLink phase's start (both NVLink phases share it, the last
    needs at least its own bytes after its start), the NIC from the rail phase's start. So
    large buffers take max(NVLink time, network time), not the sum.

    Parameters
    ----------
    {op, shape, size, alphas, efficiency}

    Returns
    -------
    {seconds}

    Examples
    --------
    >>> hier_time("allreduce", GroupShape(2, 8, 400e9, 50e9), 8e9, alpha_intra=0.0,
    ...           alpha_inter=0.0)        # max(2·7/8·8e9/400e9, 2·1/2·1e9/50e9)
    0.035
    """
    k, h = shape.gpus_per_host, shape.hosts
    rounds = 2 if op == "allreduce" else 1
    phases = {"allreduce": ("rs", "net", "ag"), "allgather": ("net", "ag"),
              "reducescatter": ("rs", "net")}[op]
    n_intra = sum(p != "net" for p in phases) if k > 1 else 0
    nv = n_intra * (k - 1) / k * size / shape.bw_intra / efficiency if k > 1 else 0.0
    net = rounds * (h - 1) / h * size / k / shape.bw_inter / efficiency if h > 1 else 0.0
    latency, worst, first_nv = 0.0, 0.0, None
    for phase in phases:
        if phase == "net" and h > 1:
            latency += rounds * (h - 1) * alpha_inter
            worst = max(worst, net + latency)
        elif phase != "net" and k > 1:
            latency += (k - 1) * alpha_intra
            first_nv = latency if first_nv is None else first_nv
            worst = max(worst, first_nv + nv, latency + nv / n_intra)
    return worst


@_FORM_DOCS.fill
def nvls_time(op: str, shape: GroupShape, size: float, nccl: NcclParams, *,
              channels: int, alpha_intra: float, alpha_inter: float) -> float:
    """NVLS on one host, NVLS+tree across hosts (:mod:`~hpnsim.collectives.schedules.nvls`).

    One host: α_intra + S·max(out, in)/(B_intra·nvls_efficiency), (out, in) from
    :func:`~hpnsim.collectives.schedules.nvls.nvls_loads` (all-reduce (k+1)/k both ways). Across
    hosts the per-rail double binary tree over hosts carries S/k at the same time
    (:func:`tree_time` on one GPU per host), after the NVLS hop, plus what NCCL's chunk
    pipeline adds to that steady rate (its fill over the tree's depth:
    :func:`~hpnsim.collectives.closed_form.nvlstree.nvlstree_fill`).

    Parameters
    ----------
    {op, shape, size}
    nccl : NcclParams
        Its ``nvls_efficiency`` scales NVLink.
    {channels, alphas}

    Returns
    -------
    {seconds}

    Examples
    --------
    >>> t = nvls_time("allreduce", GroupShape(1, 8, 400e9, 50e9), 8e9, NcclParams(),
    ...               channels=2, alpha_intra=0.0, alpha_inter=0.0)
    >>> round(t * 0.85, 9)           # 8e9 · 9/8 / 400e9
    0.0225
    """
    k = shape.gpus_per_host
    intra = size * max(nvls_loads(op, k)) / (shape.bw_intra * nccl.nvls_efficiency)
    if shape.hosts == 1:
        return alpha_intra + intra
    rail = GroupShape(shape.hosts, 1, shape.bw_intra, shape.bw_inter, shape.nic_ports)
    net = tree_time(rail, size / k, channels=channels, alpha_intra=0.0,
                    alpha_inter=alpha_inter)
    return alpha_intra + max(intra, net) + nvlstree_fill(shape, size, nccl)
