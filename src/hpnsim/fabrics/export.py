"""Write a fabric as JSON (round-trips), GraphML, or SimAI's topology text.

SimAI (astra-sim-alibabacloud, ns-3 backend) topology text, as its generator
``astra-sim-alibabacloud/inputs/topo/gen_Topo_Template.py`` writes it and its ns-3 frontend
(``network_frontend/ns3/common.h``, ``AstraSimNetwork.cc``) reads it:

- header ``node_num gpus_per_server nvswitch_num switch_num link_num gpu_type``: ``node_num``
  counts every node (GPUs, NVSwitches, network switches); ``switch_num`` counts the network
  switches only (ToR/Agg/Core), *not* the NVSwitches: ns-3 reads ``nvswitch_num`` ids, then
  ``switch_num`` more, and takes ``node_num - nvswitch_num - switch_num`` as the GPU count;
- one line with the switch ids: NVSwitches first (host order), then the network switches by
  tier (ToRs, Aggs, Cores), each tier by plane/side, pod, segment, rail, index -- the
  generator's order (all first-side ASWs, then all second-side ASWs, then the PSWs);
- one line per cable ``src dst bandwidth latency error_rate`` (``400Gbps``, ``0.0005ms``,
  per direction, the lower id first), GPU cables first by GPU (its NVSwitch, then its NIC
  ports), then switch-switch cables, sorted by ``(src, dst)`` as the generator emits them.

GPU ``g`` is node ``g`` (GPUs host-major) and NVSwitch ``h`` is node ``n_gpus + h``: SimAI maps
GPU ``i`` to NVSwitch ``gpu_num + i // gpus_per_server`` (``AstraSimNetwork.cc``), so a host
has exactly one NVSwitch (or none when it has one GPU). SimAI has no NIC node: a NIC's ports
become GPU-ToR cables; PCIe links are dropped. SimAI simulates the training network only: a
frontend network is left out of its export.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.columns import BACKEND, NODE_FIELDS, SWITCH_KINDS, LinkKind, NodeKind
from hpnsim.fabrics.fabric import Fabric

FORMATS = ("json", "graphml", "simai")
_ATTRS = ("tier", "pod", "segment", "rail", "plane", "host", "network")
_LINK_FIELDS = ("link_src", "link_dst", "link_capacity", "link_latency", "link_kind",
                "link_port")


def to_json(fabric: Fabric) -> dict:
    """Plain-data form of a fabric (arrays as lists); :func:`from_json` reads it back.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> g = from_json(json.loads(json.dumps(to_json(f))))
    >>> bool((g.link_dst == f.link_dst).all()), g.n_gpus
    (True, 16)
    """
    meta = {k: v for k, v in fabric.meta.items()}
    return {
        "format": "hpnsim-fabric/1", "meta": meta,
        "nodes": {name: getattr(fabric, name).tolist() for name in NODE_FIELDS},
        "links": {name: getattr(fabric, name).tolist() for name in _LINK_FIELDS},
        "gpu_node": fabric.gpu_node.tolist(), "gpu_nic": fabric.gpu_nic.tolist(),
    }


def from_json(data: dict) -> Fabric:
    """Fabric from :func:`to_json` output (already parsed)."""
    if data.get("format") != "hpnsim-fabric/1":
        raise InputError("format", "not an hpnsim fabric JSON (format hpnsim-fabric/1)")
    nodes = {k: np.asarray(v) for k, v in data["nodes"].items()}
    links = {k: np.asarray(v) for k, v in data["links"].items()}
    return Fabric(nodes, links, np.asarray(data["gpu_node"]), np.asarray(data["gpu_nic"]),
                  data.get("meta"))


def to_graphml(fabric: Fabric) -> str:
    """GraphML text: one node per node (with its attributes and name), one edge per link.

    >>> from hpnsim.fabrics import fat_tree
    >>> text = to_graphml(fat_tree(2))
    >>> text.count("<node "), text.count("<edge ")
    (9, 16)
    """
    keys = [("kind", "node", "string"), ("name", "node", "string")]
    keys += [(f, "node", "int") for f in _ATTRS]
    keys += [("capacity_Bps", "edge", "double"), ("latency_s", "edge", "double"),
             ("link_kind", "edge", "string"), ("port", "edge", "int")]
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">']
    out += [f'<key id="{k}" for="{target}" attr.name="{k}" attr.type="{t}"/>'
            for k, target, t in keys]
    out.append('<graph id="fabric" edgedefault="directed">')
    kinds = [k.name.lower() for k in NodeKind]
    attrs = [getattr(fabric, f"node_{f}").tolist() for f in _ATTRS]
    for i, kind in enumerate(fabric.node_kind.tolist()):
        data = "".join(f'<data key="{n}">{a[i]}</data>' for n, a in zip(_ATTRS, attrs, strict=True))
        out.append(f'<node id="n{i}"><data key="kind">{kinds[kind]}</data>'
                   f'<data key="name">{escape(fabric.node_name(i))}</data>{data}</node>')
    link_kinds = [k.name.lower() for k in LinkKind]
    for i, (s, d, c, lat, k, p) in enumerate(zip(
            fabric.link_src.tolist(), fabric.link_dst.tolist(), fabric.link_capacity.tolist(),
            fabric.link_latency.tolist(), fabric.link_kind.tolist(), fabric.link_port.tolist(),
            strict=True)):
        out.append(f'<edge id="e{i}" source="n{s}" target="n{d}">'
                   f'<data key="capacity_Bps">{c!r}</data><data key="latency_s">{lat!r}</data>'
                   f'<data key="link_kind">{link_kinds[k]}</data><data key="port">{p}</data>'
                   f'</edge>')
    out += ["</graph>", "</graphml>", ""]
    return "\n".join(out)


#: GPU names SimAI's ns-3 frontend knows (common.h maps any other name to GPUType::NONE)
SIMAI_GPU_TYPES = ("A100", "A800", "H100", "H800")


def _plain(x: float) -> str:
    """A decimal without exponent: ns-3's DataRate parser stops at the first char not in
    ``0123456789.``, so ``1e+03Gbps`` would not load."""
    return np.format_float_positional(x, precision=12, trim="-")


def _simai_ids(fabric: Fabric) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SimAI id per fabric node (-1: not exported), NVSwitch nodes and network switch nodes,
    each in SimAI's order."""
    kind = fabric.node_kind
    backend = fabric.node_network == BACKEND
    nvswitch = np.flatnonzero((kind == NodeKind.NVSWITCH) & backend)
    nvswitch = nvswitch[np.argsort(fabric.node_host[nvswitch], kind="stable")]
    gpu_host = fabric.node_host[fabric.gpu_node]
    hosts = np.unique(gpu_host)
    per_host = fabric.gpus_per_host
    if (np.diff(gpu_host) < 0).any() or (np.bincount(np.searchsorted(hosts, gpu_host))
                                         != per_host).any():
        raise InputError("format", "simai export needs GPUs numbered host by host, "
                                   f"{per_host} per host")
    if np.unique(fabric.gpu_nic).size < fabric.n_gpus:
        raise InputError("format", "SimAI merges each GPU with its own NIC; this fabric's GPUs "
                                   "share NICs behind PCIe switches (gpus_per_pcie_switch > 1)")
    if len(nvswitch) == 0 and per_host > 1:
        raise InputError("format", f"simai export needs one NVSwitch per host; this fabric "
                                   f"has {per_host} GPUs per host and none")
    if len(nvswitch) and not np.array_equal(fabric.node_host[nvswitch], hosts):
        raise InputError("format", f"SimAI maps GPU i to NVSwitch n_gpus + i // "
                                   f"gpus_per_server: it needs exactly one NVSwitch per host; "
                                   f"this fabric has {len(nvswitch)} for {len(hosts)} hosts")
    switches = np.flatnonzero(np.isin(kind, list(SWITCH_KINDS)) & backend)
    switches = switches[np.lexsort((fabric.node_index[switches], fabric.node_rail[switches],
                                    fabric.node_segment[switches], fabric.node_pod[switches],
                                    fabric.node_plane[switches], kind[switches]))]
    simai_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    simai_id[fabric.gpu_node] = np.arange(fabric.n_gpus)
    simai_id[fabric.gpu_nic] = np.arange(fabric.n_gpus)  # the NIC merges into its GPU
    order = np.concatenate([nvswitch, switches])
    simai_id[order] = fabric.n_gpus + np.arange(len(order))
    return simai_id, nvswitch, switches


