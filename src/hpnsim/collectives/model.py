"""Closed forms of the simulated algorithms on a real group, and the ``auto`` choice.

A group is ``hosts`` hosts with ``gpus_per_host`` of its GPUs each (:class:`GroupShape`):
NVLink inside a host, one NIC per GPU across hosts. The formulas below are what the
simulator gives for that group on a non-blocking network with the NIC ports evenly used
(spraying, or one port per channel); the tests check them to 1e-9. Every time is
``base + hop latencies + bytes / (protocol efficiency · bandwidth)``, with NCCL's latency
tables (:func:`~hpnsim.collectives.cost.hop_latencies`).

``auto`` (:func:`choose_algorithm`) takes the algorithm and protocol with the smallest
predicted time on the actual group, the way NCCL's tuner does with its own model
(``tuning.cc``: time = latency + bytes / bandwidth per algorithm and protocol, NVLS and
NVLS+tree with Simple only).

Which algorithms ``auto`` may weigh follows NCCL 2.18.3 (the version of the HPN paper's
experiments; ``src/graph/tuning.cc`` ``ncclTopoTuneModel`` and ``src/enqueue.cc``
``getAlgoInfo`` at tag v2.18.3-1): all-gather, reduce-scatter, broadcast and reduce run
ring only (NVLS all-gather came with 2.19); NVLS (``NCCL_ALGO_NVLS``) runs inside one host
only (disabled across nodes without CollNet); NVLS+tree (``NCCL_ALGO_NVLS_TREE``) runs across
hosts only (disabled when ``nNodes == 1``), all-reduce only; both need NVLink SHARP
(``nccl.nvls``: every Hopper part and B200) and Simple. hpnsim adds its own pipelined
hierarchical form (``hier``). The times compared are this module's closed forms, which the
simulator reproduces, with the latencies of :mod:`~hpnsim.collectives.nccl` (later NCCL
tables; 2.18.3's NVLS latencies were 23 us base and, for NVLS+tree, 2(nNodes-1)·19 us,
which moves the size where NVLS+tree takes over, not the large-buffer choice). Every efficiency and latency comes from one
:class:`~hpnsim.collectives.nccl.NcclParams`, the same the simulation runs with: link
efficiencies scale ``bw_intra`` / ``bw_inter`` (:meth:`GroupShape.from_fabric`), protocol
efficiencies divide the bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpnsim.collectives.cost import latency_family, nccl_time
from hpnsim.collectives.nccl import PROTOCOLS, NcclParams, resolve_nccl
from hpnsim.collectives.nvls import nvls_loads
from hpnsim.collectives.ops import (
    SUPPORTED,
    normalize_algorithm,
    normalize_op,
    normalize_protocol,
)
from hpnsim.collectives.tree import dtree_depth, dtree_load
from hpnsim.errors import InputError

#: algorithms ``auto`` weighs (NCCL's ring and tree, the rail-aligned hierarchical form, and
#: NVLS / NVLS+tree where the GPUs have NVLink SHARP)
AUTO_CANDIDATES = ("tree", "ring", "hier", "nvls", "nvlstree")


@dataclass(frozen=True)
class GroupShape:
    """A collective's group as the closed forms see it.

    ``hosts`` hosts with ``gpus_per_host`` group GPUs each (``uniform``: the same local GPUs
    on every host, so rails line up); ``bw_intra`` NVLink bytes/s per GPU and direction,
    ``bw_inter`` one GPU's NIC bytes/s (all ports), both as NCCL moves payload over them
    (link efficiencies applied by :meth:`from_fabric`); ``pxn``: the last GPU of a host
    hands a ring's network hop over NVLink to the GPU of the right rail; ``nvls``: NVSwitch
    multicast/reduction is available.

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
    nvls: bool = False

    @property
    def n(self) -> int:
        return self.hosts * self.gpus_per_host

    @classmethod
    def from_fabric(cls, fabric, gpus, pxn: bool = True,
                    nccl: NcclParams | None = None) -> GroupShape:
        """Shape of the GPU group ``gpus`` on ``fabric`` (GPUs per host: the most on one host),
        with ``nccl``'s link efficiencies applied: NVLink × ``nvlink_efficiency``, the NIC ×
        ``network_efficiency`` (or the PCIe link to it × ``pcie_efficiency`` if smaller).

        >>> from hpnsim.fabrics import fat_tree
        >>> from hpnsim.collectives.nccl import WIRE_RATE
        >>> s = GroupShape.from_fabric(fat_tree(4), range(16), nccl=WIRE_RATE)
        >>> s.hosts, bool(s.bw_inter == fat_tree(4).link_capacity[fat_tree(4).gpu_access_link[0, 0]])
        (16, True)
        """
        from hpnsim.collectives.schedule import host_groups, uniform_hosts
        from hpnsim.fabrics.fabric import LinkKind

        gpus = np.asarray(gpus, dtype=np.int64)
        gph = fabric.gpus_per_host
        groups = host_groups(gpus, gph)
        out = fabric.out_of(int(fabric.gpu_node[gpus[0]]))
        nvlink = fabric.link_capacity[out][fabric.link_kind[out] == LinkKind.NVLINK]
        nccl = resolve_nccl(nccl)
        access = fabric.gpu_access_link[int(gpus[0])]
        nic = float(fabric.link_capacity[access[access >= 0]].sum()) * nccl.network_efficiency
        pcie = fabric.link_capacity[out][fabric.link_kind[out] == LinkKind.PCIE]
        if pcie.size:
            nic = min(nic, float(pcie.max()) * nccl.pcie_efficiency)
        intra = float(nvlink.max()) * nccl.nvlink_efficiency if nvlink.size else math.inf
        return cls(len(groups), max(g.size for g in groups), intra, nic,
                   int(nccl.channels_per_nic or fabric.ports_per_nic), uniform_hosts(groups, gph),
                   bool(pxn) and bool(fabric.meta.get("rail_optimized", False)),
                   bool(nccl.nvls))


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


