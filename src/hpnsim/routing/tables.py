"""Per-fabric lookups routing needs, built once (vectorized) and cached per Fabric object
(and, under a :class:`~hpnsim.fabrics.state.FabricState` with links down, per state
fingerprint: the adjacency without the down links and the distances over the rest).

- switch-to-switch out-adjacency (CSR) so hop-by-hop kernels never scan NIC-facing ports;
- per GPU: its PCIe links (GPU->NIC, NIC->GPU), NVLink links (GPU->NVSwitch, NVSwitch->GPU),
  ACCESS links per NIC port in both directions, and the ToR behind each port;
- a (host, rail) -> GPU table for PXN relays.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, fields, replace

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.distances import switch_distance_matrix
from hpnsim.fabrics.fabric import UNREACHABLE, Fabric, LinkKind

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_STATE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: degraded-state tables kept per fabric (least recently used dropped first)
STATE_TABLES_KEPT = 16


@dataclass(frozen=True)
class RoutingTables:
    """Lookups derived from one :class:`~hpnsim.fabrics.fabric.Fabric`."""

    sw_ptr: np.ndarray        # int64 (n_nodes+1): out-links toward switches, by source node
    sw_links: np.ndarray      # int32
    pair_keys: np.ndarray     # int64 sorted ``src * n_nodes + dst`` of switch-to-switch links
    pair_links: np.ndarray    # int32 link id of each key
    row: np.ndarray           # int32 (n_nodes): row in fabric.switch_distance, -1 if no switch
    distance: np.ndarray      # int16 switch_distance
    gpu_tor: np.ndarray       # int32 (n_gpus, ports): ToR behind each NIC port, -1 if none
    access_up: np.ndarray     # int32 (n_gpus, ports): NIC -> ToR link per port
    access_down: np.ndarray   # int32 (n_gpus, ports): ToR -> NIC link per port
    pcie_up: np.ndarray       # int32 (n_gpus,): GPU -> NIC (GPU -> PCIe switch if one)
    pcie_down: np.ndarray     # int32 (n_gpus,): NIC -> GPU (PCIe switch -> GPU if one)
    switch_up: np.ndarray     # int32 (n_gpus,): PCIe switch -> shared NIC, -1 if none
    switch_down: np.ndarray   # int32 (n_gpus,): shared NIC -> PCIe switch, -1 if none
    nvlink_up: np.ndarray     # int32 (n_gpus,): GPU -> NVSwitch, -1 if none
    nvlink_down: np.ndarray   # int32 (n_gpus,): NVSwitch -> GPU, -1 if none
    gpu_host: np.ndarray      # int32 (n_gpus,)
    gpu_rail: np.ndarray      # int32 (n_gpus,)
    host_rail_gpu: np.ndarray  # int32 (n_hosts, rails): GPU of a host on a rail, -1 if none
    ip: np.ndarray            # int64 (n_gpus,): IPv4 address of each GPU's NIC (10.0.0.0/8)
    max_hops: int             # longest finite switch-to-switch hop count
    link_up: np.ndarray | None = None       # bool (n_links) when some link is down, else None
    base: RoutingTables | None = None       # the all-up tables when some link is down

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    @property
    def ports(self) -> int:
        return self.gpu_tor.shape[1]

    def topo(self, fabric: Fabric) -> tuple:
        """The arrays the walking kernels take as one tuple (see :mod:`.kernels`)."""
        return (self.sw_ptr, self.sw_links, fabric.link_dst, self.row, self.distance,
                self.pair_keys, self.pair_links, fabric.node_tier)

    def base_topo(self) -> tuple:
        """The all-up adjacency and distances the kernels use to keep a fixed mapping's
        all-up choice (see :mod:`.kernels`): the base tables' when some link is down, else
        this table's own."""
        b = self.base if self.base is not None else self
        return (b.sw_ptr, b.sw_links, b.distance, b.pair_keys, b.pair_links)


def _first_link_of_kind(fabric: Fabric, nodes: np.ndarray, kind: LinkKind) -> np.ndarray:
    """Per node, the lowest-id out-link of ``kind`` (-1 if none), vectorized."""
    links = np.flatnonzero(fabric.link_kind == kind)
    best = np.full(fabric.n_nodes, np.iinfo(np.int32).max, dtype=np.int64)
    np.minimum.at(best, fabric.link_src[links], links)
    out = best[nodes]
    return np.where(out == np.iinfo(np.int32).max, -1, out).astype(np.int32)


def _max_finite(distance: np.ndarray) -> int:
    finite = distance[distance < UNREACHABLE]
    return int(finite.max()) if finite.size else 0


def routing_tables(fabric: Fabric, state=None) -> RoutingTables:
    """Build (or fetch from cache) the routing lookups of ``fabric`` (under ``state``).

    With ``state`` None or without down links these are the all-up tables; otherwise the
    switch adjacency leaves out the down links and distances count only the links that
    are up (cached per ``state.fingerprint``; ``base`` holds the all-up tables).

    >>> from hpnsim.fabrics.hpn import hpn7
    >>> f = hpn7(segments=2, hosts_per_segment=2, backup_hosts=0, tor_uplinks=4,
    ...          aggs_per_plane=4)
    >>> t = routing_tables(f)
    >>> t.ports, int(f.link_dst[t.access_up[9, 1]]) == int(f.gpu_tor[9, 1])
    (2, True)
    >>> from hpnsim.fabrics import FabricState
    >>> s = FabricState(f).set_down(f.out_of(f.gpu_tor[0, 0])[-1])    # a ToR uplink
    >>> d = routing_tables(f, s)
    >>> d.base is t, d.sw_links.size == t.sw_links.size - 1
    (True, True)
    """
    if state_key(fabric, state) is None or not state.down_links.size:
        return _all_up_tables(fabric)
    per_state = _STATE_CACHE.setdefault(fabric, OrderedDict())
    key = state.fingerprint
    tables = per_state.get(key)
    if tables is not None:
        per_state.move_to_end(key)
        return tables
    tables = _degraded_tables(fabric, _all_up_tables(fabric), state.up)
    per_state[key] = tables
    while len(per_state) > STATE_TABLES_KEPT:
        per_state.popitem(last=False)
    return tables


