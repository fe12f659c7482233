"""Build the :class:`Schedule` of an operation with a chosen algorithm (pure index math)."""

from __future__ import annotations

import math

import numpy as np

from hpnsim.collectives.closed_form.shape import default_channel_count
from hpnsim.collectives.ops import AUTO, check_supported, normalize_algorithm, normalize_op
from hpnsim.collectives.schedules.nvls import nvls_stages
from hpnsim.collectives.schedules.p2p import alltoall_stages, p2p_stages
from hpnsim.collectives.schedules.ring import hier_stages, ring_stages
from hpnsim.collectives.schedules.schedule import Schedule, check_group, host_groups, uniform_hosts
from hpnsim.collectives.schedules.tree import hd_stages, tree_stages
from hpnsim.errors import InputError


def default_channels(op: str, algo: str, gpus: np.ndarray, gpus_per_host: int,
                     nic_ports: int = 1) -> int:
    """Default channel count for the group ``gpus``
    (:func:`~hpnsim.collectives.closed_form.shape.default_channel_count`).

    Parameters
    ----------
    op, algo : str
        The operation and a concrete algorithm.
    gpus : array of int
        GPU indices of the group.
    gpus_per_host : int
        GPUs per host of the fabric (groups the GPUs by host).
    nic_ports : int
        Ports per NIC: NCCL opens a channel per network device.

    Returns
    -------
    int

    Examples
    --------
    >>> default_channels("allreduce", "ring", np.arange(16), 8, nic_ports=2)
    16
    >>> default_channels("allreduce", "hier", np.arange(16), 8, nic_ports=2)
    2
    """
    groups = host_groups(np.asarray(gpus), gpus_per_host)
    return default_channel_count(op, algo, len(groups), max(g.size for g in groups),
                                 uniform_hosts(groups, gpus_per_host), nic_ports)


def build_schedule(op: str, gpus, size: float, algo: str, *, gpus_per_host: int = 8,
                   channels: int | None = None, root: int = 0, pxn: bool = True,
                   nic_ports: int = 1) -> Schedule:
    """Schedule of ``op`` over the GPU group ``gpus`` (GPU indices, rank order) for a buffer of
    ``size`` bytes (nccl-tests convention: the all-reduce buffer, the gathered all-gather
    output, each rank's all-to-all send buffer, the message of send/recv).

    Parameters
    ----------
    op : str
        The operation (any spelling :func:`~hpnsim.collectives.ops.normalize_op` accepts).
    gpus : sequence of int
        GPU indices, rank order.
    size : float
        Bytes, nccl-tests convention.
    algo : str
        ring, tree, hd, hier, nvls, nvlstree or direct (not auto: see
        :func:`hpnsim.collectives.closed_form.model.choose_algorithm`).
    gpus_per_host : int
        GPUs per host of the fabric.
    channels : int, optional
        Independent copies, each carrying size/channels over its own connections (default
        :func:`default_channels`).
    root : int
        Rank index of the broadcast/reduce root.
    pxn : bool
        Relay cross-rail hops over NVLink.
    nic_ports : int
        Ports per NIC; scales the default channel count.

    Returns
    -------
    Schedule
        Its stages (transfer groups) and their dependencies; empty for one GPU.

    Examples
    --------
    >>> sch = build_schedule("allreduce", range(16), 2**20, "hier")
    >>> [s.name for s in sch.stages][:2], sch.final
    (['allreduce/hier/intra-rs', 'allreduce/hier/rail0/ch0'], (0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
    """
    op, algo = normalize_op(op), normalize_algorithm(algo)
    if algo == AUTO:
        raise InputError("algo", "build_schedule needs a concrete algorithm, not auto")
    check_supported(op, algo)
    gpus = check_group(gpus)
    if not (isinstance(size, int | float | np.number) and math.isfinite(size) and size > 0):
        raise InputError("size", f"must be a finite number of bytes > 0, got {size!r}")
    if int(gpus_per_host) < 1:
        raise InputError("gpus_per_host", f"must be >= 1, got {gpus_per_host!r}")
    if channels is None:
        channels = default_channels(op, algo, gpus, gpus_per_host, nic_ports)
    if int(channels) != channels or channels < 1:
        raise InputError("channels", f"must be an integer >= 1, got {channels!r}")
    if not 0 <= root < gpus.size:
        raise InputError("root", f"must be a rank in 0..{gpus.size - 1}, got {root!r}")
    if op == "send" and gpus.size < 2:
        raise InputError("gpus", "send needs at least 2 GPUs")
    sch = Schedule(op, algo, gpus, float(size))
    if gpus.size == 1:
        return sch
    channels = int(channels)
    if algo == "ring":
        ring_stages(sch, gpus_per_host, channels, pxn=pxn, root=root)
    elif algo == "hier":
        hier_stages(sch, gpus_per_host, channels)
    elif algo == "tree":
        tree_stages(sch, gpus_per_host, channels)
    elif algo == "hd":
        hd_stages(sch, gpus_per_host, channels)
    elif algo in ("nvls", "nvlstree"):
        nvls_stages(sch, gpus_per_host, channels)
    elif op == "alltoall":
        alltoall_stages(sch, gpus_per_host, channels, pxn=pxn)
    else:
        p2p_stages(sch, gpus_per_host, channels)
    return sch
