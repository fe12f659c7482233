"""Hostnames of a fabric's devices and the names of their ports (docs/wiring.md).

Devices are what a technician cables: switches, hosts (with every GPU, NVSwitch, PCIe
switch and NIC inside them), storage hosts, and the backup hosts a fabric reserves ToR
ports for but does not build as nodes. One rule names them from hpnsim's node names
(:meth:`~hpnsim.fabrics.fabric.Fabric.node_name`):

- a switch or a storage host: its node name with ``/`` written ``-``
  (``pod0/seg0/tor-r0-p1`` -> ``pod0-seg0-tor-r0-p1``, ``fe/pod1/agg-3`` -> ``fe-pod1-agg-3``);
- a node inside a host: the host, its name up to ``host<i>`` (a frontend node's ``fe/``
  left out: the frontend NIC sits in the same server), ``pod0-seg0-host17``;
- backup host ``b`` of a segment: ``pod<p>-seg<s>-backup<b>``.

Ports, named as Linux names interfaces (at most 15 characters, no ``/``):

- a switch's ports are ``swp1``, ``swp2``, ... (1-based, as Cumulus and SONiC front panels
  count): first the cables to the tier below (a ToR's hosts in host order, then its backup
  hosts; an Agg's ToRs; a core's Aggs), then the peer cables of a stacked pair, then the
  cables to the tier above, each group in the order hpnsim builds them (far device, then
  parallel cables);
- a host's NIC ``n`` (its rail, or its PCIe switch) has ports ``nic<n>p0``, ``nic<n>p1``, ...;
  the frontend NIC's are ``fe0p0`` and ``fe0p1``; a storage host's ``nic0p0``, ``nic0p1``;
- inside a host (``--in-host``): ``<component>-<peer>`` with components ``gpu<r>``,
  ``nvswitch``, ``nic<n>``, ``pcisw<n>``, ``cpu`` and ``fe0`` (``gpu3-nvswitch`` at one end,
  ``nvswitch-gpu3`` at the other).

>>> from hpnsim.fabrics import hpn7
>>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
...          aggs_per_plane=2)
>>> names = device_names(f)
>>> names[int(f.gpu_tor[9, 1])], names[int(f.gpu_nic[9])], nic_label(f, int(f.gpu_nic[9]))
('pod0-seg0-tor-r1-p1', 'pod0-seg0-host1', 'nic1')
"""

from __future__ import annotations

import numpy as np

from hpnsim.fabrics.fabric import FRONTEND, Fabric, NodeKind

#: node kinds that sit inside a host and take the host's name
IN_HOST_KINDS = (NodeKind.GPU, NodeKind.NVSWITCH, NodeKind.NIC, NodeKind.PCIE_SWITCH,
                 NodeKind.HOST)

#: Linux's limit on an interface name (IFNAMSIZ - 1)
MAX_PORT_NAME = 15


def hostname(node_name: str) -> str:
    """The device hostname of one node name (module docstring).

    >>> hostname("pod0/seg0/tor-r0-p1"), hostname("pod0/seg2/host17/gpu-r3")
    ('pod0-seg0-tor-r0-p1', 'pod0-seg2-host17')
    >>> hostname("fe/pod0/seg0/host4/nic"), hostname("fe/pod1/storage-5")
    ('pod0-seg0-host4', 'fe-pod1-storage-5')
    """
    parts = node_name.split("/")
    for i, part in enumerate(parts):
        if part.startswith("host") and part[4:].isdigit():
            inside = parts[1:i + 1] if parts[0] == "fe" else parts[:i + 1]
            return "-".join(inside)
    return "-".join(parts)


def device_names(fabric: Fabric) -> list[str]:
    """The device hostname of every node of ``fabric`` (one per node id)."""
    return [hostname(fabric.node_name(i)) for i in range(fabric.n_nodes)]


def backup_hostname(pod: int, segment: int, index: int) -> str:
    """Hostname of backup host ``index`` of a segment.

    >>> backup_hostname(0, 3, 7)
    'pod0-seg3-backup7'
    """
    return f"pod{pod}-seg{segment}-backup{index}"


def nic_label(fabric: Fabric, node: int) -> str:
    """The label of a NIC (or storage host) in its device: ``nic<n>``, ``fe0`` or ``nic0``."""
    kind = NodeKind(int(fabric.node_kind[node]))
    if kind == NodeKind.STORAGE:
        return "nic0"
    if fabric.node_network[node] == FRONTEND:
        return "fe0"
    return f"nic{max(int(fabric.node_rail[node]), 0)}"


def component_label(fabric: Fabric, node: int) -> str:
    """A host component's label for in-host ports (``gpu3``, ``nvswitch``, ``cpu`` ...)."""
    kind = NodeKind(int(fabric.node_kind[node]))
    rail = max(int(fabric.node_rail[node]), 0)
    if kind == NodeKind.GPU:
        return f"gpu{rail}"
    if kind == NodeKind.NVSWITCH:
        return "nvswitch"
    if kind == NodeKind.PCIE_SWITCH:
        return f"pcisw{rail}"
    if kind == NodeKind.HOST:
        return "cpu"
    return nic_label(fabric, node)


def switch_port(number: int) -> str:
    """Name of a switch's port ``number`` (1-based).

    >>> switch_port(1), switch_port(196)
    ('swp1', 'swp196')
    """
    return f"swp{number}"


def number_switch_ports(node: np.ndarray, rank: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Port numbers (1-based) of switch cable ends: per ``node``, by ``rank`` (0 below,
    1 peer, 2 above) then ``order`` (the cable's build order).

    >>> number_switch_ports(np.array([5, 5, 7, 5]), np.array([2, 0, 0, 0]),
    ...                     np.array([0, 1, 2, 3])).tolist()
    [3, 1, 1, 2]
    """
    sort = np.lexsort((order, rank, node))
    sorted_node = node[sort]
    start = np.r_[0, np.flatnonzero(np.diff(sorted_node)) + 1]
    first = np.repeat(start, np.diff(np.r_[start, sorted_node.size]))
    numbers = np.empty(node.size, dtype=np.int64)
    numbers[sort] = np.arange(node.size) - first + 1
    return numbers
