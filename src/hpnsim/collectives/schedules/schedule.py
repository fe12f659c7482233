"""Schedules: which GPU sends how many bytes to which, in which stage.

A :class:`Stage` is one transfer group of the engine: member flows that move in lockstep
(a ring phase, a tree, one halving-doubling step), or, with ``coupled=False``, a bag of
independent flows (all-to-all, send/recv) that become one engine group each. Repeated
identical steps are folded into one stage carrying the steps' total bytes; its step counts
(``intra_steps`` over NVLink, ``inter_steps`` across the network) give its latency.

Schedules are pure index math over GPU indices (host-major: ``host = g // gpus_per_host``),
independent of any fabric, so they can be checked by counting bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from hpnsim.collectives.docfill import DocEntries
from hpnsim.errors import InputError

#: Docstring entries the schedule modules share, written once: the contract of the stage
#: builders, ``f(sch, gpus_per_host, channels, ...) -> None`` (``ring_stages``,
#: ``hier_stages``, ``tree_stages``, ``hd_stages``, ``nvls_stages``, ``alltoall_stages``,
#: ``p2p_stages``), and the flow arrays of the per-flow helpers.
SCHEDULE_DOCS = DocEntries(
    sch="""sch : Schedule
    The schedule to append to (its op, GPUs in rank order and size).""",
    gpus_per_host="""gpus_per_host : int
    GPUs per host of the fabric.""",
    channels="""channels : int
    Independent copies, each carrying S/channels over its own connections.""",
    pxn="""pxn : bool
    Relay cross-rail hops over NVLink.""",
    appended="""None
    The stages are appended to ``sch``.""",
    flows="""src, dst : numpy.ndarray
    GPU of each flow's ends.""",
)


class ChannelKind(IntEnum):
    """Which set of NCCL connections a stage's flows run on, within channel ``conn``: the
    ring, tree ``lane`` (0 or 1: NCCL's two trees), the rail ring of local GPU ``lane``
    (hierarchical), the NVLink ring of phase ``lane`` (hierarchical: 0 reduce-scatter, 1
    all-gather), the halving-doubling step ``lane`` (:func:`hd_lane`) or the NVLS operation
    ``lane`` (:data:`NVLS_OPS`). Stages of one kind, lane and ``conn`` (in any collective)
    reuse the same connections (:attr:`Stage.channel`)."""

    RING = 0
    TREE = 1
    RAIL = 2
    HIER_INTRA = 3
    HD = 4
    NVLS = 5


NVLS_OPS = ("allreduce", "allgather", "reducescatter")   # lane of ChannelKind.NVLS


def hd_lane(step: str) -> int:
    """Lane of a halving-doubling step (:class:`ChannelKind` ``HD``): ``fold`` 0,
    ``unfold`` 1, reduce-scatter at distance d ``2 + 2d``, all-gather at d ``3 + 2d``.

    >>> [hd_lane(s) for s in ("fold", "unfold", "rs1", "ag1", "rs2")]
    [0, 1, 4, 5, 6]
    """
    if step in ("fold", "unfold"):
        return int(step == "unfold")
    return 2 + 2 * int(step[2:]) + int(step.startswith("ag"))


