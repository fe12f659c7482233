"""`simulate_paths`: the packet engine on a :class:`~hpnsim.fabrics.fabric.Fabric` and routed
:class:`~hpnsim.routing.paths.Paths` (what :func:`hpnsim.routing.route` returns).

The fabric gives capacities and propagation delays; every link that leaves a ToR, Agg or
Core switch queues in that switch's shared buffer; links leaving a NIC, GPU or NVSwitch have
no buffer limit, no ECN and send no pause (NVLink and PCIe are credit-based, not RoCE). A
flow that crosses the network starts at its NIC port: the GPU->NIC (PCIe) and NIC->GPU legs
and a PXN NVLink hop before the NIC are cut, since DCQCN paces at the NIC. A flow inside a
host keeps its NVLink path.
"""

from __future__ import annotations

import numpy as np

from hpnsim.fabrics.fabric import SWITCH_KINDS, LinkKind
from hpnsim.packet.api import simulate_flows
from hpnsim.packet.params import PacketParams
from hpnsim.packet.result import PacketResult

__all__ = ["fabric_switches", "network_legs", "simulate_paths"]


def fabric_switches(fabric) -> np.ndarray:
    """Per link, the switch (0..n-1) whose buffer holds its egress queue, -1 if none.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> s = fabric_switches(f)
    >>> int(s[f.gpu_access_link[0, 0]]), int(s[f.gpu_access_link[0, 0] ^ 1]) >= 0
    (-1, True)
    """
    is_switch = np.isin(fabric.node_kind, [int(k) for k in SWITCH_KINDS])
    switch_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    switch_id[is_switch] = np.arange(int(is_switch.sum()))
    return switch_id[fabric.link_src]


def network_legs(fabric, paths) -> list[np.ndarray]:
    """Each flow's links from its first ACCESS link (NIC -> ToR) to its last (ToR -> NIC);
    a flow with no ACCESS link (inside a host) keeps its whole path.

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing import route
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> p = route(f, [0, 0], [8, 1], "hpn_dual_plane")
    >>> [len(x) for x in network_legs(f, p)], p.hop_counts().tolist()
    ([2, 2], [4, 2])
    """
    access = fabric.link_kind == int(LinkKind.ACCESS)
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
                          sizes, starts, params, switch_of=fabric_switches(fabric), **options)


def fabric_rings(fabric, gpus, channels: int, *, policy: str | None = None,
                 pxn: bool = True, seed: int = 0) -> list[list[np.ndarray]]:
    """NCCL's rings over ``gpus`` (one per channel, :func:`hpnsim.collectives.ring.ring_order`:
    channel c leaves each host from rail c) routed on ``fabric``; ``rings[c][r]`` is the
    packet path from rank r to rank r+1 (:func:`network_legs`), for :func:`simulate_ring`.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> rings = fabric_rings(f, range(16), 2)
    >>> len(rings), len(rings[0]), [len(p) for p in rings[1]][6:9]   # NVLink, NVLink, network
    (2, 16, [2, 2, 2])
    """
    from hpnsim.collectives.ring import ring_order
    from hpnsim.routing import native_policy, route

    gpus = np.asarray(list(gpus), dtype=np.int64)
    per_host = int(fabric.gpus_per_host)
    rings = []
    for c in range(channels):
        order, _ = ring_order(gpus, per_host, c, pxn)
        paths = route(fabric, order, np.roll(order, -1), policy or native_policy(fabric),
                      conn=np.full(order.size, c), seed=seed, pxn=pxn)
        rings.append(network_legs(fabric, paths))
    return rings
