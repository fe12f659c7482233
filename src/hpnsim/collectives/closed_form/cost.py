"""Closed-form cost models: alpha-beta (Hockney) and NCCL's own tuning model.

These are the references the simulated collectives are validated against; the forms on a
real group of multi-GPU hosts, and the ``auto`` choice, are in
:mod:`hpnsim.collectives.closed_form.model`.

Latency tables (NCCL ``tuning.cc``: base latency per algorithm and protocol, per-hop latency
over NVLink and over the network) live in :class:`~hpnsim.collectives.nccl.params.NcclParams`.
"""

from __future__ import annotations

import math

from hpnsim.collectives.ops import (
    busbw_factor,
    normalize_algorithm,
    normalize_op,
    normalize_protocol,
)
from hpnsim.collectives.schedules.tree import dtree_depth, dtree_load
from hpnsim.errors import InputError


def latency_family(algo: str) -> str:
    """Which NCCL latency table an algorithm uses (tree, nvls, nvlstree as themselves; ring
    for the others).

    Parameters
    ----------
    algo : str
        Any spelling :func:`~hpnsim.collectives.ops.normalize_algorithm` accepts.

    Returns
    -------
    str
        ``ring``, ``tree``, ``nvls`` or ``nvlstree``.

    Examples
    --------
    >>> latency_family("hier"), latency_family("tree"), latency_family("nvls")
    ('ring', 'tree', 'nvls')
    """
    algo = normalize_algorithm(algo)
    return algo if algo in ("tree", "nvls", "nvlstree") else "ring"


def hop_latencies(algo: str, protocol: str, nccl=None) -> tuple[float, float, float]:
    """NCCL's latencies of an algorithm and protocol.

    Parameters
    ----------
    algo, protocol : str
        The algorithm (its :func:`latency_family` picks the table) and protocol.
    nccl : NcclParams, dict or None
        :class:`~hpnsim.collectives.nccl.params.NcclParams` (None: NCCL's tables).

    Returns
    -------
    tuple of float
        ``(base, per NVLink hop, per network hop)`` seconds.

    Examples
    --------
    >>> hop_latencies("ring", "simple")
    (8.4e-06, 3.4e-06, 1.4e-05)
    """
    from hpnsim.collectives.nccl.params import resolve_nccl

    return resolve_nccl(nccl).latencies(latency_family(algo), normalize_protocol(protocol))


#: operations whose rings pay the proxy's post overhead per step across hosts (tuning.cc
#: applies ``max(intraLat, netOverhead)`` to every ring but broadcast and reduce chains)
_PACED_RING_OPS = ("allreduce", "allgather", "reducescatter")


def schedule_latencies(schedule, algo: str, protocol: str, nccl) -> tuple[float, float, float]:
    """``(base, per NVLink hop, per network hop)`` seconds that the stages of ``schedule``
    pay: :func:`hop_latencies`, with the proxy's per-step floor on the NVLink hops of NCCL's
    ring when it spans hosts (:meth:`~hpnsim.collectives.nccl.params.NcclParams.latencies`;
    tuning.cc applies it to ``NCCL_ALGO_RING`` only, so hpnsim's own hier and hd keep
    their tables).

    Parameters
    ----------
    schedule : Schedule
        Its operation and stages (a stage with network steps means the ring spans hosts).
    algo, protocol : str
        Concrete algorithm and protocol.
    nccl : NcclParams

    Returns
    -------
    tuple of float

    Examples
    --------
    >>> from hpnsim.collectives.nccl.params import NcclParams
    >>> from hpnsim.collectives.schedules.algorithms import build_schedule
    >>> sch = build_schedule("allreduce", list(range(16)), 1e6, "ring", gpus_per_host=8)
    >>> schedule_latencies(sch, "ring", "ll", NcclParams())      # 0.6 us floored at 1 us
    (6.6e-06, 1e-06, 2.7e-06)
    """
    multi_host = normalize_algorithm(algo) == "ring" and schedule.op in _PACED_RING_OPS and \
        any(stage.inter_steps for stage in schedule.stages)
    return nccl.latencies(latency_family(algo), normalize_protocol(protocol),
                          multi_host=multi_host)


