"""Radix arithmetic of one design: how many GPUs a ToR, a segment, a pod and the core hold.

For a chip of capacity ``C`` at access port speed ``s`` and fabric link speed ``s_up``:

- ToR: ``n`` hosts (a host is one scale-up domain: an HGX box, an NVL72 rack), each putting
  its GPUs of the ToR's rail (all of its GPUs when not rail-optimized) on it with ``a`` ports
  (``nic_ports / sides``) per GPU, ``n // 16`` backup units more (HPN: 8
  per 128), and ``U`` uplinks: the most that fit, no more than 1:1, and at most the allowed
  oversubscription; ``n`` is the largest that fits (51.2T, 200G, dual ToR: 128 + 8 ports of
  200G and 60 x 400G up).
- segment: ``rails x sides`` ToRs when rail-optimized (``n x rails`` GPUs), else ``sides``.
- Aggs: ``U`` per plane (one link from every ToR of the plane); an Agg has
  ``C / s_up`` ports, ``ceil(ports / (o + 1))`` toward the core for an ``o``:1 ratio; a
  segment takes as many of its down ports as it has ToRs in the Agg's plane, so a pod holds
  ``down // tors_per_plane`` segments (HPN: 120 // 8 = 15).
- core: ``C / s_up`` ports; pod ``p``'s Agg ``j`` of plane ``q`` links its ``u``-th uplink
  to core ``(q, u, j // per_pod)``: at most ``C / s_up`` pods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from hpnsim.design.family import Mechanisms
from hpnsim.design.inputs import DesignInputs

_EPS = 1e-9


class Binding(StrEnum):
    """What stops a design from growing (or from being built at all)."""

    TOR_RADIX = "ToR radix"
    AGG_RADIX = "Agg radix"
    CORE_RADIX = "core radix"
    POWER = "power"
    NIC_PORTS = "NIC ports"


@dataclass(frozen=True)
class Shape:
    """Per-switch port allocation of one design, and its largest pod and fabric."""

    mechanisms: Mechanisms
    units_per_tor: int        # hosts (scale-up domains) a ToR group serves
    backup_units: int         # backup hosts per ToR group
    unit_gpus: int            # GPUs a host puts on one ToR group (domain / rails when
    #                           rail-optimized: 1 on an HGX host, 9 for NVL72 on 8 rails)
    access_ports: int         # ports of one GPU on one ToR
    tor_uplinks: int
    tors_per_segment: int
    segment_gpus: int
    planes: int
    tors_per_plane: int       # ToRs of one plane in one segment
    aggs_per_plane: int
    agg_down: int
    agg_up: int
    max_segments: int         # segments in one pod
    core_ports: int
    tor_active_bw: float      # bytes/s of a ToR's active down ports
    tor_up_bw: float          # bytes/s of its uplinks

    @property
    def pod_gpus(self) -> int:
        """GPUs of a full pod."""
        return self.max_segments * self.segment_gpus

    @property
    def tor_oversub(self) -> float:
        """A ToR's active down bandwidth over its up bandwidth."""
        return self.tor_active_bw / self.tor_up_bw


def host_gpus_on_tor(d: DesignInputs, m: Mechanisms) -> int:
    """GPUs of one host (a scale-up domain) on one ToR group: the domain's share of a rail
    when rail-optimized, else the whole domain."""
    return d.domain.gpus // d.rails if m.rail_optimized else d.domain.gpus


def _tor(d: DesignInputs, m: Mechanisms) -> tuple[int, int, int, int, float, float] | None:
    """(units, backup units, access ports per GPU, uplinks, down and up bytes/s) of a ToR."""
    sides = 2 if m.dual_tor else 1
    a = d.nic_ports // sides
    gpus_per_unit = host_gpus_on_tor(d, m)
    port_bw = a * d.nic_speed * gpus_per_unit     # one unit's active ports on one ToR
    c, s_up, max_ports = d.chip.capacity, d.uplink_speed, d.chip.max_ports
    for n in range(int(c / port_bw + _EPS), 0, -1):
        b = int(n * d.backup_share + _EPS)
        down = (n + b) * port_bw
        ports = (n + b) * a * gpus_per_unit
        if down > c * (1 + _EPS) or ports >= max_ports:
            continue
        fit = min(int((c - down) / s_up + _EPS), max_ports - ports)
        full = math.ceil(n * port_bw / s_up - _EPS)   # 1:1
        up = min(fit, full)
        if up >= 1 and n * port_bw / (up * s_up) <= d.tor_oversub * (1 + _EPS):
            return n, b, a, up, n * port_bw, up * s_up
    return None


def shape(d: DesignInputs, m: Mechanisms) -> Shape | Binding:
    """The design's shape, or the constraint that leaves it nothing to build.

    >>> from hpnsim.design.inputs import design_inputs
    >>> hpn = shape(design_inputs(), Mechanisms(2, True, True, True))
    >>> hpn.units_per_tor, hpn.backup_units, hpn.tor_uplinks, hpn.agg_down, hpn.agg_up
    (128, 8, 60, 120, 8)
    >>> hpn.segment_gpus, hpn.max_segments, hpn.pod_gpus
    (1024, 15, 15360)
    """
    if m.dual_tor and d.nic_ports != 2:
        return Binding.NIC_PORTS
    tor = _tor(d, m)
    if tor is None:
        return Binding.TOR_RADIX
    n, b, a, up, down_bw, up_bw = tor
    sides = 2 if m.dual_tor else 1
    groups = d.rails if m.rail_optimized else 1
    unit_gpus = host_gpus_on_tor(d, m)
    tors = groups * sides
    planes = (groups if m.rail_only else 1) * (sides if m.dual_plane else 1)
    radix = d.chip.radix(d.uplink_speed)
    agg_up = max(1, math.ceil(radix / (d.agg_oversub + 1) - _EPS))
    agg_down = radix - agg_up
    per_plane = tors // planes
    segments = agg_down // per_plane
    if segments == 0:
        return Binding.AGG_RADIX
    return Shape(m, n, b, unit_gpus, a, up, tors, n * groups * unit_gpus, planes, per_plane,
                 up, agg_down, agg_up, segments, radix, down_bw, up_bw)


def core_layout(s: Shape, pods: int) -> tuple[int, int]:
    """(Aggs of one pod on one core, core switches) for ``pods`` pods (the builder's layout:
    :func:`hpnsim.fabrics.tiered.build_tiered`)."""
    per_pod = min(s.aggs_per_plane, s.core_ports // pods)
    return per_pod, s.planes * s.agg_up * math.ceil(s.aggs_per_plane / per_pod)


def max_pods(s: Shape) -> int:
    """Pods a core of ``core_ports`` ports joins (each pod needs one port of every core)."""
    return s.core_ports
