"""Shared clusters: jobs arrive, wait for hosts, train together on one fabric, and leave,
while a scheduler re-decides paths, priority classes and offsets at every cluster event.

At every cluster event (an arrival, a departure) queued jobs are placed in arrival order
when the allocator finds them hosts (a job that does not fit waits; a later, smaller one may
start before it), then the scheduler decides for the running jobs that use the network:

- **path choice, per job**: a job's candidates are its iteration routed with the routing
  seeds ``seed .. seed + candidates - 1`` (each seed re-hashes every connection of the job,
  as a per-job choice of UDP source ports would); Crux's path selection (and TACCL*'s, in
  arrival order) takes jobs from the highest GPU intensity down and gives each the candidate
  whose most loaded network link carries the fewest bytes per capacity already placed. The
  choice is per job, not per connection: per-connection choices would need a collective
  compiled per combination of ports.
- **priority class**: the scheduler's class (:func:`~hpnsim.sched.policies.schedule`), set
  on every transfer of the job;
- **offset** (CASSINI): a delay before the job's first iteration (exact mode: when it is
  placed; steady-state mode: at the start of every interval, where all jobs start an
  iteration).

Crux's inputs are measured: ``W_j`` = GPUs x compute time per iteration and the bytes per
network link of one iteration alone on its GPUs, so ``t_j`` is its uncontended bottleneck
transfer time.

Between two events the set of jobs is fixed. Exact mode (``exact=True``) simulates every
iteration on one engine run (:mod:`hpnsim.sched.cluster.exact`). Steady-state mode
simulates each group of link-sharing jobs until its iteration times are stable
(:mod:`hpnsim.sched.cluster.steady`), then advances the clock at those rates to the next
event; a group whose jobs and decisions did not change reuses its rates. The result says how
much time and how many iterations were extrapolated.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from hpnsim.errors import InputError, check_seed
from hpnsim.sched.cluster.exact import ExactCluster
from hpnsim.sched.cluster.jobs import ClusterJob, TemplateCache
from hpnsim.sched.cluster.result import ClusterResult, JobOutcome
from hpnsim.sched.cluster.steady import MAX_PROBE_SIZE, Probe, components, probe
from hpnsim.sched.compression import check_levels
from hpnsim.sched.policies import check_scheduler, schedule
from hpnsim.workloads.allocation import POLICIES, allocate, hosts_of

__all__ = ["ClusterJob", "ClusterResult", "simulate_cluster"]

#: schedulers that choose paths (the rest keep every job on seed ``seed``)
PATH_SELECTING = {"crux-ps-pa": "intensity", "crux": "intensity", "taccl": "arrival"}
#: routing seeds tried per job by path selection
DEFAULT_CANDIDATES = 4


@dataclass
class _Run:
    job: int
    gpus: np.ndarray
    hosts: np.ndarray
    start: float
    seed: int = 0
    priority: int = 0
    offset: float = 0.0
    done: float = 0.0
    progress: list = field(default_factory=list)


def _check(fabric, jobs, scheduler, allocator, K, tolerance, candidates):
    check_scheduler(scheduler)
    check_levels(K)
    if allocator not in POLICIES:
        raise InputError("allocator", f"one of {', '.join(POLICIES)}; got {allocator!r}")
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


def simulate_cluster(fabric, jobs, *, scheduler: str = "none", allocator: str = "packed",
                     K: int = 8, samples: int = 10, exact: bool = False,
                     tolerance: float = 0.01, seed: int = 0, horizon: float | None = None,
                     progress=None, candidates: int = DEFAULT_CANDIDATES,
                     routing: str = "ecmp",
                     probe_budget: int = MAX_PROBE_SIZE) -> ClusterResult:
    """Run a trace of jobs on a shared fabric under a scheduler (module docstring).

    Parameters
    ----------
    fabric : Fabric
    jobs : sequence of :class:`ClusterJob`
    scheduler : one of :data:`~hpnsim.sched.policies.SCHEDULERS`
    allocator : one of :data:`~hpnsim.workloads.allocation.POLICIES`
    K, samples : priority classes and Crux's sampled topological orders
    exact : simulate every iteration (else steady-state extrapolation)
    tolerance : relative tolerance of a stable iteration time (and of "contended")
    seed : routing hash seed, random allocator, Crux's sampled orders
    horizon : stop at this time (seconds; default: when every job has left)
    progress : callable ``(time, jobs finished, jobs)``, called at every event
    candidates : routing seeds tried per job by path selection
    routing : routing policy of every job's traffic
    probe_budget : tasks plus link entries a task-by-task steady-state probe may need
        (:func:`~hpnsim.sched.cluster.steady.task_level_cost`); costlier components are
        probed phase-level (:mod:`hpnsim.sched.cluster.phase`; 0: always)

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
    jobs = _check(fabric, jobs, scheduler, allocator, K, tolerance, candidates)
    if isinstance(probe_budget, bool) or not isinstance(probe_budget, int) or probe_budget < 0:
        raise InputError("probe_budget", f"an integer >= 0, got {probe_budget!r}")
    seed = check_seed(seed)
    end = math.inf if horizon is None else float(horizon)
    cap = np.asarray(fabric.link_capacity, dtype=np.float64)
    cache = TemplateCache(fabric, routing)
    rng = np.random.default_rng(seed)
    pending = deque(sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival, i)))
    free = np.ones(fabric.n_hosts, dtype=bool)
    queue: list[int] = []
    running: dict[int, _Run] = {}
    finished: dict[int, _Run] = {}
    engine = ExactCluster(cap) if exact else None
    stats = {"extrapolated_time": 0.0, "extrapolated_iterations": 0.0, "probes": 0,
             "unstable_probes": 0, "phase_probes": 0}
    steady_cache: dict = {}
    events = [0.0]
    t = 0.0

    def template(r: _Run, seed_: int | None = None):
        return cache.get(jobs[r.job], r.gpus, r.seed if seed_ is None else seed_)

    while True:
        while pending and jobs[pending[0]].arrival <= t:
            queue.append(pending.popleft())
        placed = []
        for j in list(queue):
            job = jobs[j]
            gpus = allocate(allocator, fabric, free, job.n_gpus, tp=job.tp, seed=rng,
                            gpus=None if job.gpus is None else list(job.gpus))
            if gpus is None:
                continue
            queue.remove(j)
            hosts = hosts_of(gpus, fabric.gpus_per_host)
            free[hosts] = False
            running[j] = _Run(j, np.asarray(gpus), hosts, t, seed=seed, progress=[(t, 0.0)])
            placed.append(j)
        if not running:
            if not pending:
                if queue:
                    raise InputError("allocator", f"{allocator} cannot place "
                                                  f"{jobs[queue[0]].name!r} on the empty cluster")
                break
            t = min(jobs[pending[0]].arrival, end)
            events.append(t)
            if t >= end:
                break
            continue
        _decide(scheduler, jobs, running, template, cap, K=K, seed=seed, samples=samples,
                candidates=candidates)
        limit = min(jobs[pending[0]].arrival if pending else math.inf, end)
        for r in running.values():
            if jobs[r.job].duration is not None:
                limit = min(limit, r.start + jobs[r.job].duration)
        if exact:
            t_new, leaving = _exact_step(engine, jobs, running, placed, template, t, limit)
        else:
            t_new, leaving = _steady_step(jobs, running, template, cap, t, limit, tolerance,
                                          steady_cache, stats, probe_budget)
        t = t_new
        events.append(t)
        for j in leaving:
            r = running.pop(j)
            free[r.hosts] = True
            finished[j] = r
            if exact and jobs[j].duration is not None:
                engine.stop(j)
        if progress is not None:
            progress(t, len(finished), len(jobs))
        if t >= end:
            break
    return _result(scheduler, allocator, exact, tolerance, fabric, jobs, running, finished,
                   queue + list(pending), engine, template, np.array(events), stats, t, seed)


