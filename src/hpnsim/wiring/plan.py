"""The cabling plan of a fabric: one row per physical cable, named ends, speed and medium.

A :class:`~hpnsim.fabrics.fabric.Fabric` holds its cables as pairs of directed links
(``l``, ``l ^ 1``); a plan is a view of them (DESIGN.md: the blueprint is the fabric), with
three things added that a technician needs and the arrays do not hold:

- **bonded cables split**: a link that bonds several ports (a single-ToR NIC's 2 x 200G,
  a stacked pair's peer links, a Lingjun NIC's ports) is as many cables as ports: the
  link's capacity over the port speed of its class;
- **backup hosts**: built as ToR ports only (no nodes), they are cabled like the first
  active host of their segment (backend) and like the segment's host of their frontend
  ToR pair (frontend), on the next ToR ports;
- **names and media**: devices and ports named by :mod:`hpnsim.wiring.names`; ``speed``
  the port speed (``200G``); ``medium`` the transceiver type the bill of materials counts
  for the cable's class (``<speed>-MM`` multimode under 100 m, else ``-SM``; one
  transceiver at each end and one fibre of that mode: :mod:`hpnsim.fabrics.bom`).

Every cable of the bill of materials appears once (a test counts). In-host NVLink and PCIe
links are rows only with ``in_host=True`` (medium ``NVLink`` / ``PCIe``, speed the link's
per-direction bandwidth), after every network cable.

Row order: the built network cables in the order hpnsim builds them (backend access cables,
peer, uplinks, core; then the frontend's), then the backup hosts' cables, then the in-host
rows. The same fabric parameters give the same plan, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from hpnsim.fabrics.bom import DEFAULT_DISTANCES, speed_label
from hpnsim.fabrics.columns import SWITCH_KINDS
from hpnsim.fabrics.fabric import FRONTEND, Fabric, LinkKind, NodeKind
from hpnsim.wiring.names import (
    backup_hostname,
    component_label,
    device_names,
    nic_label,
    number_switch_ports,
    switch_port,
)

#: the columns of a plan, in order (CSV header and JSON keys)
COLUMNS = ("a_device", "a_port", "b_device", "b_port", "speed", "medium")
#: the four fields that name a cable
END_FIELDS = ("a_device", "a_port", "b_device", "b_port")
#: link kind -> the BOM's link class (its distance and port speed)
LINK_CLASS = {LinkKind.ACCESS: "access", LinkKind.UPLINK: "uplink", LinkKind.CORE: "core",
              LinkKind.PEER: "peer", LinkKind.NVLINK: "nvlink", LinkKind.PCIE: "pcie"}
#: the BOM's rule (bom.py): a run under this many metres gets multimode optics
MULTIMODE_LIMIT_M = 100.0
_SPEED_KEY = {"access": ("tor", "down_speed"), "uplink": ("tor", "up_speed"),
              "peer": ("tor", "peer_speed"), "core": ("agg", "up_speed")}


@dataclass(frozen=True)
class Cable:
    """One physical cable of a plan (a row)."""

    a_device: str
    a_port: str
    b_device: str
    b_port: str
    speed: str
    medium: str

    @property
    def ends(self) -> tuple[tuple[str, str], tuple[str, str]]:
        """``((a_device, a_port), (b_device, b_port))``."""
        return (self.a_device, self.a_port), (self.b_device, self.b_port)

    def key(self) -> dict[str, str]:
        """The four fields that name the cable."""
        return {name: getattr(self, name) for name in END_FIELDS}

    def row(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in COLUMNS}


@dataclass
class CablingPlan:
    """A fabric's cables with the fabric they come from.

    Attributes
    ----------
    fabric : Fabric
    template, options : the fabric's template and builder options as given (strings), so
        the plan file can name and rebuild its fabric.
    cables : list of Cable, in row order.
    link : numpy.ndarray
        Per cable, the fabric link ``a -> b`` it belongs to (``b -> a`` is ``link ^ 1``),
        -1 for a backup host's cable (no link is built for it).
    a_node, b_node : numpy.ndarray
        Per cable, the node at each end (-1 at a backup host).
    link_class : list of str
        Per cable: access, uplink, core, peer (the BOM's classes), nvlink or pcie.
    network : numpy.ndarray
        Per cable, BACKEND or FRONTEND.

    Examples
    --------
    >>> from hpnsim.fabrics import build_fabric
    >>> options = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "1",
    ...            "tor_uplinks": "2", "aggs_per_plane": "2"}
    >>> plan = cabling_plan(build_fabric("hpn7", options), "hpn7", options)
    >>> len(plan.cables), plan.cables[0].row()      # doctest: +NORMALIZE_WHITESPACE
    (80, {'a_device': 'pod0-seg0-host0', 'a_port': 'nic0p0',
          'b_device': 'pod0-seg0-tor-r0-p0', 'b_port': 'swp1', 'speed': '200G',
          'medium': '200G-MM'})
    >>> plan.cables[-1].key()                       # doctest: +NORMALIZE_WHITESPACE
    {'a_device': 'pod0-seg0-backup0', 'a_port': 'nic7p1',
     'b_device': 'pod0-seg0-tor-r7-p1', 'b_port': 'swp3'}
    """

    fabric: Fabric
    template: str
    options: dict[str, str]
    cables: list[Cable]
    link: np.ndarray
    a_node: np.ndarray
    b_node: np.ndarray
    link_class: list[str]
    network: np.ndarray
    _ends: dict | None = field(default=None, repr=False)

    @property
    def ends(self) -> dict[tuple[str, str], tuple[int, int]]:
        """``(device, port) -> (cable index, 0 at the a end / 1 at the b end)``."""
        if self._ends is None:
            ends = {}
            for i, cable in enumerate(self.cables):
                a, b = cable.ends
                ends[a] = (i, 0)
                ends[b] = (i, 1)
            self._ends = ends
        return self._ends

    @cached_property
    def devices(self) -> set[str]:
        """Every device that has a cable in the plan."""
        return {device for device, _ in self.ends}

    @cached_property
    def switch_nodes(self) -> dict[str, int]:
        """Switch hostname -> its node (a switch is one node; a host is many)."""
        out = {}
        for i, cable in enumerate(self.cables):
            for device, node in ((cable.a_device, self.a_node[i]),
                                 (cable.b_device, self.b_node[i])):
                if node >= 0 and self.fabric.node_kind[node] in SWITCH_KINDS:
                    out[device] = int(node)
        return out

    def node_of(self, end: tuple[str, str]) -> int:
        """The fabric node at a plan end (-1 at a backup host, or not in the plan)."""
        hit = self.ends.get(end)
        if hit is None:
            return -1
        i, side = hit
        return int(self.b_node[i] if side else self.a_node[i])

    def built(self, swaps=(), missing=()) -> list[tuple[tuple[str, str], tuple[str, str]]]:
        """The cables as a fabric built with these mistakes would have them: for each pair
        of ``a`` ends in ``swaps`` the two cables' far ends exchanged, the cables of the
        ``a`` ends in ``missing`` left out (for examples and tests; see
        :func:`hpnsim.wiring.lldp.write_tables`).

        >>> from hpnsim.fabrics import fat_tree
        >>> plan = cabling_plan(fat_tree(2), "fat_tree", {"k": "2"})
        >>> plan.built(swaps=[(("pod0-seg0-host0", "nic0p0"), ("pod1-seg0-host1", "nic0p0"))])[0]
        (('pod0-seg0-host0', 'nic0p0'), ('pod1-seg0-tor', 'swp1'))
        """
        cables = [list(c.ends) for c in self.cables]
        for x1, x2 in swaps:
            i, j = self.ends[tuple(x1)][0], self.ends[tuple(x2)][0]
            cables[i][1], cables[j][1] = cables[j][1], cables[i][1]
        gone = {self.ends[tuple(end)][0] for end in missing}
        return [tuple(ends) for i, ends in enumerate(cables) if i not in gone]

    def counts(self) -> dict[str, dict[str, int]]:
        """Cables per network and class, and transceivers by medium (two per cable), the
        figures of the bill of materials (:func:`hpnsim.fabrics.bom.bill_of_materials`)."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for cls, net, cable in zip(self.link_class, self.network, self.cables, strict=True):
            section = out.setdefault("frontend" if net == FRONTEND else "backend",
                                     {"cables": {}, "transceivers": {}})
            section["cables"][cls] = section["cables"].get(cls, 0) + 1
            if cls not in ("nvlink", "pcie"):
                section["transceivers"][cable.medium] = \
                    section["transceivers"].get(cable.medium, 0) + 2
        return out


