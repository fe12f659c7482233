"""What a design starts from: the chip, the NICs, the scale-up domain, the allowed
oversubscription per tier, the power budget and the GPUs wanted; validated at the edge.

Defaults are HPN 7.0's (SIGCOMM 2024, section 3, 5 and 6.2, Figure 7): a 51.2T chip, one
2 x 200G NIC per GPU, 8-GPU H800 hosts on 8 rails, ToR-Agg links at 400G, a ToR at most
16:15 oversubscribed (128 x 200G active down, 60 x 400G up), an Agg 15:1 toward the core
(120 down, 8 up) and 8 backup hosts per 128 active ones.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from hpnsim.design.domains import ScaleUpDomain, domain_named
from hpnsim.errors import InputError
from hpnsim.fabrics.bom import UNIT_TABLE
from hpnsim.fabrics.chips import SwitchChip, check_port_speed, chip_named
from hpnsim.fabrics.hpn_sizing import AGG_CORE_RATIO, BACKUP_SHARE
from hpnsim.units import parse_bandwidth

#: HPN's ToR: 128 x 200G active down over 60 x 400G up
HPN_TOR_OVERSUB = Fraction(128 * 200, 60 * 400)
_POWER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*(w|kw|mw|gw)?\s*$", re.IGNORECASE)
_SCALE = {"w": 1.0, "kw": 1e3, "mw": 1e6, "gw": 1e9}


@dataclass(frozen=True)
class DesignInputs:
    """Validated inputs in SI units (bytes/s, watts)."""

    chip: SwitchChip
    nic_ports: int
    nic_speed: float
    uplink_speed: float
    domain: ScaleUpDomain
    rails: int
    tor_oversub: float
    agg_oversub: float
    backup_share: float
    gpu_power_w: float
    power_budget_w: float | None = None
    target_gpus: int | None = None

    @property
    def nic_bandwidth(self) -> float:
        """Bytes/s of one GPU's NIC (all its ports)."""
        return self.nic_ports * self.nic_speed


def parse_ratio(value, field: str) -> float:
    """``15``, ``"15:1"``, ``"16/15"`` -> a float >= 1.

    >>> parse_ratio("15:1", "agg-oversub"), round(parse_ratio("16/15", "tor-oversub"), 4)
    (15.0, 1.0667)
    >>> parse_ratio("0.5", "tor-oversub")
    Traceback (most recent call last):
    hpnsim.errors.InputError: tor-oversub: must be a ratio >= 1 (down:up, e.g. 15:1 or 16/15), got '0.5'
    """
    text = str(value).strip()
    try:
        if ":" in text:
            a, b = text.split(":", 1)
            ratio = float(a) / float(b)
        elif "/" in text:
            ratio = float(Fraction(text))
        else:
            ratio = float(text)
    except (ValueError, ZeroDivisionError):
        ratio = math.nan
    if not math.isfinite(ratio) or ratio < 1:
        raise InputError(field, f"must be a ratio >= 1 (down:up, e.g. 15:1 or 16/15), "
                                f"got {value!r}")
    return ratio


def parse_power(value, field: str = "power-budget") -> float:
    """``"18MW"`` -> 18e6 (watts).

    >>> parse_power("18MW"), parse_power("1036W")
    (18000000.0, 1036.0)
    """
    match = _POWER.match(str(value))
    if not match or float(match.group(1)) <= 0:
        raise InputError(field, f"must be a power > 0 such as 18MW or 1036W, got {value!r}")
    return float(match.group(1)) * _SCALE[(match.group(2) or "w").lower()]


def design_inputs(chip="51.2T", nic_ports=2, nic_speed="200G", uplink_speed=None,
                  domain="hgx-h800", nvlink=None, rails=None, tor_oversub=None,
                  agg_oversub=None, power_budget=None, gpus=None,
                  gpu_power=None) -> DesignInputs:
    """Validate string inputs (CLI, YAML) into :class:`DesignInputs`.

    ``uplink_speed`` defaults to twice the NIC port speed when the chip has such ports (HPN:
    200G ports, 400G ToR-Agg links), else the port speed. ``rails`` defaults to the largest
    divisor of the domain's GPUs up to 8 (HPN's 8 rails). ``gpu_power`` defaults to the BOM's
    per-GPU figure (the DGX H100 maximum, see :mod:`hpnsim.fabrics.bom`).

    >>> d = design_inputs()
    >>> d.chip.name, d.rails, d.uplink_speed * 8 / 1e9, round(d.tor_oversub, 4), d.agg_oversub
    ('51.2T', 8, 400.0, 1.0667, 15.0)
    >>> design_inputs(chip="25.6T", nic_speed="800G")
    Traceback (most recent call last):
    hpnsim.errors.InputError: nic-speed: a 25.6T chip (50G lanes, at most 256 ports) has ports of 100G, 200G, 400G, not 800G
    """
    switch = chip_named(chip, "chip")
    if isinstance(nic_ports, bool) or not isinstance(nic_ports, int) or not 1 <= nic_ports <= 8:
        raise InputError("nic-ports", f"must be an integer in 1..8, got {nic_ports!r}")
    port = check_port_speed(switch, parse_bandwidth(nic_speed, "nic-speed"), "nic-speed")
    if uplink_speed is None:
        up = 2 * port if switch.carries(2 * port) else port
    else:
        up = check_port_speed(switch, parse_bandwidth(uplink_speed, "uplink-speed"),
                              "uplink-speed")
    dom = domain_named(domain, nvlink, "domain")
    if rails is None:
        rails = max(r for r in range(1, min(8, dom.gpus) + 1) if dom.gpus % r == 0)
    if isinstance(rails, bool) or not isinstance(rails, int) or rails < 1 \
            or dom.gpus % rails:
        raise InputError("rails", f"must divide the domain's {dom.gpus} GPUs (a rail is one "
                                  f"GPU of each domain), got {rails!r}")
    target = None
    if gpus is not None:
        try:
            target = int(gpus)
        except (TypeError, ValueError):
            target = 0
        if target <= 0:
            raise InputError("gpus", f"must be a positive integer, got {gpus!r}")
    return DesignInputs(
        chip=switch, nic_ports=nic_ports, nic_speed=port, uplink_speed=up, domain=dom,
        rails=rails,
        tor_oversub=(float(HPN_TOR_OVERSUB) if tor_oversub is None
                     else parse_ratio(tor_oversub, "tor-oversub")),
        agg_oversub=(float(AGG_CORE_RATIO) if agg_oversub is None
                     else parse_ratio(agg_oversub, "agg-oversub")),
        backup_share=BACKUP_SHARE,
        gpu_power_w=(UNIT_TABLE["gpu"]["power_w"] if gpu_power is None
                     else parse_power(gpu_power, "gpu-power")),
        power_budget_w=None if power_budget is None else parse_power(power_budget),
        target_gpus=target)
