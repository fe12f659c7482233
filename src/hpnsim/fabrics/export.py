"""Write a fabric as JSON (round-trips), GraphML, or SimAI's topology text.

SimAI (astra-sim-alibabacloud) topology text: a header
``node_num gpus_per_server nvswitch_num switch_num link_num gpu_type``, one line with the
ids of every switch (NVSwitches first, then network switches), then one line per cable
``src dst bandwidth latency error_rate``. SimAI has no NIC node: GPU ``g`` is node ``g`` and
its NIC ports become GPU-ToR links; PCIe links are dropped. Bandwidths are per direction.
SimAI simulates the training network only: a frontend network is left out of its export.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import _NODE_FIELDS, BACKEND, SWITCH_KINDS, Fabric, LinkKind, NodeKind

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
        "nodes": {name: getattr(fabric, name).tolist() for name in _NODE_FIELDS},
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


def to_simai(fabric: Fabric, gpu_type: str = "H800", error_rate: float = 0.0) -> str:
    """SimAI topology text (see the module docstring).

    >>> from hpnsim.fabrics import hpn7
    >>> lines = to_simai(hpn7(segments=1, hosts_per_segment=2, backup_hosts=0,
    ...                       tor_uplinks=2, aggs_per_plane=2)).splitlines()
    >>> lines[0]
    '38 8 2 22 80 H800'
    >>> lines[2]
    '0 16 1600Gbps 0.0005ms 0'
    """
    kind = fabric.node_kind
    nvswitch = np.flatnonzero(kind == NodeKind.NVSWITCH)
    switches = np.flatnonzero(np.isin(kind, list(SWITCH_KINDS))
                              & (fabric.node_network == BACKEND))
    simai_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    simai_id[fabric.gpu_node] = np.arange(fabric.n_gpus)
    simai_id[fabric.gpu_nic] = np.arange(fabric.n_gpus)  # the NIC merges into its GPU
    order = np.concatenate([nvswitch, switches])
    simai_id[order] = fabric.n_gpus + np.arange(len(order))
    cable = np.arange(0, fabric.n_links, 2)  # builders emit cables as (l, l ^ 1) pairs
    cable = cable[(fabric.link_kind[cable] != LinkKind.PCIE)
                  & (fabric.link_network[cable] == BACKEND)]
    src, dst = simai_id[fabric.link_src[cable]], simai_id[fabric.link_dst[cable]]
    if (src < 0).any() or (dst < 0).any():
        raise InputError("format", "simai export needs every link to join GPUs/NICs/switches")
    gbps = fabric.link_capacity[cable] * 8 / 1e9
    ms = fabric.link_latency[cable] * 1e3
    header = (f"{fabric.n_gpus + len(order)} {fabric.gpus_per_host} {len(nvswitch)} "
              f"{len(order)} {len(cable)} {gpu_type}")
    body = [f"{s} {d} {b:g}Gbps {m:g}ms {error_rate:g}"
            for s, d, b, m in zip(src.tolist(), dst.tolist(), gbps.tolist(), ms.tolist(),
                                  strict=True)]
    return "\n".join([header, " ".join(map(str, simai_id[order].tolist())), *body]) + "\n"


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
