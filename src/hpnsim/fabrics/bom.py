"""Bill of materials: switches, ports by speed, cables, transceivers by type, power, cost.

Per-unit figures live in :data:`UNIT_TABLE`, an editable table (pass ``units=`` overrides,
or ``--units FILE.json`` on the CLI). Defaults and where they come from:

- ``gpu``: 1275 W per GPU, the NVIDIA DGX H100 system maximum (10.2 kW) over 8 GPUs;
  it includes CPUs, memory and NICs of the host. It is counted for every host, backup hosts
  included (HPN's backup hosts are powered spares); ``power_w["backup_hosts"]`` says how much
  of ``power_w["gpus"]`` they are.
  The HPN paper's figure is lower: an 18 MW building holds about 15K GPUs (one 15,360-GPU
  pod), about 1.17 kW per active GPU *all-in* (hosts, backup hosts, both networks). With the
  DGX maximum this model gives about 21.9 MW (about 700 GPUs per MW) for that pod, so HPN's
  hosts draw less than the DGX maximum (typical rather than peak draw, or H800 hosts in
  another configuration). Keeping the backend network and the 120 backup hosts, about
  1,036 W per GPU (8.3 kW per host) reproduces 18 MW: pass ``{"gpu": {"power_w": 1036}}``.
  The default is left at the documented DGX maximum rather than tuned to the paper.
- ``switch_51.2T``: 1500 W and 50,000 USD per single-chip 51.2 Tb/s switch without optics;
  an estimate for a 64 x 800G (Tomahawk 5 / Spectrum-4 class) 2RU box (vendors publish
  typical power of 1-2 kW; list prices vary by vendor and volume).
- ``switch_25.6T``: the previous generation (Tomahawk 4 class, 64 x 400G). Power follows the
  HPN fact that the 51.2T chip draws about 45% more than the 25.6T generation: 1500 / 1.45,
  about 1034 W. Cost: an estimate of 25,000 USD (half the 51.2T box; older, cheaper parts).
- ``switch_102.4T``: the next generation (HPN: 102.4 Tb/s single-chip switches). Both figures
  are estimates: power assumes the same +45% step again (1500 x 1.45 = 2175 W), cost
  100,000 USD.
- transceivers ``<speed>-SM`` (single-mode, e.g. DR4/FR4) and ``<speed>-MM`` (multimode,
  e.g. SR4/SR8): power from common module specifications (about 2.5-15 W), single-mode prices
  as estimates, multimode priced 70% below single-mode (HPN paper).
- ``fibre-MM`` / ``fibre-SM``: one patch cable per link, estimated.
Replace these with your quotes: the model multiplies them, it does not know them.

Overrides (:func:`validate_units`): every value must be a finite number >= 0 under the keys
``power_w`` or ``cost_usd``. An override may change one key of a known unit. A name not in
the table is an error listing the known names, unless it follows the naming pattern of a
switch chip (``switch_<Tb/s>T``, e.g. ``switch_204.8T``) or a transceiver
(``<Gb/s>G-SM`` / ``<Gb/s>G-MM``, e.g. ``1600G-SM``): such a new unit is added to the table,
and then needs both ``power_w`` and ``cost_usd``.

Distances decide the optics: a link class whose run is under ``multimode_limit_m`` (100 m by
default, as in one HPN building) gets multimode optics, longer runs single-mode.
"""

from __future__ import annotations

import math
import re
from numbers import Real
from typing import Any

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import Fabric

UNIT_TABLE: dict[str, dict[str, float]] = {
    "gpu": {"power_w": 1275.0, "cost_usd": 0.0},
    "switch_25.6T": {"power_w": 1500.0 / 1.45, "cost_usd": 25_000.0},
    "switch_51.2T": {"power_w": 1500.0, "cost_usd": 50_000.0},
    "switch_102.4T": {"power_w": 1500.0 * 1.45, "cost_usd": 100_000.0},
    "100G-SM": {"power_w": 3.5, "cost_usd": 150.0},
    "100G-MM": {"power_w": 2.5, "cost_usd": 45.0},
    "200G-SM": {"power_w": 6.0, "cost_usd": 400.0},
    "200G-MM": {"power_w": 5.0, "cost_usd": 120.0},
    "400G-SM": {"power_w": 9.0, "cost_usd": 700.0},
    "400G-MM": {"power_w": 8.0, "cost_usd": 210.0},
    "800G-SM": {"power_w": 15.0, "cost_usd": 1200.0},
    "800G-MM": {"power_w": 13.0, "cost_usd": 360.0},
    "fibre-SM": {"power_w": 0.0, "cost_usd": 60.0},
    "fibre-MM": {"power_w": 0.0, "cost_usd": 50.0},
}

UNIT_FIELDS = ("power_w", "cost_usd")
#: names a new unit may take: a switch chip or a transceiver speed and fibre mode
NEW_UNIT_PATTERN = re.compile(r"switch_\d+(\.\d+)?T|\d+(\.\d+)?G-(SM|MM)")

