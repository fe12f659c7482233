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

This module holds the arrays, their checks and the ways to build a changed fabric; the
kinds and column names are in :mod:`hpnsim.fabrics.columns` (re-exported here), the lookups
derived from the arrays in :mod:`hpnsim.fabrics.lookups`, the switch distances in
:mod:`hpnsim.fabrics.distances`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.columns import (
    BACKEND,
    COLUMN_DTYPES,
    COLUMNS,
    FRONTEND,
    LINK_FIELDS,
    NODE_FIELDS,
    SWITCH_KINDS,  # noqa: F401  (kept importable from here)
    LinkKind,
    NodeKind,
)
from hpnsim.fabrics.distances import UNREACHABLE, SwitchDistances, frozen
from hpnsim.fabrics.lookups import FabricLookups

__all__ = ["BACKEND", "FRONTEND", "UNREACHABLE", "Fabric", "LinkKind", "NodeKind", "frozen"]


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


class Fabric(FabricLookups, SwitchDistances):
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
        for name in NODE_FIELDS:
            column = nodes.get(name)
            if column is None and name == "node_network":  # fabrics without a frontend
                column = np.zeros(n_nodes, dtype=np.int8)
            array = np.ascontiguousarray(column, dtype=COLUMN_DTYPES.get(name, np.int32))
            if array.shape != (n_nodes,):
                raise ValueError(f"{name} must have shape ({n_nodes},), got {array.shape}")
            setattr(self, name, frozen(array))
        n_links = len(links["link_src"])
        for name in LINK_FIELDS:
            array = np.ascontiguousarray(links[name], dtype=COLUMN_DTYPES[name])
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
        if name in COLUMNS and self.__dict__.get("_built"):
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
        known = {*NODE_FIELDS, *LINK_FIELDS, "gpu_node", "gpu_nic", "meta"}
        unknown = sorted(set(columns) - known)
        if unknown:
            raise InputError(unknown[0],
                             f"not a Fabric column; use one of {', '.join(sorted(known))}")
        pick = lambda name: columns[name] if name in columns else getattr(self, name)  # noqa: E731
        return Fabric({name: pick(name) for name in NODE_FIELDS},
                      {name: pick(name) for name in LINK_FIELDS},
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
