"""Scale-up domains: GPUs on one NVLink domain, and the NVLink bandwidth each GPU has in it.

The catalog (bidirectional NVLink bandwidth per GPU, as the vendor states it):

- ``hgx-h800``: 8 GPUs on NVSwitch, 400 GB/s (the HPN paper's host, section 3).
- ``hgx-h100``: 8 GPUs on NVSwitch, 900 GB/s (NVIDIA H100 SXM datasheet, NVLink 4).
- ``nvl72``: 72 Blackwell GPUs in one rack, 1.8 TB/s each (NVIDIA GB200 NVL72: fifth-generation
  NVLink, 130 TB/s across the 72 GPUs).
- ``gh200-256``: 256 Grace Hopper superchips on one NVLink Switch System, 900 GB/s each
  (NVIDIA DGX GH200). The largest NVLink domain sold: a larger one is refused.

The scale-out network sees a domain through its NICs: one per GPU, every GPU of the domain
can relay to any other at NVLink speed, so a rail-optimized network may use up to as many
rails as the domain has GPUs (HPN: 8 rails on an 8-GPU host).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpnsim.errors import InputError
from hpnsim.units import parse_bandwidth


@dataclass(frozen=True)
class ScaleUpDomain:
    """``gpus`` on one NVLink domain; ``nvlink`` bytes/s per GPU (bidirectional)."""

    name: str
    gpus: int
    nvlink: float
    source: str


DOMAINS: dict[str, ScaleUpDomain] = {
    "hgx-h800": ScaleUpDomain("hgx-h800", 8, 400e9, "HPN paper section 3 (H800 host)"),
    "hgx-h100": ScaleUpDomain("hgx-h100", 8, 900e9, "NVIDIA H100 SXM datasheet"),
    "nvl72": ScaleUpDomain("nvl72", 72, 1.8e12, "NVIDIA GB200 NVL72 (NVLink 5)"),
    "gh200-256": ScaleUpDomain("gh200-256", 256, 900e9, "NVIDIA DGX GH200"),
}
#: the largest NVLink domain sold (DGX GH200)
MAX_DOMAIN_GPUS = max(d.gpus for d in DOMAINS.values())


def domain_named(value, nvlink=None, field: str = "domain") -> ScaleUpDomain:
    """A catalog domain by name, or ``N`` GPUs (with ``nvlink``, else the NVLink bandwidth of
    the smallest catalog domain that holds ``N``).

    >>> domain_named("nvl72").gpus, domain_named("16").nvlink
    (72, 1800000000000.0)
    >>> domain_named("512")
    Traceback (most recent call last):
    hpnsim.errors.InputError: domain: 512 GPUs is larger than any NVLink domain sold (the largest, NVIDIA DGX GH200, joins 256); choose 1..256 or one of hgx-h800, hgx-h100, nvl72, gh200-256
    """
    text = str(value).strip().lower()
    if text in DOMAINS:
        domain = DOMAINS[text]
        if nvlink is None:
            return domain
        return ScaleUpDomain(domain.name, domain.gpus, parse_bandwidth(nvlink, "nvlink"),
                             "as given")
    names = ", ".join(DOMAINS)
    try:
        gpus = int(text)
    except ValueError:
        raise InputError(field, f"choose one of {names} or a GPU count, got {value!r}") from None
    if not 1 <= gpus <= MAX_DOMAIN_GPUS:
        raise InputError(field, f"{gpus} GPUs is {'larger than any' if gpus > 0 else 'not an'} "
                                f"NVLink domain sold (the largest, NVIDIA DGX GH200, joins "
                                f"{MAX_DOMAIN_GPUS}); choose 1..{MAX_DOMAIN_GPUS} or one of "
                                f"{names}")
    if nvlink is not None:
        return ScaleUpDomain(f"{gpus}-gpu", gpus, parse_bandwidth(nvlink, "nvlink"), "as given")
    holder = min((d for d in DOMAINS.values() if d.gpus >= gpus), key=lambda d: d.gpus)
    return ScaleUpDomain(f"{gpus}-gpu", gpus, holder.nvlink, f"NVLink of {holder.name}")
