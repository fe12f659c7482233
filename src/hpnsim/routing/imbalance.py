"""Port imbalance as the HPN paper measures it: ``max / min`` load over a device's ports.

Per NIC, its two NIC -> ToR ports (send) and its two ToR -> NIC ports (receive); per ToR,
its uplinks; per aggregation switch, its downlinks to ToRs. ``max / min`` is 1 for perfect
balance and infinite when one port carries nothing while another carries something (the
paper's "3x" is a ratio of this kind). Devices whose ports all idle are left out. Under a
:class:`~hpnsim.fabrics.state.FabricState`, down links are no ports.
"""

from __future__ import annotations

import numpy as np

from hpnsim.fabrics.fabric import Fabric, NodeKind

#: lower edges of the histogram rows of a ratio distribution (the last row is infinity)
HISTOGRAM_EDGES = (1.0, 1.5, 2.0, 3.0)
PERCENTILES = (50, 90, 99)
TIERS = ("nic_send", "nic_receive", "tor_uplinks", "agg_downlinks")


def ratio_max_over_min(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, ``max / min`` of ``values`` (nan when every value is 0, inf when only
    the minimum is).

    >>> ratio_max_over_min(np.array([3., 1., 0., 0., 2., 0.]), np.array([0, 0, 1, 1, 2, 2]),
    ...                    3).tolist()
    [3.0, nan, inf]
    """
    peak = np.full(n_groups, -np.inf)
    low = np.full(n_groups, np.inf)
    np.maximum.at(peak, groups, values)
    np.minimum.at(low, groups, values)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = peak / low
    return np.where(peak > 0, ratio, np.nan)


def nic_port_links(fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """``(send, receive)``: per GPU and NIC port, the NIC -> ToR and ToR -> NIC link (-1 where
    the port has no ToR)."""
    send = fabric.gpu_access_link
    tors = fabric.gpu_tor
    receive = np.where(send >= 0, fabric.link_ids(np.maximum(tors, 0),
                                                  fabric.gpu_nic[:, None]), -1)
    return send, receive


def _port_groups(links: np.ndarray, up) -> tuple[np.ndarray, np.ndarray]:
    """Flatten a ``(devices, ports)`` link table into (links, device per link)."""
    device = np.broadcast_to(np.arange(links.shape[0])[:, None], links.shape)
    keep = links >= 0
    if up is not None:
        keep &= up[np.maximum(links, 0)]
    return links[keep], device[keep]


def _switch_groups(fabric: Fabric, kind: NodeKind, upward: bool, up):
    src, dst = fabric.link_src, fabric.link_dst
    tier_src, tier_dst = fabric.node_tier[src], fabric.node_tier[dst]
    if upward:
        mask = (fabric.node_kind[src] == kind) & (tier_dst > tier_src)
    else:
        mask = (fabric.node_kind[src] == kind) & (fabric.node_kind[dst] == NodeKind.TOR)
    if up is not None:
        mask &= up
    links = np.flatnonzero(mask)
    owners, device = np.unique(src[links], return_inverse=True)
    return links, device, owners


def ratios_by_tier(fabric: Fabric, load: np.ndarray, *, state=None) -> dict:
    """Per tier (:data:`TIERS`), ``(ratios, names)``: the ``max / min`` ratio of every device
    with traffic on that tier's ports and the device's name.

    >>> import hpnsim.fabrics as fb
    >>> f = fb.hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...             aggs_per_plane=2)
    >>> load = np.zeros(f.n_links)
    >>> load[f.gpu_access_link[0]] = [3.0, 1.0]
    >>> ratios_by_tier(f, load)["nic_send"]
    (array([3.]), ['pod0/seg0/host0/nic-r0'])
    """
    up = None if state is None else np.asarray(state.up, dtype=bool)
    load = np.asarray(load, dtype=np.float64)
    out = {}
    send, receive = nic_port_links(fabric)
    for tier, table in (("nic_send", send), ("nic_receive", receive)):
        links, device = _port_groups(table, up)
        ratio = ratio_max_over_min(load[links], device, table.shape[0])
        idx = np.flatnonzero(~np.isnan(ratio))
        out[tier] = (ratio[idx], [fabric.node_name(fabric.gpu_nic[i]) for i in idx])
    for tier, kind, upward in (("tor_uplinks", NodeKind.TOR, True),
                               ("agg_downlinks", NodeKind.AGG, False)):
        links, device, owners = _switch_groups(fabric, kind, upward, up)
        ratio = ratio_max_over_min(load[links], device, owners.size)
        idx = np.flatnonzero(~np.isnan(ratio))
        out[tier] = (ratio[idx], [fabric.node_name(owners[i]) for i in idx])
    return out


def _nearest_rank(sorted_values: np.ndarray, q: float) -> float:
    k = max(int(np.ceil(q / 100.0 * sorted_values.size)) - 1, 0)
    return float(sorted_values[k])


def summarize(ratios: np.ndarray, names: list[str]) -> dict:
    """Distribution of one tier's ratios: device count, how many are infinite, nearest-rank
    percentiles, the worst ratio and its device, histogram rows (``"1-1.5"``, ...,
    ``"3-inf"`` for finite ratios, ``"inf"``).

    >>> s = summarize(np.array([1.0, 1.0, 3.0, np.inf]), ["a", "b", "c", "d"])
    >>> s["devices"], s["infinite"], s["p50"], s["max"], s["worst"], s["histogram"]["3-inf"]
    (4, 1, 1.0, inf, 'd', 1)
    """
    values = np.sort(np.asarray(ratios, dtype=np.float64))
    out: dict = {"devices": int(values.size), "infinite": int(np.isinf(values).sum())}
    for q in PERCENTILES:
        out[f"p{q}"] = _nearest_rank(values, q) if values.size else 1.0
    out["max"] = float(values[-1]) if values.size else 1.0
    out["worst"] = names[int(np.argmax(ratios))] if values.size else ""
    finite = values[np.isfinite(values)]
    edges = (*HISTOGRAM_EDGES, np.inf)
    rows = {}
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        label = f"{lo:g}-{hi:g}"
        rows[label] = int(((finite >= lo) & (finite < hi)).sum())
    rows["inf"] = out["infinite"]
    out["histogram"] = rows
    return out


def at_least(summary: dict, threshold: float = 3.0) -> int:
    """How many devices of a :func:`summarize` dict have a ratio of ``threshold`` or more
    (infinite included; ``threshold`` must be one of :data:`HISTOGRAM_EDGES`).

    >>> at_least(summarize(np.array([1.0, 3.0, 4.0, np.inf]), list("abcd")))
    3
    """
    start = HISTOGRAM_EDGES.index(threshold)
    rows = list(summary["histogram"].values())
    return int(sum(rows[start:]))


def jsonable(imbalance: dict) -> dict:
    """:func:`port_imbalance` with infinite ratios as the string ``"inf"`` (JSON has no
    infinity).

    >>> jsonable({"nic_send": {"max": float("inf"), "p50": 1.0}})
    {'nic_send': {'max': 'inf', 'p50': 1.0}}
    """
    return {tier: {k: ("inf" if isinstance(v, float) and np.isinf(v) else v)
                   for k, v in summary.items()} for tier, summary in imbalance.items()}


def port_imbalance(fabric: Fabric, load: np.ndarray, *, state=None) -> dict:
    """``max / min`` port imbalance per tier (:data:`TIERS`), each a :func:`summarize` dict.

    ``load`` is per link (flows, e.g. :meth:`Paths.link_load
    <hpnsim.routing.paths.Paths.link_load>`, or bytes, e.g. a collective's ``link_bytes``).

    Examples
    --------
    Four flows into GPU 8's NIC, three of them on its port 0:

    >>> import hpnsim.fabrics as fb
    >>> from hpnsim.routing import route
    >>> f = fb.hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...             aggs_per_plane=2)
    >>> p = route(f, [0, 1, 2, 2], [8, 8, 8, 8], "ecmp", port=[0, 0, 0, 1])
    >>> port_imbalance(f, p.link_load(f.n_links))["nic_receive"]["max"]
    3.0
    """
    return {tier: summarize(*pair)
            for tier, pair in ratios_by_tier(fabric, load, state=state).items()}
