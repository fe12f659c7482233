"""What a :class:`~hpnsim.fabrics.fabric.Fabric` answers from its arrays: adjacency, link and
GPU lookups, node queries and names.

:class:`FabricLookups` gives the fabric its derived lookups, each computed on first use and
cached read-only (the arrays never change): the CSR adjacency (``out_ptr``, ``out_links``),
the vectorized link lookup ``link_ids``, the GPUs' NIC ports (``gpu_tor``,
``gpu_access_link``), ``nodes_where`` / ``switches`` queries, per-link network, and the
human-readable node and link names (``node_name``, ``link_name``, ``find_node``).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.columns import FRONTEND, NODE_FIELDS, SWITCH_KINDS, LinkKind, NodeKind
from hpnsim.fabrics.distances import frozen

__all__ = ["FabricLookups"]


class FabricLookups:
    """Derived lookups over a fabric's node and link arrays (a base of :class:`Fabric`).

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> f.node_name(f.neighbors(f.gpu_nic[0])[0]) == f.node_name(f.gpu_node[0])
    True
    """

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
                allowed = ", ".join(f.removeprefix("node_") for f in NODE_FIELDS)
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
