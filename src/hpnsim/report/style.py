"""How the report names and colours things, said once: the parts of an iteration, fabrics,
link kinds, the phrases every figure's subtitle is made of, and how a figure is saved.

Every figure and table module of :mod:`hpnsim.report` takes its words and colours from here,
so a part, a fabric or a link is called and coloured the same everywhere.
"""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import pyplot
from hpnsim.training.iteration import PARTS

__all__ = ["DPI", "EXPOSED", "FABRIC_COLORS", "FABRIC_NAMES", "LINK_WORDS", "NVLINK_HATCH", "PARTS",
           "PART_COLORS", "PART_LABELS", "fabric_colors", "gpu_label", "held_line",
           "job_shape", "link_kind", "plain", "run_nvlink", "save_figure", "size_label"]

#: what a reader calls each part of an iteration (:data:`PARTS`, the order they stack in)
PART_LABELS = {"compute": "compute", "tp": "exposed TP", "pp": "exposed PP",
               "dp": "exposed DP", "ep": "exposed EP", "bubble": "pipeline bubble",
               "optimizer": "optimizer", "straggler": "slowest GPU"}
PART_COLORS = {"compute": "#4c72b0", "tp": "#dd8452", "pp": "#937860", "dp": "#c44e52",
               "ep": "#8172b3", "bubble": "#bbbbbb", "optimizer": "#55a868",
               "straggler": "#da8bc3"}
#: the parts of an iteration that are communication not hidden behind compute (per dimension)
EXPOSED = tuple(p for p in PARTS if p not in ("compute", "bubble", "optimizer", "straggler"))

#: what a reader should call each template
FABRIC_NAMES = {"hpn7": "HPN 7.0 (2-tier, dual-plane)", "dcn_plus": "DCN+ (3-tier Clos)"}
#: one colour per fabric (or per line of a figure), in order of first appearance
FABRIC_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b")

#: busiest-link kinds as a reader knows them (LinkKind names, lower case)
LINK_WORDS = {"nvlink": "NVLink (in host)", "pcie": "PCIe (in host)",
              "access": "NIC-ToR link", "uplink": "ToR uplink", "core": "core link"}
#: the kind of a link from the node kinds at its ends (``Fabric.node_name`` leaves:
#: ``gpu-r0``, ``nvswitch``, ``nic-r0``, ``tor-r0-p1``, ``agg-p0-3``, ``core-2``)
_LINK_ENDS = {frozenset({"gpu", "nvswitch"}): "nvlink", frozenset({"gpu", "nic"}): "pcie",
              frozenset({"nic", "tor"}): "access", frozenset({"tor", "agg"}): "uplink",
              frozenset({"agg", "core"}): "core"}
#: hatch of bars whose busiest link is NVLink: the network is not what limits them
NVLINK_HATCH = "///"

#: resolution of the report's PNGs (the SVGs are resolution-free)
DPI = 110


def fabric_colors(fabrics) -> dict[str, str]:
    """One colour per fabric, in order of first appearance.

    >>> fabric_colors(["hpn7", "dcn_plus", "hpn7"])
    {'hpn7': '#1f77b4', 'dcn_plus': '#d62728'}
    """
    names = list(dict.fromkeys(fabrics))
    return {f: FABRIC_COLORS[i % len(FABRIC_COLORS)] for i, f in enumerate(names)}


def link_kind(link_name: str | None) -> str:
    """What a reader calls a link named by ``Fabric.link_name`` (``""`` when unknown).

    >>> link_kind("pod0/seg0/host0/gpu-r0->pod0/seg0/host0/nvswitch")
    'NVLink (in host)'
    >>> link_kind("pod0/seg1/tor-r3-p0->pod0/agg-p0-7"), link_kind(None)
    ('ToR uplink', '')
    """
    if not link_name or "->" not in link_name:
        return ""
    ends = [side.split("[")[0].rsplit("/", 1)[-1].split("-")[0]
            for side in link_name.split("->", 1)]
    kind = _LINK_ENDS.get(frozenset(ends))
    return LINK_WORDS[kind] if kind else ""


def plain(text) -> str:
    """``text`` as matplotlib draws it literally (``$`` would start mathtext).

    >>> plain("cost $5 and $6")
    'cost \\\\$5 and \\\\$6'
    """
    return str(text).replace("$", r"\$")


def size_label(size: float) -> str:
    """``1048576`` -> ``'1 MiB'``.

    >>> size_label(2**20), size_label(3 * 2**30), size_label(512)
    ('1 MiB', '3 GiB', '512 B')
    """
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def job_shape(job: dict) -> str:
    """``TP8 x PP2 x DP4`` (and ``EP`` when experts are split) of a job's dict.

    >>> job_shape({"tp": 8, "pp": 2, "dp": 4, "ep": 2})
    'TP8 x PP2 x DP4 EP2'
    """
    shape = " x ".join(f"{k.upper()}{job[k]}" for k in ("tp", "pp", "dp") if k in job)
    return shape + (f" EP{job['ep']}" if job.get("ep", 1) > 1 else "")


def run_nvlink(run: dict) -> str:
    """``NVLink <its option>`` when a ``results.json`` set the hosts' NVLink, else ``""``."""
    nvlink = (run.get("fabric", {}).get("options") or {}).get("nvlink")
    return f"NVLink {nvlink}" if nvlink else ""


def gpu_label(config: dict) -> str:
    """The demo's GPU and, when every fabric has the same hosts, their NVLink and NIC.

    >>> gpu_label({"gpu": "h800", "hosts": {"hpn7": {"nvlink_bandwidth": 4e11,
    ...                                              "nic_bandwidth": 5e10}}})
    'H800 (NVLink 400 GB/s, NIC 400 Gb/s per GPU)'
    """
    hosts = {(h["nvlink_bandwidth"], h["nic_bandwidth"])
             for h in config.get("hosts", {}).values()}
    gpu = str(config.get("gpu", "")).upper()
    if len(hosts) == 1:
        nvlink, nic = hosts.pop()
        gpu += f" (NVLink {nvlink / 1e9:g} GB/s, NIC {8 * nic / 1e9:g} Gb/s per GPU)"
    return gpu


def held_line(gpus: set, nvlink: str, routing: str, fabric: str) -> str:
    """The subtitle of a figure whose bars share GPUs, NVLink, routing and fabric.

    >>> held_line({"h800"}, "", "ecmp", "fabric hpn7")
    'Held fixed: GPU H800, routing ecmp, fabric hpn7.'
    """
    gpu = ", ".join(sorted(g.upper() for g in gpus if g))
    pieces = [p for p in (f"GPU {gpu}" if gpu else "", nvlink,
                          f"routing {routing}" if routing else "", fabric) if p]
    return "Held fixed: " + ", ".join(pieces) + "."


def save_figure(fig, folder: str | Path, stem: str, svg: bool = True) -> tuple[Path, Path | None]:
    """Write ``fig`` as ``stem.png`` and (unless ``svg`` is false) ``stem.svg`` in ``folder``
    and close it; the SVG's path is None when it was not written.

    >>> import tempfile
    >>> fig = pyplot().figure(figsize=(1, 1))
    >>> [p.suffix for p in save_figure(fig, tempfile.mkdtemp(), "x")]
    ['.png', '.svg']
    """
    folder = Path(folder)
    png, vector = folder / f"{stem}.png", folder / f"{stem}.svg" if svg else None
    fig.savefig(png, dpi=DPI)
    if vector is not None:
        fig.savefig(vector)
    pyplot().close(fig)
    return png, vector
