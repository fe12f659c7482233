"""Routing diagnostics: per-link load, port and uplink imbalance, hash collisions, histogram.

Collisions are counted against the *ideal spread*: network links are grouped into sets of
interchangeable alternatives (a switch's or NIC's links up to the same tier; the links
into one node from the same tier above, e.g. the two ToR ports leading to one NIC or the
60 Agg links into one ToR). A group carrying ``T`` flows over ``m`` links ideally puts
``ceil(T/m)`` on each; every flow above that on a link is one collision. Perfect
placement gives 0; ECMP with n flows on n paths gives ``n - distinct paths used``.
Under a :class:`~hpnsim.fabrics.state.FabricState` a down link is no alternative: the
ideal spread counts only the links of a group that are up.
"""

from __future__ import annotations

__all__ = ["RoutingDiagnostics", "alternative_groups", "diagnose", "excess_over_ideal",
           "port_imbalance"]

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpnsim.fabrics.fabric import Fabric, LinkKind, NodeKind
from hpnsim.routing import imbalance as by_tier
from hpnsim.routing.imbalance import port_imbalance
from hpnsim.routing.paths import Paths
from hpnsim.routing.tables import state_key

#: link kinds where routing has a choice (in-host NVLink and PCIe are fixed by the endpoints)
NETWORK_KINDS = (LinkKind.ACCESS, LinkKind.UPLINK, LinkKind.CORE, LinkKind.PEER)
_GROUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def alternative_groups(fabric: Fabric, state=None) -> np.ndarray:
    """Group id of every link among interchangeable alternatives (-1 for in-host links and,
    under ``state``, for down links).

    Upward links group by (source, tier above); downward links by (destination, tier
    above); links within a tier (ToR peer links) stand alone. Cached per fabric and state
    fingerprint; read-only.

    >>> import hpnsim.fabrics as fb
    >>> f = fb.hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=4,
    ...             aggs_per_plane=4)
    >>> g = alternative_groups(f)
    >>> bool(g[f.gpu_access_link[0, 0]] == g[f.gpu_access_link[0, 1]])   # one NIC's 2 ports
    True
    """
    key = state_key(fabric, state)
    per_state = _GROUPS.setdefault(fabric, {})
    cached = per_state.get(key)
    if cached is not None:
        return cached
    if key is not None:
        groups = alternative_groups(fabric).copy()
        groups[~state.up] = -1
        groups.flags.writeable = False
        per_state[key] = groups
        while len(per_state) > 16:         # keep the all-up groups and the latest states
            per_state.pop(next(k for k in per_state if k is not None))
        return groups
    src, dst = fabric.link_src.astype(np.int64), fabric.link_dst.astype(np.int64)
    tier_src, tier_dst = fabric.node_tier[src].astype(np.int64), fabric.node_tier[dst]
    network = np.isin(fabric.link_kind, NETWORK_KINDS)
    up, down = tier_dst > tier_src, tier_dst < tier_src
    key = np.where(up, src * 32 + tier_dst, np.where(down, dst * 32 + 16 + tier_src,
                                                     fabric.n_nodes * 32
                                                     + np.arange(fabric.n_links)))
    groups = np.full(fabric.n_links, -1, dtype=np.int64)
    _, groups[network] = np.unique(key[network], return_inverse=True)
    groups.flags.writeable = False
    per_state[None] = groups
    return groups


def excess_over_ideal(fabric: Fabric, load: np.ndarray, *, integral: bool = True,
                      state=None) -> np.ndarray:
    """Per link, the load above the ideal spread of its group of alternatives.

    A group carrying ``T`` over ``m`` interchangeable links ideally puts ``T/m`` on each
    (``ceil(T/m)`` when ``integral``: whole flows); in-host links have no alternative and
    get 0 (so do down links under ``state``, whose group then counts one link fewer). The
    sum over links is the collision count of :func:`diagnose`.

    >>> import hpnsim.fabrics as fb
    >>> f = fb.hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=4,
    ...             aggs_per_plane=4)
    >>> load = np.zeros(f.n_links)
    >>> load[f.gpu_access_link[0, 0]] = 2.0       # both flows of GPU 0 on NIC port 0
    >>> float(excess_over_ideal(f, load).sum())   # ideal is one per port
    1.0
    >>> from hpnsim.fabrics import FabricState
    >>> s = FabricState(f).set_down(f.gpu_access_link[0, 1])      # port 1 is dead
    >>> float(excess_over_ideal(f, load, state=s).sum())          # port 0 is all there is
    0.0
    """
    groups = alternative_groups(fabric, state)
    network = groups >= 0
    n_groups = int(groups.max()) + 1 if network.any() else 0
    g = groups[network]
    group_total = np.bincount(g, weights=load[network], minlength=n_groups)
    group_size = np.bincount(g, minlength=n_groups)
    ideal = group_total / np.maximum(group_size, 1)
    if integral:
        ideal = np.ceil(ideal - 1e-9)
    excess = np.zeros(fabric.n_links)
    excess[network] = np.maximum(load[network] - ideal[g], 0.0)
    excess[excess < 1e-9] = 0.0   # spraying fractions leave rounding dust
    return excess


