"""The GPU each fabric template's hosts hold, with where that comes from.

A fabric is built for a host generation: the HPN paper's hosts are 8 x H800 (NVLink
400 GB/s), NVIDIA's rail-optimized reference design is built of DGX H100s (NVLink 900 GB/s).
The GPU is a property of the fabric, not a flag to remember: the commands plan collectives
with NCCL's parameters for it (NVLS on Hopper) and give the hosts its NVLink, unless the
user names another GPU (``--gpu``, a scenario's ``gpu``). Only names live here (fabrics sit
below the GPU catalog, :mod:`hpnsim.workloads.gpus`); each builder's ``nvlink`` default is
this GPU's NVLink.

>>> host_gpu("hpn7").model
'h800'
>>> host_gpu("rail_optimized").model
'h100'
"""

from __future__ import annotations

from dataclasses import dataclass

from hpnsim.errors import InputError

__all__ = ["HOST_GPUS", "HostGpu", "host_gpu", "gpu_choice"]


@dataclass(frozen=True)
class HostGpu:
    """The GPU model of a template's hosts (a name of :mod:`hpnsim.workloads.gpus`) and
    the source it is taken from."""

    model: str
    source: str


_HPN = "Qian et al., Alibaba HPN, SIGCOMM'24 §9 and App. A: hosts of 8 x H800"
#: template -> the GPU of its hosts, each from the system the template reproduces
HOST_GPUS: dict[str, HostGpu] = {
    "hpn7": HostGpu("h800", _HPN),
    "dcn_plus": HostGpu("h800", f"{_HPN} (the DCN+ baseline ran on the same hosts)"),
    "rail_optimized": HostGpu("h100", "NVIDIA DGX SuperPOD reference architecture (DGX H100: "
                                      "8 x H100 SXM, NVLink 900 GB/s, one 400G NIC per GPU)"),
    "rail_only": HostGpu("h100", "Wang et al., Rail-only (arXiv 2307.12169): DGX H100 "
                                 "hosts, 8 x H100 on 900 GB/s NVLink"),
    "lingjun": HostGpu("h800", "assumed: the Lingjun trace (Crux, SIGCOMM'24) names no GPU "
                               "model; Alibaba's hosts of the same generation in the HPN "
                               "paper are 8 x H800"),
    "fat_tree": HostGpu("h800", "assumed: a k-ary fat-tree (Al-Fares et al.) has no GPU host "
                                "of its own; the HPN paper's H800 hosts, so it compares like "
                                "for like with hpn7 and dcn_plus"),
}


def host_gpu(template: str) -> HostGpu:
    """The GPU of ``template``'s hosts.

    >>> host_gpu("dcn_plus").model
    'h800'
    >>> host_gpu("torus")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: template: unknown fabric 'torus'; choose from hpn7, dcn_plus, rail_optimized, rail_only, lingjun, fat_tree
    """
    if template not in HOST_GPUS:
        raise InputError("template", f"unknown fabric {template!r}; choose from "
                                     f"{', '.join(HOST_GPUS)}")
    return HOST_GPUS[template]


def gpu_choice(template: str, given: str | None = None, by: str = "--gpu") -> tuple[str, str]:
    """``(gpu, where it came from)``: ``given`` (named by ``by``) if set, else the
    template's hosts; the second item is what a command's header prints.

    >>> gpu, source = gpu_choice("hpn7")
    >>> gpu, source[:36]
    ('h800', 'the hpn7 hosts (Qian et al., Alibaba')
    >>> gpu_choice("hpn7", "h100")
    ('h100', '--gpu')
    """
    if given:
        return str(given).lower(), by
    host = host_gpu(template)
    return host.model, f"the {template} hosts ({host.source})"