def _tiers(fabric: Fabric, network: int) -> dict:
    if network == FRONTEND:
        return fabric.meta.get("frontend", {}).get("tiers", {})
    return fabric.meta.get("tiers", {})


def _class_speed(fabric: Fabric, network: int, cls: str, capacity: float) -> float:
    tier, key = _SPEED_KEY[cls]
    speed = float(_tiers(fabric, network).get(tier, {}).get(key, 0.0))
    return speed if speed > 0 else capacity


def _medium(cls: str, speed: float) -> str:
    mode = "MM" if DEFAULT_DISTANCES[cls] < MULTIMODE_LIMIT_M else "SM"
    return f"{speed_label(speed)}-{mode}"


class _Rows:
    """Cable rows being collected (column lists), numbered switch ports filled at the end."""

    def __init__(self) -> None:
        self.a_dev, self.a_port, self.b_dev, self.b_port = [], [], [], []
        self.speed, self.medium, self.cls = [], [], []
        self.link, self.a_node, self.b_node, self.network = [], [], [], []

    def add(self, a_dev, a_port, b_dev, b_port, speed, medium, cls, link, a_node, b_node,
            network) -> None:
        for column, value in ((self.a_dev, a_dev), (self.a_port, a_port),
                              (self.b_dev, b_dev), (self.b_port, b_port),
                              (self.speed, speed), (self.medium, medium), (self.cls, cls),
                              (self.link, link), (self.a_node, a_node),
                              (self.b_node, b_node), (self.network, network)):
            column.append(value)


