"""Bill of materials: switches, ports by speed, cables, transceivers by type, power, cost.

Per-unit figures live in :data:`UNIT_TABLE`, an editable table (pass ``units=`` overrides,
or ``--units FILE.json`` on the CLI). Defaults and where they come from:

- ``gpu_w``: 1275 W per GPU, the NVIDIA DGX H100 system maximum (10.2 kW) over 8 GPUs;
  it includes CPUs, memory and NICs of the host.
- ``switch_51.2T``: 1500 W and 50,000 USD per single-chip 51.2 Tb/s switch without optics;
  an estimate for a 64 x 800G (Tomahawk 5 / Spectrum-4 class) 2RU box (vendors publish
  typical power of 1-2 kW; list prices vary by vendor and volume).
- transceivers ``<speed>-SM`` (single-mode, e.g. DR4/FR4) and ``<speed>-MM`` (multimode,
  e.g. SR4/SR8): power from common module specifications (about 2.5-15 W), single-mode prices
  as estimates, multimode priced 70% below single-mode (HPN paper).
- ``fibre-MM`` / ``fibre-SM``: one patch cable per link, estimated.
Replace these with your quotes: the model multiplies them, it does not know them.

Distances decide the optics: a link class whose run is under ``multimode_limit_m`` (100 m by
default, as in one HPN building) gets multimode optics, longer runs single-mode.
"""

from __future__ import annotations

from typing import Any

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import Fabric

UNIT_TABLE: dict[str, dict[str, float]] = {
    "gpu": {"power_w": 1275.0, "cost_usd": 0.0},
    "switch_51.2T": {"power_w": 1500.0, "cost_usd": 50_000.0},
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

#: metres of a typical run per link class (edit for your floor plan)
DEFAULT_DISTANCES = {"access": 20.0, "uplink": 80.0, "core": 500.0, "peer": 5.0}


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
    (storage servers are not in the table and not counted).

    >>> from hpnsim.fabrics import hpn7
    >>> bom = bill_of_materials(hpn7())
    >>> bom["switches"], bom["transceivers"]
    ({'tor': 240, 'agg': 120}, {'200G-MM': 65280, '400G-MM': 28800})
    >>> bill_of_materials(hpn7(frontend=True))["frontend"]["switches"]
    {'tor': 64, 'agg': 64, 'core': 60}
    """
    table = {key: dict(value) for key, value in UNIT_TABLE.items()}
    for key, value in (units or {}).items():
        table.setdefault(key, {}).update(value)
    dist = {**DEFAULT_DISTANCES, **(distances or {})}
    tiers = fabric.meta.get("tiers", {})
    agg_built = bool(fabric.meta.get("uplinks_built", {}).get("agg"))
    back = _network_section(tiers, agg_built, table, dist, multimode_limit_m)
    hosts = int(fabric.meta.get("active_hosts", fabric.n_hosts))
    all_hosts = hosts + int(fabric.meta.get("backup_hosts", 0))
    all_gpus = all_hosts * fabric.gpus_per_host
    power = {**back["power_w"], "gpus": all_gpus * table["gpu"]["power_w"]}
    cost = dict(back["cost_usd"])
    out = {k: back[k] for k in ("switches", "switch_ports", "reserved_ports")}
    out["nic_ports"] = all_gpus * int(fabric.meta.get("ports_per_nic", 1))
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