def hier_time(op: str, shape: GroupShape, size: float, *, alpha_intra: float,
              alpha_inter: float, efficiency: float = 1.0) -> float:
    """Pipelined hierarchical collective (:func:`~hpnsim.collectives.ring.hier_stages`).

    All phases run at once: the NVLink rings (reduce-scatter, all-gather: (k-1)/k·S each per
    GPU) share NVLink, the rail rings move r(H-1)/H·S/k per NIC. Each phase ends at its
    phase starts after the hop latencies of the phases up to it (pipeline fill); NVLink is
    then busy from the first NVLink phase's start (both NVLink phases share it, the last
    needs at least its own bytes after its start), the NIC from the rail phase's start. So
    large buffers take max(NVLink time, network time), not the sum.

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


def nvls_time(op: str, shape: GroupShape, size: float, nccl: NcclParams, *,
              channels: int, alpha_intra: float, alpha_inter: float) -> float:
    """NVLS on one host, NVLS+tree across hosts (:mod:`~hpnsim.collectives.nvls`).

    One host: α_intra + S·max(out, in)/(B_intra·nvls_efficiency), (out, in) from
    :func:`~hpnsim.collectives.nvls.nvls_loads` (all-reduce (k+1)/k both ways). Across
    hosts the per-rail double binary tree over hosts carries S/k at the same time
    (:func:`tree_time` on one GPU per host), after the NVLS hop.

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
    return alpha_intra + max(intra, net)


def model_time(op: str, algo: str, protocol: str, shape: GroupShape, size: float, *,
               channels: int | None = None, nccl: NcclParams | None = None) -> float:
    """Predicted time (s) of ``op`` with ``algo`` and ``protocol`` on ``shape``: the closed
    forms above for ring, tree, hd, hier, nvls and nvlstree (all-reduce, all-gather,
    reduce-scatter); NCCL's own model (:func:`~hpnsim.collectives.cost.nccl_time`) for the
    rest. Efficiencies and latencies from ``nccl`` (None: NCCL's defaults); NVLS runs
    Simple only (infinite time otherwise, as NCCL disables it).

    >>> round(model_time("allreduce", "tree", "simple", GroupShape(16, 8, 200e9, 50e9, 2),
    ...                  8e9) * 1e3, 3)
    70.176
    """
    op, algo, proto = normalize_op(op), normalize_algorithm(algo), normalize_protocol(protocol)
    nccl = resolve_nccl(nccl)
    if not size > 0 or not math.isfinite(size):
        raise InputError("size", f"must be finite and > 0, got {size!r}")
    if shape.n == 1:
        return 0.0
    if channels is None:
        channels = default_channel_count(op, algo, shape.hosts, shape.gpus_per_host,
                                         shape.uniform, shape.nic_ports)
    base, nv_hop, net_hop = nccl.latencies(latency_family(algo), proto)
    eff = nccl.protocol_efficiency(proto)
    common = dict(channels=channels, alpha_intra=nv_hop, alpha_inter=net_hop, efficiency=eff)
    if algo in ("nvls", "nvlstree"):
        if proto != "simple":
            return math.inf
        return base + nvls_time(op, shape, size, nccl, channels=channels, alpha_intra=nv_hop,
                                alpha_inter=net_hop)
    if algo == "tree" and op == "allreduce":
        return base + tree_time(shape, size, **common)
    if algo == "ring" and op in ("allreduce", "allgather", "reducescatter"):
        return base + ring_time(op, shape, size, **common)
    if algo == "hier" and op in ("allreduce", "allgather", "reducescatter"):
        return base + hier_time(op, shape, size, alpha_intra=nv_hop, alpha_inter=net_hop,
                                efficiency=eff)
    if algo == "hd" and op in ("allreduce", "allgather", "reducescatter"):
        return base + hd_time(op, shape, size, alpha_intra=nv_hop, alpha_inter=net_hop,
                              efficiency=eff)
    bus = min(shape.bw_intra, shape.gpus_per_host * shape.bw_inter) if shape.hosts > 1 \
        else shape.bw_intra
    family = "tree" if algo == "tree" else "ring"
    return nccl_time(op, family, proto, shape.n, shape.hosts, size, bus, nccl=nccl)