def _network_cables(fabric: Fabric, names: list[str], rows: _Rows) -> None:
    """Every built cable of the networks (not in-host), in link order."""
    kinds = fabric.link_kind[0::2]
    for pair in np.flatnonzero(np.isin(kinds, [LinkKind.ACCESS, LinkKind.UPLINK,
                                               LinkKind.CORE, LinkKind.PEER])):
        link = 2 * int(pair)
        a, b = int(fabric.link_src[link]), int(fabric.link_dst[link])
        cls = LINK_CLASS[LinkKind(int(kinds[pair]))]
        network = int(max(fabric.node_network[a], fabric.node_network[b]))
        capacity = float(fabric.link_capacity[link])
        speed = _class_speed(fabric, network, cls, capacity)
        count = max(1, int(round(capacity / speed)))
        for i in range(count):
            a_port = None
            if cls == "access":
                a_port = f"{nic_label(fabric, a)}p{int(fabric.link_port[link]) * count + i}"
            rows.add(names[a], a_port, names[b], None, speed_label(speed),
                     _medium(cls, speed), cls, link, a, b, network)


def _first_host_cables(rows: _Rows, fabric: Fabric, network: int) -> dict[tuple, list[int]]:
    """Row indices of the access cables of each (pod, segment, host) of ``network``."""
    by_host: dict[tuple, list[int]] = {}
    for i, (cls, a, net) in enumerate(zip(rows.cls, rows.a_node, rows.network, strict=True)):
        if cls == "access" and net == network and a >= 0 \
                and fabric.node_kind[a] == NodeKind.NIC:
            key = (int(fabric.node_pod[a]), int(fabric.node_segment[a]),
                   int(fabric.node_host[a]))
            by_host.setdefault(key, []).append(i)
    return by_host