def _decide(scheduler, jobs, running, template, cap, *, K, seed, samples, candidates):
    """Set every running job's seed (path), priority class and offset."""
    net = [r for r in running.values() if template(r, seed).links.size]
    for r in running.values():
        r.priority, r.offset = 0, 0.0
    if not net:
        return
    how = PATH_SELECTING.get(scheduler)
    if how is not None:
        base = [template(r, seed).sched_job(jobs[r.job].name, jobs[r.job].n_gpus, cap)
                for r in net]
        if how == "intensity":
            intensity = np.array([b.intensity(cap) for b in base])
            order = np.lexsort((np.arange(len(net)), -intensity))
        else:
            order = np.array(sorted(range(len(net)), key=lambda i: running_start(net[i])))
        load = np.zeros(cap.size)
        for i in order.tolist():
            r = net[i]
            best = None
            for c in range(candidates):
                tpl = template(r, seed + c)
                level = load[tpl.links] / cap[tpl.links]
                score = (float(level.max(initial=0.0)), float(level.sum()), c)
                if best is None or score < best[0]:
                    best = (score, c, tpl)
                if score[0] == 0.0:     # nothing placed on its links: no candidate is better
                    break
            r.seed = seed + best[1]
            np.add.at(load, best[2].links, best[2].link_bytes)
    else:
        for r in net:
            r.seed = seed
    sched = [template(r).sched_job(jobs[r.job].name, jobs[r.job].n_gpus, cap) for r in net]
    decision = schedule(scheduler, sched, None, cap, K=K, seed=seed, samples=samples)
    for r, p, o in zip(net, decision.priority.tolist(), decision.offsets.tolist(),
                       strict=True):
        r.priority, r.offset = int(p), float(o)