def to_simai(fabric: Fabric, gpu_type: str = "H800", error_rate: float = 0.0) -> str:
    """SimAI topology text that SimAI's ns-3 backend loads as is (see the module docstring).

    Parameters
    ----------
    fabric : the fabric; its backend network is exported.
    gpu_type : one of :data:`SIMAI_GPU_TYPES`.
    error_rate : per-packet error rate written on every cable (SimAI's generator: 0).

    Examples
    --------
    Two 8-GPU hosts, dual-plane HPN: 16 GPUs, 2 NVSwitches, 16 ToRs + 4 Aggs, 16 NVLink +
    32 access + 32 ToR-Agg cables:

    >>> from hpnsim.fabrics import hpn7
    >>> lines = to_simai(hpn7(segments=1, hosts_per_segment=2, backup_hosts=0,
    ...                       tor_uplinks=2, aggs_per_plane=2)).splitlines()
    >>> lines[0]
    '38 8 2 20 80 H800'
    >>> lines[2:5]
    ['0 16 1600Gbps 0.0005ms 0', '0 18 200Gbps 0.001ms 0', '0 26 200Gbps 0.001ms 0']
    """
    if gpu_type not in SIMAI_GPU_TYPES:
        raise InputError("gpu_type", f"SimAI knows {', '.join(SIMAI_GPU_TYPES)}, got "
                                     f"{gpu_type!r}")
    if not 0.0 <= error_rate <= 1.0:
        raise InputError("error_rate", f"a per-packet probability in [0, 1], got {error_rate}")
    simai_id, nvswitch, switches = _simai_ids(fabric)
    cable = np.arange(0, fabric.n_links, 2)  # builders emit cables as (l, l ^ 1) pairs
    cable = cable[(fabric.link_kind[cable] != LinkKind.PCIE)
                  & (fabric.link_network[cable] == BACKEND)]
    a, b = simai_id[fabric.link_src[cable]], simai_id[fabric.link_dst[cable]]
    if (a < 0).any() or (b < 0).any():
        raise InputError("format", "simai export needs every link to join GPUs/NICs/switches")
    src, dst = np.minimum(a, b), np.maximum(a, b)
    by = np.lexsort((dst, src))  # stable: parallel cables keep the builder's order
    cable, src, dst = cable[by], src[by], dst[by]
    gbps = fabric.link_capacity[cable] * 8 / 1e9
    ms = fabric.link_latency[cable] * 1e3
    n_switch = len(switches)
    header = (f"{fabric.n_gpus + len(nvswitch) + n_switch} {fabric.gpus_per_host} "
              f"{len(nvswitch)} {n_switch} {len(cable)} {gpu_type}")
    ids = range(fabric.n_gpus, fabric.n_gpus + len(nvswitch) + n_switch)
    err = _plain(error_rate)
    body = [f"{s} {d} {_plain(g)}Gbps {_plain(m)}ms {err}"
            for s, d, g, m in zip(src.tolist(), dst.tolist(), gbps.tolist(), ms.tolist(),
                                  strict=True)]
    return "\n".join([header, " ".join(map(str, ids)), *body]) + "\n"


def export(fabric: Fabric, path: str | Path, fmt: str = "json") -> Path:
    """Write ``fabric`` to ``path`` in ``fmt`` (json, graphml or simai); returns the path."""
    if fmt not in FORMATS:
        raise InputError("format", f"choose one of {', '.join(FORMATS)}, got {fmt!r}")
    path = Path(path)
    if fmt == "json":
        from hpnsim.jsonable import to_jsonable

        text = json.dumps(to_jsonable(to_json(fabric)))
    elif fmt == "graphml":
        text = to_graphml(fabric)
    else:
        text = to_simai(fabric)
    try:
        path.write_text(text)
    except OSError as error:
        raise InputError("export", f"cannot write {str(path)!r}: {error}") from None
    return path
