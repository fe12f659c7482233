"""A collective's group as the closed forms see it (:class:`GroupShape`: hosts, GPUs per
host, the NVLink and NIC bandwidths NCCL moves payload at) and the channels NCCL would open
on it (:func:`default_channel_count`).

Examples
--------
>>> GroupShape(4, 8, 200e9, 50e9, nic_ports=2).n
32
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpnsim.collectives.nccl.params import NcclParams, resolve_nccl

__all__ = ["GroupShape", "default_channel_count"]


@dataclass(frozen=True)
class GroupShape:
    """A collective's group as the closed forms see it.

    ``hosts`` hosts with ``gpus_per_host`` group GPUs each (``uniform``: the same local GPUs
    on every host, so rails line up); ``bw_intra`` NVLink bytes/s per GPU and direction,
    ``bw_inter`` one GPU's NIC bytes/s (all ports), both as NCCL moves payload over them
    (link efficiencies applied by :meth:`from_fabric`); ``pxn``: the last GPU of a host
    hands a ring's network hop over NVLink to the GPU of the right rail; ``nvls``: NVSwitch
    multicast/reduction is available.

    Examples
    --------
    >>> GroupShape(4, 8, 200e9, 50e9, nic_ports=2).n
    32
    """

    hosts: int
    gpus_per_host: int
    bw_intra: float
    bw_inter: float
    nic_ports: int = 1
    uniform: bool = True
    pxn: bool = True
    nvls: bool = False

    @property
    def n(self) -> int:
        """GPUs in the group.

        Examples
        --------
        >>> GroupShape(2, 4, 200e9, 50e9).n
        8
        """
        return self.hosts * self.gpus_per_host

    @classmethod
    def from_fabric(cls, fabric, gpus, pxn: bool = True,
                    nccl: NcclParams | None = None) -> GroupShape:
        """Shape of the GPU group ``gpus`` on ``fabric`` (GPUs per host: the most on one host),
        with ``nccl``'s link efficiencies applied: NVLink × ``nvlink_efficiency``, the NIC ×
        ``network_efficiency`` (or the PCIe link to it × ``pcie_efficiency`` if smaller).

        Examples
        --------
        >>> from hpnsim.fabrics import fat_tree
        >>> from hpnsim.collectives.nccl.params import WIRE_RATE
        >>> s = GroupShape.from_fabric(fat_tree(4), range(16), nccl=WIRE_RATE)
        >>> s.hosts, bool(s.bw_inter == fat_tree(4).link_capacity[fat_tree(4).gpu_access_link[0, 0]])
        (16, True)
        """
        from hpnsim.collectives.schedules.schedule import host_groups, uniform_hosts
        from hpnsim.fabrics.fabric import LinkKind

        gpus = np.asarray(gpus, dtype=np.int64)
        gph = fabric.gpus_per_host
        groups = host_groups(gpus, gph)
        out = fabric.out_of(int(fabric.gpu_node[gpus[0]]))
        nvlink = fabric.link_capacity[out][fabric.link_kind[out] == LinkKind.NVLINK]
        nccl = resolve_nccl(nccl)
        access = fabric.gpu_access_link[int(gpus[0])]
        nic = float(fabric.link_capacity[access[access >= 0]].sum()) * nccl.network_efficiency
        pcie = fabric.link_capacity[out][fabric.link_kind[out] == LinkKind.PCIE]
        if pcie.size:
            nic = min(nic, float(pcie.max()) * nccl.pcie_efficiency)
        intra = float(nvlink.max()) * nccl.nvlink_efficiency if nvlink.size else math.inf
        return cls(len(groups), max(g.size for g in groups), intra, nic,
                   int(nccl.channels_per_nic or fabric.ports_per_nic), uniform_hosts(groups, gph),
                   bool(pxn) and bool(fabric.meta.get("rail_optimized", False)),
                   bool(nccl.nvls))


def default_channel_count(op: str, algo: str, hosts: int, gpus_per_host: int, uniform: bool,
                          nic_ports: int = 1) -> int:
    """Channels NCCL would open, roughly: a ring (or tree pair) per NIC port of every rail
    of the group, so every port of every NIC carries traffic (the tree also on one host, so
    its chain heads rotate over all GPUs); ``nic_ports`` per rail ring for hier, and for
    halving-doubling and send/recv; one for all-to-all (its many peers spread the load).

    Parameters
    ----------
    op, algo : str
        Canonical operation and concrete algorithm.
    hosts, gpus_per_host : int
        The group's hosts and GPUs on each.
    uniform : bool
        The same local GPUs on every host (rails line up).
    nic_ports : int
        Ports per NIC.

    Returns
    -------
    int

    Examples
    --------
    >>> default_channel_count("allreduce", "ring", 4, 8, True, 2)
    16
    >>> default_channel_count("allreduce", "hier", 4, 8, True, 2)
    2
    """
    if op == "alltoall":
        return 1
    if uniform and (algo == "tree" or (algo == "ring" and hosts > 1)):
        return gpus_per_host * nic_ports
    return nic_ports
