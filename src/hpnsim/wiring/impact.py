"""What a miswire costs: the collectives that cross the miswired ports, run on the planned
and on the as-built fabric (:mod:`hpnsim.wiring.asbuilt`), busbw before and after.

By default, for every NIC (or ToR) whose links differ from the plan: the all-reduce (or
the ``op`` asked for) of its rail in its segment (the GPUs of that rail on every host of
the segment) and the segment's (every GPU of the segment); when an Agg's or core's links
differ, also the rail's over the whole pod (it crosses the Aggs). Or the user's group.

Each runs alone (:func:`hpnsim.collectives.run_collective`), under the fabric's own
routing by default (HPN 7.0: ``hpn_dual_plane``, port p stays in plane p). Colliding links
are the network links (NIC ports, switch links) that carry more member flows of one step
on the as-built fabric than on the plan's same link, and more than one: across planes,
flows arrive on another port than the one their connection was balanced for (the dual
plane's one path per flow is gone); across rails, a rail's flows go up through the Agg
tier (``uplink_bytes`` as built > 0 where the plan has 0).
"""

from __future__ import annotations

import numpy as np

from hpnsim.fabrics.fabric import Fabric, LinkKind, NodeKind
from hpnsim.wiring.asbuilt import AsBuilt, as_built
from hpnsim.wiring.diff import check
from hpnsim.wiring.lldp import Sighting
from hpnsim.wiring.plan import CablingPlan

#: at most this many colliding links are listed per collective (all are counted)
LISTED_LINKS = 20


def _gpus_of(fabric: Fabric, pod: int, segment: int | None, rail: int | None) -> list[int]:
    nodes = fabric.gpu_node
    mask = fabric.node_pod[nodes] == pod
    if segment is not None:
        mask &= fabric.node_segment[nodes] == segment
    if rail is not None:
        mask &= fabric.node_rail[nodes] == rail
    return np.flatnonzero(mask).tolist()


def affected_groups(plan: CablingPlan, changed: set[int]) -> list[tuple[str, list[int]]]:
    """(label, GPUs) of the default collectives for the ``changed`` nodes (module docstring)."""
    fabric = plan.fabric
    places: set[tuple[int, int, int]] = set()      # (pod, segment, rail)
    pods: set[int] = set()
    gpu_tor = fabric.gpu_tor
    for node in sorted(changed):
        kind = NodeKind(int(fabric.node_kind[node]))
        if kind == NodeKind.NIC:
            gpus = np.flatnonzero(fabric.gpu_nic == node)
        elif kind == NodeKind.TOR:
            gpus = np.flatnonzero((gpu_tor == node).any(axis=1))
        else:
            if kind in (NodeKind.AGG, NodeKind.CORE):
                pods.add(int(fabric.node_pod[node]))
            continue
        for g in gpus:
            n = fabric.gpu_node[g]
            places.add((int(fabric.node_pod[n]), int(fabric.node_segment[n]),
                        int(fabric.node_rail[n])))
    groups: list[tuple[str, list[int]]] = []
    for pod, seg, rail in sorted(places):
        groups.append((f"rail {rail} of pod{pod}-seg{seg}", _gpus_of(fabric, pod, seg, rail)))
    for pod, seg in sorted({(p, s) for p, s, _ in places}):
        groups.append((f"segment pod{pod}-seg{seg}", _gpus_of(fabric, pod, seg, None)))
    rails = sorted({r for _, _, r in places}) or [0]
    for pod in sorted(pods):
        for rail in rails:
            groups.append((f"rail {rail} of pod{pod}", _gpus_of(fabric, pod, None, rail)))
    seen, out = set(), []
    for label, gpus in groups:
        if len(gpus) > 1 and tuple(gpus) not in seen:
            seen.add(tuple(gpus))
            out.append((label, gpus))
    return out


def link_flows(fabric: Fabric, op: str, gpus, size: float, routing: str, state=None
               ) -> np.ndarray:
    """Per link, the most member flows of one wave of concurrent stages (0 off the network)."""
    from hpnsim.collectives.planning.compile import compile_into
    from hpnsim.engine import TaskGraph
    from hpnsim.routing.diagnostics import NETWORK_KINDS

    compiled = compile_into(TaskGraph(), fabric, op, gpus, size, routing=routing, state=state)
    worst = np.zeros(fabric.n_links)
    waves: dict[tuple, np.ndarray] = {}
    for i, stage in enumerate(compiled.schedule.stages):
        paths = compiled.paths[i]
        if paths is not None:
            load = np.bincount(paths.links, weights=paths.weight, minlength=fabric.n_links)
            waves[stage.deps] = waves.get(stage.deps, 0) + load
    for load in waves.values():
        np.maximum(worst, load, out=worst)
    worst[~np.isin(fabric.link_kind, NETWORK_KINDS)] = 0.0
    return worst


