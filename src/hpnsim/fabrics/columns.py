"""The vocabulary of a :class:`~hpnsim.fabrics.fabric.Fabric`: node and link kinds, networks, columns.

Nodes carry ``node_kind`` (:class:`NodeKind`), ``node_tier`` (0 inside a host, 1 ToR, 2 Agg,
3 Core), ``node_pod``, ``node_segment``, ``node_rail``, ``node_plane``, ``node_host``,
``node_index`` and ``node_network`` (:data:`BACKEND` or :data:`FRONTEND`); links carry
``link_src``, ``link_dst``, ``link_capacity``, ``link_latency``, ``link_kind``
(:class:`LinkKind`) and ``link_port``. :data:`NODE_FIELDS`, :data:`LINK_FIELDS` and
:data:`COLUMN_DTYPES` name those arrays and their dtypes once, for the fabric and its exports.

>>> NodeKind(3).name, LinkKind.ACCESS.value
('TOR', 2)
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

__all__ = ["BACKEND", "COLUMNS", "COLUMN_DTYPES", "FRONTEND", "LINK_FIELDS", "NODE_FIELDS",
           "SWITCH_KINDS", "LinkKind", "NodeKind"]


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

#: the node arrays of a fabric, one entry per node
NODE_FIELDS = ("node_kind", "node_tier", "node_pod", "node_segment", "node_rail",
               "node_plane", "node_host", "node_index", "node_network")
#: the link arrays of a fabric, one entry per directed link
LINK_FIELDS = ("link_src", "link_dst", "link_capacity", "link_latency", "link_kind",
               "link_port")
#: every array a fabric holds (the read-only ones)
COLUMNS = frozenset((*NODE_FIELDS, *LINK_FIELDS, "gpu_node", "gpu_nic"))
#: dtype of each array (int32 where not named)
COLUMN_DTYPES = {"node_kind": np.int8, "node_tier": np.int8, "node_network": np.int8,
                 "link_src": np.int32, "link_dst": np.int32, "link_capacity": np.float64,
                 "link_latency": np.float64, "link_kind": np.int8, "link_port": np.int8}
