"""Vectorized fabric assembly shared by the builders: node blocks, cable blocks, hosts, checks.

Builders never loop over nodes in Python: they add whole blocks of nodes (``np.arange``
arithmetic gives the ids) and whole blocks of cables (each cable becomes two consecutive
directed links, so the reverse of link ``l`` is ``l ^ 1``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import Fabric, LinkKind, NodeKind
from hpnsim.units import format_bandwidth, parse_bandwidth, parse_time

#: bytes/s per direction of a x16 PCIe link by generation (GT/s x 16 lanes x 128/130 / 8)
PCIE_X16 = {3: 8e9 * 16 * 128 / 130 / 8, 4: 16e9 * 16 * 128 / 130 / 8,
            5: 32e9 * 16 * 128 / 130 / 8, 6: 64e9 * 16 / 8}
_PCIE_RE = re.compile(r"^gen\s*(\d)\s*(?:x\s*(\d+))?$", re.IGNORECASE)


def parse_pcie(value, field: str = "pcie") -> float:
    """PCIe link per direction in bytes/s: ``"Gen5x16"`` or a bandwidth such as ``"64GB/s"``.

    >>> round(parse_pcie("Gen5x16") / 1e9, 2)
    63.02
    >>> parse_pcie("Gen4x8") == PCIE_X16[4] / 2
    True
    """
    match = _PCIE_RE.match(str(value).strip())
    if not match:
        return parse_bandwidth(value, field)
    gen, lanes = int(match.group(1)), int(match.group(2) or 16)
    if gen not in PCIE_X16 or lanes not in (1, 2, 4, 8, 16):
        raise InputError(field, f"use Gen3..Gen6 with x1..x16 lanes or a bandwidth, got {value!r}")
    return PCIE_X16[gen] * lanes / 16


def positive_int(value, field: str, allow_zero: bool = False) -> int:
    """Validate an integer parameter (> 0, or >= 0 when ``allow_zero``).

    >>> positive_int(3, "segments")
    3
    >>> positive_int(0, "segments")
    Traceback (most recent call last):
    hpnsim.errors.InputError: segments: must be an integer > 0, got 0
    """
    bound = ">= 0" if allow_zero else "> 0"
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InputError(field, f"must be an integer {bound}, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(field, f"must be an integer {bound}, got {value!r}")
    return int(value)


def choice(value, field: str, allowed: tuple[str, ...]) -> str:
    """Validate a string option against its allowed values."""
    if value not in allowed:
        raise InputError(field, f"choose one of {', '.join(allowed)}, got {value!r}")
    return value


def check_ports(tier: str, field: str, chip: float, **groups: tuple[float, float]) -> None:
    """Raise InputError naming ``field`` when a switch needs more bandwidth than its chip.

    ``groups`` maps a port group to ``(ports, speed in bytes/s)``.

    >>> check_ports("ToR", "hosts_per_segment", 6.4e12, down=(136, 25e9), up=(60, 50e9))
    >>> check_ports("ToR", "hosts_per_segment", 6.4e12, down=(137, 25e9), up=(60, 50e9))
    Traceback (most recent call last):
    hpnsim.errors.InputError: hosts_per_segment: a ToR would need 51.4 Tbps of ports (down 137 x 200.0 Gbps + up 60 x 400.0 Gbps) but its chip has 51.2 Tbps; lower hosts_per_segment or raise chip
    """
    need = sum(n * speed for n, speed in groups.values())
    if need > chip * (1 + 1e-9):
        detail = " + ".join(f"{name} {int(n)} x {format_bandwidth(speed)}"
                            for name, (n, speed) in groups.items() if n)
        raise InputError(field, f"a {tier} would need {format_bandwidth(need)} of ports "
                                f"({detail}) but its chip has {format_bandwidth(chip)}; "
                                f"lower {field} or raise chip")


def tier_plan(switches: int, chip: float, **groups: tuple[float, float]) -> dict[str, Any]:
    """Port plan of one switch tier for analysis and BOM: per-switch ports and speeds by group.

    Groups: ``down`` (active), ``backup`` (reserved for backup hosts), ``up`` and ``peer``.
    """
    plan = {"switches": int(switches), "chip": float(chip)}
    for name in ("down", "backup", "up", "peer"):
        ports, speed = groups.get(name, (0, 0.0))
        plan[f"{name}_ports"] = int(ports)
        plan[f"{name}_speed"] = float(speed)
    return plan


class Assembly:
    """Collects node and cable blocks, then makes a :class:`Fabric`."""

    def __init__(self) -> None:
        self._nodes: list[dict[str, np.ndarray]] = []
        self._links: list[dict[str, np.ndarray]] = []
        self.n_nodes = 0

    def nodes(self, kind: NodeKind, count: int, *, tier: int, pod=-1, segment=-1, rail=-1,
              plane=-1, host=-1, index=-1, network: int = 0) -> np.ndarray:
        """Add ``count`` nodes; attributes are scalars or arrays of length ``count``."""
        ids = np.arange(self.n_nodes, self.n_nodes + count, dtype=np.int32)
        block = {"node_kind": np.full(count, int(kind), np.int8),
                 "node_tier": np.full(count, tier, np.int8),
                 "node_network": np.full(count, network, np.int8)}
        for name, value in (("pod", pod), ("segment", segment), ("rail", rail),
                            ("plane", plane), ("host", host), ("index", index)):
            block[f"node_{name}"] = np.broadcast_to(np.asarray(value, np.int32), (count,))
        self._nodes.append(block)
        self.n_nodes += count
        return ids

    def cables(self, a, b, capacity: float, latency: float, kind: LinkKind, port=-1) -> None:
        """Add one cable per ``(a[i], b[i])``: links ``a -> b`` and ``b -> a``, interleaved."""
        a, b, port = np.broadcast_arrays(np.asarray(a, np.int32), np.asarray(b, np.int32),
                                         np.asarray(port, np.int8))
        n = a.size
        self._links.append({
            "link_src": np.stack([a.ravel(), b.ravel()], axis=1).ravel(),
            "link_dst": np.stack([b.ravel(), a.ravel()], axis=1).ravel(),
            "link_capacity": np.full(2 * n, capacity, np.float64),
            "link_latency": np.full(2 * n, latency, np.float64),
            "link_kind": np.full(2 * n, int(kind), np.int8),
            "link_port": np.repeat(port.ravel(), 2),
        })

    def finish(self, gpu_node: np.ndarray, gpu_nic: np.ndarray, meta: dict[str, Any]) -> Fabric:
        """Concatenate the blocks into a :class:`Fabric`."""
        nodes = {key: np.concatenate([blk[key] for blk in self._nodes]) for key in self._nodes[0]}
        if self._links:
            links = {key: np.concatenate([blk[key] for blk in self._links])
                     for key in self._links[0]}
        else:
            links = {key: np.zeros(0) for key in ("link_src", "link_dst", "link_capacity",
                                                  "link_latency", "link_kind", "link_port")}
        return Fabric(nodes, links, gpu_node, gpu_nic, meta)


def pcie_nics_per_host(gpus_per_host: int, gpus_per_pcie_switch, host_field: str) -> int:
    """Validate a host's PCIe layout; returns its NICs (one per PCIe switch).

    Every builder with hosts takes ``gpus_per_pcie_switch`` (``k``): ``k = 1`` is one NIC
    per GPU on its own PCIe link, ``k > 1`` puts every ``k`` GPUs under one PCIe switch
    with one NIC (:func:`add_hosts`). ``k`` must divide the host's GPUs, named by
    ``host_field`` (the builder's parameter: ``gpus_per_host`` or ``rails``).

    >>> pcie_nics_per_host(8, 2, "rails")
    4
    >>> pcie_nics_per_host(8, 3, "rails")
    Traceback (most recent call last):
    hpnsim.errors.InputError: gpus_per_pcie_switch: must divide rails=8 (the host's GPUs), got 3
    """
    k = positive_int(gpus_per_pcie_switch, "gpus_per_pcie_switch")
    if gpus_per_host % k:
        raise InputError("gpus_per_pcie_switch", f"must divide {host_field}={gpus_per_host} "
                                                 f"(the host's GPUs), got {k}")
    return gpus_per_host // k


def add_hosts(asm: Assembly, host_pod, host_segment, gpus_per_host: int, *, nvlink: float,
              pcie: float, latency: float, first_host: int = 0,
              gpus_per_switch: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Add hosts: GPUs, one NVSwitch per host (if > 1 GPU) and their NICs.

    With ``gpus_per_switch == 1`` every GPU has its own NIC on its own PCIe link. With
    ``gpus_per_switch = k > 1`` (an HGX/DGX-style host) every group of ``k`` GPUs hangs
    off one PCIe switch (own ``pcie`` link each) that has one NIC below it (one ``pcie``
    link): the ``k`` GPUs share the switch -> NIC link and the NIC's ports.
    ``nvlink`` is the *bidirectional* NVLink figure per GPU; each direction of a GPU⇄NVSwitch
    link gets half. Returns ``(gpu_node, gpu_nic)`` indexed by GPU index (host-major); a
    NIC node repeats in ``gpu_nic`` for every GPU that shares it.
    """
    host_pod = np.asarray(host_pod, np.int32)
    n_hosts = host_pod.size
    n_gpus = n_hosts * gpus_per_host
    host = np.repeat(np.arange(first_host, first_host + n_hosts, dtype=np.int32), gpus_per_host)
    pod = np.repeat(host_pod, gpus_per_host)
    segment = np.repeat(np.asarray(host_segment, np.int32), gpus_per_host)
    rail = np.tile(np.arange(gpus_per_host, dtype=np.int32), n_hosts)
    gpu = asm.nodes(NodeKind.GPU, n_gpus, tier=0, pod=pod, segment=segment, rail=rail, host=host)
    k = gpus_per_switch
    if k == 1:
        nic = asm.nodes(NodeKind.NIC, n_gpus, tier=0, pod=pod, segment=segment, rail=rail,
                        host=host)
        asm.cables(gpu, nic, pcie, latency, LinkKind.PCIE)
    else:
        first = slice(None, None, k)  # attributes of each switch / NIC: its first GPU's
        switch = asm.nodes(NodeKind.PCIE_SWITCH, n_gpus // k, tier=0, pod=pod[first],
                           segment=segment[first], rail=rail[first] // k, host=host[first])
        shared = asm.nodes(NodeKind.NIC, n_gpus // k, tier=0, pod=pod[first],
                           segment=segment[first], rail=rail[first] // k, host=host[first])
        asm.cables(gpu, np.repeat(switch, k), pcie, latency, LinkKind.PCIE)
        asm.cables(switch, shared, pcie, latency, LinkKind.PCIE)
        nic = np.repeat(shared, k)
    if gpus_per_host > 1:
        nvswitch = asm.nodes(NodeKind.NVSWITCH, n_hosts, tier=0, pod=host_pod,
                             segment=host_segment,
                             host=np.arange(first_host, first_host + n_hosts, dtype=np.int32))
        asm.cables(gpu, np.repeat(nvswitch, gpus_per_host), nvlink / 2, latency, LinkKind.NVLINK)
    return gpu, nic


def common_speeds(nvlink, pcie, hop_latency, host_latency) -> dict[str, float]:
    """Parse the in-host link and latency parameters every builder shares."""
    return {"nvlink": parse_bandwidth(nvlink, "nvlink"), "pcie": parse_pcie(pcie),
            "hop_latency": parse_time(hop_latency, "hop_latency"),
            "host_latency": parse_time(host_latency, "host_latency")}