def _check(n: int, size: float) -> None:
    if n < 1:
        raise InputError("gpus", f"need at least 1 GPU, got {n}")
    if not size > 0 or not math.isfinite(size):
        raise InputError("size", f"must be finite and > 0, got {size!r}")


def alpha_beta_time(op: str, algo: str, n: int, size: float, alpha: float,
                    bandwidth: float) -> float:
    """Hockney alpha-beta time of a collective on ``n`` ranks with uniform links.

    ``alpha`` is the per-step latency, ``bandwidth`` each rank's bytes/s per direction and
    ``size`` the nccl-tests buffer size. Ring all-reduce: 2(n-1)·α + 2(n-1)/n·S/B; ring
    all-gather and reduce-scatter: (n-1)·α + (n-1)/n·S/B; halving-doubling all-reduce:
    2·log2(p)·α + 2(p-1)/p·S/B plus 2(α + S/B) to fold the n-p extra ranks (p the largest
    power of two ≤ n); double binary tree all-reduce (pipelined, each tree half the data,
    every rank interior in at most one): 2·⌈log2 n⌉·α + 2·S/B for n >= 4 (S/B for 2 ranks,
    1.5·S/B for 3); pipelined ring broadcast/reduce (chain): (n-1)·α + S/B; direct
    all-to-all: α + (n-1)/n·S/B; send/recv: α + S/B.

    Parameters
    ----------
    op, algo : str
        The operation and a concrete algorithm (ring, hd, tree, direct).
    n : int
        Ranks.
    size : float
        Bytes, nccl-tests convention.
    alpha : float
        Seconds per step.
    bandwidth : float
        Each rank's bytes/s per direction.

    Returns
    -------
    float
        Seconds (0 for one rank).

    Raises
    ------
    InputError
        When the pair (op, algo) has no alpha-beta form here.

    Examples
    --------
    >>> alpha_beta_time("allreduce", "ring", 4, 1e9, 0.0, 1e9)
    1.5
    >>> alpha_beta_time("allreduce", "hd", 8, 8e9, 1e-6, 1e9)
    14.000006
    """
    op, algo = normalize_op(op), normalize_algorithm(algo)
    _check(n, size)
    beta = size / bandwidth
    if n == 1:
        return 0.0
    if algo == "ring" and op == "allreduce":
        return 2 * (n - 1) * alpha + 2 * (n - 1) / n * beta
    if algo in ("ring", "hd") and op in ("allgather", "reducescatter"):
        steps = (n - 1) if algo == "ring" else math.log2(n)
        return steps * alpha + (n - 1) / n * beta
    if algo == "hd" and op == "allreduce":
        p = 1 << (n.bit_length() - 1)
        fold = 0.0 if p == n else 2 * (alpha + beta)
        return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * beta + fold
    if algo == "tree" and op == "allreduce":
        return 2 * dtree_depth(n) * alpha + dtree_load(n) / 2 * beta
    if algo == "ring" and op in ("broadcast", "reduce"):
        return (n - 1) * alpha + beta
    if algo == "direct" and op == "alltoall":
        return alpha + (n - 1) / n * beta
    if algo == "direct" and op in ("sendrecv", "send"):
        return alpha + beta
    raise InputError("algo", f"no alpha-beta model for {op} with {algo}")


