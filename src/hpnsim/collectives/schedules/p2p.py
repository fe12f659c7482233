"""Unsynchronized patterns: direct all-to-all (with PXN cross-rail relay) and send/recv.

Each member flow here runs on its own (one engine group per flow): nothing couples the
flows of an all-to-all, so one slow flow does not slow the others down.
"""

from __future__ import annotations

import numpy as np

from hpnsim.collectives.schedules.schedule import (
    SCHEDULE_DOCS,
    Schedule,
    Stage,
    crosses_hosts,
    relay_gpu,
)


@SCHEDULE_DOCS.fill
def pxn_relay(src: np.ndarray, dst: np.ndarray, gpus_per_host: int,
              members: np.ndarray) -> np.ndarray:
    """Relay GPU for each flow under PXN, or -1 when the flow goes direct.

    A flow between hosts whose GPUs sit on different rails first crosses NVLink to the GPU of
    the source host that has the destination's local id, when that GPU is in the group.

    Parameters
    ----------
    {flows, gpus_per_host}
    members : numpy.ndarray
        The group's GPUs (a relay must be one).

    Returns
    -------
    numpy.ndarray
        Relay GPU per flow, -1 for a direct flow.

    Examples
    --------
    >>> pxn_relay(np.array([0, 0, 1]), np.array([9, 8, 2]), 8, np.arange(16)).tolist()
    [1, -1, -1]
    """
    relay = relay_gpu(src, dst, gpus_per_host)
    cross = (src // gpus_per_host != dst // gpus_per_host) & (src % gpus_per_host
                                                            != dst % gpus_per_host)
    ok = cross & np.isin(relay, members)
    return np.where(ok, relay, -1)


@SCHEDULE_DOCS.fill
def alltoall_stages(sch: Schedule, gpus_per_host: int, channels: int, *, pxn: bool = True) -> None:
    """Direct all-to-all: every rank sends S/n to every other rank, split over channels.

    Parameters
    ----------
    {sch, gpus_per_host, channels, pxn}

    Returns
    -------
    {appended}

    Examples
    --------
    >>> sch = Schedule("alltoall", "direct", np.arange(3), 6.0)
    >>> alltoall_stages(sch, 8, 1)
    >>> s = sch.stages[0]
    >>> s.n_members, s.size, s.coupled
    (6, 2.0, False)
    """
    gpus, n = sch.gpus, sch.gpus.size
    a, b = np.nonzero(~np.eye(n, dtype=bool))
    src, dst = gpus[a], gpus[b]
    via = pxn_relay(src, dst, gpus_per_host, gpus) if pxn else np.full(src.size, -1)
    crosses = crosses_hosts(src, dst, gpus_per_host)
    for c in range(channels):
        sch.add(Stage(src, dst, sch.size / n / channels, int(not crosses), int(crosses),
                      coupled=False, conn=c, via=via, name=f"alltoall/ch{c}"))


@SCHEDULE_DOCS.fill
def p2p_stages(sch: Schedule, gpus_per_host: int, channels: int) -> None:
    """Point-to-point. ``sendrecv`` (nccl-tests): rank i sends S to rank i+1 (mod n), so two
    GPUs exchange both ways; ``send``: a chain, rank i sends S to rank i+1 for i < n-1 (a
    pipeline-parallel hand-off when n = 2).

    Parameters
    ----------
    {sch, gpus_per_host, channels}

    Returns
    -------
    {appended}

    Examples
    --------
    >>> sch = Schedule("send", "direct", np.array([0, 8]), 5.0)
    >>> p2p_stages(sch, 8, 1)
    >>> s = sch.stages[0]
    >>> s.src.tolist(), s.dst.tolist(), s.size, s.inter_steps
    ([0], [8], 5.0, 1)
    """
    gpus = sch.gpus
    if sch.op == "sendrecv":
        src, dst = gpus, np.roll(gpus, -1)
    else:
        src, dst = gpus[:-1], gpus[1:]
    crosses = crosses_hosts(src, dst, gpus_per_host)
    for c in range(channels):
        sch.add(Stage(src, dst, sch.size / channels, int(not crosses), int(crosses),
                      coupled=False, conn=c, name=f"{sch.op}/ch{c}"))
