"""Closed forms of the simulated algorithms on a real group, and the ``auto`` choice.

A group is ``hosts`` hosts with ``gpus_per_host`` of its GPUs each (:class:`GroupShape`):
NVLink inside a host, one NIC per GPU across hosts. The formulas below are what the
simulator gives for that group on a non-blocking network with the NIC ports evenly used
(spraying, or one port per channel); the tests check them to 1e-9. Every time is
``base + hop latencies + bytes / (protocol efficiency · bandwidth)``, with NCCL's latency
tables (:func:`~hpnsim.collectives.cost.hop_latencies`).

``auto`` (:func:`choose_algorithm`) takes the algorithm and protocol with the smallest
predicted time on the actual group, the way NCCL's tuner does with its own model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpnsim.collectives.cost import hierarchical_time, hop_latencies, nccl_time
from hpnsim.collectives.ops import (
    PROTOCOL_EFFICIENCY,
    SUPPORTED,
    normalize_algorithm,
    normalize_op,
    normalize_protocol,
)
from hpnsim.collectives.tree import dtree_depth, dtree_load
from hpnsim.errors import InputError

#: algorithms ``auto`` weighs (NCCL's ring and tree, and the rail-aligned hierarchical form)
AUTO_CANDIDATES = ("tree", "ring", "hier")


@dataclass(frozen=True)
class GroupShape:
    """A collective's group as the closed forms see it.

    ``hosts`` hosts with ``gpus_per_host`` group GPUs each (``uniform``: the same local GPUs
    on every host, so rails line up); ``bw_intra`` NVLink bytes/s per GPU and direction,
    ``bw_inter`` one GPU's NIC bytes/s (all ports); ``pxn``: the last GPU of a host hands a
    ring's network hop over NVLink to the GPU of the right rail.

    >>> GroupShape(4, 8, 200e9, 50e9, nic_ports=2).n
    32
    """

    hosts: int
    gpus_per_host: int
    bw_intra: float
    bw_inter: float
    nic_ports: int = 1
    uniform: bool = True
    pxn: bool = True

    @property
    def n(self) -> int:
        return self.hosts * self.gpus_per_host

    @classmethod
    def from_fabric(cls, fabric, gpus, pxn: bool = True) -> GroupShape:
        """Shape of the GPU group ``gpus`` on ``fabric`` (GPUs per host: the most on one host).

        >>> from hpnsim.fabrics import fat_tree
        >>> GroupShape.from_fabric(fat_tree(4), range(16)).hosts
        16
        """
        from hpnsim.collectives.schedule import host_groups, uniform_hosts
        from hpnsim.fabrics.fabric import LinkKind

        gpus = np.asarray(gpus, dtype=np.int64)
        gph = fabric.gpus_per_host
        groups = host_groups(gpus, gph)
        out = fabric.out_of(int(fabric.gpu_node[gpus[0]]))
        nvlink = fabric.link_capacity[out][fabric.link_kind[out] == LinkKind.NVLINK]
        access = fabric.gpu_access_link[int(gpus[0])]
        nic = float(fabric.link_capacity[access[access >= 0]].sum())
        return cls(len(groups), max(g.size for g in groups),
                   float(nvlink.max()) if nvlink.size else math.inf, nic,
                   int(fabric.ports_per_nic), uniform_hosts(groups, gph),
                   bool(pxn) and bool(fabric.meta.get("rail_optimized", False)))


def default_channel_count(op: str, algo: str, hosts: int, gpus_per_host: int, uniform: bool,
                          nic_ports: int = 1) -> int:
    """Channels NCCL would open, roughly: a ring (or tree pair) per NIC port of every rail
    of the group, so every port of every NIC carries traffic (the tree also on one host, so
    its chain heads rotate over all GPUs); ``nic_ports`` per rail ring for hier, and for
    halving-doubling and send/recv; one for all-to-all (its many peers spread the load).

    >>> default_channel_count("allreduce", "ring", 4, 8, True, 2)
    16
    >>> default_channel_count("allreduce", "hier", 4, 8, True, 2)
    2
    """
    if op == "alltoall":
        return 1
    if uniform and (algo == "tree" or (algo == "ring" and hosts > 1)):
        return gpus_per_host * nic_ports
    return nic_ports


def _rail_share(channels: int, k: int) -> float:
    """Most channels on one rail, as a fraction of all (channel c uses rail c mod k)."""
    return math.ceil(channels / k) / channels


def ring_time(op: str, shape: GroupShape, size: float, *, channels: int, alpha_intra: float,
              alpha_inter: float, efficiency: float = 1.0) -> float:
    """Rail-aligned ring (all-reduce: 2 rounds, all-gather/reduce-scatter: 1) on ``shape``.

    Channel c walks every host's GPUs from rail c mod k, so its network hop stays on one
    rail; with PXN the last GPU of a host relays its chunk over NVLink, so every GPU sends
    one member per channel over NVLink. Each member moves r(n-1)/n·S/C:
    r(n-1)·steps, r(H-1) of them across hosts;
    time = r(n-H)·α_intra + r(H-1)·α_inter + r(n-1)/n·S·max(u/B_intra, f/B_inter)/eff, with u
    = 1 (PXN or one host), (k-1)/k without PXN, 0 for one GPU per host, and f the largest
    share of channels on one rail (1/k when C is a multiple of k), 0 on one host.

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
    return rounds * ((n - h) * alpha_intra + (h - 1) * alpha_inter) + moved * bw / efficiency


