"""Capacity-planning figures of a fabric: counts, oversubscription, bisection, ECMP path choices.

Also the HPN reach table: how far each mechanism stretches one and two switch tiers.
Figures are of the backend (training) network; :func:`frontend_summary` reports HPN's
frontend network apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpnsim.fabrics.fabric import BACKEND, FRONTEND, UNREACHABLE, Fabric, LinkKind, NodeKind
from hpnsim.units import parse_bandwidth

TIER_KINDS = {"tor": NodeKind.TOR, "agg": NodeKind.AGG, "core": NodeKind.CORE}


def counts(fabric: Fabric) -> dict[str, Any]:
    """GPUs, hosts (active and backup), switches per tier, directed links and cables.

    Backend only: frontend nodes and links (if any) are in :func:`frontend_summary`.

    >>> from hpnsim.fabrics import fat_tree
    >>> c = counts(fat_tree(4))
    >>> c["gpus"], c["switches"], c["cables"]
    (16, {'tor': 8, 'agg': 8, 'core': 4}, 64)
    """
    backend = fabric.node_network == BACKEND
    kinds = np.bincount(fabric.node_kind[backend], minlength=len(NodeKind))
    links = int((fabric.link_network == BACKEND).sum())
    return {
        "gpus": fabric.n_gpus,
        "hosts": int(fabric.meta.get("active_hosts", fabric.n_hosts)),
        "backup_hosts": int(fabric.meta.get("backup_hosts", 0)),
        "switches": {tier: int(kinds[kind]) for tier, kind in TIER_KINDS.items()},
        "links": links,
        "cables": links // 2,
    }


def oversubscription(fabric: Fabric) -> dict[str, float | None]:
    """Per switch tier: active downlink bandwidth / uplink bandwidth (None without uplinks).

    Uplinks reserved for a core that a single pod does not build still count (the HPN pod's
    Aggs are 15:1 by design); a partly filled pod reports its actual, lower ratio.

    >>> from hpnsim.fabrics import hpn7
    >>> {k: round(v, 3) for k, v in oversubscription(hpn7()).items()}
    {'tor': 1.067, 'agg': 15.0}
    """
    return _ratios(fabric.meta.get("tiers", {}))


def _ratios(tiers: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for tier, plan in tiers.items():
        up = plan["up_ports"] * plan["up_speed"]
        down = plan["down_ports"] * plan["down_speed"]
        out[tier] = down / up if up else None
    return out


def bisection_bandwidth(fabric: Fabric) -> float:
    """Bytes/s per direction across a balanced cut at the highest tier the fabric spans.

    For these tiered fabrics it is half of the smallest of: all NIC bandwidth, all ToR
    uplink bandwidth (if there is more than one segment) and all Agg-to-core bandwidth (if
    there is more than one pod) — the cut separating halves of the segments (pods).

    >>> from hpnsim.fabrics import fat_tree
    >>> bisection_bandwidth(fat_tree(4)) / 50e9   # k^3/8 links of 400G
    8.0
    """
    kind = np.where(fabric.link_network == BACKEND, fabric.link_kind, -1)
    src_kind = fabric.node_kind[fabric.link_src]
    dst_kind = fabric.node_kind[fabric.link_dst]
    nic_up = fabric.link_capacity[(kind == LinkKind.ACCESS) & (src_kind == NodeKind.NIC)].sum()
    total = nic_up
    tor_up_mask = (kind == LinkKind.UPLINK) & (src_kind == NodeKind.TOR)
    gpu_nodes = fabric.gpu_node
    if len(np.unique(fabric.node_segment[gpu_nodes] + 1_000_003 * fabric.node_pod[gpu_nodes])) > 1:
        total = min(total, fabric.link_capacity[tor_up_mask].sum())
    if len(np.unique(fabric.node_pod[gpu_nodes])) > 1:
        core_up = fabric.link_capacity[(kind == LinkKind.CORE) & (dst_kind == NodeKind.CORE)]
        total = min(total, core_up.sum())
    return float(total) / 2


def count_shortest_paths(fabric: Fabric, source: int, target: int) -> int:
    """Number of shortest switch-level paths (parallel links counted) between two switches.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> a, b = f.nodes_where(kind=NodeKind.TOR)[[0, 7]]
    >>> count_shortest_paths(f, a, b)    # (k/2)^2 between pods
    4
    """
    if source == target:
        return 1
    rows = fabric.switch_row
    s, t = rows[source], rows[target]
    d_src = fabric.switch_distance_from(source).astype(np.int64)
    if d_src[t] >= UNREACHABLE:
        return 0
    src_row, dst_row = rows[fabric.link_src], rows[fabric.link_dst]
    between = (src_row >= 0) & (dst_row >= 0)
    u, v = src_row[between], dst_row[between]
    forward = d_src[v] == d_src[u] + 1
    u, v = u[forward], v[forward]
    count = np.zeros(len(d_src), dtype=np.float64)  # exact below 2**53 paths
    count[s] = 1.0
    for layer in range(1, int(d_src[t]) + 1):
        step = d_src[v] == layer
        count += np.bincount(v[step], weights=count[u[step]], minlength=len(count))
    return int(round(count[t]))


def path_choices(fabric: Fabric, port: int = 0) -> dict[str, int | None]:
    """ECMP path choices from GPU 0 to a same-rail GPU: same segment, other segment, other pod.

    Counted on NIC port ``port`` as shortest ToR-to-ToR paths (1 when both use one ToR);
    None when the fabric has no such pair.

    >>> from hpnsim.fabrics import hpn7
    >>> path_choices(hpn7(segments=2))
    {'same_segment': 1, 'cross_segment': 60, 'cross_pod': None}
    """
    nodes = fabric.gpu_node
    pod, seg = fabric.node_pod[nodes], fabric.node_segment[nodes]
    rail, host = fabric.node_rail[nodes], fabric.node_host[nodes]
    same_rail = rail == rail[0]
    cases = {
        "same_segment": same_rail & (pod == pod[0]) & (seg == seg[0]) & (host != host[0]),
        "cross_segment": same_rail & (pod == pod[0]) & (seg != seg[0]),
        "cross_pod": same_rail & (pod != pod[0]),
    }
    port = min(port, fabric.ports_per_nic - 1)
    out: dict[str, int | None] = {}
    for name, mask in cases.items():
        other = np.flatnonzero(mask)
        if len(other) == 0:
            out[name] = None
            continue
        out[name] = count_shortest_paths(fabric, int(fabric.gpu_tor[0, port]),
                                         int(fabric.gpu_tor[other[-1], port]))
    return out


def reach_table(chip: str = "51.2T", port_speed: str = "200G", uplink_speed: str = "400G",
                rails: int = 8, agg_oversubscription: int = 15) -> list[dict[str, Any]]:
    """GPUs reachable in one switch tier and in two, as HPN's mechanisms are added one by one.

    Model (51.2T chip, 2 x 200G per GPU, 400G uplinks): a ToR gives half its bandwidth to
    hosts; two tiers hold as many ToRs per plane as an Agg has downlinks, each ToR one link
    to each Agg of its plane (1:1 Aggs keep half their ports for the core, 15:1 Aggs keep
    1/16). The published figures (HPN paper) are given beside the model's.

    >>> [(r["mechanism"], r["tier1"], r["tier2"]) for r in reach_table()][1:]
    [('+ dual-ToR', 128, 4096), ('+ rail-optimized', 1024, 4096), ('+ dual-plane', 1024, 8192), ('+ 15:1 agg-core', 1024, 15360)]
    """
    chip_bw = parse_bandwidth(chip, "chip")
    port = parse_bandwidth(port_speed, "port_speed")
    up = parse_bandwidth(uplink_speed, "uplink_speed")
    nic = 2 * port
    down_half = chip_bw / 2
    rows = []
    published = [(64, 2048), (128, 4096), (1024, None), (None, 8192), (None, 15360)]
    steps = ["plain Clos", "+ dual-ToR", "+ rail-optimized", "+ dual-plane", "+ 15:1 agg-core"]
    for i, step in enumerate(steps):
        dual, rail, plane, over = i >= 1, i >= 2, i >= 3, i >= 4
        per_tor_gpus = int(down_half // (port if dual else nic))
        tier1 = per_tor_gpus * (rails if rail else 1)
        agg_ports = int(chip_bw // up)
        agg_down = agg_ports * agg_oversubscription // (agg_oversubscription + 1) if over \
            else agg_ports // 2
        planes = 2 if plane else 1
        # each ToR spends one uplink per Agg of its plane; Aggs limit the ToRs per plane
        tors = planes * agg_down
        gpu_ports = tors * per_tor_gpus
        tier2 = int(gpu_ports // (2 if dual else 1))
        pub1, pub2 = published[i]
        rows.append({"mechanism": step, "tier1": tier1, "tier2": tier2,
                     "published_tier1": pub1, "published_tier2": pub2})
    rows[0]["note"] = ("the model gives 64 ToRs x 64 GPUs = 4096 for a 1:1 two-tier plain Clos; "
                       "the paper states 2K")
    return rows


def frontend_summary(fabric: Fabric) -> dict[str, Any] | None:
    """HPN's frontend network: hosts, storage hosts, switches, oversubscription, checkpoint.

    None when the fabric has no frontend. ``checkpoint`` is
    :func:`hpnsim.fabrics.frontend.checkpoint_time_bound` (30 GB per GPU, every GPU at once).

    >>> from hpnsim.fabrics import hpn7
    >>> fe = frontend_summary(hpn7(frontend=True))
    >>> fe["switches"], fe["oversubscription"]
    ({'tor': 64, 'agg': 64, 'core': 60}, {'tor': 1.0, 'agg': 1.0, 'core': None})
    """
    from hpnsim.fabrics.frontend import checkpoint_time_bound

    meta = fabric.meta.get("frontend")
    if not meta:
        return None
    front = fabric.node_network == FRONTEND
    kinds = np.bincount(fabric.node_kind[front], minlength=len(NodeKind))
    links = int((fabric.link_network == FRONTEND).sum())
    return {
        "hosts": int(kinds[NodeKind.HOST]), "storage_hosts": int(kinds[NodeKind.STORAGE]),
        "pods": meta["pods"], "storage_pods": meta["storage_pods"],
        "switches": {tier: int(kinds[kind]) for tier, kind in TIER_KINDS.items()},
        "links": links, "cables": links // 2,
        "oversubscription": _ratios(meta["tiers"]),
        "checkpoint": checkpoint_time_bound(fabric),
    }


def summary(fabric: Fabric) -> dict[str, Any]:
    """Everything the CLI prints: counts, oversubscription, bisection, path choices.

    With a frontend network, ``frontend`` holds :func:`frontend_summary`.

    >>> from hpnsim.fabrics import fat_tree
    >>> summary(fat_tree(4))["path_choices"]
    {'same_segment': 1, 'cross_segment': 2, 'cross_pod': 4}
    """
    out = {"template": fabric.meta.get("template"), **counts(fabric)}
    out["oversubscription"] = oversubscription(fabric)
    out["bisection_bandwidth"] = bisection_bandwidth(fabric)
    out["path_choices"] = path_choices(fabric)
    front = frontend_summary(fabric)
    if front is not None:
        out["frontend"] = front
    return out


def fabric_report(fabric: Fabric) -> dict[str, Any]:
    """Summary and bill of materials of a fabric as one JSON-ready dict.

    ``requested_gpus`` is the ``--gpus`` request the fabric was sized for (None if
    unsized); the BOM uses the unit table in ``fabric.meta["units"]`` if one is set.

    Examples
    --------
    >>> from hpnsim.fabrics import fat_tree
    >>> r = fabric_report(fat_tree(4))
    >>> r["gpus"], r["switches"], r["path_choices"]["cross_pod"]
    (16, {'tor': 8, 'agg': 8, 'core': 4}, 4)
    """
    from hpnsim.fabrics.bom import bill_of_materials

    out = summary(fabric)
    out = {**{k: v for k, v in out.items() if k in ("template", "gpus")},
           "requested_gpus": fabric.meta.get("requested_gpus"), **out}
    out["options"] = fabric.meta.get("options", {})
    out["bom"] = bill_of_materials(fabric, units=fabric.meta.get("units"))
    return out
