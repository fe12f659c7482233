"""The ``hpnsim fabric`` template and parameters that build a design.

Rail-optimized designs are ``hpn7`` (``dual_tor`` nonstacked or single, ``dual_plane``,
``rail_only``, ``domain_gpus`` for a domain larger than its rails); the others ``dcn_plus``
(a ToR group serves whole hosts). Every count is passed explicitly, so the built fabric has
the design's switches, ports and cables whatever the template's defaults. A host of the
fabric is one scale-up domain: an NVL72 rack is a 72-GPU host on one NVSwitch.
"""

from __future__ import annotations

from typing import Any

from hpnsim.design.inputs import DesignInputs
from hpnsim.design.space import Design
from hpnsim.errors import InputError


def _speed(bytes_per_s: float) -> str:
    return f"{bytes_per_s * 8 / 1e9:g}G"


def template_options(d: DesignInputs, design: Design) -> tuple[str, dict[str, Any]]:
    """(template, typed options) that build ``design``.

    >>> from hpnsim.design.inputs import design_inputs
    >>> from hpnsim.design.space import evaluate
    >>> from hpnsim.design.family import Mechanisms
    >>> t, o = template_options(design_inputs(), evaluate(design_inputs(),
    ...                                                   Mechanisms(2, True, True, True)))
    >>> t, o["segments"], o["tor_uplinks"], o["agg_core_uplinks"]
    ('hpn7', 15, 60, 8)
    """
    if not design.feasible or design.shape is None:
        raise InputError("emit", f"{design.name} cannot be built: {design.reason}")
    s, m = design.shape, design.mechanisms
    head = {"chip": d.chip.name, "dual_tor": "nonstacked" if m.dual_tor else "single"}
    if m.rail_optimized:
        head.update({"dual_plane": m.dual_plane, "rail_only": m.rail_only, "rails": d.rails})
        if d.domain.gpus != d.rails:
            head["domain_gpus"] = d.domain.gpus
    else:
        head.update({"dual_plane": m.dual_plane, "gpus_per_host": d.domain.gpus})
    counts = {"port_speed": _speed(d.nic_speed), "ports_per_nic": d.nic_ports,
              "uplink_speed": _speed(d.uplink_speed), "hosts_per_segment": s.units_per_tor,
              "backup_hosts": s.backup_units, "tor_uplinks": s.tor_uplinks}
    if m.rail_optimized:
        counts["aggs_per_plane"] = s.aggs_per_plane
    else:
        counts["aggs_per_pod"] = s.planes * s.aggs_per_plane
    counts.update({"agg_core_uplinks": s.agg_up, "segments": design.segments,
                   "pods": design.pods})
    if design.last_pod_segments != design.segments:
        counts["last_pod_segments"] = design.last_pod_segments
    counts["nvlink"] = f"{d.domain.nvlink / 1e9:g}GB/s"
    return ("hpn7" if m.rail_optimized else "dcn_plus"), {**head, **counts}


def command_line(template: str, options: dict[str, Any]) -> str:
    """The ``hpnsim fabric`` command line of ``template`` and ``options``.

    >>> command_line("hpn7", {"segments": 15, "dual_plane": True})
    'hpnsim fabric hpn7 --segments 15 --dual-plane true'
    """
    parts = [f"hpnsim fabric {template}"]
    for key, value in options.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        parts.append(f"--{key.replace('_', '-')} {text}")
    return " ".join(parts)


def scenario_block(template: str, options: dict[str, Any]) -> str:
    """The scenario YAML ``fabric:`` block of ``template`` and ``options``.

    >>> print(scenario_block("hpn7", {"segments": 15, "dual_plane": True}))
    fabric:
      template: hpn7
      segments: 15
      dual_plane: true
    """
    lines = ["fabric:", f"  template: {template}"]
    for key, value in options.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        lines.append(f"  {key}: {text}")
    return "\n".join(lines)
