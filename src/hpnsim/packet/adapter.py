"""`simulate_paths`: the packet engine on a fabric and routed paths.

The packet engine knows only arrays (DESIGN.md), so this adapter reads a fabric by its
documented array columns and imports nothing from :mod:`hpnsim.fabrics`: ``link_capacity``
(bytes/s), ``link_latency`` (s), ``link_src``, ``link_dst`` and ``node_tier`` (0 inside a
host, 1 ToR, 2 Agg, 3 Core). Every link that leaves a switch (tier >= 1) queues in that
switch's shared buffer; links leaving a NIC, GPU or NVSwitch (tier 0) have no buffer limit,
no ECN and send no pause (NVLink and PCIe are credit-based, not RoCE). An access link joins
tier 0 and tier >= 1. Links that touch a switch are Ethernet (their frames carry preamble,
SFD and gap on the wire); a flow's control packets (CNPs, NACKs) return over the reverse of
its links (a fabric builds every cable as links ``l`` and ``l ^ 1``). A flow that crosses the network starts at its NIC port: its GPU->NIC
(PCIe) and NIC->GPU legs and a PXN NVLink hop before the NIC are cut, since DCQCN paces at
the NIC. A flow inside a host keeps its NVLink path.
"""

from __future__ import annotations

import numpy as np

from hpnsim.packet.api import simulate_flows
from hpnsim.packet.params import PacketParams
from hpnsim.packet.result import PacketResult

__all__ = ["fabric_links", "fabric_switches", "network_legs", "simulate_paths"]


def fabric_switches(fabric) -> np.ndarray:
    """Per link, the switch (0..n-1) whose buffer holds its egress queue, -1 if none.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> s = fabric_switches(f)
    >>> int(s[f.gpu_access_link[0, 0]]), int(s[f.gpu_access_link[0, 0] ^ 1]) >= 0
    (-1, True)
    """
    is_switch = np.asarray(fabric.node_tier) >= 1
    switch_id = np.full(is_switch.size, -1, dtype=np.int64)
    switch_id[is_switch] = np.arange(int(is_switch.sum()))
    return switch_id[np.asarray(fabric.link_src)]


def fabric_links(fabric) -> dict:
    """The per-link keywords of :func:`~hpnsim.packet.api.simulate_flows` for ``fabric``:
    ``switch_of`` (:func:`fabric_switches`), ``reverse`` (``l ^ 1``) and ``framed`` (links
    with a switch at either end: Ethernet).

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> k = fabric_links(f)
    >>> up = f.gpu_access_link[0, 0]
    >>> bool(k["reverse"][up] == up ^ 1), bool(k["framed"][up]), bool(k["framed"].all())
    (True, True, False)
    """
    tier = np.asarray(fabric.node_tier)
    src, dst = tier[np.asarray(fabric.link_src)], tier[np.asarray(fabric.link_dst)]
    n = src.size
    return {"switch_of": fabric_switches(fabric), "reverse": np.arange(n) ^ 1,
            "framed": (src >= 1) | (dst >= 1)}


def network_legs(fabric, paths) -> list[np.ndarray]:
    """Each flow's links from its first access link (NIC -> ToR) to its last (ToR -> NIC);
    a flow with no access link (inside a host) keeps its whole path. ``paths`` has CSR
    ``ptr`` and ``links`` (a :class:`~hpnsim.routing.paths.Paths`).

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing import route
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> p = route(f, [0, 0], [8, 1], "hpn_dual_plane")
    >>> [len(x) for x in network_legs(f, p)], p.hop_counts().tolist()
    ([2, 2], [4, 2])
    """
    tier = np.asarray(fabric.node_tier)
    src, dst = tier[np.asarray(fabric.link_src)], tier[np.asarray(fabric.link_dst)]
    access = (src == 0) != (dst == 0)
    out = []
    for i in range(len(paths.ptr) - 1):
        links = np.asarray(paths.links[paths.ptr[i]:paths.ptr[i + 1]], dtype=np.int64)
        at = np.flatnonzero(access[links])
        out.append(links[at[0]:at[-1] + 1] if at.size else links)
    return out


def simulate_paths(fabric, paths, sizes, starts=None, params: PacketParams | None = None,
                   **options) -> PacketResult:
    """Packet-level run of routed flows on ``fabric`` (see the module docstring).

    ``options`` go to :func:`~hpnsim.packet.api.simulate_flows` (``qp``, ``deps``,
    ``watch``, ``t_end``, ...); per-link results are indexed by the fabric's link ids.

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing import route
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> p = route(f, [0, 1], [8, 8], "hpn_dual_plane", port=0)   # 2:1 into GPU 8's port
    >>> r = simulate_paths(f, p, 1e6)
    >>> bool(r.q_max.max() > 0), int(r.drops.sum())
    (True, 0)
    """
    return simulate_flows(fabric.link_capacity, fabric.link_latency, network_legs(fabric, paths),
                          sizes, starts, params, **{**fabric_links(fabric), **options})
