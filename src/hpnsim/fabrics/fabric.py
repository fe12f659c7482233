"""The :class:`Fabric`: nodes and directed links as flat numpy arrays, with derived lookups.

Layout (docs/design.md): nodes carry ``node_kind`` (:class:`NodeKind`), ``node_tier``
(0 inside a host, 1 ToR, 2 Agg, 3 Core), ``node_pod``, ``node_segment``, ``node_rail``,
``node_plane``, ``node_host`` and ``node_index`` (a position that tells apart nodes whose
other attributes agree, e.g. Agg 17 of plane 0), -1 where an attribute does not apply, and
``node_network`` (:data:`BACKEND` or :data:`FRONTEND`; frontend names start with ``fe/``).
Links are directed (a cable is two links): ``link_src``, ``link_dst``, ``link_capacity``
(bytes/s), ``link_latency`` (s), ``link_kind`` (:class:`LinkKind`), ``link_port`` (the NIC
port of an ACCESS link, else -1). Builders emit every cable as two consecutive links, so the
reverse of link ``l`` is ``l ^ 1``.

A built Fabric is immutable: every array (and every derived array cached on first use:
adjacency, link lookup, GPU ports, switch distances) is read-only, so caches keyed on a
fabric (routing tables, collective plans) can never go stale. To change a fabric, build a
new one (:meth:`Fabric.replace`, :meth:`Fabric.with_link_capacity`); what changes during a
run (links down, degraded capacity) lives in :class:`hpnsim.fabrics.state.FabricState`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import IntEnum
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.distances import UNREACHABLE, SwitchDistances, frozen

__all__ = ["BACKEND", "FRONTEND", "UNREACHABLE", "Fabric", "LinkKind", "NodeKind", "frozen"]


class NodeKind(IntEnum):
    """What a node is."""

    GPU = 0
    NVSWITCH = 1
    NIC = 2
    TOR = 3
    AGG = 4
    CORE = 5
    HOST = 6
    STORAGE = 7
    PCIE_SWITCH = 8   # a host's PCIe switch joining GPUs to a NIC they share (opt-in)


#: ``node_network`` values: the training (backend) network and the separate frontend network
BACKEND, FRONTEND = 0, 1


class LinkKind(IntEnum):
    """What a directed link is. PEER is the ToR-ToR link of a stacked dual-ToR pair."""

    NVLINK = 0
    PCIE = 1
    ACCESS = 2
    UPLINK = 3
    CORE = 4
    PEER = 5


SWITCH_KINDS = (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE)

_NODE_FIELDS = ("node_kind", "node_tier", "node_pod", "node_segment", "node_rail",
                "node_plane", "node_host", "node_index", "node_network")
_LINK_FIELDS = ("link_src", "link_dst", "link_capacity", "link_latency", "link_kind",
                "link_port")
_COLUMNS = frozenset((*_NODE_FIELDS, *_LINK_FIELDS, "gpu_node", "gpu_nic"))
_DTYPES = {"node_kind": np.int8, "node_tier": np.int8, "node_network": np.int8, "link_src": np.int32,
           "link_dst": np.int32, "link_capacity": np.float64, "link_latency": np.float64,
           "link_kind": np.int8, "link_port": np.int8}
_NAME_RE = re.compile(r"[a-z]+|-?\d+")


def capacity_values(bytes_per_s, n: int) -> np.ndarray:
    """``n`` link capacities (bytes/s) from one number, one per link, or a unit string
    (``"100G"``); InputError unless finite and >= 0.

    >>> capacity_values("100G", 2).tolist()
    [12500000000.0, 12500000000.0]
    """
    from hpnsim.units import parse_bandwidth

    if isinstance(bytes_per_s, str):
        bytes_per_s = parse_bandwidth(bytes_per_s, "bytes_per_s")
    try:
        value = np.broadcast_to(np.asarray(bytes_per_s, dtype=np.float64), (n,))
    except (TypeError, ValueError) as exc:
        raise InputError("bytes_per_s", f"needs a number or one per link ({n}), "
                                        f"got {bytes_per_s!r:.60}") from exc
    if not np.all(np.isfinite(value) & (value >= 0)):
        raise InputError("bytes_per_s", f"must be finite and >= 0, got {bytes_per_s!r:.60}")
    return value


class Fabric(SwitchDistances):
    """Array-backed network: nodes, directed links, GPU indices and derived lookups.

    Builders (:func:`hpnsim.fabrics.hpn7` and friends) create fabrics; ``meta`` holds
    what arrays cannot (template, parameters, switch port plans, backup hosts). Like the
    arrays, ``meta`` is read-only once built: a fabric with other entries is
    ``fabric.replace(meta={**fabric.meta, ...})``.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> f.n_gpus, f.node_name(f.gpu_node[9])
    (16, 'pod0/seg0/host1/gpu-r1')
    >>> f.node_name(f.gpu_tor[9, 1])
    'pod0/seg0/tor-r1-p1'
    >>> bool(f.link_ids([f.gpu_nic[9]], [f.gpu_tor[9, 1]])[0] == f.gpu_access_link[9, 1])
    True
    >>> f.meta["template"] = "mine"
    Traceback (most recent call last):
    ...
    TypeError: 'mappingproxy' object does not support item assignment
    """

    def __init__(self, nodes: dict[str, np.ndarray], links: dict[str, np.ndarray],
                 gpu_node: np.ndarray, gpu_nic: np.ndarray, meta: dict[str, Any] | None = None):
        n_nodes = len(nodes["node_kind"])
        for name in _NODE_FIELDS:
            column = nodes.get(name)
            if column is None and name == "node_network":  # fabrics without a frontend
                column = np.zeros(n_nodes, dtype=np.int8)
            array = np.ascontiguousarray(column, dtype=_DTYPES.get(name, np.int32))
            if array.shape != (n_nodes,):
                raise ValueError(f"{name} must have shape ({n_nodes},), got {array.shape}")
            setattr(self, name, frozen(array))
        n_links = len(links["link_src"])
        for name in _LINK_FIELDS:
            array = np.ascontiguousarray(links[name], dtype=_DTYPES[name])
            if array.shape != (n_links,):
                raise ValueError(f"{name} must have shape ({n_links},), got {array.shape}")
            setattr(self, name, frozen(array))
        self.gpu_node = frozen(np.ascontiguousarray(gpu_node, dtype=np.int32))
        self.gpu_nic = frozen(np.ascontiguousarray(gpu_nic, dtype=np.int32))
        self._meta = MappingProxyType(dict(meta or {}))
        self._built = True

    @property
    def meta(self) -> Mapping[str, Any]:
        """What arrays cannot hold (template, options, port plans ...), read-only."""
        return self._meta

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_meta"] = dict(self._meta)   # a mappingproxy does not pickle
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _meta=MappingProxyType(state["_meta"]))

    def __setattr__(self, name: str, value) -> None:
        if name in _COLUMNS and self.__dict__.get("_built"):
            raise AttributeError(f"Fabric.{name} is read-only: build a new fabric with "
                                 f"fabric.replace({name}=...)")
        object.__setattr__(self, name, value)

    # ------------------------------------------------------- new fabrics
    def replace(self, **columns) -> Fabric:
        """A new Fabric with some arrays replaced (the others are shared, read-only).

        Keys: any node or link column (``link_capacity``, ``node_plane``...), ``gpu_node``,
        ``gpu_nic`` or ``meta``. Derived lookups are rebuilt on first use by the new fabric.

        >>> from hpnsim.fabrics import fat_tree
        >>> f = fat_tree(4)
        >>> g = f.replace(link_latency=np.zeros(f.n_links))
        >>> float(g.link_latency.max()), np.shares_memory(g.link_src, f.link_src)
        (0.0, True)
        """
        known = {*_NODE_FIELDS, *_LINK_FIELDS, "gpu_node", "gpu_nic", "meta"}
        unknown = sorted(set(columns) - known)
        if unknown:
            raise InputError(unknown[0],
                             f"not a Fabric column; use one of {', '.join(sorted(known))}")
        pick = lambda name: columns[name] if name in columns else getattr(self, name)  # noqa: E731
        return Fabric({name: pick(name) for name in _NODE_FIELDS},
                      {name: pick(name) for name in _LINK_FIELDS},
                      pick("gpu_node"), pick("gpu_nic"), pick("meta"))

    def with_link_capacity(self, links, bytes_per_s) -> Fabric:
        """A new Fabric whose selected links have capacity ``bytes_per_s`` (others unchanged).

        Parameters
        ----------
        links : ``None`` (every link), a :class:`LinkKind` (every link of that kind), a
            boolean mask of ``n_links``, or link ids.
        bytes_per_s : a number >= 0, a unit string (``"900GB/s"``, ``"400G"``), or one
            value per selected link.

        Examples
        --------
        >>> from hpnsim.fabrics import hpn7
        >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
        ...          aggs_per_plane=2)
        >>> g = f.with_link_capacity(LinkKind.NVLINK, "450GB/s")
        >>> float(g.link_capacity[g.link_kind == LinkKind.NVLINK].max()) / 1e9
        450.0
        >>> bool((g.link_capacity[g.link_kind != LinkKind.NVLINK]
        ...       == f.link_capacity[f.link_kind != LinkKind.NVLINK]).all())
        True
        """
        if links is None:
            ids = np.arange(self.n_links)
        elif isinstance(links, LinkKind):
            ids = np.flatnonzero(self.link_kind == links)
        else:
            ids = self.check_link_ids(links)
        capacity = self.link_capacity.copy()
        capacity[ids] = capacity_values(bytes_per_s, ids.size)
        return self.replace(link_capacity=capacity)

    def check_link_ids(self, links) -> np.ndarray:
        """Link ids (int64) from ids or a boolean mask of ``n_links``; InputError if unknown.

        >>> from hpnsim.fabrics import fat_tree
        >>> f = fat_tree(4)
        >>> f.check_link_ids(f.link_kind == LinkKind.CORE).size, f.check_link_ids(3).tolist()
        (32, [3])
        """
        array = np.atleast_1d(np.asarray(links))
        if array.dtype == bool:
            if array.shape != (self.n_links,):
                raise InputError("links", f"a mask needs one entry per link ({self.n_links}), "
                                          f"got shape {array.shape}")
            return np.flatnonzero(array)
        if array.size == 0:
            return np.zeros(0, dtype=np.int64)
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
            raise InputError("links", f"must be link ids or a boolean mask, got {links!r:.60}")
        bad = (array < 0) | (array >= self.n_links)
        if bad.any():
            raise InputError("links", f"unknown link id {int(array[bad][0])} "
                                      f"(the fabric has links 0..{self.n_links - 1})")
        return array.astype(np.int64)

    # ------------------------------------------------------------------ sizes
    @property
    def n_nodes(self) -> int:
        return len(self.node_kind)

    @property
    def n_links(self) -> int:
        return len(self.link_src)

    @property
    def n_gpus(self) -> int:
        return len(self.gpu_node)

    @property
    def gpus_per_host(self) -> int:
        return int(self.meta.get("gpus_per_host", 8))

    @property
    def n_hosts(self) -> int:
        return self.n_gpus // self.gpus_per_host

    def __repr__(self) -> str:
        template = self.meta.get("template", "custom")
        return (f"Fabric({template}: {self.n_gpus} GPUs, {self.n_nodes} nodes, "
                f"{self.n_links} links)")

    # ------------------------------------------------------------ adjacency
    @cached_property
    def _out_csr(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.link_src, kind="stable").astype(np.int32)
        counts = np.bincount(self.link_src, minlength=self.n_nodes)
        ptr = np.zeros(self.n_nodes + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        return frozen(ptr), frozen(order)

    @property
    def out_ptr(self) -> np.ndarray:
        """CSR row pointer: the links leaving node ``i`` are ``out_links[out_ptr[i]:out_ptr[i+1]]``."""
        return self._out_csr[0]

    @property
    def out_links(self) -> np.ndarray:
        """Link ids grouped by source node (ascending link id within a node)."""
        return self._out_csr[1]

    def out_of(self, node: int) -> np.ndarray:
        """Link ids leaving ``node``."""
        return self.out_links[self.out_ptr[node]:self.out_ptr[node + 1]]

    def neighbors(self, node: int) -> np.ndarray:
        """Node ids one link away from ``node`` (with repeats for parallel links)."""
        return self.link_dst[self.out_of(node)]

    @cached_property
    def _link_keys(self) -> tuple[np.ndarray, np.ndarray]:
        keys = self.link_src.astype(np.int64) * self.n_nodes + self.link_dst
        order = np.argsort(keys, kind="stable")
        return frozen(keys[order]), frozen(order.astype(np.int32))

    def link_ids(self, src_nodes, dst_nodes) -> np.ndarray:
        """Vectorized link lookup: the id of a link ``src -> dst`` per pair, -1 where none.

        Between nodes joined by parallel links the lowest link id is returned.

        >>> from hpnsim.fabrics import fat_tree
        >>> f = fat_tree(4)
        >>> f.link_ids([f.gpu_nic[0], 0], [f.gpu_node[0], 1]).tolist()
        [1, -1]
        """
        src = np.asarray(src_nodes, dtype=np.int64)
        dst = np.asarray(dst_nodes, dtype=np.int64)
        sorted_keys, order = self._link_keys
        if len(sorted_keys) == 0:
            return np.full(np.broadcast(src, dst).shape, -1, dtype=np.int32)
        keys = src * self.n_nodes + dst
        pos = np.searchsorted(sorted_keys, keys)
        pos_clipped = np.minimum(pos, len(sorted_keys) - 1)
        found = (sorted_keys[pos_clipped] == keys) & (src >= 0) & (dst >= 0)
        return np.where(found, order[pos_clipped], -1).astype(np.int32)

    # --------------------------------------------------------- GPU mapping
    @cached_property
    def _gpu_ports(self) -> tuple[np.ndarray, np.ndarray]:
        # by NIC row, then per GPU through gpu_nic: GPUs under one PCIe switch share a NIC
        nic_row = np.full(self.n_nodes, -1, dtype=np.int64)
        nics = np.unique(self.gpu_nic)
        nic_row[nics] = np.arange(nics.size)
        access = np.flatnonzero((self.link_kind == LinkKind.ACCESS)
                                & (nic_row[self.link_src] >= 0))  # not frontend NICs
        ports = max(int(self.link_port[access].max()) + 1, 1) if len(access) else 1
        tor = np.full((nics.size, ports), -1, dtype=np.int32)
        link = np.full((nics.size, ports), -1, dtype=np.int32)
        row = nic_row[self.link_src[access]]
        port = self.link_port[access].astype(np.int64)
        tor[row, port] = self.link_dst[access]
        link[row, port] = access
        gpu_row = nic_row[self.gpu_nic]
        return frozen(tor[gpu_row]), frozen(link[gpu_row])

    @property
    def gpu_tor(self) -> np.ndarray:
        """``(n_gpus, ports)`` ToR node reached by each NIC port of each GPU (-1 if none)."""
        return self._gpu_ports[0]

    @property
    def gpu_access_link(self) -> np.ndarray:
        """``(n_gpus, ports)`` ACCESS link id NIC -> ToR per port (-1 if none); reverse is ``^ 1``."""
        return self._gpu_ports[1]

    @cached_property
    def ports_per_nic(self) -> int:
        """Number of NIC ports (columns of :attr:`gpu_tor`)."""
        return self.gpu_tor.shape[1]

    def gpu_of_node(self, nodes) -> np.ndarray:
        """GPU index of GPU nodes (-1 for other nodes).

        >>> from hpnsim.fabrics import fat_tree
        >>> f = fat_tree(4)
        >>> f.gpu_of_node(f.gpu_node[[3, 5]]).tolist()
        [3, 5]
        """
        lookup = np.full(self.n_nodes, -1, dtype=np.int32)
        lookup[self.gpu_node] = np.arange(self.n_gpus, dtype=np.int32)
        return lookup[np.asarray(nodes)]

    # --------------------------------------------------------------- queries
    def nodes_where(self, **attributes) -> np.ndarray:
        """Node ids whose attributes all match, e.g. ``nodes_where(kind=NodeKind.TOR, plane=0)``.

        Keys: ``kind``, ``tier``, ``pod``, ``segment``, ``rail``, ``plane``, ``host``, ``index``;
        a value may be a single value or a list of allowed values.

        >>> from hpnsim.fabrics import fat_tree
        >>> fat_tree(4).nodes_where(kind=NodeKind.CORE).size
        4
        """
        mask = np.ones(self.n_nodes, dtype=bool)
        for key, value in attributes.items():
            if value is None:
                continue
            column = getattr(self, f"node_{key}", None)
            if column is None or key in ("name",):
                allowed = ", ".join(f.removeprefix("node_") for f in _NODE_FIELDS)
                raise InputError(key, f"unknown node attribute; use one of {allowed}")
            mask &= np.isin(column, np.atleast_1d(np.asarray(value, dtype=np.int64)))
        return np.flatnonzero(mask).astype(np.int32)

    def switches(self, network: int | None = None) -> np.ndarray:
        """Node ids of all switches (ToR, Agg, Core), ascending; of one network if given."""
        return self.nodes_where(kind=list(SWITCH_KINDS), network=network)

    @cached_property
    def link_network(self) -> np.ndarray:
        """Per link, :data:`FRONTEND` if either end is a frontend node, else :data:`BACKEND`.

        In-host links from a GPU to its host's CPU (``HOST``) count as frontend: only
        frontend traffic (checkpoints, datasets) crosses them.

        >>> from hpnsim.fabrics import hpn7
        >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, frontend=True)
        >>> np.bincount(f.link_network).tolist(), f.has_frontend
        ([2048, 64], True)
        """
        return frozen(np.maximum(self.node_network[self.link_src],
                                 self.node_network[self.link_dst]))

    @property
    def has_frontend(self) -> bool:
        """Whether the fabric includes frontend nodes."""
        return bool((self.node_network == FRONTEND).any())

    # ------------------------------------------------------------------ names
    def node_name(self, node: int) -> str:
        """Human-readable name, e.g. ``pod0/seg3/tor-r5-p1`` or ``pod0/seg0/host17/gpu-r3``.

        Frontend nodes start with ``fe/``, e.g. ``fe/pod0/seg3/tor-p1-0``.
        """
        i = int(node)
        kind = NodeKind(int(self.node_kind[i]))
        parts = ["fe"] if self.node_network[i] == FRONTEND else []
        for attr, prefix in (("pod", "pod"), ("segment", "seg")):
            value = int(getattr(self, f"node_{attr}")[i])
            if value >= 0:
                parts.append(f"{prefix}{value}")
        host = int(self.node_host[i])
        if host >= 0 and kind not in SWITCH_KINDS:
            parts.append(f"host{host}")
        leaf = kind.name.lower()
        for attr, prefix in (("rail", "-r"), ("plane", "-p"), ("index", "-")):
            value = int(getattr(self, f"node_{attr}")[i])
            if value >= 0:
                leaf += f"{prefix}{value}"
        parts.append(leaf)
        return "/".join(parts)

    def link_name(self, link: int) -> str:
        """``src->dst`` with the NIC port for access links, e.g. ``.../nic-r0->.../tor-r0-p1[port1]``."""
        i = int(link)
        name = f"{self.node_name(self.link_src[i])}->{self.node_name(self.link_dst[i])}"
        port = int(self.link_port[i])
        return name + (f"[port{port}]" if port >= 0 else "")

    @cached_property
    def _names(self) -> dict[str, int]:
        return {self.node_name(i): i for i in range(self.n_nodes)}

    def find_node(self, name: str) -> int:
        """Node id of a name made by :meth:`node_name`; InputError if there is none.

        >>> from hpnsim.fabrics import fat_tree
        >>> f = fat_tree(4)
        >>> f.node_name(f.find_node("pod1/seg1/tor"))
        'pod1/seg1/tor'
        """
        node = self._names.get(name)
        if node is None:
            raise InputError("node", f"no node named {name!r} (e.g. {self.node_name(0)!r})")
        return node
