"""Shared clusters: jobs arrive, wait for hosts, train together on one fabric, and leave,
while a scheduler re-decides paths, priority classes and offsets at every cluster event.

At every cluster event (an arrival, a departure) queued jobs are placed in arrival order
when the allocator finds them hosts (a job that does not fit waits; a later, smaller one may
start before it), then the scheduler decides for the running jobs that use the network:

- **path choice, per job** (:mod:`hpnsim.sched.cluster.decide`): a job's candidates are its
  iteration routed with the routing seeds ``seed .. seed + candidates - 1``; Crux's path
  selection (and TACCL*'s, in arrival order) takes jobs from the highest GPU intensity down
  and gives each the candidate whose most loaded network link carries the fewest bytes per
  capacity, those already placed and its own (:func:`~hpnsim.sched.cluster.decide.least_loaded`).
- **priority class**: the scheduler's class (:func:`~hpnsim.sched.policies.schedule`), set
  on every transfer of the job;
- **offset and gate** (CASSINI): iteration ``k`` starts no earlier than ``offset + k x
  gate`` (exact mode: from the job's placement, re-anchored when the jobs sharing its links
  change; steady-state mode: from the start of every interval, where all jobs start an
  iteration).

Crux's inputs are measured: ``W_j`` = GPUs x compute time per iteration and the bytes per
network link of one iteration alone on its GPUs, so ``t_j`` is its uncontended bottleneck
transfer time.

Between two events the set of jobs is fixed, and a mode advances them
(:mod:`hpnsim.sched.cluster.modes`): exact mode (``exact=True``) simulates every iteration on
one engine run; steady-state mode simulates each group of link-sharing jobs until its
iteration times are stable, then advances the clock at those rates to the next event. The
result says how much time and how many iterations were extrapolated.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict

import numpy as np

from hpnsim.errors import InputError, check_seed
from hpnsim.sched.cluster.decide import decide
from hpnsim.sched.cluster.jobs import ClusterJob, RunningJob, TemplateCache
from hpnsim.sched.cluster.modes import AdvanceMode, ExactMode, SteadyMode
from hpnsim.sched.cluster.result import ClusterResult, JobOutcome
from hpnsim.sched.cluster.steady import MAX_PROBE_SIZE, MAX_PROBE_TASKS
from hpnsim.sched.compression import check_levels
from hpnsim.sched.paths import CLUSTER_CANDIDATES
from hpnsim.sched.policies import check_scheduler
from hpnsim.workloads.allocation import allocate, given, hosts_of, within_host
from hpnsim.workloads.allocator_names import ALLOCATORS

__all__ = ["ClusterDriver", "ClusterJob", "ClusterResult", "TemplateCache", "check_window",
           "simulate_cluster"]


def simulate_cluster(fabric, jobs, *, scheduler: str = "none", allocator: str = "packed",
                     K: int = 8, samples: int = 10, exact: bool = False,
                     tolerance: float = 0.01, seed: int = 0, horizon: float | None = None,
                     progress=None, candidates: int = CLUSTER_CANDIDATES,
                     routing: str = "ecmp",
                     probe_budget: int = MAX_PROBE_SIZE,
                     window: tuple[float, float] | None = None,
                     templates: TemplateCache | None = None,
                     share_hosts: bool = False) -> ClusterResult:
    """Run a trace of jobs on a shared fabric under a scheduler (module docstring).

    Parameters
    ----------
    fabric : Fabric
    jobs : sequence of :class:`ClusterJob`
    scheduler : one of :data:`~hpnsim.sched.policies.SCHEDULERS`
    allocator : one of :data:`~hpnsim.workloads.allocator_names.ALLOCATORS`
    K, samples : priority classes and Crux's sampled topological orders
    exact : simulate every iteration (else steady-state extrapolation)
    tolerance : relative tolerance of a stable iteration time (and of "contended")
    seed : routing hash seed, random allocator, Crux's sampled orders
    horizon : stop at this time (seconds; default: when every job has left)
    progress : callable ``(time, jobs finished, jobs)``, called at every event
    candidates : routing seeds tried per job by path selection
        (:data:`~hpnsim.sched.paths.CLUSTER_CANDIDATES`)
    routing : routing policy of every job's traffic
    probe_budget : tasks plus link entries a task-by-task steady-state probe may need
        (:func:`~hpnsim.sched.cluster.steady.task_level_cost`); costlier components are
        probed phase-level (:mod:`hpnsim.sched.cluster.phase`; 0: always)
    window : ``(t0, t0 + T)`` seconds, the period utilization is measured over (the paper's
        Definition 1; default the whole run); without a ``horizon`` the run stops at its end
    templates : a :class:`~hpnsim.sched.cluster.jobs.TemplateCache` on the same fabric and
        routing, shared between runs (``--compare``: each job's iterations compiled once)
    share_hosts : a job smaller than a host takes free GPUs of a partly used host
        (:func:`~hpnsim.workloads.allocation.within_host`); larger jobs still take whole
        free hosts by ``allocator`` (default: every job takes whole hosts)

    Examples
    --------
    Two 16-GPU data-parallel jobs on a k=4 fat-tree with one GPU per host, one after the
    other on the same hosts (the cluster has room for only one of them at a time):

    >>> from hpnsim.fabrics import fat_tree
    >>> from hpnsim.training.job import TrainJob
    >>> f = fat_tree(4, gpus_per_host=1)
    >>> big = TrainJob("llama3-8b", tp=1, dp=16, zero=1)
    >>> r = simulate_cluster(f, [ClusterJob("a", big, iterations=3),
    ...                          ClusterJob("b", big, arrival=0.1, iterations=3)], exact=True)
    >>> a, b = r.jobs
    >>> bool(abs(b.start - a.finish) < 1e-9), round(b.wait, 3) == round(a.finish - 0.1, 3)
    (True, True)
    """
    return ClusterDriver(fabric, jobs, scheduler=scheduler, allocator=allocator, K=K,
                         samples=samples, exact=exact, tolerance=tolerance, seed=seed,
                         horizon=horizon, progress=progress, candidates=candidates,
                         routing=routing, probe_budget=probe_budget, window=window,
                         templates=templates, share_hosts=share_hosts).run()


class ClusterDriver:
    """One shared-cluster run (:func:`simulate_cluster`): the trace's queue, the free hosts,
    the running and finished jobs, and the mode that advances between events.

    Takes :func:`simulate_cluster`'s arguments, and ``probe_tasks``: the tasks a
    steady-state probe's graph may hold before it stops unstable
    (:data:`~hpnsim.sched.cluster.steady.MAX_PROBE_TASKS`).

    At each event: admit the arrivals, place what fits, let the scheduler decide, advance to
    the next event, release the leavers.
    """

    def __init__(self, fabric, jobs, *, scheduler: str = "none", allocator: str = "packed",
                 K: int = 8, samples: int = 10, exact: bool = False,
                 tolerance: float = 0.01, seed: int = 0, horizon: float | None = None,
                 progress=None, candidates: int = CLUSTER_CANDIDATES,
                 routing: str = "ecmp", probe_budget: int = MAX_PROBE_SIZE,
                 probe_tasks: int = MAX_PROBE_TASKS, window=None, templates=None,
                 share_hosts: bool = False):
        self.jobs = _check(fabric, jobs, scheduler, allocator, K, tolerance, candidates)
        check_horizon(horizon, self.jobs)
        self.window = check_window(window, horizon, self.jobs)
        if horizon is None and self.window is not None:
            horizon = self.window[1]
        if isinstance(probe_budget, bool) or not isinstance(probe_budget, int) \
                or probe_budget < 0:
            raise InputError("probe_budget", f"an integer >= 0, got {probe_budget!r}")
        self.fabric, self.scheduler, self.allocator = fabric, scheduler, allocator
        self.share_hosts = bool(share_hosts)
        self.K, self.samples, self.candidates = K, samples, candidates
        self.tolerance, self.seed = tolerance, check_seed(seed)
        self.end = math.inf if horizon is None else float(horizon)
        self.on_event = progress
        self.cap = np.asarray(fabric.link_capacity, dtype=np.float64)
        if templates is not None and (templates.fabric is not fabric
                                      or templates.routing != routing):
            raise InputError("templates", "a cache built for another fabric or routing")
        self.templates = TemplateCache(fabric, routing) if templates is None else templates
        self.mode: AdvanceMode = ExactMode(self.cap, self.templates, self.end) if exact else \
            SteadyMode(self.cap, self.templates, tolerance=tolerance, budget=probe_budget,
                       max_tasks=probe_tasks)
        self.rng = np.random.default_rng(self.seed)
        self.pending = deque(sorted(range(len(self.jobs)),
                                    key=lambda i: (self.jobs[i].arrival, i)))
        self.free_gpus = np.ones(fabric.n_gpus, dtype=bool)
        self._check_placeable()
        self.queue: list[int] = []
        self.running: dict[int, RunningJob] = {}
        self.finished: dict[int, RunningJob] = {}
        self.events = [0.0]
        self.t = 0.0

    def run(self) -> ClusterResult:
        while True:
            self._on_arrivals()
            placed = self._place()
            if not self.running:
                if not self._wait_for_arrival():
                    break
                continue
            decide(self.scheduler, list(self.running.values()), self.templates, self.cap,
                   K=self.K, seed=self.seed, samples=self.samples, candidates=self.candidates)
            self.t, leaving = self.mode.advance(self.running, placed, self.t, self._limit())
            self.events.append(self.t)
            for j in leaving:
                self._on_departure(j)
            if self.on_event is not None:
                self.on_event(self.t, len(self.finished), len(self.jobs))
            if self.t >= self.end:
                break
        return self._result()

    def _on_arrivals(self) -> None:
        """Queue the jobs that have arrived by now."""
        while self.pending and self.jobs[self.pending[0]].arrival <= self.t:
            self.queue.append(self.pending.popleft())

    @property
    def free(self) -> np.ndarray:
        """Hosts with every GPU free."""
        per_host = self.fabric.gpus_per_host
        n = self.fabric.n_hosts
        return self.free_gpus[: n * per_host].reshape(n, per_host).all(axis=1)

    def _gpus_for(self, job: ClusterJob, free_gpus: np.ndarray, rng) -> np.ndarray | None:
        """The allocator's GPUs for ``job`` given the free GPUs (None: not now)."""
        per_host = self.fabric.gpus_per_host
        if self.share_hosts and job.gpus is not None:
            gpus = given(self.fabric, np.ones(self.fabric.n_hosts, dtype=bool),
                         list(job.gpus), job.tp)
            return gpus if free_gpus[gpus].all() else None
        if self.share_hosts and job.n_gpus < per_host:
            return within_host(self.fabric, free_gpus, job.n_gpus)
        n = self.fabric.n_hosts
        free_hosts = free_gpus[: n * per_host].reshape(n, per_host).all(axis=1)
        return allocate(self.allocator, self.fabric, free_hosts, job.n_gpus, tp=job.tp,
                        seed=rng, gpus=None if job.gpus is None else list(job.gpus))

    def _check_placeable(self) -> None:
        """Every job fits the empty cluster under the allocator, before anything runs."""
        empty = np.ones(self.fabric.n_gpus, dtype=bool)
        rng = np.random.default_rng(self.seed)
        for i, job in enumerate(self.jobs):
            if self._gpus_for(job, empty, rng) is None:
                raise InputError(f"jobs[{i}]", f"the {self.allocator} allocator cannot place "
                                               f"{job.name!r} ({job.n_gpus} GPUs) even on "
                                               "the empty cluster")

    def _place(self) -> list[int]:
        """Place queued jobs in arrival order where the allocator finds them GPUs."""
        placed = []
        for j in list(self.queue):
            job = self.jobs[j]
            gpus = self._gpus_for(job, self.free_gpus, self.rng)
            if gpus is None:
                continue
            self.queue.remove(j)
            hosts = hosts_of(gpus, self.fabric.gpus_per_host)
            if self.share_hosts:
                self.free_gpus[np.asarray(gpus)] = False
            else:               # a job holds its hosts whole
                per_host = self.fabric.gpus_per_host
                self.free_gpus[(hosts[:, None] * per_host + np.arange(per_host)).ravel()] = False
            self.running[j] = RunningJob(j, job, np.asarray(gpus), hosts, self.t,
                                         seed=self.seed, progress=[(self.t, 0.0)])
            placed.append(j)
        return placed

    def _wait_for_arrival(self) -> bool:
        """The cluster is empty: move to the next arrival (False: nothing more to run)."""
        if not self.pending:
            if self.queue:
                raise InputError("allocator", f"{self.allocator} cannot place "
                                              f"{self.jobs[self.queue[0]].name!r} "
                                              "on the empty cluster")
            return False
        self.t = min(self.jobs[self.pending[0]].arrival, self.end)
        self.events.append(self.t)
        return self.t < self.end

    def _limit(self) -> float:
        """The next known event: an arrival, a job's duration up, or the horizon."""
        limit = min(self.jobs[self.pending[0]].arrival if self.pending else math.inf, self.end)
        for r in self.running.values():
            if r.spec.duration is not None:
                limit = min(limit, r.start + r.spec.duration)
        return limit

    def _on_departure(self, j: int) -> None:
        r = self.running.pop(j)
        if self.share_hosts:
            self.free_gpus[r.gpus] = True
        else:
            per_host = self.fabric.gpus_per_host
            self.free_gpus[(r.hosts[:, None] * per_host + np.arange(per_host)).ravel()] = True
        self.finished[j] = r
        self.mode.leave(r)

    def _result(self) -> ClusterResult:
        outcomes = []
        waiting = self.queue + list(self.pending)
        unfinished = [self.jobs[j].name for j in self.running] + \
            [self.jobs[j].name for j in waiting]
        for j, r in sorted({**self.finished, **self.running}.items()):
            job = r.spec
            # alone on the base routing seed (the scenario's routing, no path choice)
            alone = self.templates.of(r, self.seed).iteration_time
            finish, progress = self.mode.trajectory(r, j in self.running, self.t, alone)
            outcomes.append(JobOutcome(job.name, job.n_gpus, r.hosts.tolist(), job.arrival,
                                       r.start, float(finish), float(progress[1][-1]),
                                       job.n_gpus * self.templates.of(r).compute_time, alone,
                                       progress, r.gpus.tolist()))
        return ClusterResult(self.scheduler, self.allocator, self.mode.exact, self.tolerance,
                             self.fabric.n_gpus, outcomes, np.array(self.events),
                             unfinished=unfinished, window=self.window,
                             **asdict(self.mode.extrapolation()))


def _clock(seconds: float) -> str:
    """``2400 s (40 min)``: seconds, and minutes or hours past a minute."""
    if seconds >= 3600:
        return f"{seconds:g} s ({seconds / 3600:.4g} h)"
    return f"{seconds:g} s ({seconds / 60:.4g} min)" if seconds >= 60 else f"{seconds:g} s"


def check_horizon(horizon, jobs) -> None:
    """InputError naming ``horizon`` when it comes no later than the first arrival: no job
    would run before the trace stops (the tables would be empty and every job unfinished).

    >>> from types import SimpleNamespace as J
    >>> check_horizon(1800.0, [J(name="j1", arrival=2400.0), J(name="j0", arrival=3000.0)])
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: horizon: 1800 s (30 min) ends before the first job arrives (j1 at 2400 s (40 min)): no job would run; give a horizon after it
    """
    if horizon is None or not jobs:
        return
    first = min(jobs, key=lambda j: j.arrival)
    if horizon <= first.arrival:
        raise InputError("horizon", f"{_clock(horizon)} ends before the first job arrives "
                                    f"({first.name} at {_clock(first.arrival)}): no job would "
                                    f"run; give a horizon after it")


def check_window(window, horizon, jobs) -> tuple[float, float] | None:
    """``window`` as ``(t0, t0 + T)`` floats, or InputError naming ``window``: it must be
    ``0 <= t0 < t0 + T``, end by the ``horizon``, and overlap the trace (end after the
    first arrival; when every job has a ``duration``, start before the trace is over).

    >>> check_window((10, 20), None, [])
    (10.0, 20.0)
    >>> check_window((10, 20), 15.0, [])
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: window: must end by the horizon (15 s), got [10, 20] s
    """
    if window is None:
        return None
    try:
        a, b = (float(x) for x in window)
    except (TypeError, ValueError):
        raise InputError("window", f"two times [start, end], got {window!r}") from None
    if not (math.isfinite(a) and math.isfinite(b) and 0 <= a < b):
        raise InputError("window", f"needs 0 <= start < end, got [{a:g}, {b:g}] s")
    if horizon is not None and b > horizon:
        raise InputError("window", f"must end by the horizon ({horizon:g} s), "
                                   f"got [{a:g}, {b:g}] s")
    if jobs and b <= min(j.arrival for j in jobs):
        first = min(jobs, key=lambda j: j.arrival)
        raise InputError("window", f"ends at {_clock(b)}, before the first job arrives "
                                   f"({first.name} at {_clock(first.arrival)}): no job runs "
                                   f"in it")
    if jobs and all(j.duration is not None for j in jobs):
        # the cluster is never idle while a job waits (it fits the empty cluster), so the
        # trace is over by the last arrival plus every job's duration one after another
        last = max(j.arrival for j in jobs) + sum(j.duration for j in jobs)
        if a >= last:
            raise InputError("window", f"starts at {a:g} s, after the trace (over by "
                                       f"{last:g} s)")
    return a, b


def _check(fabric, jobs, scheduler, allocator, K, tolerance, candidates):
    check_scheduler(scheduler)
    check_levels(K)
    if allocator not in ALLOCATORS:
        raise InputError("allocator", f"one of {', '.join(ALLOCATORS)}; got {allocator!r}")
    if not (isinstance(tolerance, int | float) and 0 < tolerance < 1):
        raise InputError("tolerance", f"a fraction in (0, 1), got {tolerance!r}")
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise InputError("candidates", f"an integer >= 1, got {candidates!r}")
    jobs = list(jobs)
    names = set()
    for i, job in enumerate(jobs):
        if not isinstance(job, ClusterJob):
            raise InputError(f"jobs[{i}]", f"must be a ClusterJob, got {type(job).__name__}")
        if job.name in names:
            raise InputError(f"jobs[{i}].name", f"{job.name!r} is used by another job")
        names.add(job.name)
        if job.n_gpus > fabric.n_gpus:
            raise InputError(f"jobs[{i}].gpus", f"{job.name!r} needs {job.n_gpus:,} GPUs; "
                                                f"the cluster has {fabric.n_gpus:,}")
        if allocator == "given" and job.gpus is None:
            raise InputError(f"jobs[{i}].gpus", "the given allocator needs every job's GPUs")
    return jobs
