"""Neighbour tables as lldpd prints them (``lldpcli -f json show neighbors``), one file per device.

A folder holds ``DEVICE.json`` for each device that reported, ``DEVICE`` its hostname in
the plan. lldpd (1.0.x, ``src/client/json_writer.c`` shapes) prints, with ``-f json``::

    {"lldp": {"interface": {"swp1": {"chassis": {"pod0-seg0-host0": {...}},
                                     "port": {"id": {"type": "ifname", "value": "nic0p0"},
                                              "descr": "nic0p0"}}}}}

when one interface has a neighbour, and ``"interface": [{"swp1": {...}}, {"swp2": {...}}]``
(a list of one-key objects) when several do; ``{"lldp": {}}`` when none does. A chassis
with a system name is keyed by it; one without is ``"chassis": {"id": {...}, ...}``. With
``-f json0`` every value is a list (``{"lldp": [{"interface": [{"name": "swp1", "chassis":
[{"name": [{"value": ...}]}], "port": [{"id": [{"type", "value"}]}]}]}]}``); both are read.

The far port is the port ID when its subtype names an interface (``ifname``, ``local``),
else the port description (lldpd's default sends the MAC as port ID and the interface
name as description).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hpnsim.errors import InputError, read_user_text

#: keys of a chassis object that are fields, not a system name (a nameless chassis)
_CHASSIS_FIELDS = {"id", "descr", "mgmt-ip", "mgmt-iface", "capability", "ttl"}
#: port ID subtypes that carry an interface name
_NAMED_PORT_IDS = ("ifname", "local")


@dataclass(frozen=True)
class Sighting:
    """One neighbour seen: ``device``'s ``port`` sees ``far_device``'s ``far_port``."""

    device: str
    port: str
    far_device: str
    far_port: str
    source: str     # the file it was read from


def _bad(where: str, message: str) -> InputError:
    return InputError(where, f"not lldpd's neighbour JSON (lldpcli -f json show neighbors): "
                             f"{message}")


def _text(value) -> str | None:
    """A json0 ``[{"value": x}]`` or a plain string."""
    if isinstance(value, list):
        value = value[0] if value else None
        if isinstance(value, dict):
            value = value.get("value")
    return value if isinstance(value, str) else None


def _far_port(port, where: str, ifname: str) -> str:
    if isinstance(port, list):          # json0
        port = port[0] if port and isinstance(port[0], dict) else {}
    if not isinstance(port, dict):
        raise _bad(where, f"interface {ifname}: port is not an object")
    ident = port.get("id")
    if isinstance(ident, list):
        ident = ident[0] if ident else None
    if isinstance(ident, dict) and ident.get("type") in _NAMED_PORT_IDS \
            and isinstance(ident.get("value"), str):
        return ident["value"]
    descr = _text(port.get("descr"))
    if descr:
        return descr
    raise InputError(where, f"interface {ifname}: the neighbour's port names no interface "
                            f"(port ID {ident!r:.60} and no description); configure lldpd "
                            f"with 'configure lldp portidsubtype ifname'")


def _far_name(chassis, where: str, ifname: str) -> str:
    if isinstance(chassis, list):       # json0
        name = _text((chassis[0] if chassis and isinstance(chassis[0], dict) else {})
                     .get("name"))
    elif isinstance(chassis, dict):
        names = [key for key in chassis if key not in _CHASSIS_FIELDS]
        name = names[0] if len(names) == 1 and isinstance(chassis[names[0]], dict) else None
    else:
        raise _bad(where, f"interface {ifname}: chassis is not an object")
    if not name:
        raise InputError(where, f"interface {ifname}: the neighbour sends no system name; "
                                f"set it to the device's hostname (lldpcli configure system "
                                f"hostname NAME)")
    return name


def _interfaces(data, where: str) -> list[tuple[str, dict]]:
    """(interface name, its entry) of every neighbour, either JSON shape."""
    if not isinstance(data, dict) or "lldp" not in data:
        raise _bad(where, 'it has no top-level "lldp" key')
    lldp = data["lldp"]
    out = []
    if isinstance(lldp, list):                       # json0: [{"interface": [{name...}]}]
        for block in lldp:
            if not isinstance(block, dict):
                raise _bad(where, '"lldp" holds a non-object')
            for entry in block.get("interface", []):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise _bad(where, "an interface without a name")
                out.append((entry["name"], entry))
        return out
    if not isinstance(lldp, dict):
        raise _bad(where, '"lldp" is neither an object nor a list')
    interfaces = lldp.get("interface", {})
    entries = interfaces if isinstance(interfaces, list) else [interfaces]
    for entry in entries:
        if not isinstance(entry, dict):
            raise _bad(where, '"interface" holds a non-object')
        for name, body in entry.items():
            if not isinstance(body, dict):
                raise _bad(where, f"interface {name} is not an object")
            out.append((name, body))
    return out


def parse_neighbours(data, device: str, where: str) -> list[Sighting]:
    """The sightings in one parsed neighbour table of ``device``.

    >>> one = {"lldp": {"interface": {"swp1": {"chassis": {"h0": {"id": {}}},
    ...        "port": {"id": {"type": "ifname", "value": "nic0p0"}}}}}}
    >>> parse_neighbours(one, "tor0", "tor0.json")[0].far_port
    'nic0p0'
    >>> many = {"lldp": {"interface": [{"swp1": one["lldp"]["interface"]["swp1"]},
    ...         {"swp2": {"chassis": {"h1": {}}, "port": {"id": {"type": "mac",
    ...          "value": "02:00:00:00:00:01"}, "descr": "nic0p1"}}}]}}
    >>> [(s.port, s.far_device, s.far_port) for s in parse_neighbours(many, "tor0", "x")]
    [('swp1', 'h0', 'nic0p0'), ('swp2', 'h1', 'nic0p1')]
    >>> parse_neighbours({"lldp": {}}, "tor0", "x")
    []
    """
    out = []
    for ifname, entry in _interfaces(data, where):
        far = _far_name(entry.get("chassis"), where, ifname)
        out.append(Sighting(device, ifname, far, _far_port(entry.get("port"), where, ifname),
                            where))
    return out


def read_neighbour_tables(folder: str | Path, devices: set[str],
                          field: str = "--lldp") -> tuple[list[Sighting], set[str]]:
    """Every sighting in ``folder``'s ``DEVICE.json`` files, and the devices that reported.

    Raises InputError naming the file when it is not lldpd's JSON, when ``DEVICE`` or a
    neighbour's system name is not one of ``devices`` (the plan's), and naming ``field``
    when the folder holds no ``.json`` file.
    """
    root = Path(folder)
    if not root.is_dir():
        raise InputError(field, f"{folder} is not a folder of DEVICE.json neighbour tables")
    files = sorted(root.glob("*.json"))
    if not files:
        raise InputError(field, f"{folder} holds no DEVICE.json neighbour table")
    sightings: list[Sighting] = []
    reported: set[str] = set()
    for path in files:
        where = str(path)
        device = path.stem
        if device not in devices:
            raise InputError(where, f"device {device!r} is not in the plan (a file is named "
                                    f"by the device's hostname, e.g. "
                                    f"{min(devices) if devices else 'pod0-seg0-host0'}.json)")
        try:
            data = json.loads(read_user_text(path, where, "JSON file"))
        except json.JSONDecodeError as exc:
            raise _bad(where, f"not valid JSON ({exc.msg}, line {exc.lineno})") from None
        found = parse_neighbours(data, device, where)
        for s in found:
            if s.far_device not in devices:
                raise InputError(where, f"interface {s.port}: neighbour {s.far_device!r} is "
                                        f"not a device of the plan")
        sightings += found
        reported.add(device)
    return sightings, reported


def neighbour_table(entries: list[tuple[str, str, str]]) -> dict:
    """lldpcli's ``-f json`` output for a device whose ports ``entries`` = (port, far device,
    far port) each see one neighbour (the shapes of the module docstring).

    >>> neighbour_table([("swp1", "h0", "nic0p0")])["lldp"]["interface"]["swp1"]["port"]
    {'id': {'type': 'ifname', 'value': 'nic0p0'}, 'descr': 'nic0p0'}
    """
    shaped = [{port: {"via": "LLDP", "chassis": {device: {}},
                      "port": {"id": {"type": "ifname", "value": far}, "descr": far}}}
              for port, device, far in entries]
    if not shaped:
        return {"lldp": {}}
    return {"lldp": {"interface": shaped[0] if len(shaped) == 1 else shaped}}


def write_tables(folder: str | Path, cables) -> list[Path]:
    """Write ``DEVICE.json`` for every device of ``cables`` (pairs of (device, port) ends):
    what lldpd would print on a fabric cabled so (e.g. :meth:`CablingPlan.built
    <hpnsim.wiring.plan.CablingPlan.built>`)."""
    seen: dict[str, list] = {}
    for (ad, ap), (bd, bp) in cables:
        seen.setdefault(ad, []).append((ap, bd, bp))
        seen.setdefault(bd, []).append((bp, ad, ap))
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for device in sorted(seen):
        path = root / f"{device}.json"
        path.write_text(json.dumps(neighbour_table(sorted(seen[device])), indent=1) + "\n",
                        encoding="utf-8")
        written.append(path)
    return written
