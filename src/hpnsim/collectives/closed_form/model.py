"""Closed forms of the simulated algorithms on a real group, and the ``auto`` choice.

A group is ``hosts`` hosts with ``gpus_per_host`` of its GPUs each
(:class:`~hpnsim.collectives.closed_form.shape.GroupShape`): NVLink inside a host, one NIC per GPU
across hosts. The closed form of each algorithm (:mod:`hpnsim.collectives.closed_form.forms`) is what
the simulator gives for that group on a non-blocking network with the NIC ports evenly used
(spraying, or one port per channel); the tests check them to 1e-9. :func:`model_time`
dispatches to them: every time is ``base + hop latencies + bytes / (protocol efficiency ·
bandwidth)``, with NCCL's latency tables (:func:`~hpnsim.collectives.closed_form.cost.hop_latencies`).

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
simulator reproduces, with the latencies of :mod:`~hpnsim.collectives.nccl.params` (later NCCL
tables; 2.18.3's NVLS latencies were 23 us base and, for NVLS+tree, 2(nNodes-1)·19 us,
which moves the size where NVLS+tree takes over, not the large-buffer choice). Every efficiency and latency comes from one
:class:`~hpnsim.collectives.nccl.params.NcclParams`, the same the simulation runs with: link
efficiencies scale ``bw_intra`` / ``bw_inter`` (:meth:`~hpnsim.collectives.closed_form.shape.GroupShape.from_fabric`), protocol
efficiencies divide the bytes.
"""

from __future__ import annotations

import math

from hpnsim.collectives.closed_form.cost import latency_family, nccl_time
from hpnsim.collectives.closed_form.forms import hd_time, hier_time, nvls_time, ring_time, tree_time
from hpnsim.collectives.closed_form.shape import GroupShape, default_channel_count
from hpnsim.collectives.nccl.params import NcclParams, resolve_nccl
from hpnsim.collectives.ops import (
    PROTOCOLS,
    SUPPORTED,
    normalize_algorithm,
    normalize_op,
    normalize_protocol,
)
from hpnsim.errors import InputError

__all__ = ["AUTO_CANDIDATES", "GroupShape", "auto_candidates", "choose_algorithm",
           "choose_protocol", "default_channel_count", "hd_time", "hier_time", "model_time",
           "nvls_time", "ring_time", "tree_time"]

#: algorithms ``auto`` weighs (NCCL's ring and tree, the rail-aligned hierarchical form, and
#: NVLS / NVLS+tree where the GPUs have NVLink SHARP)
AUTO_CANDIDATES = ("tree", "ring", "hier", "nvls", "nvlstree")


def model_time(op: str, algo: str, protocol: str, shape: GroupShape, size: float, *,
               channels: int | None = None, nccl: NcclParams | None = None) -> float:
    """Predicted time (s) of ``op`` with ``algo`` and ``protocol`` on ``shape``: the closed
    forms above for ring, tree, hd, hier, nvls and nvlstree (all-reduce, all-gather,
    reduce-scatter); NCCL's own model (:func:`~hpnsim.collectives.closed_form.cost.nccl_time`) for the
    rest. Efficiencies and latencies from ``nccl`` (None: NCCL's defaults); NVLS runs
    Simple only (infinite time otherwise, as NCCL disables it).

    Parameters
    ----------
    op, algo, protocol : str
        What runs (concrete algorithm and protocol; any spelling).
    shape : GroupShape
    size : float
        Bytes, nccl-tests convention.
    channels : int, optional
        Parallel rings/trees (default :func:`default_channel_count`).
    nccl : NcclParams, optional
        Efficiencies and latencies (None: NCCL's defaults).

    Returns
    -------
    float
        Seconds (0 for one GPU; infinite for NVLS with a protocol other than Simple).

    Examples
    --------
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
    family = latency_family(algo)
    paced = algo == "ring" and shape.hosts > 1 and op in ("allreduce", "allgather",
                                                            "reducescatter")
    base, nv_hop, net_hop = nccl.latencies(family, proto, multi_host=paced)
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

    Parameters
    ----------
    op : str
    shape : GroupShape

    Returns
    -------
    tuple of str
        In order of preference on a tie (the first supported algorithm when none is).

    Examples
    --------
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

    Parameters
    ----------
    op : str
    shape : GroupShape
    size : float
        Bytes, nccl-tests convention.
    channels : int, optional
        Parallel rings/trees (default per algorithm).
    nccl : NcclParams, optional
        Efficiencies and latencies (None: NCCL's defaults).

    Returns
    -------
    tuple of str
        Among :func:`auto_candidates` and every protocol; ties go to the earlier candidate.

    Examples
    --------
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

    Parameters
    ----------
    op, algo : str
    shape : GroupShape
    size : float
        Bytes, nccl-tests convention.
    channels : int, optional
    nccl : NcclParams, optional
        As :func:`choose_algorithm`.

    Returns
    -------
    str
        One of ll, ll128, simple.

    Examples
    --------
    >>> choose_protocol("allreduce", "ring", GroupShape(2, 8, 200e9, 50e9, 2), 2**30)
    'simple'
    """
    return min(PROTOCOLS, key=lambda p: model_time(op, algo, p, shape, size,
                                                   channels=channels, nccl=nccl))
