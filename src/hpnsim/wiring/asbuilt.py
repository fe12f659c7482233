"""The fabric as found: the observed cabling applied to the planned fabric.

Every cable seen keeps the end the plan calls its ``a`` end (the host's NIC port, the
lower switch's port) and the planned link of that end, and goes to the node it was seen
reaching (a switch port no planned cable uses is still that switch): a NIC port swapped
onto the other plane's ToR becomes an ACCESS link from that NIC (same NIC port) to that ToR. Links of one planned link that reach the same node stay
one link (a bonded NIC's two cables); a planned cable not seen lowers its link's capacity
by one cable's share and a link with no cable left is down (a
:class:`~hpnsim.fabrics.state.FabricState`), so routing avoids it where it can. Cables to
backup hosts (not built), to a host port no planned cable uses, and between ports no planned
cable uses are left out.

Nodes, GPUs and in-host links are those of the planned fabric; only network links change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.fabrics.columns import LINK_FIELDS, NODE_FIELDS
from hpnsim.fabrics.fabric import Fabric, LinkKind
from hpnsim.fabrics.state import FabricState
from hpnsim.wiring.diff import seen_cables
from hpnsim.wiring.lldp import Sighting
from hpnsim.wiring.plan import CablingPlan

_NETWORK = (LinkKind.ACCESS, LinkKind.UPLINK, LinkKind.CORE, LinkKind.PEER)


@dataclass
class AsBuilt:
    """The fabric as found and what differs from the plan.

    Attributes
    ----------
    fabric : Fabric
        Planned nodes; network links rebuilt from the cables seen.
    state : FabricState or None
        Links with no cable seen are down (None when none is).
    changed_nodes : set of int
        Nodes (NICs, switches) whose links differ from the plan.
    origin : numpy.ndarray
        Per link, the planned link it was built from (same direction).
    """

    fabric: Fabric
    state: FabricState | None
    changed_nodes: set[int]
    origin: np.ndarray


def _anchor(plan: CablingPlan, ends) -> tuple[int, tuple] | None:
    """(planned cable index, far end) of a seen cable: the end that is a planned ``a`` end
    (the host or lower side) keeps its cable; None when neither end is one."""
    for end, other in ((ends[0], ends[1]), (ends[1], ends[0])):
        hit = plan.ends.get(end)
        if hit is not None and hit[1] == 0 and plan.link[hit[0]] >= 0:
            return hit[0], other
    return None


def as_built(plan: CablingPlan, sightings: list[Sighting]) -> AsBuilt:
    """The fabric the ``sightings`` show (module docstring).

    >>> from hpnsim.fabrics import build_fabric
    >>> from hpnsim.wiring.diff import planned_sightings
    >>> from hpnsim.wiring.plan import cabling_plan
    >>> o = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "0",
    ...      "tor_uplinks": "2", "aggs_per_plane": "2"}
    >>> plan = cabling_plan(build_fabric("hpn7", o), "hpn7", o)
    >>> built = as_built(plan, planned_sightings(plan))
    >>> bool((built.fabric.link_dst == plan.fabric.link_dst).all()), built.state
    (True, None)
    """
    fabric = plan.fabric
    seen = seen_cables(sightings)
    cables_of_link: dict[int, int] = {}
    for link in plan.link[plan.link >= 0]:
        cables_of_link[int(link)] = cables_of_link.get(int(link), 0) + 1
    # per planned link: far node -> cables reaching it
    reach: dict[int, dict[int, int]] = {}
    switches = plan.switch_nodes
    for ends in seen:
        anchored = _anchor(plan, ends)
        if anchored is None:
            continue
        cable, far_end = anchored
        far = plan.node_of(far_end)
        if far < 0:             # a switch port no planned cable uses: still that switch
            far = switches.get(far_end[0], -1) if far_end not in plan.ends else -1
        if far < 0:
            continue
        link = int(plan.link[cable])
        reach.setdefault(link, {})
        reach[link][far] = reach[link].get(far, 0) + 1
    columns = {name: [] for name in LINK_FIELDS}
    origin: list[int] = []
    down: list[int] = []
    changed: set[int] = set()

    def emit(link: int, dst: int, capacity: float) -> None:
        src = int(fabric.link_src[link])
        for name in LINK_FIELDS:
            forward = getattr(fabric, name)[link]
            backward = getattr(fabric, name)[link ^ 1]
            if name == "link_src":
                forward, backward = src, dst
            elif name == "link_dst":
                forward, backward = dst, src
            elif name == "link_capacity":
                forward = backward = capacity
            columns[name] += [forward, backward]
        origin.extend((link, link ^ 1))

    for link in range(0, fabric.n_links, 2):
        kind = LinkKind(int(fabric.link_kind[link]))
        if kind not in _NETWORK:
            emit(link, int(fabric.link_dst[link]), float(fabric.link_capacity[link]))
            continue
        planned_dst = int(fabric.link_dst[link])
        per_cable = float(fabric.link_capacity[link]) / cables_of_link.get(link, 1)
        groups = reach.get(link, {})
        if not groups:
            down += [len(columns["link_src"]), len(columns["link_src"]) + 1]
            emit(link, planned_dst, float(fabric.link_capacity[link]))
            changed |= {int(fabric.link_src[link]), planned_dst}
            continue
        for dst in sorted(groups, key=lambda d: (d != planned_dst, d)):
            if dst != planned_dst or groups[dst] != cables_of_link.get(link, 1):
                changed |= {int(fabric.link_src[link]), planned_dst, dst}
            emit(link, dst, per_cable * groups[dst])
    links = {name: np.asarray(values) for name, values in columns.items()}
    nodes = {name: getattr(fabric, name) for name in NODE_FIELDS}
    built = Fabric(nodes, links, fabric.gpu_node, fabric.gpu_nic, dict(fabric.meta))
    state = FabricState(built).set_down(down) if down else None
    return AsBuilt(built, state, changed, np.asarray(origin, dtype=np.int64))