def tree_time(shape: GroupShape, size: float, *, channels: int, alpha_intra: float,
              alpha_inter: float, efficiency: float = 1.0) -> float:
    """Double binary tree all-reduce over hosts (:func:`~hpnsim.collectives.tree.tree_stages`).

    Latency: 2(k-1)·α_intra + 2·ceil(log2 H)·α_inter. Bandwidth: all 2C stages run at one
    rate, set by the busiest link. A GPU in the middle of a channel's chain sends 2 members
    per tree (up and down), a chain end 1; a host's NIC sends ``dtree_load(H)`` members per
    channel (4 for H >= 4: 3 in the tree where it is interior, 1 in the other). With C a
    multiple of k this is max(2(k-1)/k·S/B_intra, dtree_load(H)/2·S/(k·B_inter)), i.e.
    2S/(k·B_inter) on the network for H >= 4 — NCCL's "tree algbw = busBw / 2".

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


def hd_time(op: str, shape: GroupShape, size: float, *, alpha_intra: float,
            alpha_inter: float, efficiency: float = 1.0) -> float:
    """Halving-doubling (:func:`~hpnsim.collectives.tree.hd_stages`) on ``shape``.

    Step k exchanges S/2^(k+1) with the partner at distance 2^k: over NVLink while every
    pair of the step shares a host, else over the NIC (all ports). Reduce-scatter and
    all-gather take the steps once, all-reduce twice, plus a whole-buffer fold and unfold
    when n is not a power of two. Channels split every step, so they do not change the
    time on evenly used links.

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


def model_time(op: str, algo: str, protocol: str, shape: GroupShape, size: float, *,
               channels: int | None = None) -> float:
    """Predicted time (s) of ``op`` with ``algo`` and ``protocol`` on ``shape``: the closed
    forms above for ring, tree, hd and hier (all-reduce, all-gather, reduce-scatter); NCCL's
    own model (:func:`~hpnsim.collectives.cost.nccl_time`) for the rest.

    >>> round(model_time("allreduce", "tree", "simple", GroupShape(16, 8, 200e9, 50e9, 2),
    ...                  8e9) * 1e3, 3)
    70.182
    """
    op, algo, proto = normalize_op(op), normalize_algorithm(algo), normalize_protocol(protocol)
    if not size > 0 or not math.isfinite(size):
        raise InputError("size", f"must be finite and > 0, got {size!r}")
    if shape.n == 1:
        return 0.0
    if channels is None:
        channels = default_channel_count(op, algo, shape.hosts, shape.gpus_per_host,
                                         shape.uniform, shape.nic_ports)
    base, nv_hop, net_hop = hop_latencies(algo, proto)
    eff = PROTOCOL_EFFICIENCY[proto]
    common = dict(channels=channels, alpha_intra=nv_hop, alpha_inter=net_hop, efficiency=eff)
    if algo == "tree" and op == "allreduce":
        return base + tree_time(shape, size, **common)
    if algo == "ring" and op in ("allreduce", "allgather", "reducescatter"):
        return base + ring_time(op, shape, size, **common)
    if algo == "hier" and op in ("allreduce", "allgather", "reducescatter"):
        return base + hierarchical_time(
            op, shape.gpus_per_host, shape.hosts, size / eff, alpha_intra=nv_hop,
            bw_intra=shape.bw_intra, alpha_inter=net_hop, bw_inter=shape.bw_inter)
    if algo == "hd" and op in ("allreduce", "allgather", "reducescatter"):
        return base + hd_time(op, shape, size, alpha_intra=nv_hop, alpha_inter=net_hop,
                              efficiency=eff)
    bus = min(shape.bw_intra, shape.gpus_per_host * shape.bw_inter) if shape.hosts > 1 \
        else shape.bw_intra
    family = "tree" if algo == "tree" else "ring"
    return nccl_time(op, family, proto, shape.n, shape.hosts, size, bus)


def auto_candidates(op: str, shape: GroupShape) -> tuple[str, ...]:
    """Algorithms ``auto`` weighs for ``op`` on ``shape``: ring and tree as NCCL, plus hier
    when it differs from a ring (several hosts, several GPUs each, rails lined up).

    >>> auto_candidates("allreduce", GroupShape(4, 8, 200e9, 50e9))
    ('tree', 'ring', 'hier')
    >>> auto_candidates("alltoall", GroupShape(4, 8, 200e9, 50e9))
    ('direct',)
    """
    op = normalize_op(op)
    hier_ok = shape.uniform and shape.hosts > 1 and shape.gpus_per_host > 1
    found = tuple(a for a in AUTO_CANDIDATES if a in SUPPORTED[op] and (a != "hier" or hier_ok))
    return found or (SUPPORTED[op][0],)


def choose_algorithm(op: str, shape: GroupShape, size: float, *,
                     channels: int | None = None) -> tuple[str, str]:
    """``(algorithm, protocol)`` with the smallest :func:`model_time` on the actual group.

    >>> many = GroupShape(256, 8, 200e9, 50e9, nic_ports=2)
    >>> choose_algorithm("allreduce", many, 64 * 2**10)
    ('tree', 'll')
    >>> fast_nvlink = GroupShape(4, 8, 450e9, 50e9, nic_ports=2)   # network-bound hosts
    >>> choose_algorithm("allreduce", fast_nvlink, 2**30)
    ('ring', 'simple')
    """
    best = min((model_time(op, a, p, shape, size, channels=channels), i, a, p)
               for i, a in enumerate(auto_candidates(op, shape)) for p in PROTOCOL_EFFICIENCY)
    return best[2], best[3]


def choose_protocol(op: str, algo: str, shape: GroupShape, size: float, *,
                    channels: int | None = None) -> str:
    """The protocol with the smallest :func:`model_time` for a fixed algorithm.

    >>> choose_protocol("allreduce", "ring", GroupShape(2, 8, 200e9, 50e9, 2), 2**30)
    'simple'
    """
    return min(PROTOCOL_EFFICIENCY, key=lambda p: model_time(op, algo, p, shape, size,
                                                             channels=channels))
