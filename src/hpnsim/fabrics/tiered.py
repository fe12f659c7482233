"""One vectorized builder behind every templated fabric: hosts, ToRs, Aggs and an optional core.

A *segment* is the set of hosts under one group of ToRs. Inside a segment there are
``groups`` x ``sides`` ToRs: a NIC on rail ``r`` uses group ``r`` when rail-optimized (else
group 0), and its port ``p`` goes to side ``p`` (dual ToR) or, with one side, all ports are
bonded into one ACCESS link pair. ToRs link evenly to every Agg of their *plane*; the planes
split the Aggs of a pod by ToR side (HPN dual-plane), by ToR group (rail-only), by both
(rail-only on two planes: HPN's Table 4), or not at all. The last pod may hold fewer
segments (``last_pod_segments``): its Aggs are all built, their down ports partly used. With more than one pod, Agg uplink ``u`` of Agg ``j`` goes to core ``(plane, u, j // q)``,
where ``q`` Aggs per pod share a core (as many as the core's ports allow): a fat-tree when
``q == 1``.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.assembly import (
    Assembly,
    add_hosts,
    check_ports,
    pcie_nics_per_host,
    tier_plan,
)
from hpnsim.fabrics.fabric import Fabric, LinkKind, NodeKind
from hpnsim.fabrics.frontend import FrontendSpec, add_frontend
from hpnsim.units import format_bandwidth


@dataclass
class TieredSpec:
    """Validated, SI-unit description of a tiered fabric (builders fill it in)."""

    template: str
    pods: int
    segments: int
    hosts: int                 # active hosts per segment
    backups: int               # backup hosts per segment (ToR ports only)
    gpus_per_host: int
    rail_optimized: bool
    sides: int                 # ToRs per group a NIC attaches to (2: dual ToR)
    ports_per_nic: int
    port_speed: float
    tor_uplinks: int
    aggs_per_plane: int
    plane_by: str              # "side", "group", "group_side" or "none"
    agg_uplinks: int           # per Agg toward the core (reserved when pods == 1)
    up_speed: float
    chip: float
    core_ports: int | None
    peer_links: int            # stacked dual ToR: links between the two ToRs of a pair
    nvlink: float
    pcie: float
    hop_latency: float
    host_latency: float
    hosts_field: str = "hosts_per_segment"
    segments_field: str = "segments"
    last_pod_segments: int | None = None   # segments of the last pod (None: ``segments``)
    frontend: FrontendSpec | None = None   # HPN frontend network (see frontend.py)
    gpus_per_pcie_switch: int = 1          # GPUs sharing one PCIe switch and its NIC
    gpus_field: str = "gpus_per_host"      # the builder's parameter for GPUs per host
    rail_groups: int | None = None         # rails when fewer than the host's NICs (a host
    #                                        larger than its rails: an NVL72 rack on 8 rails)
    # For port-check errors: builder parameter of each spec field, and the spec values of
    # the builder's defaults. A switch over its chip budget then names the parameter that
    # pushes it over (see _check_switch); without them the error names hosts_field
    # (ToR) or segments_field (Agg).
    param_names: dict[str, str] = field(default_factory=dict)
    reference: dict[str, Any] = field(default_factory=dict)


#: set by :func:`hpnsim.fabrics.registry.planned_gpus` to check a spec without building it:
#: :func:`build_tiered` then raises :class:`Planned` once every check has passed
PLAN_ONLY: ContextVar[bool] = ContextVar("hpnsim_plan_only", default=False)


class Planned(Exception):  # noqa: N818 - a result carried by an exception, not an error
    """Raised by :func:`build_tiered` under :data:`PLAN_ONLY`: the spec is valid and its
    fabric would hold ``gpus`` GPUs."""

    def __init__(self, gpus: int):
        super().__init__(gpus)
        self.gpus = gpus


#: spec fields that set a ToR's / an Agg's port bandwidth (besides ``chip``)
_TOR_FIELDS = ("hosts", "backups", "gpus_per_host", "ports_per_nic", "port_speed",
               "tor_uplinks", "up_speed", "peer_links", "chip")
_AGG_FIELDS = ("segments", "gpus_per_host", "plane_by", "tor_uplinks", "aggs_per_plane",
               "agg_uplinks", "up_speed", "chip")
#: how to bring a field back down (default: "lower <param>")
_FIX = {"plane_by": "set {} true", "aggs_per_plane": "raise {}", "chip": "raise {}"}


def _shape(s: TieredSpec) -> tuple[int, int, int]:
    """(ToR groups per segment, planes, ToRs of one plane per segment). Rail-optimized:
    one group per NIC of a host (per GPU, or per PCIe switch when GPUs share a NIC)."""
    groups = (s.rail_groups or s.gpus_per_host // s.gpus_per_pcie_switch) \
        if s.rail_optimized else 1
    planes = {"side": s.sides, "group": groups, "group_side": groups * s.sides,
              "none": 1}[s.plane_by]
    return groups, planes, groups * s.sides // planes


def _tor_ports(s: TieredSpec) -> dict[str, tuple[float, float]]:
    """Port groups of one ToR: (ports, speed)."""
    groups = _shape(s)[0]
    nics = s.gpus_per_host // s.gpus_per_pcie_switch
    host_ports = (nics // groups) * (s.ports_per_nic // s.sides)
    return {"down": (s.hosts * host_ports, s.port_speed),
            "backup": (s.backups * host_ports, s.port_speed),
            "up": (s.tor_uplinks, s.up_speed), "peer": (s.peer_links, s.up_speed)}


def _agg_ports(s: TieredSpec) -> dict[str, tuple[float, float]]:
    """Port groups of one Agg: one down port per ToR of its plane and link to it."""
    per_pair = s.tor_uplinks // s.aggs_per_plane
    return {"down": (s.segments * _shape(s)[2] * per_pair, s.up_speed),
            "up": (s.agg_uplinks, s.up_speed)}


def _need(ports: dict[str, tuple[float, float]]) -> float:
    return sum(n * speed for n, speed in ports.values())


def _check_switch(s: TieredSpec, tier: str, ports, fields: tuple[str, ...],
                  fallback: str) -> None:
    """Raise InputError when a ``tier`` switch needs more than its chip.

    The error's field is the parameter whose value, put back to the builder's default
    (``s.reference``), makes the switch fit; the message lists every such parameter (or,
    when none alone does, every one whose default would lower the need, the most helpful
    first). Without a reference, or with every parameter at its default, it names
    ``fallback``.
    """
    need = _need(ports(s))
    if need <= s.chip * (1 + 1e-9):
        return
    trials = []
    for name in fields:
        if name not in s.reference or getattr(s, name) == s.reference[name]:
            continue
        trial = replace(s, **{name: s.reference[name]})
        if trial.tor_uplinks % trial.aggs_per_plane:
            continue
        excess = _need(ports(trial)) - trial.chip
        if excess < need - s.chip:
            trials.append((excess, name))
    fixing = [name for excess, name in sorted(trials) if excess <= 1e-9 * s.chip]
    blamed = fixing or [name for _, name in sorted(trials)]
    if not blamed:
        check_ports(tier, fallback, s.chip, **ports(s))
        raise AssertionError("unreachable: the switch is over its chip")  # pragma: no cover
    names = [s.param_names.get(name, name) for name in blamed]
    detail = " + ".join(f"{group} {int(n)} x {format_bandwidth(speed)}"
                        for group, (n, speed) in ports(s).items() if n)
    if tier == "Agg":
        detail += (f"; down = {s.segments} segments x {_shape(s)[2]} ToRs of its plane x "
                   f"{s.tor_uplinks // s.aggs_per_plane} link(s) each")
    fixes = [_FIX.get(name, "lower {}").format(p) for name, p in zip(blamed, names, strict=True)]
    if "chip" not in blamed:
        fixes.append("raise chip")
    why = ("at its default" if len(names) == 1 else "each at its default") + (
        " it would fit" if fixing else " it would need less")
    fix = fixes[0] if len(fixes) == 1 else f"{', '.join(fixes[:-1])} or {fixes[-1]}"
    raise InputError(names[0], f"a {tier} would need {format_bandwidth(need)} of ports "
                               f"({detail}) but its chip has {format_bandwidth(s.chip)}; "
                               f"set by {', '.join(names)} ({why}): {fix}")


def build_tiered(spec: TieredSpec, **meta) -> Fabric:
    """Build the fabric described by ``spec`` after checking every switch's ports."""
    s = spec
    pcie_nics_per_host(s.gpus_per_host, s.gpus_per_pcie_switch, s.gpus_field)
    groups, planes, _ = _shape(s)
    tor_ports_per_nic = s.ports_per_nic // s.sides
    if s.tor_uplinks % s.aggs_per_plane:
        raise InputError("tor_uplinks", f"must be a multiple of the Aggs per plane "
                                        f"({s.aggs_per_plane}), got {s.tor_uplinks}")
    _check_switch(s, "ToR", _tor_ports, _TOR_FIELDS, s.hosts_field)
    _check_switch(s, "Agg", _agg_ports, _AGG_FIELDS, s.segments_field)
    tor_ports, agg_ports = _tor_ports(s), _agg_ports(s)
    per_pair = s.tor_uplinks // s.aggs_per_plane

    if s.pods > 1:
        _core_layout(s)  # fail before building anything
    last = s.segments if s.last_pod_segments is None else s.last_pod_segments
    if not 1 <= last <= s.segments:
        raise InputError("last_pod_segments", f"must be in 1..segments={s.segments}, "
                                              f"got {last}")
    asm = Assembly()
    n_segments = (s.pods - 1) * s.segments + last
    if PLAN_ONLY.get():
        raise Planned(n_segments * s.hosts * s.gpus_per_host)
    seg_of_host = np.repeat(np.arange(n_segments, dtype=np.int32), s.hosts)
    k = s.gpus_per_pcie_switch
    gpu, nic = add_hosts(asm, seg_of_host // s.segments, seg_of_host % s.segments,
                         s.gpus_per_host, nvlink=s.nvlink, pcie=s.pcie, latency=s.host_latency,
                         gpus_per_switch=k)

    # ToRs, ordered (pod, segment, group, side)
    per_seg = groups * s.sides
    n_tor = n_segments * per_seg
    t = np.arange(n_tor, dtype=np.int32)
    tor_seg, tor_group, tor_side = t // per_seg, (t // s.sides) % groups, t % s.sides
    tor = asm.nodes(NodeKind.TOR, n_tor, tier=1, pod=tor_seg // s.segments,
                    segment=tor_seg % s.segments, rail=tor_group if s.rail_optimized else -1,
                    plane=tor_side if s.sides > 1 else -1)
    lat = s.hop_latency
    g = np.arange(len(gpu), dtype=np.int32)
    group_of_gpu = (g % s.gpus_per_host) // k % groups if s.rail_optimized else 0
    first_tor = tor[0] + ((g // s.gpus_per_host) // s.hosts * groups + group_of_gpu) * s.sides
    bonded = tor_ports_per_nic * s.port_speed
    for side in range(s.sides):  # one cable per NIC: a shared NIC's first GPU's ToR
        asm.cables(nic[::k], first_tor[::k] + side, bonded, lat, LinkKind.ACCESS,
                   port=side if s.sides > 1 else 0)
    if s.peer_links and s.sides == 2:
        asm.cables(tor[0::2], tor[1::2], s.peer_links * s.up_speed, lat, LinkKind.PEER)

    # Aggs, ordered (pod, plane, index)
    aggs = s.aggs_per_plane
    n_agg = s.pods * planes * aggs
    a = np.arange(n_agg, dtype=np.int32)
    agg = asm.nodes(NodeKind.AGG, n_agg, tier=2, pod=a // (planes * aggs),
                    plane=(a // aggs) % planes if planes > 1 else -1, index=a % aggs)
    tor_plane = {"side": tor_side, "group": tor_group,
                 "group_side": tor_group * s.sides + tor_side, "none": 0 * tor_side}[s.plane_by]
    first_agg = agg[0] + (tor_seg // s.segments * planes + tor_plane) * aggs
    slots = np.arange(s.tor_uplinks, dtype=np.int32) // per_pair
    asm.cables(np.repeat(tor, s.tor_uplinks), (first_agg[:, None] + slots).ravel(),
               s.up_speed, lat, LinkKind.UPLINK)

    tiers = {
        "tor": tier_plan(n_tor, s.chip, **tor_ports),
        "agg": dict(tier_plan(n_agg, s.chip, **agg_ports),
                    total_down_ports=n_tor * s.tor_uplinks),
    }
    if s.pods > 1:
        tiers["core"] = _add_core(asm, s, agg, planes)
    if s.frontend is not None:
        meta["frontend"] = add_frontend(
            asm, s.frontend, gpu, gpus_per_host=s.gpus_per_host, pods=s.pods,
            segments=s.segments, n_segments=n_segments, hosts=s.hosts, backups=s.backups,
            up=s.up_speed, chip=s.chip, pcie=s.pcie, hop_latency=s.hop_latency,
            host_latency=s.host_latency)
    meta.update({
        "template": s.template, "gpus_per_host": s.gpus_per_host, "pods": s.pods,
        "segments": s.segments, "last_pod_segments": last, "hosts_per_segment": s.hosts,
        "backup_hosts_per_segment": s.backups, "active_hosts": n_segments * s.hosts,
        "backup_hosts": n_segments * s.backups, "rail_optimized": s.rail_optimized,
        "planes": planes, "ports_per_nic": s.ports_per_nic,
        "nic_bandwidth": s.ports_per_nic * s.port_speed, "tiers": tiers,
        "uplinks_built": {"tor": True, "agg": s.pods > 1},
    })
    if k > 1:
        meta["gpus_per_pcie_switch"] = k
    return asm.finish(gpu, nic, meta)


def _core_layout(s: TieredSpec) -> tuple[int, int]:
    """(ports per core switch, Aggs of one pod on one core), validated."""
    if not s.agg_uplinks:
        raise InputError("pods", "more than one pod needs Agg uplinks to a core, got 0")
    core_ports = s.core_ports if s.core_ports is not None else int(s.chip // s.up_speed)
    check_ports("core", "core_ports", s.chip, down=(core_ports, s.up_speed))
    per_pod = min(s.aggs_per_plane, core_ports // s.pods)
    if per_pod == 0:
        raise InputError("pods", f"a {core_ports}-port core switch reaches at most "
                                 f"{core_ports} pods, got {s.pods}")
    return core_ports, per_pod


def _add_core(asm: Assembly, s: TieredSpec, agg: np.ndarray, planes: int) -> dict:
    _, per_pod = _core_layout(s)
    aggs = s.aggs_per_plane
    per_group = -(-aggs // per_pod)
    per_plane = s.agg_uplinks * per_group
    n_core = planes * per_plane
    c = np.arange(n_core, dtype=np.int32)
    core = asm.nodes(NodeKind.CORE, n_core, tier=3, plane=c // per_plane if planes > 1 else -1,
                     index=c % per_plane)
    a = np.arange(len(agg), dtype=np.int32)
    plane = (a // aggs) % planes
    uplink = np.arange(s.agg_uplinks, dtype=np.int32)
    target = (core[0] + (plane[:, None] * s.agg_uplinks + uplink) * per_group
              + (a % aggs // per_pod)[:, None])
    asm.cables(np.repeat(agg, s.agg_uplinks), target.ravel(), s.up_speed, s.hop_latency,
               LinkKind.CORE)
    return dict(tier_plan(n_core, s.chip, down=(s.pods * per_pod, s.up_speed)),
                total_down_ports=len(agg) * s.agg_uplinks)
