"""Helpers of the wiring tests: a fabric built from its plan with planted miswires, and the
neighbour tables lldpd would print for it, written in lldpd's JSON shapes by hand."""

from __future__ import annotations

import json
from pathlib import Path

from hpnsim.fabrics import build_fabric
from hpnsim.wiring.plan import cabling_plan

#: a small HPN 7.0: one segment of 2 hosts (+1 backup host), 2 rails, 2 Aggs per plane
SMALL_HPN = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "1", "rails": "2",
             "tor_uplinks": "2", "aggs_per_plane": "2"}


def small_plan(options=None, template="hpn7"):
    options = dict(SMALL_HPN if options is None else options)
    return cabling_plan(build_fabric(template, options), template, options)


def find(plan, a_device, a_port):
    """Row index of the cable whose a end is ``(a_device, a_port)``."""
    index, side = plan.ends[(a_device, a_port)]
    assert side == 0
    return index


def built_cables(plan, swaps=(), missing=()):
    """The cables as built: every planned cable, with the far (b) ends of each pair in
    ``swaps`` exchanged and the rows in ``missing`` left out; as (end, end) pairs."""
    cables = {i: list(c.ends) for i, c in enumerate(plan.cables)}
    for i, j in swaps:
        cables[i][1], cables[j][1] = cables[j][1], cables[i][1]
    return [tuple(ends) for i, ends in cables.items() if i not in set(missing)]


def _neighbour(far_device, far_port, json0=False, port_as_descr=False):
    port_id = ({"type": "mac", "value": "02:00:00:00:00:01"} if port_as_descr
               else {"type": "ifname", "value": far_port})
    if json0:
        return {"chassis": [{"id": [{"type": "mac", "value": "02:00:00:00:00:02"}],
                             "name": [{"value": far_device}]}],
                "port": [{"id": [port_id], "descr": [{"value": far_port}]}]}
    return {"via": "LLDP", "chassis": {far_device: {"id": {"type": "mac",
                                                            "value": "02:00:00:00:00:02"}}},
            "port": {"id": port_id, "descr": far_port, "ttl": "4"}}


def table(entries, json0=False, port_as_descr=False):
    """lldpcli's JSON for one device: ``entries`` are (port, far device, far port)."""
    if json0:
        return {"lldp": [{"interface": [{"name": port, **_neighbour(d, p, True, port_as_descr)}
                                        for port, d, p in entries]}]}
    if not entries:
        return {"lldp": {}}
    shaped = [{port: _neighbour(d, p, False, port_as_descr)} for port, d, p in entries]
    return {"lldp": {"interface": shaped[0] if len(shaped) == 1 else shaped}}


def write_tables(folder: Path, cables, devices, json0=(), port_as_descr=False):
    """``DEVICE.json`` for each of ``devices``: what it sees on the ``cables`` built."""
    seen: dict[str, list] = {d: [] for d in devices}
    for (ad, ap), (bd, bp) in cables:
        if ad in seen:
            seen[ad].append((ap, bd, bp))
        if bd in seen:
            seen[bd].append((bp, ad, ap))
    folder.mkdir(parents=True, exist_ok=True)
    for device, entries in seen.items():
        data = table(sorted(entries), json0=device in json0, port_as_descr=port_as_descr)
        (folder / f"{device}.json").write_text(json.dumps(data, indent=2))
    return folder