#: metres of a typical run per link class (edit for your floor plan)
DEFAULT_DISTANCES = {"access": 20.0, "uplink": 80.0, "core": 500.0, "peer": 5.0}


def validate_units(units: Any) -> dict[str, dict[str, float]]:
    """Check unit overrides (see the module docstring); return them as floats.

    >>> validate_units({"switch_51.2T": {"power_w": 1200}})
    {'switch_51.2T': {'power_w': 1200.0}}
    >>> validate_units({"switch_51.2T": {"power_w": "abc"}})
    Traceback (most recent call last):
    hpnsim.errors.InputError: units: switch_51.2T.power_w: must be a number >= 0, got 'abc'
    """
    if units is None:
        return {}
    if not isinstance(units, dict):
        raise InputError("units", f"must map unit names to {{power_w, cost_usd}}, "
                                  f"got {type(units).__name__}")
    out: dict[str, dict[str, float]] = {}
    for name, value in units.items():
        if not isinstance(value, dict):
            raise InputError("units", f"{name}: must be an object with power_w and/or cost_usd, "
                                      f"got {value!r}")
        if name not in UNIT_TABLE:
            if not isinstance(name, str) or not NEW_UNIT_PATTERN.fullmatch(name):
                raise InputError("units", f"unknown unit {name!r}; known: "
                                          f"{', '.join(UNIT_TABLE)} (new units must be named "
                                          f"switch_<Tb/s>T, <Gb/s>G-SM or <Gb/s>G-MM)")
            missing = [key for key in UNIT_FIELDS if key not in value]
            if missing:
                raise InputError("units", f"{name}: a new unit needs both power_w and "
                                          f"cost_usd, missing {', '.join(missing)}")
        entry = {}
        for key, number in value.items():
            if key not in UNIT_FIELDS:
                raise InputError("units", f"{name}.{key}: unknown figure; use power_w or "
                                          f"cost_usd")
            if isinstance(number, bool) or not isinstance(number, Real):
                raise InputError("units", f"{name}.{key}: must be a number >= 0, got {number!r}")
            if not math.isfinite(number):
                raise InputError("units", f"{name}.{key}: must be a finite number >= 0, "
                                          f"got {number!r}")
            if number < 0:
                raise InputError("units", f"{name}.{key}: must be a number >= 0, got {number!r}")
            entry[key] = float(number)
        out[name] = entry
    return out


def speed_label(bytes_per_second: float) -> str:
    """``50e9`` -> ``"400G"``.

    >>> speed_label(25e9)
    '200G'
    """
    return f"{bytes_per_second * 8 / 1e9:g}G"


def _switch_key(plan: dict[str, Any]) -> str:
    return f"switch_{plan['chip'] * 8 / 1e12:g}T"


def _total(plan: dict[str, Any], group: str) -> int:
    """Ports of ``group`` over the whole tier (a total overrides switches x per-switch)."""
    return int(plan.get(f"total_{group}_ports", plan["switches"] * plan[f"{group}_ports"]))


