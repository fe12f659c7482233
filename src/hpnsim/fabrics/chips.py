"""Single-chip switch ASICs: capacity, SerDes lanes, the port speeds they break out into.

One vocabulary with the rest of the package: a chip is named by its capacity as ``--chip``
takes it (``"51.2T"``), and its power and price are the bill of materials' entries
``switch_<name>`` in :data:`hpnsim.fabrics.bom.UNIT_TABLE` (estimates; see that module), not
a second table.

Lanes and port limits (the vendors' product briefs for the chip generation named):

- ``25.6T``: Broadcom Tomahawk 4 (BCM56990), 512 x 50G PAM4 SerDes; 64 x 400G, 128 x 200G or
  256 x 100G ports (at most 256 ports).
- ``51.2T``: Broadcom Tomahawk 5 (BCM78900), 512 x 100G PAM4 SerDes; 64 x 800G, 128 x 400G
  or 256 x 200G ports (at most 256 ports). The HPN paper's ToR and Agg chip.
- ``102.4T``: Broadcom Tomahawk 6 (BCM78910), 512 x 200G PAM4 SerDes; 64 x 1.6T, 128 x 800G,
  256 x 400G or 512 x 200G ports (at most 512 ports). HPN's next generation.

A port takes 1, 2, 4 or 8 lanes (an 8-lane OSFP/QSFP-DD cage broken out), so a chip carries a
port speed when it is 1, 2, 4 or 8 lanes and the chip's capacity at that speed does not
exceed its port limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpnsim.errors import InputError
from hpnsim.units import format_bandwidth, parse_bandwidth

#: lanes one port may take (a cage of 8 lanes, broken out into 1, 2 or 4)
LANES_PER_PORT = (1, 2, 4, 8)


@dataclass(frozen=True)
class SwitchChip:
    """A single-chip switch: ``capacity`` and ``lane_speed`` in bytes/s."""

    name: str
    capacity: float
    lane_speed: float
    max_ports: int
    source: str

    @property
    def unit(self) -> str:
        """Its entry in the bill of materials' unit table."""
        return f"switch_{self.name}"

    def port_speeds(self) -> tuple[float, ...]:
        """Port speeds (bytes/s) the chip breaks out into, slowest first.

        >>> [format_bandwidth(s) for s in CHIPS["51.2T"].port_speeds()]
        ['200.0 Gbps', '400.0 Gbps', '800.0 Gbps']
        """
        return tuple(n * self.lane_speed for n in LANES_PER_PORT
                     if self.capacity / (n * self.lane_speed) <= self.max_ports + 1e-9)

    def carries(self, speed: float) -> bool:
        """Whether ``speed`` (bytes/s) is one of the chip's port speeds."""
        return any(abs(speed - s) <= 1e-9 * s for s in self.port_speeds())

    def radix(self, speed: float) -> int:
        """Ports of ``speed`` when the whole chip runs at it (128 x 400G on 51.2T)."""
        return int(self.capacity / speed + 1e-9)


CHIPS: dict[str, SwitchChip] = {
    "25.6T": SwitchChip("25.6T", 25.6e12 / 8, 50e9 / 8, 256, "Broadcom Tomahawk 4 (BCM56990)"),
    "51.2T": SwitchChip("51.2T", 51.2e12 / 8, 100e9 / 8, 256, "Broadcom Tomahawk 5 (BCM78900)"),
    "102.4T": SwitchChip("102.4T", 102.4e12 / 8, 200e9 / 8, 512,
                         "Broadcom Tomahawk 6 (BCM78910)"),
}


def chip_named(value, field: str = "chip") -> SwitchChip:
    """The catalog chip of a capacity as typed (``"51.2T"``, ``"51.2Tbps"``).

    >>> chip_named("102.4T").max_ports
    512
    >>> chip_named("12.8T")
    Traceback (most recent call last):
    hpnsim.errors.InputError: chip: no chip of 12.8 Tbps in the catalog; known: 25.6T, 51.2T, 102.4T
    """
    capacity = parse_bandwidth(value, field)
    for chip in CHIPS.values():
        if abs(chip.capacity - capacity) <= 1e-9 * capacity:
            return chip
    raise InputError(field, f"no chip of {format_bandwidth(capacity)} in the catalog; "
                            f"known: {', '.join(CHIPS)}")


def check_port_speed(chip: SwitchChip, speed: float, field: str) -> float:
    """Raise InputError naming ``field`` unless ``chip`` has ports of ``speed``.

    >>> check_port_speed(CHIPS["25.6T"], 100e9, "nic-speed")
    Traceback (most recent call last):
    hpnsim.errors.InputError: nic-speed: a 25.6T chip (50G lanes, at most 256 ports) has ports of 100G, 200G, 400G, not 800G
    """
    if not chip.carries(speed):
        allowed = ", ".join(f"{s * 8 / 1e9:g}G" for s in chip.port_speeds())
        raise InputError(field, f"a {chip.name} chip ({chip.lane_speed * 8 / 1e9:g}G lanes, at "
                                f"most {chip.max_ports} ports) has ports of {allowed}, not "
                                f"{speed * 8 / 1e9:g}G")
    return speed