def auto_candidates(op: str, shape: GroupShape) -> tuple[str, ...]:
    """Algorithms ``auto`` weighs for ``op`` on ``shape``: ring and tree as NCCL, plus hier
    when it differs from a ring (several hosts, several GPUs each, rails lined up), and, as
    NCCL 2.18.3 enables them when ``shape.nvls``: NVLS all-reduce on one host, NVLS+tree
    all-reduce across hosts (all-gather and reduce-scatter: ring, never NVLS; see the
    module docstring).

    >>> auto_candidates("allreduce", GroupShape(4, 8, 200e9, 50e9))
    ('tree', 'ring', 'hier')
    >>> auto_candidates("allreduce", GroupShape(4, 8, 200e9, 50e9, nvls=True))
    ('tree', 'ring', 'hier', 'nvlstree')
    >>> auto_candidates("allreduce", GroupShape(1, 8, 200e9, 50e9, nvls=True))
    ('tree', 'ring', 'nvls')
    >>> auto_candidates("allgather", GroupShape(1, 8, 200e9, 50e9, nvls=True))
    ('ring',)
    >>> auto_candidates("alltoall", GroupShape(4, 8, 200e9, 50e9))
    ('direct',)
    """
    op = normalize_op(op)
    multi = shape.uniform and shape.hosts > 1 and shape.gpus_per_host > 1
    nvls_op = shape.nvls and op == "allreduce"     # NCCL 2.18.3: NVLS all-reduce only
    allowed = {"hier": multi,
               "nvls": nvls_op and shape.hosts == 1 and shape.gpus_per_host > 1,
               "nvlstree": nvls_op and multi}
    found = tuple(a for a in AUTO_CANDIDATES if a in SUPPORTED[op] and allowed.get(a, True))
    return found or (SUPPORTED[op][0],)


def choose_algorithm(op: str, shape: GroupShape, size: float, *,
                     channels: int | None = None,
                     nccl: NcclParams | None = None) -> tuple[str, str]:
    """``(algorithm, protocol)`` with the smallest :func:`model_time` on the actual group.

    >>> many = GroupShape(256, 8, 200e9, 50e9, nic_ports=2)
    >>> choose_algorithm("allreduce", many, 64 * 2**10)
    ('tree', 'll')
    >>> fast_nvlink = GroupShape(4, 8, 450e9, 50e9, nic_ports=2)   # network-bound hosts
    >>> choose_algorithm("allreduce", fast_nvlink, 2**30)    # pipelined: max, not sum
    ('hier', 'simple')
    >>> one_h100 = GroupShape(1, 8, 450e9 * 0.824, 50e9, nic_ports=2, nvls=True)
    >>> choose_algorithm("allreduce", one_h100, 2**30)
    ('nvls', 'simple')
    """
    best = min((model_time(op, a, p, shape, size, channels=channels, nccl=nccl), i, a, p)
               for i, a in enumerate(auto_candidates(op, shape)) for p in PROTOCOLS)
    return best[2], best[3]


def choose_protocol(op: str, algo: str, shape: GroupShape, size: float, *,
                    channels: int | None = None, nccl: NcclParams | None = None) -> str:
    """The protocol with the smallest :func:`model_time` for a fixed algorithm.

    >>> choose_protocol("allreduce", "ring", GroupShape(2, 8, 200e9, 50e9, 2), 2**30)
    'simple'
    """
    return min(PROTOCOLS, key=lambda p: model_time(op, algo, p, shape, size,
                                                   channels=channels, nccl=nccl))
