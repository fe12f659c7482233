"""The jobs of a shared cluster and their compiled iterations, replayed without recompiling.

A :class:`ClusterJob` is a training job as a cluster sees it: a
:class:`~hpnsim.training.job.TrainJob`, an arrival time, and how long it stays
(``iterations``, or ``duration`` seconds). Once placed it runs iteration after iteration.

Compiling an iteration of a large job (routing every collective) takes a tenth of a second
or more, and a cluster run needs thousands. An :class:`IterationTemplate` compiles one
iteration once per (job shape, GPUs, routing seed) and appends copies of its tasks to any
TaskGraph, with the job's priority class on every transfer. The template's lone run is also
the job's *alone* profile: its iteration time, its computation per iteration and the bytes
it puts on every network link and every PCIe link (the host's links that jobs could share
and that may bind: the paper's ``t_j`` is over every link of the job's paths), from which
Crux's ``W_j``, ``t_j`` and ``I_j`` follow
(:meth:`IterationTemplate.sched_job`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from hpnsim.engine import TaskGraph, simulate
from hpnsim.engine.taskgraph import TRANSFER
from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import LinkKind
from hpnsim.routing.precise import NETWORK_LINKS
from hpnsim.sched.jobs import SchedJob
from hpnsim.training.program import Program

__all__ = ["DEMAND_LINKS", "ClusterJob", "IterationTemplate", "RunningJob", "TemplateCache"]

#: the links a job's demand is counted on: the network's and the hosts' PCIe links
#: (NVLink stays inside a job's own GPUs and NVSwitch: no other job's traffic crosses it)
DEMAND_LINKS = (*NETWORK_LINKS, LinkKind.PCIE)


@dataclass
class ClusterJob:
    """A job of a shared cluster.

    Attributes
    ----------
    name : str
    job : TrainJob or Program
        What it trains (a :class:`~hpnsim.training.program.Program` for hand-built jobs).
    arrival : float
        Seconds after the start of the trace (>= 0).
    iterations : int, optional
        Iterations it runs before leaving.
    duration : float, optional
        Seconds it runs before leaving (instead of ``iterations``).
    gpus : array of int, optional
        An explicit placement (the ``given`` allocator); else the allocator chooses.
    tp_algo, dp_algo : str
        Collective algorithms (as :func:`~hpnsim.training.compile_program`).

    Examples
    --------
    >>> from hpnsim.training.job import TrainJob
    >>> ClusterJob("a", TrainJob("llama3-8b", tp=8, dp=2), arrival=5.0, iterations=10).n_gpus
    16
    """

    name: str
    job: object
    arrival: float = 0.0
    iterations: int | None = None
    duration: float | None = None
    gpus: object = None
    tp_algo: str = "auto"
    dp_algo: str = "auto"

    def __post_init__(self):
        label = f"job {self.name!r}"
        if not (isinstance(self.arrival, int | float) and math.isfinite(self.arrival)
                and self.arrival >= 0):
            raise InputError("arrival", f"{label}: a time >= 0, got {self.arrival!r}")
        if (self.iterations is None) == (self.duration is None):
            raise InputError("iterations", f"{label}: give iterations or duration, exactly one")
        if self.iterations is not None and (isinstance(self.iterations, bool) or not
                                            isinstance(self.iterations, int | np.integer)
                                            or self.iterations < 1):
            raise InputError("iterations", f"{label}: an integer >= 1, got {self.iterations!r}")
        if self.duration is not None and not (math.isfinite(self.duration)
                                              and self.duration > 0):
            raise InputError("duration", f"{label}: seconds > 0, got {self.duration!r}")

    @property
    def n_gpus(self) -> int:
        return int(self.job.layout.n_gpus if isinstance(self.job, Program) else self.job.gpus)

    @property
    def tp(self) -> int:
        return int(self.job.layout.tp if isinstance(self.job, Program) else self.job.tp)

    @cached_property
    def program(self) -> Program:
        """The training program of one iteration, built once for all its templates."""
        from hpnsim.training import program_from_job

        return self.job if isinstance(self.job, Program) else program_from_job(self.job)

    @cached_property
    def shape(self) -> tuple:
        """What decides the job's traffic and compute (its TrainJob or Program, algorithms);
        worked out once (a cluster run asks at every template look-up). The ``repr`` of a
        frozen TrainJob shows every field but its cost memo (``to_dict`` would do too, but
        works out each stage's compute: 6 ms, for each job of each run of a comparison)."""
        return (repr(self.job), self.tp_algo, self.dp_algo)


@dataclass
class IterationTemplate:
    """One compiled iteration of a job on its GPUs with a routing seed, and its alone run.

    Attributes
    ----------
    arrays : the compiled graph's flat arrays (task 0 is the iteration's start)
    stage_end : template ids of the tasks ending the iteration
    iteration_time : seconds alone on the idle fabric
    compute_time : seconds of computation (compute and optimizer) per GPU per iteration
    links, link_bytes : network and PCIe links the iteration loads (:data:`DEMAND_LINKS`)
        and its bytes on each
    """

    arrays: object
    stage_end: np.ndarray
    iteration_time: float
    compute_time: float
    links: np.ndarray
    link_bytes: np.ndarray
    transfers: np.ndarray = field(default=None)
    #: :meth:`sched_job`'s answers by (name, GPUs), with the capacity they were made for
    _sched: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def compile(cls, job: ClusterJob, fabric, gpus, *, routing: str = "ecmp",
                seed: int = 0, program: Program | None = None) -> IterationTemplate:
        """Compile one iteration of ``job`` on ``gpus`` and run it alone (``program``: its
        training program when already built, else ``job.program``).

        >>> from hpnsim.fabrics import fat_tree
        >>> from hpnsim.training.job import TrainJob
        >>> f = fat_tree(4, gpus_per_host=1)
        >>> j = ClusterJob("a", TrainJob("llama3-8b", tp=1, dp=2, zero=1), iterations=1)
        >>> t = IterationTemplate.compile(j, f, [0, 4])
        >>> bool(t.iteration_time > t.compute_time > 0), t.links.size > 0
        (True, True)
        """
        return cls.compiled(job, fabric, gpus, routing=routing, seed=seed, program=program)[0]

    @classmethod
    def compiled(cls, job: ClusterJob, fabric, gpus, *, routing: str = "ecmp", seed: int = 0,
                 program: Program | None = None) -> tuple[IterationTemplate, object]:
        """:meth:`compile`, and the compiled iteration (a CompiledIteration, its graph
        dropped) that :meth:`reseeded` builds other seeds' templates from."""
        from hpnsim.training import compile_program

        graph = TaskGraph()
        program = job.program if program is None else program
        # a release > 0 gives the iteration a start task (id 0) that copies re-anchor
        it = compile_program(program, graph, fabric, routing=routing, tp_algo=job.tp_algo,
                             dp_algo=job.dp_algo, gpus=np.asarray(gpus), seed=seed,
                             release=1.0)
        sim = simulate(graph, fabric.link_capacity)
        # frozen after the run, which froze it (freezing first costs 4x the page faults)
        arrays = graph.arrays(fabric.n_links)
        it = replace(it, graph=None)
        return cls._alone(it, sim, arrays, fabric), it

    @classmethod
    def reseeded(cls, it, arrays, fabric, seed: int) -> IterationTemplate | None:
        """The template :meth:`compile` gives on routing seed ``seed``, from the compiled
        iteration ``it`` and frozen graph ``arrays`` of another seed of the same job and
        GPUs (:meth:`compiled`): only its routes are planned again
        (:func:`~hpnsim.training.reseed.reseeded_arrays`). None where that needs a compile.

        >>> from hpnsim.fabrics import fat_tree
        >>> from hpnsim.training.job import TrainJob
        >>> f = fat_tree(4, gpus_per_host=1)
        >>> j = ClusterJob("a", TrainJob("llama3-8b", tp=1, dp=4, zero=1), iterations=1)
        >>> t, it = IterationTemplate.compiled(j, f, [0, 4, 8, 12])
        >>> again = IterationTemplate.reseeded(it, t.arrays, f, 5)
        >>> fresh = IterationTemplate.compile(j, f, [0, 4, 8, 12], seed=5)
        >>> again.iteration_time == fresh.iteration_time
        True
        >>> bool(np.array_equal(again.link_bytes, fresh.link_bytes))
        True
        """
        from hpnsim.training.reseed import reseeded_arrays

        arrays = reseeded_arrays(it, arrays, fabric, seed)
        if arrays is None:
            return None
        graph = TaskGraph()
        graph.append_copy(arrays, release=1.0)
        return cls._alone(it, simulate(graph, fabric.link_capacity), arrays, fabric)

    @classmethod
    def _alone(cls, it, sim, arrays, fabric) -> IterationTemplate:
        """The template of the iteration ``it`` (frozen: ``arrays``) from its run alone
        on the idle fabric ``sim``."""
        from hpnsim.training import account

        res = account(it, sim.start - 1.0, sim.finish - 1.0)
        network = np.isin(fabric.link_kind, DEMAND_LINKS)
        load = np.where(network, sim.link_bytes, 0.0)
        links = np.flatnonzero(load > 0)
        return cls(arrays=arrays, stage_end=np.asarray(it.stage_end, dtype=np.int64),
                   iteration_time=float(res.iteration_time),
                   compute_time=float(res.compute_time + res.optimizer_time),
                   links=links, link_bytes=load[links],
                   transfers=np.flatnonzero(arrays.kind == TRANSFER))

    @property
    def n_tasks(self) -> int:
        return int(self.arrays.kind.size)

    @property
    def engine_size(self) -> int:
        """Tasks plus link entries of one iteration: what each copy costs the engine."""
        return int(self.arrays.kind.size + self.arrays.links.size)

    def append(self, graph: TaskGraph, *, release: float = 0.0, after=(),
               priority: int = 0) -> int:
        """Append a copy of the iteration to ``graph``; returns the id of its first task.

        The copy starts at ``release`` and after the tasks ``after``; every transfer is in
        class ``priority``. Its stage ends are ``first + stage_end``.
        """
        return graph.append_copy(self.arrays, release=release, after=after,
                                 priority=int(priority))

    def append_chain(self, graph: TaskGraph, count: int, *, release: float = 0.0, after=(),
                     priority: int = 0, every: float = 0.0) -> np.ndarray:
        """Append ``count`` iterations one after the other (the first as :meth:`append`;
        with ``every > 0`` iteration ``k`` starts no earlier than ``release + k * every``);
        returns their first task ids."""
        return graph.append_chain(self.arrays, count, release=release, after=after,
                                  priority=int(priority), chain=self.stage_end, every=every)

    def path_of(self, task: int) -> tuple[np.ndarray, np.ndarray]:
        """``(links, usage)`` of template transfer ``task``."""
        a = self.arrays
        row = slice(a.ptr[task], a.ptr[task + 1])
        return a.links[row], a.usage[row]

    def sched_job(self, name: str, n_gpus: int, capacity) -> SchedJob:
        """The job as schedulers see it (Crux's ``W_j``, ``M_{j,e}``).

        ``comm_start`` is set so that the scheduler's uncontended iteration time
        ``max(compute, comm_start x compute + t_j)`` is the simulated one alone: the share of
        the compute that the communication does not overlap.
        """
        # a cluster run asks at every event for the same jobs on the same capacity array
        # (SchedJobs are immutable: the answer is shared)
        found = self._sched.get((name, n_gpus))
        if found is not None and found[0] is capacity:
            return found[1]
        job = SchedJob(name, n_gpus, self.compute_time, self.links, self.link_bytes)
        t = job.transfer_time(capacity)
        start = 1.0
        if t > 0 and self.compute_time > 0:
            start = min(1.0, max(0.0, (self.iteration_time - t) / self.compute_time))
        job = SchedJob(name, n_gpus, self.compute_time, self.links, self.link_bytes,
                       comm_start=start)
        self._sched[(name, n_gpus)] = (capacity, job)
        return job


@dataclass(slots=True)
class RunningJob:
    """A placed job: trace index ``job``, its GPUs and hosts, start time, the scheduler's
    current decision (routing ``seed``, ``priority`` class, ``offset``, and ``gate``: when
    > 0, iteration ``k`` starts no earlier than ``offset + k * gate`` after the segment's
    start, CASSINI's time shift held at every iteration), and the iterations ``done`` with
    their ``progress`` breakpoints ``(time, done)`` (steady mode)."""

    job: int
    spec: ClusterJob
    gpus: np.ndarray
    hosts: np.ndarray
    start: float
    seed: int = 0
    priority: int = 0
    offset: float = 0.0
    gate: float = 0.0
    done: float = 0.0
    progress: list = field(default_factory=list)
    #: (job shape, GPUs): its templates' key but the seed (:meth:`TemplateCache.of`)
    placement: tuple | None = None


class TemplateCache:
    """Templates by (job shape, GPUs, seed): a job's alone run is simulated once.

    >>> TemplateCache(None).size
    0
    """

    def __init__(self, fabric, routing: str = "ecmp"):
        self.fabric, self.routing = fabric, routing
        self._cache: dict = {}
        self._stores: dict = {}
        #: training programs by job shape (each run of a comparison has its own ClusterJobs)
        self._programs: dict = {}
        #: iterations compiled (each run alone once)
        self.compiled = 0
        #: per (job shape, GPUs) the first seed's compiled iteration and frozen graph
        self._compiled: dict = {}

    def store(self, *what) -> dict:
        """A dict that every run on this cache shares under ``what`` (what its entries
        depend on besides the templates): the runs of a comparison reuse each other's
        steady-state probes of components they run alike.

        >>> c = TemplateCache(None)
        >>> c.store("probes", 0.01) is c.store("probes", 0.01), c.store("x") is c.store("y")
        (True, False)
        """
        return self._stores.setdefault(what, {})

    @property
    def size(self) -> int:
        return len(self._cache)

    def of(self, run: RunningJob, seed: int | None = None) -> IterationTemplate:
        """The template of a placed job on its current routing seed (or on ``seed``)."""
        if run.placement is None:
            run.placement = (run.spec.shape, tuple(np.asarray(run.gpus).tolist()))
        return self._lookup(run.placement, run.spec, run.gpus,
                            run.seed if seed is None else seed)

    def get(self, job: ClusterJob, gpus, seed: int) -> IterationTemplate:
        return self._lookup((job.shape, tuple(np.asarray(gpus).tolist())), job, gpus, seed)

    def _lookup(self, placement: tuple, job: ClusterJob, gpus, seed: int
                ) -> IterationTemplate:
        key = (*placement, int(seed))
        found = self._cache.get(key)
        if found is None:
            program = self._programs.get(placement[0])
            if program is None:
                program = self._programs[placement[0]] = job.program
            # another seed of the same job on the same GPUs: only its routes change
            base = self._compiled.get(placement)
            if base is not None:
                found = IterationTemplate.reseeded(*base, self.fabric, seed)
            if found is None:
                found, it = IterationTemplate.compiled(job, self.fabric, gpus,
                                                       routing=self.routing, seed=seed,
                                                       program=program)
                self._compiled.setdefault(placement, (it, found.arrays))
            self.compiled += 1
            self._cache[key] = found
        return found
