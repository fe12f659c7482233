"""The plan against what was seen: cables matched, missing, unexpected, swapped, one-sided.

Each sighting (device D's port p sees device E's port q) is a cable seen from D's end; the
cables seen are the union over every table. Then:

- **matched**: a planned cable seen (from either end or both);
- **swap**: two planned cables ``x1 - y1`` and ``x2 - y2``, neither seen, while ``x1 - y2``
  and ``x2 - y1`` are: one finding naming both, the two plugs to exchange (on one device
  where the two cables share one, else the far ends) and the class;
- **missing**: a planned cable not seen and in no swap (``why`` says whether its ends see
  other ports, or no table covers either end);
- **unexpected**: a cable seen that is not planned and in no swap;
- **one-sided**: a cable seen from one end while the other end's device has a table that
  does not list it (a unidirectional link, or a table taken mid-change); seen from one end
  because the other device sent no table is fine and only counted.

The class of a miswire (:class:`MiswireClass`) compares the devices the moved cable was
planned to reach and now reaches: the same switch (ports exchanged within one ToR: nothing
changes but the port map), switches of other planes, of other rails, other hosts, or other
switches.

>>> from hpnsim.fabrics import build_fabric
>>> from hpnsim.wiring.plan import cabling_plan
>>> o = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "0",
...      "tor_uplinks": "2", "aggs_per_plane": "2"}
>>> plan = cabling_plan(build_fabric("hpn7", o), "hpn7", o)
>>> seen = planned_sightings(plan)
>>> check(plan, seen, {s.device for s in seen}).ok
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from hpnsim.fabrics.columns import SWITCH_KINDS
from hpnsim.fabrics.fabric import NodeKind
from hpnsim.wiring.lldp import Sighting
from hpnsim.wiring.plan import CablingPlan

End = tuple[str, str]


class MiswireClass(Enum):
    """What a miswired cable now joins, compared with its plan."""

    WITHIN_SWITCH = "within_switch"          # other ports of the same switch (e.g. one ToR)
    ACROSS_PLANES = "across_planes"          # a switch of the other plane
    ACROSS_RAILS = "across_rails"            # a ToR of another rail
    BETWEEN_HOSTS = "between_hosts"          # another host's port, same rail and plane
    BETWEEN_SWITCHES = "between_switches"    # another switch of the same rail and plane
    UNPLANNED = "unplanned"                  # ports with no planned cable at either end


def cable_key(a: End, b: End) -> tuple[End, End]:
    """A cable named by its two ends, whichever end names it first."""
    return (a, b) if a <= b else (b, a)


@dataclass
class SeenCable:
    """A cable seen: its two ends and the ends whose tables list it."""

    ends: tuple[End, End]
    seen_from: set[End] = field(default_factory=set)


@dataclass
class CheckReport:
    """Result of :func:`check`; :meth:`to_dict` is the command's JSON."""

    cables: int
    matched: int
    missing: list[dict]
    unexpected: list[dict]
    swaps: list[list[dict]]
    one_sided: list[dict]
    not_reporting: int          # planned cables seen from one end whose other device sent no table
    tables: int

    @property
    def ok(self) -> bool:
        """The fabric matches the plan: every cable seen, nothing else, nothing one-sided."""
        return not (self.missing or self.unexpected or self.swaps or self.one_sided)

    def to_dict(self) -> dict:
        return {"cables": self.cables, "matched": self.matched, "missing": self.missing,
                "unexpected": self.unexpected, "swaps": self.swaps,
                "one_sided": self.one_sided, "seen_from_one_end_only_by_absent_tables":
                self.not_reporting, "tables": self.tables, "ok": self.ok}


def planned_sightings(plan: CablingPlan, skip: set[int] = frozenset()) -> list[Sighting]:
    """What every device's table would show if the fabric were built as planned (both ends
    of every cable but those of rows ``skip``); for tests and examples."""
    out = []
    for i, cable in enumerate(plan.cables):
        if i in skip:
            continue
        (ad, ap), (bd, bp) = cable.ends
        out += [Sighting(ad, ap, bd, bp, "plan"), Sighting(bd, bp, ad, ap, "plan")]
    return out


def _node_attrs(plan: CablingPlan, end: End):
    """(node id, kind, plane, rail) at an end; a backup host's (not built): a host's."""
    node = plan.node_of(end)
    if node < 0:                # a switch port no planned cable uses is still that switch
        node = plan.switch_nodes.get(end[0], -1)
    fabric = plan.fabric
    if node < 0:
        return -1, NodeKind.HOST, -1, -1
    return (node, NodeKind(int(fabric.node_kind[node])), int(fabric.node_plane[node]),
            int(fabric.node_rail[node]))


def classify(plan: CablingPlan, anchor: End, planned_far: End, found_far: End,
             other_anchor: End | None = None) -> MiswireClass:
    """Class of a cable whose end ``anchor`` was planned to reach ``planned_far`` and now
    reaches ``found_far`` (``other_anchor``: in a swap, the end that took its place)."""
    _, k1, plane1, rail1 = _node_attrs(plan, planned_far)
    _, k2, plane2, rail2 = _node_attrs(plan, found_far)
    anchor_kind = _node_attrs(plan, anchor)[1]
    if planned_far[0] == found_far[0] or (other_anchor is not None and other_anchor[0] ==
                                          anchor[0] and anchor_kind in SWITCH_KINDS):
        return MiswireClass.WITHIN_SWITCH
    if plane1 >= 0 and plane2 >= 0 and plane1 != plane2:
        return MiswireClass.ACROSS_PLANES
    if k1 in SWITCH_KINDS and k2 in SWITCH_KINDS and rail1 != rail2:
        return MiswireClass.ACROSS_RAILS
    hosts_moved = other_anchor is not None and anchor_kind not in SWITCH_KINDS and \
        _node_attrs(plan, other_anchor)[1] not in SWITCH_KINDS
    if hosts_moved or (k1 not in SWITCH_KINDS and k2 not in SWITCH_KINDS):
        return MiswireClass.BETWEEN_HOSTS
    return MiswireClass.BETWEEN_SWITCHES