def hierarchical_time(op: str, gpus_per_host: int, hosts: int, size: float, *,
                      alpha_intra: float, bw_intra: float, alpha_inter: float,
                      bw_inter: float) -> float:
    """Alpha-beta time of the hierarchical (rail-aligned) collective.

    All-reduce = ring reduce-scatter inside each host (k GPUs, NVLink), ring all-reduce of
    S/k per rail across H hosts, ring all-gather inside the host:
    2(k-1)·α_intra + 2(k-1)/k·S/B_intra + 2(H-1)·α_inter + 2(H-1)/H·(S/k)/B_inter.
    All-gather and reduce-scatter take half of each term.

    Parameters
    ----------
    op : str
        allreduce, allgather or reducescatter.
    gpus_per_host, hosts : int
        ``k`` GPUs on each of ``H`` hosts.
    size : float
        Bytes, nccl-tests convention.
    alpha_intra, bw_intra : float
        Seconds per step and bytes/s per GPU inside a host (NVLink).
    alpha_inter, bw_inter : float
        Seconds per step and bytes/s per GPU across hosts (the rail).

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> hierarchical_time("allreduce", 8, 2, 8e9, alpha_intra=0, bw_intra=1e9,
    ...                   alpha_inter=0, bw_inter=1e9)
    15.0
    """
    op = normalize_op(op)
    k, h = gpus_per_host, hosts
    _check(k * h, size)
    intra = (k - 1) * alpha_intra + (k - 1) / k * size / bw_intra
    inter = (h - 1) * alpha_inter + (h - 1) / h * (size / k) / bw_inter
    if op == "allreduce":
        return 2 * (intra + inter)
    if op in ("allgather", "reducescatter"):
        return intra + inter
    raise InputError("algo", f"hier supports allreduce, allgather, reducescatter, got {op!r}")


def nccl_time(op: str, algo: str, protocol: str, n: int, hosts: int, size: float,
              bus_bandwidth: float, nccl=None) -> float:
    """NCCL's own prediction: latency + size / algbw (seconds).

    ``bus_bandwidth`` is the bytes/s the algorithm sustains per rank (busBw);
    algbw = busBw · n / nsteps for rings (nsteps = 2(n-1) for all-reduce, n-1 for all-gather
    and reduce-scatter), 0.5 · 0.92 · busBw for tree all-reduce; both times the protocol's
    efficiency. Latency = base + intra-host hops · NVLink hop latency + inter-host hops ·
    network hop latency, with 2(n-1) ring steps of which 2(hosts-1) cross hosts, and
    2·((n/hosts - 1) NVLink + log2i(hosts) network) tree hops, ``log2i`` the floor of log2
    as in tuning.cc (56 hosts: 5, where the double binary tree is 6 deep; the closed form
    and the simulation charge the depth). ``hier`` uses ring latencies.

    Parameters
    ----------
    op, algo, protocol : str
        What runs (concrete algorithm and protocol).
    n, hosts : int
        Ranks, and the hosts they are spread over.
    size : float
        Bytes, nccl-tests convention.
    bus_bandwidth : float
        busBw, bytes/s per rank.
    nccl : NcclParams, dict or None
        Latency tables, protocol efficiencies and the tree derate (None: NCCL's).

    Returns
    -------
    float
        Seconds (0 for one rank).

    Examples
    --------
    >>> round(nccl_time("allreduce", "ring", "simple", 16, 2, 1e9, 50e9) * 1e3, 4)
    37.6316
    """
    op, algo, proto = normalize_op(op), normalize_algorithm(algo), normalize_protocol(protocol)
    _check(n, size)
    if n == 1:
        return 0.0
    from hpnsim.collectives.nccl.params import resolve_nccl
    from hpnsim.collectives.nccl.tuner import log2i

    nccl = resolve_nccl(nccl)
    base, nvlink, net = hop_latencies(algo, proto, nccl)
    local = max(n // max(hosts, 1), 1)
    efficiency = nccl.protocol_efficiency(proto)
    if algo == "tree":
        latency = base + 2 * ((local - 1) * nvlink + log2i(hosts) * net)
        algbw = 0.5 * nccl.tree_bandwidth_derate * bus_bandwidth
    else:
        rounds = 2 if op == "allreduce" else 1
        steps, inter = rounds * (n - 1), rounds * (hosts - 1)
        if op in ("broadcast", "reduce", "sendrecv", "send", "alltoall"):
            steps, inter = n - 1, hosts - 1
        latency = base + (steps - inter) * nvlink + inter * net
        algbw = bus_bandwidth / busbw_factor(op, n)
    return latency + size / (algbw * efficiency)
