"""The design space: every member of the family for one set of inputs, sized and costed.

A design is sized to the target GPU count in whole segments (two tiers: one pod, all its
Aggs built; three tiers: at least two pods joined by a core, the last one partial for
rail-optimized designs, whose template ``hpn7`` builds one, else whole pods); without a
target, to its largest: one full pod, or as many pods as the core has ports. A power budget caps either:
the largest size whose total power (GPUs, backup hosts, network) fits it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hpnsim.design.bill import design_bill
from hpnsim.design.family import Mechanisms, family
from hpnsim.design.inputs import DesignInputs
from hpnsim.design.radix import Binding, Shape, core_layout, max_pods, shape


@dataclass(frozen=True)
class Design:
    """One design of the family, sized: its shape, counts, bill and limits."""

    mechanisms: Mechanisms
    shape: Shape | None
    feasible: bool
    binding: Binding
    reason: str
    pods: int = 0
    segments: int = 0                 # per pod
    last_pod_segments: int = 0        # segments of the last pod (a partial pod: hpn7 only)
    gpus: int = 0
    max_gpus: int = 0
    bill: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.mechanisms.name

    def hops(self) -> int:
        """Switches on the longest same-rail path: 1 in a segment, 3 in a pod, 5 across."""
        if self.pods > 1:
            return 5
        return 3 if self.segments > 1 else 1

    def ecmp(self) -> tuple[int, int]:
        """(equal-cost paths, hash decisions) from one NIC port to the farthest GPU.

        Up from the ToR: one of ``aggs_per_plane`` Aggs; down to the destination: one ToR,
        or either of its pair when both ToRs of a pair share the Agg's plane; across pods:
        one of the Agg's core uplinks, and one of the Aggs of the destination pod on that
        core.
        """
        s, m = self.shape, self.mechanisms
        if s is None or self.hops() == 1:
            return 1, 0
        dest_tors = 2 if m.dual_tor and not m.dual_plane else 1
        choices = [s.aggs_per_plane, dest_tors]
        if self.pods > 1:
            per_pod, _ = core_layout(s, self.pods)
            choices = [s.aggs_per_plane, s.agg_up, per_pod, dest_tors]
        return math.prod(choices), sum(1 for c in choices if c > 1)


def _counts(d: DesignInputs, s: Shape, pods: int, segments: int,
            last: int | None = None) -> dict[str, Any]:
    """Bill of ``pods`` pods of ``segments`` segments each, the last of ``last`` (the
    builder's accounting: a partial pod still has all its Aggs)."""
    n_seg = (pods - 1) * segments + (segments if last is None else last)
    n_tor = n_seg * s.tors_per_segment
    n_agg = pods * s.planes * s.aggs_per_plane
    per_unit = s.access_ports * s.unit_gpus          # ports of one unit on one ToR
    switches = {"tor": n_tor, "agg": n_agg}
    core_total = None
    if pods > 1:
        switches["core"] = core_layout(s, pods)[1]
        core_total = {"down": (n_agg * s.agg_up, d.uplink_speed)}
    tor_ports = {"down": (n_tor * s.units_per_tor * per_unit, d.nic_speed),
                 "backup": (n_tor * s.backup_units * per_unit, d.nic_speed),
                 "up": (n_tor * s.tor_uplinks, d.uplink_speed)}
    agg_total = {"down": (n_tor * s.tor_uplinks, d.uplink_speed),
                 "up": (n_agg * s.agg_up, d.uplink_speed)}
    cables = {"access": (tor_ports["down"][0] + tor_ports["backup"][0], d.nic_speed),
              "uplink": (n_tor * s.tor_uplinks, d.uplink_speed),
              "core": (n_agg * s.agg_up if pods > 1 else 0, d.uplink_speed)}
    groups = d.rails if s.mechanisms.rail_optimized else 1
    units_gpus = groups * s.unit_gpus                 # GPUs one unit index covers in a segment
    active = n_seg * s.units_per_tor * units_gpus
    backup = n_seg * s.backup_units * units_gpus
    return design_bill(switches=switches, chip_unit=d.chip.unit, tor_ports=tor_ports,
                       agg_total=agg_total, core_total=core_total, cables=cables,
                       all_gpus=active + backup, backup_gpus=backup,
                       gpu_power_w=d.gpu_power_w, active_gpus=active)


def _fits(d: DesignInputs, bill: dict[str, Any]) -> bool:
    return d.power_budget_w is None or bill["power_w"]["total"] <= d.power_budget_w


def evaluate(d: DesignInputs, m: Mechanisms) -> Design:
    """Size and cost one member of the family.

    >>> from hpnsim.design.inputs import design_inputs
    >>> hpn = evaluate(design_inputs(), Mechanisms(2, True, True, True))
    >>> hpn.gpus, hpn.bill["switches"], hpn.binding.value
    (15360, {'tor': 240, 'agg': 120}, 'Agg radix')
    """
    s = shape(d, m)
    if isinstance(s, Binding):
        why = {Binding.NIC_PORTS: f"dual ToR needs a 2-port NIC, got {d.nic_ports} ports",
               Binding.TOR_RADIX: "no ToR fits one host within the oversubscription allowed",
               Binding.AGG_RADIX: "an Agg has fewer down ports than a segment has ToRs in "
                                  "its plane"}[s]
        return Design(m, None, False, s, why)
    three = m.tiers == 3
    top = max_pods(s) if three else 1
    max_gpus = top * s.pod_gpus
    binding = Binding.CORE_RADIX if three else Binding.AGG_RADIX
    # sizes, smallest first: (pods, segments per pod, segments of the last pod)
    full = s.max_segments
    if three:
        sizes = [(p, full, full) for p in range(2, top + 1)]
    else:
        sizes = [(1, n, n) for n in range(1, full + 1)]
    if d.target_gpus is not None:
        n_seg = math.ceil(d.target_gpus / s.segment_gpus)
        if n_seg > top * full:
            return Design(m, s, False, binding, f"{d.target_gpus:,} GPUs exceed its "
                                                f"{max_gpus:,} ({binding.value})",
                          max_gpus=max_gpus)
        if not three:
            sizes = [(1, n_seg, n_seg)]
        else:  # at least two pods; a partial last pod where the template builds one (hpn7)
            pods = max(2, math.ceil(n_seg / full))
            last = max(1, n_seg - (pods - 1) * full) if m.rail_optimized else full
            sizes = [(pods, full, last)]
    chosen = None
    for pods, segments, last in reversed(sizes):
        bill = _counts(d, s, pods, segments, last)
        if _fits(d, bill):
            chosen = (pods, segments, last, bill)
            break
        binding = Binding.POWER
    if chosen is None:
        return Design(m, s, False, Binding.POWER, "its smallest size exceeds the power budget"
                      if d.target_gpus is None else "the target exceeds the power budget",
                      max_gpus=max_gpus)
    pods, segments, last, bill = chosen
    gpus = ((pods - 1) * segments + last) * s.segment_gpus
    if binding is Binding.POWER and d.target_gpus is None:
        max_gpus = gpus
    return Design(m, s, True, binding, "", pods, segments, last, gpus, max_gpus, bill)


def design_space(d: DesignInputs) -> list[Design]:
    """Every member of the family: feasible first, then by network cost per GPU, then the
    largest first."""
    designs = [evaluate(d, m) for m in family()]
    return sorted(designs, key=lambda x: (not x.feasible,
                                          round(x.bill.get("cost_per_gpu_usd", math.inf), 2),
                                          -x.max_gpus, x.name))