def seen_cables(sightings: list[Sighting]) -> dict[tuple[End, End], SeenCable]:
    """The cables the sightings show, each with the ends whose tables list it."""
    seen: dict[tuple[End, End], SeenCable] = {}
    for s in sightings:
        here, there = (s.device, s.port), (s.far_device, s.far_port)
        cable = seen.setdefault(cable_key(here, there), SeenCable(cable_key(here, there)))
        cable.seen_from.add(here)
    return seen


def _fix(x1: End, y1: End, x2: End, y2: End) -> tuple[End, End]:
    """The two plugs to exchange: on one device where both cables have an end there."""
    if x1[0] == x2[0]:
        return x1, x2
    return y1, y2


def _swap_items(plan: CablingPlan, i: int, j: int) -> list[dict]:
    (x1, y1), (x2, y2) = plan.cables[i].ends, plan.cables[j].ends
    p, q = _fix(x1, y1, x2, y2)
    cls = classify(plan, x1, y1, y2, other_anchor=x2)
    fix = f"exchange the cables in {p[0]} {p[1]} and {q[0]} {q[1]}"
    return [{**plan.cables[i].key(), "found": {"device": y2[0], "port": y2[1]},
             "class": cls.value, "fix": fix},
            {**plan.cables[j].key(), "found": {"device": y1[0], "port": y1[1]},
             "class": cls.value, "fix": fix}]


def check(plan: CablingPlan, sightings: list[Sighting], reported: set[str]) -> CheckReport:
    """Compare ``plan`` with the cables ``sightings`` show (module docstring); ``reported``
    are the devices that sent a table."""
    seen = seen_cables(sightings)
    planned = {cable_key(*c.ends): i for i, c in enumerate(plan.cables)}
    matched = [i for k, i in planned.items() if k in seen]
    unmatched_plan = {i for k, i in planned.items() if k not in seen}
    unmatched_seen = {k for k in seen if k not in planned}
    swaps = []
    for key in sorted(unmatched_seen):
        if key not in unmatched_seen:
            continue
        for u, v in (key, key[::-1]):
            hit_u, hit_v = plan.ends.get(u), plan.ends.get(v)
            if hit_u is None or hit_v is None or hit_u[1] != 0 or hit_v[1] != 1:
                continue
            i, j = hit_u[0], hit_v[0]         # u is cable i's a end, v cable j's b end
            if i == j or i not in unmatched_plan or j not in unmatched_plan:
                continue
            x2, y1 = plan.cables[j].ends[0], plan.cables[i].ends[1]
            other = cable_key(x2, y1)
            if other in unmatched_seen and other != key:
                swaps.append(sorted((i, j)))
                unmatched_seen -= {key, other}
                unmatched_plan -= {i, j}
                break
    missing = []
    for i in sorted(unmatched_plan):
        cable = plan.cables[i]
        elsewhere = [f"{e[0]} {e[1]}" for k in sorted(unmatched_seen) for e in k
                     if any(end in k for end in cable.ends) and e not in cable.ends]
        if elsewhere:
            why = "its ends see " + ", ".join(elsewhere)
        elif not ({cable.a_device, cable.b_device} & reported):
            why = "no neighbour table from either end"
        else:
            why = "not seen from either end"
        missing.append({**cable.key(), "why": why})
    unexpected = []
    for key in sorted(unmatched_seen):
        (ud, up), (vd, vp) = key
        item = {"a_device": ud, "a_port": up, "b_device": vd, "b_port": vp}
        at_ends = [plan.cables[plan.ends[e][0]] for e in key if e in plan.ends]
        cls = MiswireClass.UNPLANNED
        for e, other in ((key[0], key[1]), (key[1], key[0])):
            hit = plan.ends.get(e)
            if hit is not None:
                far = plan.cables[hit[0]].ends[1 - hit[1]]
                cls = classify(plan, e, far, other)
                break
        item["class"] = cls.value
        item["planned_at_ends"] = [c.key() for c in at_ends]
        item["seen_from"] = sorted(f"{d} {p}" for d, p in seen[key].seen_from)
        unexpected.append(item)
    one_sided, not_reporting = [], 0
    for key, cable in sorted(seen.items()):
        if len(cable.seen_from) == 2:
            continue
        silent = [e for e in key if e not in cable.seen_from][0]
        if silent[0] not in reported:
            not_reporting += key in planned
            continue
        (ad, ap), (bd, bp) = key
        one_sided.append({"a_device": ad, "a_port": ap, "b_device": bd, "b_port": bp,
                          "seen_from": f"{cable.seen_from.copy().pop()[0]}",
                          "not_listed_by": silent[0]})
    return CheckReport(cables=len(plan.cables), matched=len(matched), missing=missing,
                       unexpected=unexpected, swaps=[_swap_items(plan, i, j) for i, j in swaps],
                       one_sided=one_sided, not_reporting=int(not_reporting),
                       tables=len(reported))
