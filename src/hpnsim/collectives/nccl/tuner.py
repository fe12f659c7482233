"""NCCL's own latency prediction, release by release: what ``ncclTopoTuneModel`` charges a
ring or tree collective before any byte moves.

hpnsim's simulated latencies follow one table (:meth:`NcclParams.latencies
<hpnsim.collectives.nccl.params.NcclParams.latencies>`: v2.29.7-1's values, which for ring and
tree are v2.18.3-1's but for the tree's Simple base) and the ring's real slowest walk
(:mod:`hpnsim.collectives.nccl.steps`). A published measurement was taken with some other
release, whose tuner may have charged the same case differently; this module states what
each release's tuner predicts, so that a measurement can be set against the model of its own
release (docs/experiments.md, the small-message table). It is a reference, not used by the
simulation. Read from ``src/graph/tuning.cc`` at three tags:

- **v2.16.5-1** (also v2.17.1-1): base ring 3.6 / 10.0 / 8.4 µs (LL / LL128 / Simple), tree
  4.4 / 4.4 / 0; per hop over NVLink ring .47 / 1.9 / 3.4, tree .52 / 1.25 / 28; over the
  network ring 2.7 / 4.0 / 9.6, tree 5.0 / 8.5 / 28. LL's NVLink hop × 1.8 when the group
  spans nodes (``intraLat *= 1.8``). Ring all-reduce crosses the network ``2 nNodes`` times.
  No proxy overhead.
- **v2.18.3-1** (the HPN paper's): base ring 6.6 / 14.0 / 8.4, tree 6.8 / 14.0 / 0; NVLink
  ring .6 / 1.9 / 3.4, tree .6 / 1.25 / 4; network ring 2.7 / 4.0 / 14, tree 5.0 / 8.5 / 14.
  A ring that spans nodes pays at least ``getNetOverhead`` per step (1 µs Intel and other
  CPUs, 2 µs AMD; × 3 for Simple); all-reduce crosses ``2 nNodes`` times (charged as
  written even where that exceeds the steps: 2 ranks on 2 nodes pay 4 network hops and
  -2 NVLink hops).
- **v2.29.7-1** (a current release): as v2.18.3-1 but tree Simple base 8.4; a ring
  all-reduce crosses ``2 (nNodes - 1)`` times; with one rank per node the ring's network hop
  is the tree's ("with ppn=1 latencies are fully exposed", since v2.23.4-1).

Tree all-reduce, every release: ``base + 2 ((nRanks/nNodes - 1) intraLat + log2i(nNodes)
interLat)``, ``log2i`` the floor of log2. The size-dependent terms of
``ncclTopoGetAlgoTime`` (the ring Simple plateau × 1.4, the tree's correction factors) are
not latencies of the table and are left out.

Examples
--------
>>> round(tuner_latency("allreduce", "ring", "ll", ranks=16, hosts=2, version="2.16.5") * 1e6, 2)
36.4
>>> round(tuner_latency("allreduce", "ring", "ll", ranks=16, hosts=2, cpu="amd") * 1e6, 1)
69.4
"""

from __future__ import annotations

from dataclasses import dataclass

from hpnsim.collectives.nccl.params import (
    BASE_LATENCY_US,
    NET_HOP_US,
    NVLINK_HOP_US,
    net_overhead_for,
)
from hpnsim.collectives.ops import PROTOCOLS
from hpnsim.errors import InputError

__all__ = ["TUNER_VERSIONS", "TunerTable", "log2i", "tuner_latency"]


@dataclass(frozen=True)
class TunerTable:
    """One release's latency tables (µs, by protocol LL / LL128 / Simple) and rules."""

    base: dict[str, tuple[float, float, float]]
    nvlink: dict[str, tuple[float, float, float]]
    net: dict[str, tuple[float, float, float]]
    ll_multinode_factor: float       # LL's NVLink hop on a multi-node group (2.16: 1.8)
    ring_crossings_minus_one: bool   # all-reduce crosses 2(nNodes-1) times, else 2 nNodes
    net_overhead: bool               # ring steps floored at getNetOverhead across nodes
    ppn1_tree_net: bool              # one rank per node: the ring's network hop is the tree's