def _backup_cables(fabric: Fabric, rows: _Rows) -> None:
    """Backup hosts' cables: copies of an active host's access cables of their segment."""
    backups = int(fabric.meta.get("backup_hosts_per_segment", 0) or 0)
    if not backups:
        return
    front = fabric.meta.get("frontend")
    for network in ([0, FRONTEND] if front else [0]):
        by_host = _first_host_cables(rows, fabric, network)
        segments: dict[tuple, list[int]] = {}
        for pod, seg, host in sorted(by_host):
            segments.setdefault((pod, seg), []).append(host)
        for (pod, seg), hosts in segments.items():
            for b in range(backups):
                if network == FRONTEND:   # spread over the segment's frontend ToR pairs
                    pairs = int(front["pairs_per_segment"])
                    source = hosts[min((b % pairs) * int(front["hosts_per_tor"]),
                                       len(hosts) - 1)]
                else:
                    source = hosts[0]
                for i in by_host[(pod, seg, source)]:
                    rows.add(backup_hostname(pod, seg, b), rows.a_port[i], rows.b_dev[i],
                             None, rows.speed[i], rows.medium[i], rows.cls[i], -1, -1,
                             rows.b_node[i], network)


def _number_ports(fabric: Fabric, rows: _Rows) -> None:
    """Fill the switch ends' port names (:func:`~hpnsim.wiring.names.number_switch_ports`)."""
    n = len(rows.cls)
    a_node, b_node = np.array(rows.a_node, dtype=np.int64), np.array(rows.b_node, dtype=np.int64)
    peer = np.array([c == "peer" for c in rows.cls])
    a_switch = np.array([p is None for p in rows.a_port])
    nodes = np.r_[b_node, a_node[a_switch]]
    rank = np.r_[np.where(peer, 1, 0), np.where(peer[a_switch], 1, 2)]
    order = np.r_[np.arange(n), np.flatnonzero(a_switch)]
    numbers = number_switch_ports(nodes, rank, order)
    for i in range(n):
        rows.b_port[i] = switch_port(int(numbers[i]))
    for j, i in enumerate(np.flatnonzero(a_switch)):
        rows.a_port[i] = switch_port(int(numbers[n + j]))


def _in_host_cables(fabric: Fabric, names: list[str], rows: _Rows) -> None:
    kinds = fabric.link_kind[0::2]
    for pair in np.flatnonzero(np.isin(kinds, [LinkKind.NVLINK, LinkKind.PCIE])):
        link = 2 * int(pair)
        a, b = int(fabric.link_src[link]), int(fabric.link_dst[link])
        ca, cb = component_label(fabric, a), component_label(fabric, b)
        kind = LinkKind(int(kinds[pair]))
        rows.add(names[a], f"{ca}-{cb}", names[b], f"{cb}-{ca}",
                 speed_label(float(fabric.link_capacity[link])),
                 "NVLink" if kind == LinkKind.NVLINK else "PCIe", LINK_CLASS[kind], link, a,
                 b, int(max(fabric.node_network[a], fabric.node_network[b])))


def cabling_plan(fabric: Fabric, template: str, options: dict[str, str] | None = None,
                 in_host: bool = False) -> CablingPlan:
    """The cabling plan of ``fabric`` (module docstring), built from ``template`` with
    ``options`` (recorded in the plan, so a plan file can rebuild its fabric).

    >>> from hpnsim.fabrics import fat_tree
    >>> plan = cabling_plan(fat_tree(4), "fat_tree", {"k": "4"})
    >>> len(plan.cables), plan.counts()["backend"]["cables"]
    (48, {'access': 16, 'uplink': 16, 'core': 16})
    >>> len(cabling_plan(fat_tree(4), "fat_tree", {"k": "4"}, in_host=True).cables)
    64
    """
    names = device_names(fabric)
    rows = _Rows()
    _network_cables(fabric, names, rows)
    _backup_cables(fabric, rows)
    _number_ports(fabric, rows)
    if in_host:
        _in_host_cables(fabric, names, rows)
    cables = [Cable(*values) for values in zip(rows.a_dev, rows.a_port, rows.b_dev,
                                               rows.b_port, rows.speed, rows.medium,
                                               strict=True)]
    return CablingPlan(fabric=fabric, template=template, options=dict(options or {}),
                       cables=cables, link=np.array(rows.link, dtype=np.int64),
                       a_node=np.array(rows.a_node, dtype=np.int64),
                       b_node=np.array(rows.b_node, dtype=np.int64),
                       link_class=list(rows.cls),
                       network=np.array(rows.network, dtype=np.int8))
