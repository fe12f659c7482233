"""A design's bill of materials from its counts: switches, ports, cables, optics, power, cost.

The same accounting as :func:`hpnsim.fabrics.bom.bill_of_materials` makes of a built fabric
(every ToR port one cable, two transceivers a cable, multimode under ``multimode_limit_m``,
reserved Agg uplinks take ports only), done here from the radix arithmetic so that a built
design's bill can be checked against it. Unit figures are the BOM's table.
"""

from __future__ import annotations

from typing import Any

from hpnsim.errors import InputError
from hpnsim.fabrics.bom import DEFAULT_DISTANCES, UNIT_TABLE, speed_label


def _add(into: dict[str, int], key: str, n: int) -> None:
    if n:
        into[key] = into.get(key, 0) + n


def design_bill(*, switches: dict[str, int], chip_unit: str, tor_ports: dict[str, tuple],
                agg_total: dict[str, tuple], core_total: dict[str, tuple] | None,
                cables: dict[str, tuple[int, float]], all_gpus: int, backup_gpus: int,
                gpu_power_w: float, active_gpus: int, multimode_limit_m: float = 100.0
                ) -> dict[str, Any]:
    """Bill of one design. ``tor_ports``/``agg_total``/``core_total``: port group -> (ports
    over the whole tier, speed); ``cables``: link class -> (cables, speed).

    >>> b = design_bill(switches={"tor": 1}, chip_unit="switch_51.2T",
    ...                 tor_ports={"down": (128, 25e9), "up": (64, 50e9)}, agg_total={},
    ...                 core_total=None, cables={"access": (128, 25e9)}, all_gpus=128,
    ...                 backup_gpus=0, gpu_power_w=0.0, active_gpus=128)
    >>> b["transceivers"], b["power_w"]["network"]
    ({'200G-MM': 256}, 2780.0)
    """
    ports: dict[str, int] = {}
    for groups in (tor_ports, agg_total, core_total or {}):
        for n, speed in groups.values():
            _add(ports, speed_label(speed), int(n))
    transceivers: dict[str, int] = {}
    fibres: dict[str, int] = {}
    cable_counts: dict[str, int] = {}
    for link_class, (n, speed) in cables.items():
        if not n:
            continue
        mode = "MM" if DEFAULT_DISTANCES[link_class] < multimode_limit_m else "SM"
        cable_counts[link_class] = n
        _add(transceivers, f"{speed_label(speed)}-{mode}", 2 * n)
        _add(fibres, f"fibre-{mode}", n)
    for key in [chip_unit, *transceivers]:
        if key not in UNIT_TABLE:
            raise InputError("units", f"no power/cost figures for {key!r} in the BOM table")
    n_switch = sum(switches.values())

    def total(items: dict[str, int], field: str) -> float:
        return float(sum(UNIT_TABLE[k][field] * n for k, n in items.items()))

    power = {"switches": n_switch * UNIT_TABLE[chip_unit]["power_w"],
             "optics": total(transceivers, "power_w")}
    power["network"] = power["switches"] + power["optics"]
    power["gpus"] = all_gpus * gpu_power_w
    power["backup_hosts"] = backup_gpus * gpu_power_w
    power["total"] = power["network"] + power["gpus"]
    cost = {"switches": n_switch * UNIT_TABLE[chip_unit]["cost_usd"],
            "optics": total(transceivers, "cost_usd"), "cables": total(fibres, "cost_usd")}
    cost["network"] = cost["switches"] + cost["optics"] + cost["cables"]
    return {"switches": dict(switches), "switch_ports": ports, "cables": cable_counts,
            "transceivers": transceivers, "fibres": fibres, "power_w": power,
            "cost_usd": cost, "cost_per_gpu_usd": cost["network"] / max(active_gpus, 1),
            "power_per_gpu_w": power["total"] / max(active_gpus, 1)}