@dataclass
class Stage:
    """One transfer group: member flows ``src[i] -> dst[i]`` of ``size`` payload bytes each.

    ``via[i] >= 0`` relays member i through that GPU of the source's host over NVLink first
    (PXN: the cross-rail hop happens inside the host, then the flow stays on the right rail).
    ``conn`` is the connection (channel) id, the entropy ECMP hashes. ``deps`` are indices
    of stages of the same schedule that must finish first. ``switch = (up, down)`` makes
    it an NVLS stage: member i is GPU ``src[i]`` talking to its NVSwitch, loading its
    GPU->NVSwitch link with ``up`` and its NVSwitch->GPU link with ``down`` wire bytes per
    byte of ``size`` (multicast and in-switch reduction: no GPU-to-GPU path). ``kind`` and
    ``lane`` say which of the channel's connections it runs on (:class:`ChannelKind`; None:
    none named, e.g. the independent flows of an uncoupled stage).

    Examples
    --------
    >>> s = Stage(np.array([0, 1]), np.array([1, 0]), size=4.0, intra_steps=1)
    >>> s.n_members, s.total_bytes
    (2, 8.0)
    """

    src: np.ndarray
    dst: np.ndarray
    size: float
    intra_steps: int = 0
    inter_steps: int = 0
    coupled: bool = True
    deps: tuple[int, ...] = ()
    conn: int = 0
    via: np.ndarray | None = None
    name: str = ""
    switch: tuple[float, float] | None = None
    kind: ChannelKind | None = None
    lane: int = 0

    def __post_init__(self) -> None:
        self.src = np.asarray(self.src, dtype=np.int64)
        self.dst = np.asarray(self.dst, dtype=np.int64)
        if self.via is not None:
            self.via = np.asarray(self.via, dtype=np.int64)

    @property
    def n_members(self) -> int:
        """Member flows of the stage.

        Examples
        --------
        >>> Stage([0, 1, 2], [1, 2, 0], 4.0).n_members
        3
        """
        return int(self.src.size)

    @property
    def channel(self) -> int:
        """The connection id of the stage's flows, ``(kind, lane, conn)`` packed into one
        integer (20 bits each for lane and conn), or -1 when it names none; the task
        graph keeps it per transfer (the packet engine's QPs: ``packet.graph.QpScope``).

        Examples
        --------
        >>> c = Stage([0], [1], 4.0, conn=3, kind=ChannelKind.TREE, lane=1).channel
        >>> c >> 40, (c >> 20) & 0xFFFFF, c & 0xFFFFF
        (1, 1, 3)
        >>> Stage([0], [1], 4.0).channel
        -1
        """
        if self.kind is None:
            return -1
        if not (0 <= self.lane < 1 << 20 and 0 <= self.conn < 1 << 20):
            raise ValueError(f"stage {self.name!r}: lane {self.lane} or conn {self.conn} "
                             f"outside 0..2**20-1")
        return (int(self.kind) << 40) | (int(self.lane) << 20) | int(self.conn)

    @property
    def total_bytes(self) -> float:
        """Payload bytes all members move.

        Examples
        --------
        >>> Stage([0, 1, 2], [1, 2, 0], 4.0).total_bytes
        12.0
        """
        return float(self.size) * self.n_members


@dataclass
class Schedule:
    """A collective as a DAG of :class:`Stage` objects (dependencies point backwards).

    Examples
    --------
    >>> sch = Schedule("sendrecv", "direct", np.array([0, 1]), 8.0)
    >>> sch.add(Stage([0], [1], 8.0, inter_steps=1, coupled=False))
    0
    >>> sch.final
    (0,)
    """

    op: str
    algo: str
    gpus: np.ndarray
    size: float
    stages: list[Stage] = field(default_factory=list)

    def add(self, stage: Stage) -> int:
        """Append ``stage`` (its ``deps`` must name stages already added); returns its
        index.

        Examples
        --------
        >>> sch = Schedule("send", "direct", np.array([0, 1]), 8.0)
        >>> sch.add(Stage([0], [1], 8.0)), sch.add(Stage([0], [1], 8.0, deps=(0,)))
        (0, 1)
        >>> sch.add(Stage([0], [1], 8.0, deps=(5,)))
        Traceback (most recent call last):
        ...
        ValueError: stage dependency 5 does not exist yet
        """
        for d in stage.deps:
            if not 0 <= d < len(self.stages):
                raise ValueError(f"stage dependency {d} does not exist yet")
        self.stages.append(stage)
        return len(self.stages) - 1

    @property
    def final(self) -> tuple[int, ...]:
        """Stages nothing else waits for: the collective is done when they are.

        Examples
        --------
        >>> sch = Schedule("send", "direct", np.array([0, 1]), 8.0)
        >>> _ = sch.add(Stage([0], [1], 8.0)); _ = sch.add(Stage([0], [1], 8.0, deps=(0,)))
        >>> sch.final
        (1,)
        """
        needed = {d for s in self.stages for d in s.deps}
        return tuple(i for i in range(len(self.stages)) if i not in needed)

    def pair_bytes(self) -> dict[tuple[int, int], float]:
        """Payload bytes per ordered (src, dst) GPU pair over the whole schedule (for checks).

        Examples
        --------
        >>> sch = Schedule("send", "direct", np.array([0, 1]), 8.0)
        >>> _ = sch.add(Stage([0], [1], 8.0, inter_steps=1))
        >>> sch.pair_bytes()
        {(0, 1): 8.0}
        """
        out: dict[tuple[int, int], float] = {}
        for s in self.stages:
            for a, b in zip(s.src.tolist(), s.dst.tolist(), strict=True):
                out[(a, b)] = out.get((a, b), 0.0) + float(s.size)
        return out