def _cable_groups(tiers: dict[str, Any], agg_built: bool) -> list[tuple[str, int, float]]:
    """(link class, cables, speed) from the switch port plans, so backups and bonds count."""
    groups = []
    tor = tiers.get("tor")
    if tor:
        groups.append(("access", _total(tor, "down") + _total(tor, "backup"),
                       tor["down_speed"]))
        groups.append(("uplink", _total(tor, "up"), tor["up_speed"]))
        groups.append(("peer", _total(tor, "peer") // 2, tor["peer_speed"]))
    agg = tiers.get("agg")
    if agg and agg_built:
        groups.append(("core", _total(agg, "up"), agg["up_speed"]))
    return [g for g in groups if g[1]]


def _network_section(tiers: dict[str, Any], agg_built: bool, table: dict, dist: dict,
                     multimode_limit_m: float) -> dict[str, Any]:
    """Switches, ports, cables, optics, power and cost of one network's switch tiers."""
    ports: dict[str, int] = {}
    reserved = 0
    for tier, plan in tiers.items():
        for group in ("down", "backup", "up", "peer"):
            n = _total(plan, group)
            if n:
                label = speed_label(plan[f"{group}_speed"])
                ports[label] = ports.get(label, 0) + n
        if tier == "agg" and not agg_built:
            reserved += _total(plan, "up")
    cables: dict[str, int] = {}
    transceivers: dict[str, int] = {}
    fibres: dict[str, int] = {}
    for link_class, n, speed in _cable_groups(tiers, agg_built):
        mode = "MM" if dist[link_class] < multimode_limit_m else "SM"
        cables[link_class] = n
        kind = f"{speed_label(speed)}-{mode}"
        transceivers[kind] = transceivers.get(kind, 0) + 2 * n
        fibres[f"fibre-{mode}"] = fibres.get(f"fibre-{mode}", 0) + n
    switch_items: dict[str, int] = {}
    for plan in tiers.values():
        key = _switch_key(plan)
        switch_items[key] = switch_items.get(key, 0) + plan["switches"]
    for key in list(transceivers) + list(switch_items):
        if key not in table:
            raise InputError("units", f"no power/cost figures for {key!r}; add it to the table")

    def total(items: dict[str, int], field: str) -> float:
        return float(sum(table[k][field] * n for k, n in items.items()))

    power = {"switches": total(switch_items, "power_w"),
             "optics": total(transceivers, "power_w")}
    power["network"] = power["switches"] + power["optics"]
    cost = {"switches": total(switch_items, "cost_usd"),
            "optics": total(transceivers, "cost_usd"), "cables": total(fibres, "cost_usd")}
    cost["network"] = cost["switches"] + cost["optics"] + cost["cables"]
    return {"switches": {tier: plan["switches"] for tier, plan in tiers.items()},
            "switch_ports": ports, "reserved_ports": reserved, "cables": cables,
            "transceivers": transceivers, "fibres": fibres, "power_w": power, "cost_usd": cost}


def bill_of_materials(fabric: Fabric, units: dict[str, dict[str, float]] | None = None,
                      distances: dict[str, float] | None = None,
                      multimode_limit_m: float = 100.0) -> dict[str, Any]:
    """Switches, ports, cables, transceivers, power, cost and GPUs per MW of a fabric.

    Backup hosts take ToR ports, cables and optics (and draw power); uplinks reserved for
    a core that is not built take ports only. The top-level switch, port, cable and optics
    figures are the backend's; a frontend network gets its own section ``frontend`` (same
    keys, plus its NIC ports). ``power_w`` and ``cost_usd`` keep the backend under
    ``network`` and add ``frontend_network``; ``total`` power counts GPUs and both networks
    (storage servers are not in the table and not counted). ``power_w["gpus"]`` counts the
    hosts' GPUs, backup hosts included; ``power_w["backup_hosts"]`` is the backup hosts' part
    of it. ``gpus_per_mw`` counts active GPUs over the total power.
    Raises InputError when ``units`` is not a valid override (:func:`validate_units`).

    >>> from hpnsim.fabrics import hpn7
    >>> bom = bill_of_materials(hpn7())
    >>> bom["switches"], bom["transceivers"]
    ({'tor': 240, 'agg': 120}, {'200G-MM': 65280, '400G-MM': 28800})
    >>> bill_of_materials(hpn7(frontend=True))["frontend"]["switches"]
    {'tor': 64, 'agg': 64, 'core': 60}
    """
    table = {key: dict(value) for key, value in UNIT_TABLE.items()}
    for key, value in validate_units(units).items():
        table.setdefault(key, {}).update(value)
    dist = {**DEFAULT_DISTANCES, **(distances or {})}
    tiers = fabric.meta.get("tiers", {})
    agg_built = bool(fabric.meta.get("uplinks_built", {}).get("agg"))
    back = _network_section(tiers, agg_built, table, dist, multimode_limit_m)
    hosts = int(fabric.meta.get("active_hosts", fabric.n_hosts))
    backup_hosts = int(fabric.meta.get("backup_hosts", 0))
    all_hosts = hosts + backup_hosts
    all_gpus = all_hosts * fabric.gpus_per_host
    gpu_w = table["gpu"]["power_w"]
    power = {**back["power_w"], "gpus": all_gpus * gpu_w,
             "backup_hosts": backup_hosts * fabric.gpus_per_host * gpu_w}
    cost = dict(back["cost_usd"])
    out = {k: back[k] for k in ("switches", "switch_ports", "reserved_ports")}
    nics = all_gpus // int(fabric.meta.get("gpus_per_pcie_switch", 1))  # shared NICs
    out["nic_ports"] = nics * int(fabric.meta.get("ports_per_nic", 1))
    out.update({k: back[k] for k in ("cables", "transceivers", "fibres")})
    front_meta = fabric.meta.get("frontend")
    power["frontend_network"] = cost["frontend_network"] = 0.0
    if front_meta:
        front = _network_section(front_meta["tiers"], True, table, dist, multimode_limit_m)
        front["nic_ports"] = 2 * (all_hosts + front_meta["storage_hosts"])
        front["storage_hosts"] = front_meta["storage_hosts"]
        out["frontend"] = front
        power["frontend_network"] = front["power_w"]["network"]
        cost["frontend_network"] = front["cost_usd"]["network"]
    power["total"] = power["network"] + power["frontend_network"] + power["gpus"]
    cost["all_networks"] = cost["network"] + cost["frontend_network"]
    out.update({
        "power_w": power, "cost_usd": cost,
        "network_cost_per_gpu_usd": cost["network"] / max(fabric.n_gpus, 1),
        "frontend_cost_per_gpu_usd": cost["frontend_network"] / max(fabric.n_gpus, 1),
        "gpus_per_mw": fabric.n_gpus / (power["total"] / 1e6),
        "distances_m": dist, "multimode_limit_m": multimode_limit_m,
    })
    return out