#: the three releases read (tags v2.16.5-1, v2.18.3-1, v2.29.7-1 of NVIDIA/nccl)
TUNER_VERSIONS = {
    "2.16.5": TunerTable(
        base={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4)},
        nvlink={"tree": (0.52, 1.25, 28.0), "ring": (0.47, 1.9, 3.4)},
        net={"tree": (5.0, 8.5, 28.0), "ring": (2.7, 4.0, 9.6)},
        ll_multinode_factor=1.8, ring_crossings_minus_one=False, net_overhead=False,
        ppn1_tree_net=False),
    "2.18.3": TunerTable(
        base={"tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4)},
        nvlink={"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
        net={"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
        ll_multinode_factor=1.0, ring_crossings_minus_one=False, net_overhead=True,
        ppn1_tree_net=False),
    # the release hpnsim's own latencies are read from (collectives/nccl/params.py)
    "2.29.7": TunerTable(
        base={f: BASE_LATENCY_US[f] for f in ("tree", "ring")},
        nvlink={f: NVLINK_HOP_US[f] for f in ("tree", "ring")},
        net={f: NET_HOP_US[f] for f in ("tree", "ring")},
        ll_multinode_factor=1.0, ring_crossings_minus_one=True, net_overhead=True,
        ppn1_tree_net=True),
}


def log2i(n: int) -> int:
    """NCCL's ``log2i``: the floor of log2 n (0 for n <= 1).

    Examples
    --------
    >>> log2i(1), log2i(2), log2i(56), log2i(64)
    (0, 1, 5, 6)
    """
    return max(int(n), 1).bit_length() - 1


def _int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(name, f"must be an integer >= {low}, got {value!r}")
    return value


def tuner_latency(op: str, algo: str, protocol: str, *, ranks: int, hosts: int,
                  version: str = "2.18.3", cpu: str = "intel") -> float:
    """Seconds of latency NCCL ``version``'s tuner charges ``op`` with ``algo`` (ring for
    all-reduce, all-gather, reduce-scatter; tree for all-reduce) and ``protocol`` on
    ``ranks`` ranks over ``hosts`` hosts (NVLink inside a host), on hosts with ``cpu``.

    Parameters
    ----------
    op, algo, protocol : str
        ``allreduce``, ``allgather`` or ``reducescatter``; ``ring`` or ``tree``; ``ll``,
        ``ll128`` or ``simple``.
    ranks, hosts : int
        The group; ``ranks`` a multiple of ``hosts``.
    version : str
        ``2.16.5``, ``2.18.3`` or ``2.29.7`` (:data:`TUNER_VERSIONS`).
    cpu : str
        ``intel``, ``amd`` or ``other`` (the proxy overhead of 2.18.3 and later).

    Returns
    -------
    float

    Raises
    ------
    InputError
        Naming the argument that is not one of the above.

    Examples
    --------
    >>> us = lambda **k: round(tuner_latency(**k) * 1e6, 2)
    >>> us(op="allreduce", algo="ring", protocol="ll", ranks=16, hosts=2)    # 6.6+26+4*2.7
    43.4
    >>> us(op="allreduce", algo="ring", protocol="ll", ranks=16, hosts=2, version="2.29.7")
    40.0
    >>> us(op="allreduce", algo="tree", protocol="ll", ranks=16, hosts=2)    # 6.8+2(4.2+5)
    25.2
    >>> us(op="allreduce", algo="ring", protocol="ll", ranks=2, hosts=2, version="2.29.7")
    16.6
    """
    table = TUNER_VERSIONS.get(str(version))
    if table is None:
        raise InputError("version", f"must be one of {', '.join(TUNER_VERSIONS)}, "
                                    f"got {version!r}")
    if op not in ("allreduce", "allgather", "reducescatter"):
        raise InputError("op", f"must be allreduce, allgather or reducescatter, got {op!r}")
    if algo not in ("ring", "tree") or (algo == "tree" and op != "allreduce"):
        raise InputError("algo", f"must be ring (or tree for allreduce), got {algo!r}")
    if protocol not in PROTOCOLS:
        raise InputError("protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    ranks, hosts = _int("ranks", ranks, 2), _int("hosts", hosts, 1)
    if ranks % hosts:
        raise InputError("hosts", f"{ranks} ranks do not split evenly over {hosts} hosts")
    overhead = net_overhead_for(cpu)
    p = PROTOCOLS.index(protocol)
    latency = table.base[algo][p]
    intra = table.nvlink[algo][p]
    if hosts > 1 and protocol == "ll":
        intra *= table.ll_multinode_factor
    inter = table.net["tree" if table.ppn1_tree_net and ranks == hosts else algo][p]
    if algo == "tree":
        latency += 2 * ((ranks // hosts - 1) * intra + log2i(hosts) * inter)
        return latency * 1e-6
    steps = 2 * (ranks - 1) if op == "allreduce" else ranks - 1
    if hosts == 1:
        crossings = 0
    elif op == "allreduce":
        crossings = 2 * (hosts - 1) if table.ring_crossings_minus_one else 2 * hosts
    else:
        crossings = hosts - 1
    if table.net_overhead and hosts > 1:
        intra = max(intra, overhead * (3 if protocol == "simple" else 1))
    latency += (steps - crossings) * intra + crossings * inter
    return latency * 1e-6