def running_start(r: _Run) -> tuple:
    return (r.start, r.job)


def _exact_step(engine, jobs, running, placed, template, t, limit):
    for j, r in running.items():
        tpl = template(r)
        if j in placed:
            job = jobs[j]
            n = job.iterations if job.iterations is not None \
                else math.ceil(job.duration / tpl.iteration_time) + 1
            engine.place(j, tpl, n, r.start, r.offset, r.priority)
        else:
            engine.decide(j, r.priority, tpl)
    counted = {j: jobs[j].iterations for j in running if jobs[j].iterations is not None}
    t_new, leaving = engine.advance(limit, counted)
    for j, r in running.items():
        job = jobs[j]
        if job.duration is not None and r.start + job.duration <= t_new:
            leaving.append(j)
    return t_new, sorted(set(leaving))


def _steady_step(jobs, running, template, cap, t, limit, tolerance, cache, stats, budget):
    runs = list(running.values())
    tpls = [template(r) for r in runs]
    remaining = np.array([jobs[r.job].iterations - r.done if jobs[r.job].iterations is not None
                          else math.inf for r in runs])
    probes: list[Probe | None] = [None] * len(runs)
    net = [i for i, tpl in enumerate(tpls) if tpl.links.size]
    for i, tpl in enumerate(tpls):
        if not tpl.links.size:     # nothing shared: its alone rate
            probes[i] = Probe([np.zeros(0)], np.array([tpl.iteration_time]), True, 0.0)
    elapsed = 0.0
    for comp in components([tpls[i].links for i in net]):
        members = [net[c] for c in comp]
        ranks = np.unique([runs[i].priority for i in members], return_inverse=True)[1]
        key = tuple((runs[i].job, runs[i].seed, int(k), runs[i].offset)
                    for i, k in zip(members, ranks.ravel().tolist(), strict=True))
        period = cache.get(key)
        if period is not None:
            for i, p in zip(members, period, strict=True):
                probes[i] = Probe([np.zeros(0)], np.array([p]), True, 0.0)
            continue
        found = cache.get(("probe", key))   # an unstable probe that would run the same
        if found is None or not found.repeats(limit - t, remaining[members]):
            found = probe([tpls[i] for i in members], [runs[i].priority for i in members],
                          [runs[i].offset for i in members], cap, tolerance=tolerance,
                          limit=limit - t, remaining=remaining[members], budget=budget)
            stats["probes"] += 1
            stats["unstable_probes"] += not found.stable
            stats["phase_probes"] += found.level == "phase"
            cache[("probe", key)] = found
        elapsed = max(elapsed, found.simulated)
        if found.stable:
            cache[key] = found.period.tolist()
        for k, i in enumerate(members):
            probes[i] = Probe([found.ends[k]], found.period[k:k + 1], found.stable,
                              found.simulated)
    leave_at = np.full(len(runs), math.inf)
    for i, p in enumerate(probes):
        if math.isfinite(remaining[i]):
            leave_at[i] = t + _time_to(p, remaining[i])
        job = jobs[runs[i].job]
        if job.duration is not None:
            leave_at[i] = min(leave_at[i], runs[i].start + job.duration)
    t_new = min(limit, float(leave_at.min()))
    dt = t_new - t
    stats["extrapolated_time"] += dt - min(elapsed, dt)
    leaving = []
    for i, (r, p) in enumerate(zip(runs, probes, strict=True)):
        gained = p.progress(0, dt)
        simulated = p.progress(0, min(dt, p.elapsed)) if p.elapsed > 0 else 0.0
        stats["extrapolated_iterations"] += max(gained - simulated, 0.0)
        if leave_at[i] <= t_new * (1 + 1e-12):
            leaving.append(r.job)
            if jobs[r.job].iterations is not None:
                gained = remaining[i]
        r.done += gained
        r.progress.append((t_new, r.done))
    return t_new, leaving


