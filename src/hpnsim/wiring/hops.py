"""Observed hop lists (INT, traceroute) against the routes the plan gives.

A file of JSON lines, one path each::

    {"source": {"device": "pod0-seg0-host0", "port": "nic0p0"},
     "destination": {"device": "pod0-seg0-host1", "port": "nic0p0"},
     "hops": [["pod0-seg0-tor-r0-p0", "swp4"], ["pod0-agg-p0-0", "swp2"],
              ["pod0-seg0-tor-r0-p0", "swp2"]]}

``source`` and ``destination`` are the NIC ports the flow leaves and enters by; each hop
is a switch and the port it sent the packet out of (as INT's egress port or a traceroute
that names interfaces records it; ``{"device", "port"}`` objects are read too).

The routes the plan gives are the fabric's shortest paths between the two ports (the set
every policy hashes over: ECMP, and HPN's dual plane, whose planes share no switch): the
first switch is the one the source port is planned to reach; every egress port must lead
over a planned cable to a switch one hop closer to the destination port's ToR, and the last
one to the destination port. A path *departs* at the first hop that breaks this: a switch
other than the one the plan's cable reaches (a miswire upstream), a port no planned cable
uses, or a port that leads away from the destination.
"""

from __future__ import annotations

import json
from pathlib import Path

from hpnsim.errors import InputError, read_user_text
from hpnsim.fabrics.columns import SWITCH_KINDS
from hpnsim.fabrics.fabric import UNREACHABLE
from hpnsim.wiring.plan import CablingPlan

End = tuple[str, str]


def _end(value, where: str, what: str) -> End:
    if isinstance(value, dict) and isinstance(value.get("device"), str) \
            and isinstance(value.get("port"), str):
        return value["device"], value["port"]
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, str)
                                                                 for v in value):
        return value[0], value[1]
    raise InputError(where, f"{what} must be {{\"device\", \"port\"}} or [device, port], "
                            f"got {value!r:.60}")


def read_hops(path: str | Path, plan: CablingPlan) -> list[dict]:
    """The paths of a JSON-lines file (module docstring), their ends checked against the
    plan; InputError naming the file and line otherwise."""
    text = read_user_text(path, str(path), "JSON-lines file")
    paths = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(str(path), f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("hops"), list):
            raise InputError(str(path), f"line {number}: needs source, destination and hops")
        source = _end(item.get("source"), where, "source")
        destination = _end(item.get("destination"), where, "destination")
        for end, what in ((source, "source"), (destination, "destination")):
            hit = plan.ends.get(end)
            if hit is None or hit[1] != 0 or plan.link_class[hit[0]] != "access":
                raise InputError(str(path), f"line {number}: {what} {end[0]} {end[1]} is no "
                                            f"host port of the plan")
        hops = [_end(h, where, f"hop {k}") for k, h in enumerate(item["hops"])]
        for device, _ in hops:
            if device not in plan.devices:
                raise InputError(str(path), f"line {number}: hop device {device!r} is not "
                                            f"in the plan")
        paths.append({"source": source, "destination": destination, "hops": hops})
    return paths


def _far(plan: CablingPlan, end: End) -> End | None:
    hit = plan.ends.get(end)
    if hit is None:
        return None
    return plan.cables[hit[0]].ends[1 - hit[1]]


def _node_of_device(plan: CablingPlan) -> dict[str, int]:
    out = {}
    for end in plan.ends:
        node = plan.node_of(end)
        if node >= 0 and plan.fabric.node_kind[node] in SWITCH_KINDS:
            out[end[0]] = node
    return out


def follow(plan: CablingPlan, path: dict, switch_node: dict[str, int]) -> dict:
    """One path against the plan: ``ok``, or where it departs (``departs_at``: hop index)
    and ``why``."""
    fabric = plan.fabric
    source, destination, hops = path["source"], path["destination"], path["hops"]
    tor = _far(plan, destination)[0]

    def distance(device: str) -> int:
        a, b = switch_node.get(device), switch_node.get(tor)
        if a is None or b is None:
            return UNREACHABLE
        return int(fabric.switch_distance[fabric.switch_row[a], fabric.switch_row[b]])

    def result(k: int | None, why: str = "") -> dict:
        return {"source": " ".join(source), "destination": " ".join(destination),
                "hops": len(hops), "ok": k is None, "departs_at": k, "why": why}

    expected = _far(plan, source)
    previous = f"{source[0]} {source[1]}"
    for k, (device, port) in enumerate(hops):
        if device != expected[0]:
            return result(k, f"reached {device}; the plan's cable from {previous} goes to "
                             f"{expected[0]} {expected[1]}")
        far = _far(plan, (device, port))
        if far is None:
            return result(k, f"{device} sent it out of {port}, which no planned cable uses")
        if far == destination:
            if k != len(hops) - 1:
                return result(k + 1, f"{device} {port} reaches the destination, but the "
                                     f"path goes on")
            return result(None)
        here, there = distance(device), distance(far[0])
        if there >= UNREACHABLE or there != here - 1:
            return result(k, f"{device} {port} leads to {far[0]}, away from {tor} "
                             f"({there if there < UNREACHABLE else 'no'} hops from it, "
                             f"{device} {here})")
        expected, previous = far, f"{device} {port}"
    return result(len(hops), f"the path ends at {expected[0]} {expected[1]}, before the "
                             f"destination")


def check_hops(plan: CablingPlan, paths: list[dict]) -> list[dict]:
    """:func:`follow` for every path.

    >>> from hpnsim.fabrics import build_fabric
    >>> from hpnsim.wiring.plan import cabling_plan
    >>> o = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "0", "rails": "1",
    ...      "tor_uplinks": "1", "aggs_per_plane": "1"}
    >>> plan = cabling_plan(build_fabric("hpn7", o), "hpn7", o)
    >>> path = {"source": ("pod0-seg0-host0", "nic0p0"),
    ...         "destination": ("pod0-seg0-host1", "nic0p0"),
    ...         "hops": [("pod0-seg0-tor-r0-p0", "swp2")]}
    >>> check_hops(plan, [path])[0]["ok"]
    True
    >>> check_hops(plan, [{**path, "hops": [("pod0-seg0-tor-r0-p0", "swp3")]}])[0]["why"]
    'pod0-seg0-tor-r0-p0 swp3 leads to pod0-agg-p0-0, away from pod0-seg0-tor-r0-p0 (1 hops from it, pod0-seg0-tor-r0-p0 0)'
    """
    switch_node = _node_of_device(plan)
    return [follow(plan, path, switch_node) for path in paths]
