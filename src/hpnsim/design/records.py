"""Designs and inputs as plain dicts (the ``--json`` output; tables and figures read these)."""

from __future__ import annotations

from typing import Any

from hpnsim.design.emit import command_line, template_options
from hpnsim.design.inputs import DesignInputs
from hpnsim.design.space import Design


def _g(bytes_per_s: float) -> str:
    return f"{bytes_per_s * 8 / 1e9:g}G"


def inputs_dict(d: DesignInputs) -> dict[str, Any]:
    """What the designs were derived from, with the chip's and domain's sources.

    >>> from hpnsim.design.inputs import design_inputs
    >>> inputs_dict(design_inputs())["chip"]["port_speeds"]
    ['200G', '400G', '800G']
    """
    return {
        "chip": {"name": d.chip.name, "capacity_tbps": d.chip.capacity * 8 / 1e12,
                 "lane": _g(d.chip.lane_speed), "max_ports": d.chip.max_ports,
                 "port_speeds": [_g(s) for s in d.chip.port_speeds()],
                 "source": d.chip.source, "bom_unit": d.chip.unit},
        "nic": {"ports": d.nic_ports, "speed": _g(d.nic_speed)},
        "uplink_speed": _g(d.uplink_speed),
        "domain": {"name": d.domain.name, "gpus": d.domain.gpus,
                   "nvlink_GBps": d.domain.nvlink / 1e9, "source": d.domain.source},
        "rails": d.rails, "tor_oversub_max": d.tor_oversub, "agg_oversub": d.agg_oversub,
        "backup_share": d.backup_share, "gpu_power_w": d.gpu_power_w,
        "power_budget_w": d.power_budget_w, "target_gpus": d.target_gpus,
    }


def design_dict(d: DesignInputs, x: Design) -> dict[str, Any]:
    """One design: ``name``, ``mechanisms``, ``tiers``, ``segment_gpus``, ``pod_gpus``,
    ``switches``, ``power_w``, ``cost_usd`` (network) and the rest of its figures."""
    s, m = x.shape, x.mechanisms
    out: dict[str, Any] = {
        "name": x.name, "mechanisms": m.labels(), "tiers": m.tiers, "feasible": x.feasible,
        "binding": x.binding.value, "reason": x.reason or None,
        "segment_gpus": s.segment_gpus if s else None, "pod_gpus": s.pod_gpus if s else None,
        "max_gpus": x.max_gpus or None, "gpus": x.gpus, "pods": x.pods,
        "segments_per_pod": x.segments,
    }
    if s is not None:
        out["tor"] = {"active_hosts": s.units_per_tor, "backup_hosts": s.backup_units,
                      "gpus_per_host_on_tor": s.unit_gpus, "access_ports_per_gpu": s.access_ports,
                      "uplinks": s.tor_uplinks, "oversubscription": s.tor_oversub}
        out["agg"] = {"down_ports": s.agg_down, "up_ports": s.agg_up,
                      "oversubscription": s.agg_down / s.agg_up}
        out.update({"tors_per_segment": s.tors_per_segment, "planes": s.planes,
                    "aggs_per_plane": s.aggs_per_plane,
                    "cross_rail": "nvlink only" if m.rail_only else "network"})
    if not x.feasible:
        out.update({"switches": None, "power_w": None, "cost_usd": None})
        return out
    b = x.bill
    paths, decisions = x.ecmp()
    template, options = template_options(d, x)
    out.update({
        "switches": b["switches"], "cables": b["cables"], "transceivers": b["transceivers"],
        "switch_ports": b["switch_ports"], "power_w": b["power_w"]["total"],
        "network_power_w": b["power_w"]["network"], "cost_usd": b["cost_usd"]["network"],
        "power_breakdown_w": b["power_w"], "cost_breakdown_usd": b["cost_usd"],
        "cost_per_gpu_usd": b["cost_per_gpu_usd"], "power_per_gpu_w": b["power_per_gpu_w"],
        "hops": x.hops(), "ecmp_paths": paths, "hash_decisions": decisions,
        "emit": {"template": template, "options": options,
                 "command": command_line(template, options)},
    })
    return out
