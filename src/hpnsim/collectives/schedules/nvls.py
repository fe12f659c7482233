"""NVLS: collectives through NVSwitch multicast and in-switch reduction (NVLink SHARP).

On one host (H100, H200, B200 on NVSwitch), NCCL's NVLS all-reduce splits the buffer into k
parts; GPU j reduces part j with one multimem load (the switch reads part j from every GPU
and returns the sum) and broadcasts it with one multimem store (the switch writes it to
every GPU). Per GPU and per byte of the buffer S: out S (its share of every part) + S/k (the
store), in S/k (the sum) + S (every stored part), so the time is S·(k+1)/k over the NVLink
rate times the NVLS efficiency, and busbw = 2(k-1)/(k+1) · B · efficiency.
All-gather (store only): out S/k, in S; reduce-scatter (load only): out S, in S/k.

NVLS+tree (several hosts, all-reduce): NVLS reduce-scatter inside every host, a double
binary tree over hosts per rail carrying S/k, NVLS all-gather; pipelined, so the NVLink
and network parts run at once (NCCL ``NVLS_TREE``).
"""

from __future__ import annotations

import numpy as np  # noqa: F401  (the examples use it)

from hpnsim.collectives.schedules.schedule import (
    NVLS_OPS,
    SCHEDULE_DOCS,
    ChannelKind,
    Schedule,
    Stage,
    host_groups,
    host_rails,
    uniform_hosts,
)
from hpnsim.errors import InputError

#: (GPU->NVSwitch, NVSwitch->GPU) wire bytes per byte of the buffer, per GPU, for k GPUs
_LOADS = {"allreduce": lambda k: ((k + 1) / k, (k + 1) / k),
          "allgather": lambda k: (1 / k, 1.0),
          "reducescatter": lambda k: (1.0, 1 / k)}


def nvls_loads(op: str, k: int) -> tuple[float, float]:
    """Per-GPU (out, in) NVLink bytes per buffer byte of NVLS ``op`` on ``k`` GPUs.

    Parameters
    ----------
    op : str
        allreduce, allgather or reducescatter (canonical).
    k : int
        GPUs of the host.

    Returns
    -------
    tuple of float
        ``(out, in)`` bytes per buffer byte.

    Examples
    --------
    >>> nvls_loads("allreduce", 8)
    (1.125, 1.125)
    """
    return _LOADS[op](k)


@SCHEDULE_DOCS.fill
def nvls_stages(sch: Schedule, gpus_per_host: int, channels: int) -> None:
    """NVLS on one host (allreduce, allgather, reducescatter), or NVLS+tree all-reduce
    across hosts (``sch.algo == "nvlstree"``, same local GPUs on every host).

    Parameters
    ----------
    {sch, gpus_per_host, channels}

    Returns
    -------
    {appended}

    Examples
    --------
    >>> sch = Schedule("allreduce", "nvls", np.arange(8), 8.0)
    >>> nvls_stages(sch, 8, 1)
    >>> s = sch.stages[0]
    >>> s.n_members, s.size, s.switch, s.intra_steps
    (8, 8.0, (1.125, 1.125), 1)
    """
    from hpnsim.collectives.schedules.tree import tree_stages

    groups = host_groups(sch.gpus, gpus_per_host)
    if sch.op not in _LOADS:
        raise InputError("algo", f"nvls supports allreduce, allgather, reducescatter, "
                         f"got {sch.op!r}")
    if sch.algo == "nvls" and len(groups) > 1:
        raise InputError("algo", "nvls runs inside one host; use nvlstree across hosts")
    if sch.algo == "nvlstree" and (sch.op != "allreduce" or not uniform_hosts(groups,
                                                                            gpus_per_host)):
        raise InputError("algo", "nvlstree is an all-reduce over hosts with the same local "
                         "GPUs each")
    k = groups[0].size
    sch.add(Stage(sch.gpus, sch.gpus, sch.size, 1, 0, name=f"{sch.op}/nvls",
                  kind=ChannelKind.NVLS, lane=NVLS_OPS.index(sch.op),
                  switch=nvls_loads(sch.op, k)))
    if len(groups) < 2:
        return
    rails = host_rails(groups)
    for lane, members in enumerate(rails):
        rail = Schedule("allreduce", "tree", members, sch.size / k)
        tree_stages(rail, gpus_per_host, channels)
        for stage in rail.stages:
            stage.name = f"allreduce/nvlstree/rail{lane}/{stage.name.split('/', 1)[1]}"
            stage.intra_steps += 1          # the fill: one NVLS reduction before the tree
            sch.add(stage)
