"""The mechanism ladder: the HPN paper's Table 2 (and Table 4) reasoning for any chip and NIC.

Start from a plain Clos of the chip and add one mechanism at a time; each step gives the
tier-1 scale (GPUs one ToR layer joins in one hop) and the tier-2 scale (GPUs a pod joins
under one Agg layer), and the factor the mechanism contributes. ``None`` where a step leaves
a scale unchanged (the paper's "-").

The ladder counts as the paper does: every switch 1:1 until the oversubscription step, no
backup hosts, fabric links at twice the bandwidth a GPU has into one ToR (HPN: 200G ports,
400G ToR-Agg links; the plain Clos, a GPU's whole 400G into one ToR, then has 800G links:
the 51.2T chip's native 64 ports, which is what gives the paper's 2K). That pairing is what
makes dual ToR double tier 2 as well: the Agg's radix doubles with the finer links. At a
fixed link speed dual ToR alone would leave tier 2 as it was (see docs/design-space.md).

For 51.2T and 2 x 200G NICs on 8 rails: 64 / 2K, 128 / 4K, 1K / -, - / 8K, - / 15K (15,360)
and, rail-only on 16 planes, 122,880 (Table 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hpnsim.design.inputs import DesignInputs
from hpnsim.errors import InputError


@dataclass(frozen=True)
class Step:
    """One rung: the scales after the mechanism, and how they were reached."""

    mechanism: str
    tier1_scale: int
    tier2_scale: int
    tier1_before: int | None
    tier2_before: int | None
    arithmetic: list[str] = field(default_factory=list)
    planes: int = 1

    def to_dict(self) -> dict[str, Any]:
        """``{"mechanism", "tier1_gpus", "tier2_gpus", "factor", ...}`` (null: unchanged)."""
        def changed(now, before):
            return None if before is not None and now == before else now

        def factor(now, before):
            return None if before is None or now == before else now / before

        return {"mechanism": self.mechanism,
                "tier1_gpus": changed(self.tier1_scale, self.tier1_before),
                "tier2_gpus": changed(self.tier2_scale, self.tier2_before),
                "factor": {"tier1": factor(self.tier1_scale, self.tier1_before),
                           "tier2": factor(self.tier2_scale, self.tier2_before)},
                "tier1_scale": self.tier1_scale, "tier2_scale": self.tier2_scale,
                "planes": self.planes, "arithmetic": list(self.arithmetic)}


def _g(bytes_per_s: float) -> str:
    return f"{bytes_per_s * 8 / 1e9:g}G"


def ladder(d: DesignInputs) -> list[Step]:
    """Table 2's steps for the inputs' chip, NIC and rails (then Table 4's rail-only tier 2).

    >>> from hpnsim.design.inputs import design_inputs
    >>> [(s.tier1_scale, s.tier2_scale) for s in ladder(design_inputs())]
    [(64, 2048), (128, 4096), (1024, 4096), (1024, 8192), (1024, 15360), (1024, 122880)]
    """
    if d.nic_ports != 2:
        raise InputError("nic-ports", f"the ladder's dual-ToR step splits a 2-port NIC over two "
                                      f"ToRs, got {d.nic_ports} ports")
    c, b, rails, o = d.chip.capacity, d.nic_bandwidth, d.rails, d.agg_oversub
    half = c / 2
    steps: list[Step] = []

    def add(name, t1, t2, lines, planes=1):
        before = steps[-1] if steps else None
        steps.append(Step(name, t1, t2, before and before.tier1_scale,
                          before and before.tier2_scale, lines, planes))

    chip = d.chip.name
    t1 = int(half / b + 1e-9)
    k = int(c / (2 * b) + 1e-9)
    t2 = (k // 2) * t1
    add(f"{chip} Clos", t1, t2, [
        f"ToR: half of {chip} down = {half * 8 / 1e12:g}T / {_g(b)} a GPU = {t1} GPUs",
        f"links at 2 x {_g(b)} = {_g(2 * b)}: {chip} / {_g(2 * b)} = {k} ports; "
        f"Agg 1:1: {k // 2} down = {k // 2} ToRs",
        f"tier 2 = {k // 2} ToRs x {t1} GPUs = {t2:,}"])
    per_tor = b / 2
    t1 = int(half / per_tor + 1e-9)
    k = int(c / (2 * per_tor) + 1e-9)
    down = k // 2
    t2 = (down // 2) * t1
    add("dual-ToR", t1, t2, [
        f"NIC ports split over two ToRs: {_g(per_tor)} a GPU on each: "
        f"{half * 8 / 1e12:g}T / {_g(per_tor)} = {t1} GPUs a ToR pair",
        f"links at {_g(2 * per_tor)}: {k} ports; Agg 1:1: {down} down; a pair takes 2",
        f"tier 2 = {down} / 2 = {down // 2} pairs x {t1} GPUs = {t2:,}"])
    t1 *= rails
    per_seg = 2 * rails
    t2 = (down // per_seg) * t1
    add("rail-optimized", t1, t2, [
        f"{rails} rails: a segment is {rails} ToR pairs = {rails} x {t1 // rails} = {t1:,} GPUs",
        f"a segment takes {per_seg} of an Agg's {down} down ports: {down // per_seg} segments",
        f"tier 2 = {down // per_seg} x {t1:,} = {t2:,}"])
    t2 = (down // rails) * t1
    add("dual-plane", t1, t2, [
        f"ToR side p links only to plane p's Aggs: a segment takes {rails} ports of an Agg",
        f"tier 2 = {down} // {rails} = {down // rails} segments x {t1:,} = {t2:,}"], planes=2)
    up = max(1, math.ceil(k / (o + 1) - 1e-9))
    down = k - up
    t2 = (down // rails) * t1
    add(f"oversubscription {o:g}:1", t1, t2, [
        f"Agg {k} ports: {up} up to the core, {down} down ({down}:{up})",
        f"tier 2 = {down} // {rails} = {down // rails} segments x {t1:,} = {t2:,}"],
        planes=2)
    t2 = down * t1
    add("rail-only tier 2", t1, t2, [
        f"ToRs of rail r and side p link only to their plane's Aggs: {2 * rails} planes",
        f"a segment takes 1 port of an Agg: tier 2 = {down} segments x {t1:,} = {t2:,}",
        "no cross-rail path through the network (MoE all-to-all relays over NVLink)"],
        planes=2 * rails)
    return steps