def _time_to(p: Probe, iterations: float) -> float:
    """Seconds after the segment start at which the probe's job has done ``iterations``."""
    ends, period = p.ends[0], float(p.period[0])
    need = math.ceil(iterations - 1e-9)
    if ends.size >= need and need >= 1 and abs(need - iterations) < 1e-9:
        return float(ends[need - 1])
    last = float(ends[-1]) if ends.size else 0.0
    return last + (iterations - ends.size) * period


def _result(scheduler, allocator, exact, tolerance, fabric, jobs, running, finished,
            waiting, engine, template, events, stats, t_end, seed) -> ClusterResult:
    outcomes = []
    unfinished = [jobs[j].name for j in running] + [jobs[j].name for j in waiting]
    for j, r in sorted({**finished, **running}.items()):
        job, tpl = jobs[j], template(r)
        alone = template(r, seed).iteration_time    # alone with plain ECMP
        if exact:
            ends = engine.iteration_ends(j)
            stop = t_end if j in running else _exact_finish(job, r, ends, t_end)
            ends = ends[ends <= stop]
            times = [r.start, *ends.tolist()]
            done = list(range(len(times)))
            if stop > times[-1]:
                times.append(stop)
                done.append(done[-1] + min((stop - times[-2]) / alone, 1.0 - 1e-12))
            finish, progress = stop, (np.array(times), np.array(done, dtype=float))
        else:
            times, done = zip(*r.progress, strict=True)
            finish, progress = times[-1], (np.array(times), np.array(done))
        outcomes.append(JobOutcome(job.name, job.n_gpus, r.hosts.tolist(), job.arrival,
                                   r.start, float(finish), float(progress[1][-1]),
                                   job.n_gpus * tpl.compute_time, alone, progress))
    return ClusterResult(scheduler, allocator, exact, tolerance, fabric.n_gpus, outcomes,
                         events, unfinished=unfinished, **stats)


def _exact_finish(job, r, ends, t_end) -> float:
    if job.iterations is not None:
        return float(ends[job.iterations - 1])
    return min(r.start + job.duration, t_end)