def state_key(fabric: Fabric, state) -> tuple | None:
    """Cache key of ``state`` on ``fabric``: None when there is no state or it changes
    nothing, else its fingerprint; InputError when it is the state of another fabric.

    >>> from hpnsim.fabrics import FabricState, fat_tree
    >>> f = fat_tree(4)
    >>> state_key(f, None), state_key(f, FabricState(f))
    (None, None)
    >>> state_key(f, FabricState(f).set_down(0)) == FabricState(f).set_down([0]).fingerprint
    True
    """
    if state is None:
        return None
    if getattr(state, "fabric", None) is not fabric:
        raise InputError("state", "is the state of another fabric: build FabricState(fabric) "
                                  "for the fabric being routed")
    return None if state.all_up else state.fingerprint


def _degraded_tables(fabric: Fabric, base: RoutingTables, up: np.ndarray) -> RoutingTables:
    """``base`` without the down links: adjacency filtered (order kept), distances redone."""
    up = np.array(up, dtype=bool)
    sw_links = base.sw_links[up[base.sw_links]]
    sw_ptr = np.zeros(fabric.n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(fabric.link_src[sw_links], minlength=fabric.n_nodes),
              out=sw_ptr[1:])
    keep = up[base.pair_links]
    distance = switch_distance_matrix(fabric, up)
    return replace(base, sw_ptr=sw_ptr, sw_links=sw_links, pair_keys=base.pair_keys[keep],
                   pair_links=base.pair_links[keep], distance=distance,
                   max_hops=max(base.max_hops, _max_finite(distance)), link_up=up, base=base)


def _all_up_tables(fabric: Fabric) -> RoutingTables:
    cached = _CACHE.get(fabric)
    if cached is not None:
        return cached
    row = fabric.switch_row
    between = np.flatnonzero((row[fabric.link_src] >= 0) & (row[fabric.link_dst] >= 0))
    order = between[np.argsort(fabric.link_src[between], kind="stable")].astype(np.int32)
    sw_ptr = np.zeros(fabric.n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(fabric.link_src[order], minlength=fabric.n_nodes), out=sw_ptr[1:])

    pair = fabric.link_src[order].astype(np.int64) * fabric.n_nodes + fabric.link_dst[order]
    by_pair = np.argsort(pair, kind="stable")
    gpu, nic = fabric.gpu_node, fabric.gpu_nic
    access_up = fabric.gpu_access_link.astype(np.int32)
    access_down = np.where(access_up >= 0,
                           fabric.link_ids(fabric.gpu_tor, nic[:, None]), -1).astype(np.int32)
    nvlink_up = _first_link_of_kind(fabric, gpu, LinkKind.NVLINK)
    nvswitch = np.where(nvlink_up >= 0, fabric.link_dst[nvlink_up], -1)
    nvlink_down = fabric.link_ids(nvswitch, gpu)

    pcie_up, pcie_down = fabric.link_ids(gpu, nic), fabric.link_ids(nic, gpu)
    # GPUs that share a NIC reach it through their PCIe switch: GPU -> switch -> NIC
    switch = np.where(pcie_up < 0, fabric.link_dst[_first_link_of_kind(fabric, gpu,
                                                                        LinkKind.PCIE)], -1)
    switch_up, switch_down = fabric.link_ids(switch, nic), fabric.link_ids(nic, switch)
    bridged = switch_up >= 0
    pcie_up = np.where(bridged, fabric.link_ids(gpu, switch), pcie_up).astype(np.int32)
    pcie_down = np.where(bridged, fabric.link_ids(switch, gpu), pcie_down).astype(np.int32)

    host = fabric.node_host[gpu].astype(np.int32)
    rail = fabric.node_rail[gpu].astype(np.int32)
    n_hosts = int(host.max()) + 1 if len(host) else 0
    n_rails = int(rail.max()) + 1 if len(rail) and rail.max() >= 0 else 0
    host_rail_gpu = np.full((n_hosts, max(n_rails, 1)), -1, dtype=np.int32)
    has_rail = rail >= 0
    host_rail_gpu[host[has_rail], rail[has_rail]] = np.flatnonzero(has_rail)

    tables = RoutingTables(
        sw_ptr=sw_ptr, sw_links=order, pair_keys=pair[by_pair], pair_links=order[by_pair],
        row=row, distance=fabric.switch_distance,
        gpu_tor=fabric.gpu_tor.astype(np.int32), access_up=access_up, access_down=access_down,
        pcie_up=pcie_up, pcie_down=pcie_down, switch_up=switch_up, switch_down=switch_down,
        nvlink_up=nvlink_up, nvlink_down=nvlink_down, gpu_host=host, gpu_rail=rail,
        host_rail_gpu=host_rail_gpu,
        ip=(0x0A000000 + (nic.astype(np.int64) & 0xFFFFFF)),
        max_hops=_max_finite(fabric.switch_distance),
    )
    _CACHE[fabric] = tables
    return tables