def _uplink_bytes(fabric: Fabric, link_bytes: np.ndarray) -> float:
    up = np.isin(fabric.link_kind, (LinkKind.UPLINK, LinkKind.CORE))
    return float(link_bytes[up].sum())


def run_both(plan: CablingPlan, built: AsBuilt, op: str, gpus: list[int], size: float,
             routing: str) -> dict:
    """One collective on the plan and as built: busbw, uplink bytes, colliding links. Where
    the as-built fabric cannot carry it (two GPUs of the group share no plane any more),
    ``reachable`` is false, with routing's reason, and its busbw 0."""
    from hpnsim.collectives.planning.run import run_collective
    from hpnsim.errors import InputError

    before = run_collective(plan.fabric, op, gpus, size, routing=routing)
    out = {"op": before.op, "algo": before.algo, "routing": routing, "n_gpus": len(gpus),
           "size": size, "busbw_planned": before.busbw / 1e9, "time_planned": before.time,
           "uplink_bytes_planned": _uplink_bytes(plan.fabric, before.link_bytes),
           "bottleneck_planned": before.bottleneck}
    try:
        after = run_collective(built.fabric, op, gpus, size, routing=routing,
                               state=built.state)
    except InputError as error:     # routing found no path: the miswire cut the group
        return {**out, "reachable": False, "why": error.message, "busbw_as_built": 0.0,
                "uplink_bytes_as_built": 0.0, "bottleneck_as_built": "-",
                "busbw_change_percent": -100.0, "colliding_links": 0, "colliding": []}
    flows_before = link_flows(plan.fabric, op, gpus, size, routing)
    flows_after = link_flows(built.fabric, op, gpus, size, routing, built.state)
    planned_same = flows_before[built.origin]
    hot = np.flatnonzero((flows_after > 1) & (flows_after > planned_same))
    hot = hot[np.lexsort((hot, -flows_after[hot]))]
    change = (after.busbw / before.busbw - 1.0) * 100 if before.busbw > 0 else 0.0
    return {**out, "reachable": True, "busbw_as_built": after.busbw / 1e9,
            "busbw_change_percent": change, "time_as_built": after.time,
            "uplink_bytes_as_built": _uplink_bytes(built.fabric, after.link_bytes),
            "bottleneck_as_built": after.bottleneck, "colliding_links": int(hot.size),
            "colliding": [{"link": built.fabric.link_name(int(k)),
                           "flows": float(flows_after[k]), "flows_planned":
                           float(planned_same[k]),
                           "planned_link": plan.fabric.link_name(int(built.origin[k]))}
                          for k in hot[:LISTED_LINKS]]}


def wiring_impact(plan: CablingPlan, sightings: list[Sighting], reported: set[str], *,
                  gpus: str | None = None, op: str = "allreduce", size: float = 2.0 ** 30,
                  routing: str | None = None) -> dict:
    """The miswires the ``sightings`` show and what they cost (module docstring).

    Returns ``{"findings": {missing, unexpected, swaps, one_sided}, "changed_nodes",
    "collectives": [{label, gpus, busbw_planned, busbw_as_built (GB/s), ...}]}``.

    >>> from hpnsim.fabrics import build_fabric
    >>> from hpnsim.wiring.diff import planned_sightings
    >>> from hpnsim.wiring.plan import cabling_plan
    >>> o = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "0", "rails": "2",
    ...      "tor_uplinks": "2", "aggs_per_plane": "2"}
    >>> plan = cabling_plan(build_fabric("hpn7", o), "hpn7", o)
    >>> wiring_impact(plan, planned_sightings(plan), plan.devices)["collectives"]
    []
    """
    from hpnsim.routing.dispatch import native_policy
    from hpnsim.units import parse_index_ranges

    report = check(plan, sightings, reported)
    built = as_built(plan, sightings)
    policy = routing or native_policy(plan.fabric)
    if gpus is not None:
        chosen = parse_index_ranges(gpus, "--gpus")
        bad = [g for g in chosen if g >= plan.fabric.n_gpus]
        if bad:
            from hpnsim.errors import InputError

            raise InputError("--gpus", f"GPU {bad[0]} is not in the fabric (0.."
                                       f"{plan.fabric.n_gpus - 1})")
        groups = [(f"--gpus {gpus}", chosen)]
    else:
        groups = affected_groups(plan, built.changed_nodes)
    out = []
    for label, members in groups:
        out.append({"label": label, **run_both(plan, built, op, members, size, policy)})
    return {"findings": {"missing": len(report.missing), "unexpected": len(report.unexpected),
                         "swaps": len(report.swaps), "one_sided": len(report.one_sided)},
            "swaps": report.swaps, "missing": report.missing,
            "unexpected": report.unexpected,
            "changed_nodes": sorted(plan.fabric.node_name(n) for n in built.changed_nodes),
            "collectives": out}
