"""What :func:`~hpnsim.training.compile_program` returns: a :class:`CompiledIteration`
(the iteration's handles in the TaskGraph: stage passes and their stream elements, Gantt
rows, stage ends, bytes per dimension) and the :class:`RouteRecord` of every transfer, so
a failure can route them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.collectives.planning.options import CollectiveOptions
from hpnsim.engine import TaskGraph
from hpnsim.training.program import Program

__all__ = ["CompiledIteration", "Element", "RouteRecord", "StagePass"]


@dataclass
class Element:
    """One element of a stage's compute stream: tasks ``first`` .. ``last``; a Delay with
    the ``nominal`` seconds per part (compute, tp, ep), or a simulated collective of
    ``category`` (nominal None).

    Examples
    --------
    >>> Element(3, 3, {"compute": 1e-3, "tp": 0.0, "ep": 0.0}).nominal["compute"]
    0.001
    >>> Element(4, 9, category="dp").nominal is None
    True
    """

    first: int
    last: int
    nominal: dict | None = None
    category: str = ""
    wait: str = "dp"     # what a wait before it (other than for a pipeline message) counts as


@dataclass
class StagePass:
    """A pass of a stage: its kind (``F``, ``B``, ...), micro-batch and chunk, the pipeline
    message it waited for (``recv`` task, -1: none) and its stream elements.

    Examples
    --------
    >>> p = StagePass("F", 0, 0, recv=7)
    >>> p.elements.append(Element(8, 8, {"compute": 1e-3, "tp": 0.0, "ep": 0.0}))
    >>> p.kind, p.recv, len(p.elements)
    ('F', 7, 1)
    """

    kind: str
    micro_batch: int
    chunk: int
    recv: int = -1
    elements: list[Element] = field(default_factory=list)


@dataclass(frozen=True)
class RouteRecord:
    """How the transfer tasks ``first:end`` of the graph were routed, so a failure can route
    them again: ``op`` (``"p2p"`` for a pipeline message) on each row of ``groups`` with
    ``size`` and ``algo`` (a p2p record's ``groups`` is ``(src GPUs, dst GPUs)``), planned
    with ``options``.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.training import TrainJob, build_iteration_graph
    >>> fab = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> it = build_iteration_graph(TrainJob("llama3-8b", tp=8, dp=2, global_batch=2), fab,
    ...                            dp_algo="ring")
    >>> r = it.routes[0]
    >>> r.op, r.algo, r.groups.shape, r.end > r.first
    ('allreduce', 'ring', (1, 2), True)
    """

    op: str
    groups: np.ndarray
    size: float
    algo: str
    first: int
    end: int
    #: the collective options it was compiled with (None for a pipeline message), so a
    #: re-plan under failures builds the same schedule (algorithm, protocol, channels, NCCL)
    options: object = None


@dataclass
class CompiledIteration:
    """An iteration in a TaskGraph and the handles :func:`~hpnsim.training.account` reads.

    ``passes[s]`` are stage ``s``'s passes; ``rows[s]`` its collective Gantt rows
    ``(kind, first_tasks, final_tasks)``; ``stage_end[s]`` a zero-length task ending the
    stage's iteration (the next iteration of the job can start ``after`` them). The
    iteration's own tasks are ``first_task:end_task``; it starts after ``origin`` (-1: at 0).
    ``options`` are the collective options it was compiled with (its ``routing`` and
    ``seed`` also routed the pipeline messages); ``routes`` how its transfers were routed;
    ``timed`` the collectives timed alone and replayed as delays.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.training import TrainJob, build_iteration_graph
    >>> fab = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    >>> it = build_iteration_graph(TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=8),
    ...                            fab, routing="hpn_dual_plane")
    >>> len(it.stage_end), it.routing, it.comm_bytes["pp"] > 0
    (2, 'hpn_dual_plane', True)
    """

    program: Program
    graph: TaskGraph
    passes: list[list[StagePass]] = field(default_factory=list)
    rows: list[list[tuple]] = field(default_factory=list)
    stage_end: list[int] = field(default_factory=list)
    comm_bytes: dict = field(default_factory=lambda: dict.fromkeys(("tp", "pp", "dp", "ep"),
                                                                   0.0))
    tp_time: float = 0.0
    ep_replay: float = 0.0  # seconds of a replayed (in-host) EP all-to-all, if any
    notes: list[str] = field(default_factory=list)
    origin: int = -1
    first_task: int = 0
    end_task: int = 0
    options: CollectiveOptions = CollectiveOptions()
    routes: list[RouteRecord] = field(default_factory=list)
    #: the collectives timed alone on one group and replayed as delays (inside a host):
    #: ``(op, group, size, options)``, each once
    timed: list[tuple] = field(default_factory=list)

    @property
    def job(self) -> dict:
        """The job description of the program (see the class example).

        Examples
        --------
        >>> from hpnsim.training.program import Layout
        >>> it = CompiledIteration(Program(Layout(tp=8), [[]], job={"model": "m"}), TaskGraph())
        >>> it.job, it.routing, it.seed
        ({'model': 'm'}, 'ecmp', 0)
        """
        return self.program.job

    @property
    def routing(self) -> str:
        """The routing policy of its traffic (``options.routing``; see :attr:`job`)."""
        return self.options.routing

    @property
    def seed(self) -> int:
        """The hash seed of its traffic (``options.seed``; see :attr:`job`)."""
        return self.options.seed
