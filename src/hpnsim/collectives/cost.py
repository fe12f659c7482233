"""Closed-form cost models: alpha-beta (Hockney) and NCCL's own tuning model.

These are the references the simulated collectives are validated against; the forms on a
real group of multi-GPU hosts, and the ``auto`` choice, are in
:mod:`hpnsim.collectives.model`.

Latency tables (microseconds) follow NCCL 2.1x's ``tuning.cc`` and stay inside the ranges
recorded in ``reference/traffic.md``: base latency per (algorithm, protocol), and per-hop
latency over NVLink and over the network.
"""

from __future__ import annotations

import math

from hpnsim.collectives.ops import (
    PROTOCOL_EFFICIENCY,
    busbw_factor,
    normalize_algorithm,
    normalize_op,
    normalize_protocol,
)
from hpnsim.collectives.tree import dtree_depth, dtree_load
from hpnsim.errors import InputError

#: base latency, seconds, per algorithm and protocol (LL, LL128, Simple)
BASE_LATENCY = {
    "ring": {"ll": 6.6e-6, "ll128": 14.0e-6, "simple": 8.4e-6},
    "tree": {"ll": 6.8e-6, "ll128": 14.0e-6, "simple": 14.0e-6},
}
#: per-hop latency, seconds, inside a host (NVLink) per algorithm and protocol
NVLINK_HOP_LATENCY = {
    "ring": {"ll": 0.6e-6, "ll128": 1.9e-6, "simple": 3.4e-6},
    "tree": {"ll": 0.6e-6, "ll128": 1.25e-6, "simple": 4.0e-6},
}
#: per-hop latency, seconds, across the network per algorithm and protocol
NET_HOP_LATENCY = {
    "ring": {"ll": 2.7e-6, "ll128": 4.0e-6, "simple": 14.0e-6},
    "tree": {"ll": 5.0e-6, "ll128": 8.5e-6, "simple": 14.0e-6},
}
#: NCCL derates its tree bandwidth by this factor (tuning.cc: ``busBw * .92``)
TREE_BANDWIDTH_DERATE = 0.92


def latency_family(algo: str) -> str:
    """Which NCCL latency table an algorithm uses (tree for tree, ring for the others).

    >>> latency_family("hier"), latency_family("tree")
    ('ring', 'tree')
    """
    return "tree" if normalize_algorithm(algo) == "tree" else "ring"


def hop_latencies(algo: str, protocol: str) -> tuple[float, float, float]:
    """``(base, per NVLink hop, per network hop)`` latency in seconds.

    >>> hop_latencies("ring", "simple")
    (8.4e-06, 3.4e-06, 1.4e-05)
    """
    family, proto = latency_family(algo), normalize_protocol(protocol)
    return (BASE_LATENCY[family][proto], NVLINK_HOP_LATENCY[family][proto],
            NET_HOP_LATENCY[family][proto])


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
              bus_bandwidth: float) -> float:
    """NCCL's own prediction: latency + size / algbw (seconds).

    ``bus_bandwidth`` is the bytes/s the algorithm sustains per rank (busBw);
    algbw = busBw · n / nsteps for rings (nsteps = 2(n-1) for all-reduce, n-1 for all-gather
    and reduce-scatter), 0.5 · 0.92 · busBw for tree all-reduce; both times the protocol's
    efficiency. Latency = base + intra-host hops · NVLink hop latency + inter-host hops ·
    network hop latency, with 2(n-1) ring steps of which 2(hosts-1) cross hosts, and
    2·((n/hosts - 1) + log2(hosts)) tree hops. ``hier`` uses ring latencies.

    >>> round(nccl_time("allreduce", "ring", "simple", 16, 2, 1e9, 50e9) * 1e3, 4)
    37.6316
    """
    op, algo, proto = normalize_op(op), normalize_algorithm(algo), normalize_protocol(protocol)
    _check(n, size)
    if n == 1:
        return 0.0
    base, nvlink, net = hop_latencies(algo, proto)
    local = max(n // max(hosts, 1), 1)
    efficiency = PROTOCOL_EFFICIENCY[proto]
    if algo == "tree":
        latency = base + 2 * ((local - 1) * nvlink + math.log2(max(hosts, 1)) * net)
        algbw = 0.5 * TREE_BANDWIDTH_DERATE * bus_bandwidth
    else:
        rounds = 2 if op == "allreduce" else 1
        steps, inter = rounds * (n - 1), rounds * (hosts - 1)
        if op in ("broadcast", "reduce", "sendrecv", "send", "alltoall"):
            steps, inter = n - 1, hosts - 1
        latency = base + (steps - inter) * nvlink + inter * net
        algbw = bus_bandwidth / busbw_factor(op, n)
    return latency + size / (algbw * efficiency)