@dataclass
class RoutingDiagnostics:
    """Loads and imbalance of one set of routed flows (see :func:`diagnose`)."""

    unit: str
    link_load: np.ndarray = field(repr=False)
    excess: np.ndarray = field(repr=False)          # per link, load above its group's ideal
    collisions: float
    colliding_links: int
    max_link_load: float
    max_load_link: int
    max_load_link_name: str
    collisions_by_kind: dict[str, float]
    nic_port_load: np.ndarray = field(repr=False)   # (n_gpus, ports) ToR -> NIC per port
    port_imbalance: float
    worst_nic_gpu: int
    uplink_imbalance: float
    worst_tor: str
    histogram: dict[str, int]
    #: per tier, the max/min port imbalance distribution (:func:`port_imbalance`)
    imbalance: dict[str, dict] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (per-link arrays left out)."""
        return {
            "unit": self.unit, "collisions": self.collisions,
            "colliding_links": self.colliding_links, "max_link_load": self.max_link_load,
            "max_load_link": self.max_load_link, "max_load_link_name": self.max_load_link_name,
            "collisions_by_kind": dict(self.collisions_by_kind),
            "port_imbalance": self.port_imbalance, "worst_nic_gpu": self.worst_nic_gpu,
            "uplink_imbalance": self.uplink_imbalance, "worst_tor": self.worst_tor,
            "histogram": dict(self.histogram), "imbalance": self.imbalance,
        }


def _ratio_max_over_mean(values: np.ndarray, groups: np.ndarray, n_groups: int):
    """Per group ``max / mean`` of ``values`` (1.0 is perfect balance; nan if empty)."""
    total = np.bincount(groups, weights=values, minlength=n_groups)
    size = np.bincount(groups, minlength=n_groups)
    peak = np.zeros(n_groups)
    np.maximum.at(peak, groups, values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return peak / (total / np.maximum(size, 1))


def diagnose(fabric: Fabric, paths: Paths, sizes=None, *, state=None) -> RoutingDiagnostics:
    """Per-link load, per-port and per-ToR-uplink imbalance, collisions and a histogram.

    Parameters
    ----------
    fabric, paths : the fabric and the routed flows (:func:`hpnsim.routing.route`).
    sizes : bytes per flow (scalar or array) to weigh loads in bytes; default counts flows.
    state : a :class:`~hpnsim.fabrics.state.FabricState`: down links are no alternatives.

    Returns
    -------
    :class:`RoutingDiagnostics`. ``port_imbalance`` is the worst NIC's ``max/mean`` load
    over the ToR ports leading to it; ``uplink_imbalance`` the worst ToR's ``max/mean``
    over its uplinks; ``histogram`` maps a network-link load (flows) to a link count;
    ``imbalance`` the paper's ``max / min`` per NIC (send and receive ports), per ToR
    (uplinks) and per Agg (downlinks), as distributions (:func:`port_imbalance`).

    Examples
    --------
    >>> import hpnsim.fabrics as fb
    >>> from hpnsim.routing import route
    >>> f = fb.hpn7(segments=2, hosts_per_segment=2, backup_hosts=0, tor_uplinks=4,
    ...             aggs_per_plane=4)
    >>> d = diagnose(f, route(f, [0, 8, 0], [16, 24, 16], "ecmp", port=0, seed=2))
    >>> d.port_imbalance, d.to_dict()["unit"]
    (2.0, 'flows')
    """
    load = paths.link_load(fabric.n_links, sizes)
    network = alternative_groups(fabric) >= 0
    integral = sizes is None and bool(np.all(paths.weight == 1.0))
    excess = excess_over_ideal(fabric, load, integral=integral, state=state)
    by_kind = {LinkKind(k).name.lower(): float(excess[fabric.link_kind == k].sum())
               for k in NETWORK_KINDS if (fabric.link_kind == k).any()}

    # the ToR ports leading to each NIC (ToR -> NIC ACCESS links, one per port)
    access = fabric.gpu_access_link
    down = np.where(access >= 0, fabric.link_ids(fabric.gpu_tor, fabric.gpu_nic[:, None]), -1)
    nic_port_load = np.where(down >= 0, load[np.maximum(down, 0)], 0.0)
    used = (down >= 0).sum(axis=1)
    mean = nic_port_load.sum(axis=1) / np.maximum(used, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        port_ratio = np.where(mean > 0, nic_port_load.max(axis=1) / mean, np.nan)
    if np.isfinite(port_ratio).any():
        worst_nic, port_imbalance = int(np.nanargmax(port_ratio)), float(np.nanmax(port_ratio))
    else:
        worst_nic, port_imbalance = -1, 1.0

    tor_up = np.flatnonzero((fabric.node_kind[fabric.link_src] == NodeKind.TOR)
                            & (fabric.node_tier[fabric.link_dst] > 1))
    worst_tor, uplink_imbalance = "", 1.0
    if tor_up.size:
        owners, owner_idx = np.unique(fabric.link_src[tor_up], return_inverse=True)
        ratio = _ratio_max_over_mean(load[tor_up], owner_idx, owners.size)
        if np.isfinite(ratio).any():
            best = int(np.nanargmax(ratio))
            worst_tor, uplink_imbalance = fabric.node_name(owners[best]), float(ratio[best])

    counted = np.round(load[network]).astype(np.int64) if integral else None
    if counted is not None:
        values, counts = np.unique(counted, return_counts=True)
        histogram = {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)}
    else:
        counts, edges = np.histogram(load[network], bins=10)
        histogram = {f"{edges[i]:.4g}-{edges[i + 1]:.4g}": int(counts[i])
                     for i in range(len(counts))}
    top = int(np.argmax(load)) if load.size else -1
    return RoutingDiagnostics(
        unit="flows" if sizes is None else "bytes", link_load=load, excess=excess,
        collisions=float(excess.sum()), colliding_links=int((excess > 1e-12).sum()),
        max_link_load=float(load.max()) if load.size else 0.0, max_load_link=top,
        max_load_link_name=fabric.link_name(top) if top >= 0 else "",
        collisions_by_kind=by_kind, nic_port_load=nic_port_load,
        port_imbalance=port_imbalance, worst_nic_gpu=worst_nic,
        uplink_imbalance=uplink_imbalance, worst_tor=worst_tor, histogram=histogram,
        imbalance=by_tier.port_imbalance(fabric, load, state=state))