def check_group(gpus, n_gpus: int | None = None) -> np.ndarray:
    """Validate a GPU group: distinct non-negative indices, inside the fabric if known.

    Parameters
    ----------
    gpus : sequence of int
        GPU indices, rank order.
    n_gpus : int, optional
        GPUs of the fabric (None: unknown).

    Returns
    -------
    numpy.ndarray
        The group as int64.

    Examples
    --------
    >>> check_group([3, 1, 2]).tolist()
    [3, 1, 2]
    """
    arr = np.asarray(gpus, dtype=np.int64).ravel()
    if arr.size == 0:
        raise InputError("gpus", "need at least 1 GPU, got an empty group")
    if arr.min() < 0:
        raise InputError("gpus", f"GPU indices must be >= 0, got {int(arr.min())}")
    if n_gpus is not None and arr.max() >= n_gpus:
        raise InputError("gpus", f"the fabric has {n_gpus} GPUs, group needs GPU {int(arr.max())}")
    if np.unique(arr).size != arr.size:
        raise InputError("gpus", "GPU indices must be distinct")
    return arr


def host_groups(gpus: np.ndarray, gpus_per_host: int) -> list[np.ndarray]:
    """The group's GPUs per host, hosts in order of first appearance, GPUs in group order.

    Parameters
    ----------
    gpus : numpy.ndarray
    gpus_per_host : int

    Returns
    -------
    list of numpy.ndarray

    Examples
    --------
    >>> [h.tolist() for h in host_groups(np.array([8, 9, 0, 1]), 8)]
    [[8, 9], [0, 1]]
    """
    hosts = np.asarray(gpus) // gpus_per_host
    _, first = np.unique(hosts, return_index=True)
    order = hosts[np.sort(first)]
    return [gpus[hosts == h] for h in order]


def uniform_hosts(groups: list[np.ndarray], gpus_per_host: int) -> bool:
    """True when every host holds the same local GPU ids (so rails line up across hosts).

    Parameters
    ----------
    groups : list of numpy.ndarray
        The group's GPUs per host (:func:`host_groups`).
    gpus_per_host : int

    Returns
    -------
    bool

    Examples
    --------
    >>> uniform_hosts([np.array([0, 1]), np.array([8, 9])], 8)
    True
    >>> uniform_hosts([np.array([0, 1]), np.array([9, 10])], 8)
    False
    """
    locals_ = [np.sort(g % gpus_per_host) for g in groups]
    return all(x.size == locals_[0].size and np.array_equal(x, locals_[0]) for x in locals_)


def split_steps(total: int, crossings: int) -> tuple[int, int]:
    """``(intra_steps, inter_steps)`` for ``total`` steps of which ``crossings`` cross hosts.

    Parameters
    ----------
    total : int
        Steps of a stage.
    crossings : int
        Those that cross hosts.

    Returns
    -------
    tuple of int

    Examples
    --------
    >>> split_steps(14, 2)
    (12, 2)
    """
    return total - crossings, crossings


def host_rails(groups: list[np.ndarray]) -> np.ndarray:
    """The group's rails: row ``l`` holds the ``l``-th GPU (by index) of every host.

    Parameters
    ----------
    groups : list of numpy.ndarray
        The group's GPUs per host (:func:`host_groups`), the same count on every host.

    Returns
    -------
    numpy.ndarray
        Shape (GPUs per host, hosts).

    Examples
    --------
    >>> host_rails([np.array([1, 0]), np.array([8, 9])]).tolist()
    [[0, 8], [1, 9]]
    """
    return np.stack([np.sort(g) for g in groups], axis=1)


@SCHEDULE_DOCS.fill
def crosses_hosts(src: np.ndarray, dst: np.ndarray, gpus_per_host: int) -> bool:
    """True when any flow ``src[i] -> dst[i]`` leaves its host (the stage's one step is a
    network step, else an NVLink step).

    Parameters
    ----------
    {flows, gpus_per_host}

    Returns
    -------
    bool

    Examples
    --------
    >>> crosses_hosts(np.array([0, 1]), np.array([1, 2]), 8)
    False
    >>> crosses_hosts(np.array([0, 1]), np.array([1, 9]), 8)
    True
    """
    return bool(np.any(src // gpus_per_host != dst // gpus_per_host))


@SCHEDULE_DOCS.fill
def relay_gpu(src: np.ndarray, dst: np.ndarray, gpus_per_host: int) -> np.ndarray:
    """The GPU on each source's host with its destination's local id: where a PXN hop hands
    a flow from NVLink to the destination's rail.

    Parameters
    ----------
    {flows, gpus_per_host}

    Returns
    -------
    numpy.ndarray
        Relay GPU per flow (the source itself when both ends share a rail).

    Examples
    --------
    >>> relay_gpu(np.array([0, 1]), np.array([9, 9]), 8).tolist()
    [1, 1]
    """
    return (src // gpus_per_host) * gpus_per_host + dst % gpus_per_host
