"""Steady state of a fixed set of jobs: simulate iterations until every job's iteration
time is stable, then give each job its steady period (seconds per iteration).

Jobs that share no network link cannot slow each other (hosts are never shared), so the
running jobs split into *components* of the link-sharing graph and each component is probed
alone. A probe is a fresh engine run of the component's jobs, every job starting an
iteration at the segment's start (a CASSINI offset delays it), iterations chained and added
as the run goes. A job is stable when, leaving out its first iteration (the warm-up from an
aligned start), the mean iteration times of the three thirds of its probe agree within
``tolerance / 2`` (at least ``3 x WINDOW + 1`` iterations); its period is their mean. Two jobs
of unrelated periods drift through each other's phases in a slow beat; halves agree only
once the probe spans several beats (thirds rarely agree by chance). A probe stops when every job is stable, when ``limit`` seconds
are simulated (the next arrival), when a job has run the iterations it had left (it leaves),
or after ``PROBE_PERIODS`` periods of its slowest job or ``MAX_PROBE_TASKS`` tasks (then
periods come from the iterations seen, and the component is counted as unstable).
A component whose task-by-task probe could not be stable within ``MAX_PROBE_SIZE``
(:func:`task_level_cost`) is probed with phase-level iterations instead
(:mod:`hpnsim.sched.cluster.phase`); such a probe gives periods but no iteration ends.
A probe that stopped on its own (stable or at a budget, before ``limit`` and before any job's
last iteration) would run again identically for the same component; the caller replays it
(:meth:`Probe.repeats`) instead of re-running it at every later event. A probe cut by its
limit, or asked for an earlier limit, is answered from its kept run
(:mod:`hpnsim.sched.cluster.probe_run`: continued, or read back).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from hpnsim.engine.twins import merge_twin_links
from hpnsim.sched.cluster.phase import MAX_SPREAD, phase_templates
from hpnsim.sched.cluster.probe_run import (
    WINDOW,
    Probe,
    ProbeLevel,
    ProbeRun,
    ProbeRuns,
    RunSlot,
    needed_iterations,
)
from hpnsim.sched.defaults import MAX_PROBE_SIZE

#: a compute budget, not a physical constant: a probe stops (unstable, periods from the
#: iterations seen) once its graph holds this many tasks. A job of 0.04 s iterations next
#: to one of 5 s would otherwise put ~10^6 tasks in the probe before the slow job has the
#: 10 iterations stability needs.
MAX_PROBE_TASKS = 60_000

__all__ = ["Probe", "ProbeLevel", "components", "probe"]


def components(link_sets: list[np.ndarray]) -> list[list[int]]:
    """Groups of indices whose link sets are connected by sharing links, each group
    ascending, the groups by their first index.

    >>> components([np.array([0, 1]), np.array([5]), np.array([1, 2]), np.array([])])
    [[0, 2], [1], [3]]
    """
    n = len(link_sets)
    if n == 0:
        return []
    sizes = np.array([links.size for links in link_sets], dtype=np.int64)
    links = np.concatenate([np.asarray(x, dtype=np.int64).ravel() for x in link_sets]) \
        if sizes.sum() else np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(n), sizes)
    # the bipartite graph job -- link: jobs are connected when they reach a common link
    ids, column = np.unique(links, return_inverse=True)
    graph = coo_matrix((np.ones(links.size), (owner, n + column.ravel())),
                       shape=(n + ids.size, n + ids.size))
    _, label = connected_components(graph, directed=False)
    label = label[:n]
    order = np.argsort(label, kind="stable")
    cuts = np.flatnonzero(np.diff(label[order])) + 1
    groups = [g.tolist() for g in np.split(order, cuts)]
    return sorted(groups)


def probe(templates, priorities, offsets, capacity, *, tolerance: float, limit: float,
          remaining, budget: int = MAX_PROBE_SIZE, max_tasks: int = MAX_PROBE_TASKS,
          max_spread: float = MAX_SPREAD, gates=None, runs: RunSlot | None = None
          ) -> Probe:
    """Probe a component (see the module docstring): task by task when that can reach
    stability within ``budget`` tasks plus link entries (:func:`task_level_cost`), else
    with every job's phase-level iteration (:mod:`hpnsim.sched.cluster.phase`).

    Parameters
    ----------
    templates : per job its :class:`~hpnsim.sched.cluster.jobs.IterationTemplate`
    priorities, offsets : per job its class and start delay
    capacity : bytes/s per link
    tolerance : relative stability tolerance
    limit : seconds until the next known event (the probe never runs past it)
    remaining : per job the iterations it has left (it stops there)
    budget : tasks plus link entries a task-level probe may need
    max_tasks : tasks a probe's graph may hold before it stops (:data:`MAX_PROBE_TASKS`)
    max_spread : slowest over fastest phase-level iteration once fast jobs are merged
        (:data:`~hpnsim.sched.cluster.phase.MAX_SPREAD`)
    gates : per job its gate period (iteration ``k`` starts no earlier than
        ``offset + k * gate``; 0: none), CASSINI's shifts held at every iteration
    runs : where the component's runs are kept between calls
        (:meth:`~hpnsim.sched.cluster.probe_run.ProbeRuns.slot`, one per component,
        decisions and ``remaining``): a later call continues or reads back the run
        (:mod:`hpnsim.sched.cluster.probe_run`) instead of simulating it again
    """
    gates = np.zeros(len(templates)) if gates is None else np.asarray(gates, dtype=float)
    level = ProbeLevel.TASK if task_level_cost(templates, offsets, limit) <= budget \
        else ProbeLevel.PHASE
    setup = (templates, priorities, offsets, capacity, tolerance, remaining, max_tasks,
             max_spread, gates)
    owner = runs.owner if runs is not None else None
    started = runs.get(level) if runs is not None else None
    if started is None:
        started = _start(level, *setup, owner=owner)
    run, scale, merge = started
    seen = run.answer(limit)
    kept, replaced = run, None
    if seen is None:            # the kept run cannot answer for this limit: a fresh one
        fresh = _start(level, *setup, owner=owner)
        seen = fresh[0].answer(limit)
        if fresh[0].now > run.now:
            started, kept, replaced = fresh, fresh[0], run
    if owner is not None:
        runs[level] = started
        owner.kept(kept, replaced)
    found = replace(seen, level=level)      # the kept run's answer stays as it was
    if level is ProbeLevel.PHASE:
        # phase-level iteration ends are not task-level ones: keep only the periods
        found.ends = [np.zeros(0) for _ in templates]
        if found.copies is not None:        # in the job's iterations, for Probe.repeats
            found.copies = found.copies * merge.astype(np.int64)
        found.period = found.period * scale
    return found


def _start(level, templates, priorities, offsets, capacity, tolerance, remaining, max_tasks,
           max_spread, gates, owner: ProbeRuns | None = None
           ) -> tuple[ProbeRun, np.ndarray, np.ndarray]:
    """A new run of the component at ``level``, with the phase-level scale and merge per
    job (ones at task level); its templates prepared once per ``owner``."""
    if owner is None:
        local, cap, scale, merge = _prepare(level, templates, capacity, max_spread)
    else:
        local, cap, scale, merge = owner.prepared(
            (level, max_spread), templates, capacity,
            lambda: _prepare(level, templates, capacity, max_spread))
    # a phase-level copy stands for ``merge`` iterations
    needed = needed_iterations(remaining) if level is ProbeLevel.TASK \
        else needed_iterations(np.ceil(np.asarray(remaining, dtype=np.float64) / merge))
    # the phase-level clock stands for the task-level one (a job's phase-level alone time
    # is close to its task-level one): offsets and the limit are used as they are; a gate
    # is per iteration of task-level time, a copy's gate the phase-level seconds that stand
    # for it (a copy's seconds x scale = task-level seconds per iteration)
    return (ProbeRun(local, priorities, offsets, cap, tolerance=tolerance, needed=needed,
                     max_tasks=max_tasks, gates=gates / scale), scale, merge)


def _prepare(level, templates, capacity, max_spread) -> tuple:
    """The templates a run at ``level`` appends, on their own links, their capacities,
    and per job the phase-level scale and merge (ones at task level)."""
    if level is ProbeLevel.TASK:
        ones = np.ones(len(templates))
        return (*_on_own_links(templates, capacity), ones, ones)
    phases, folded = phase_templates(templates, capacity, max_spread=max_spread)
    scale = np.array([p.scale for p in phases])
    merge = np.array([p.merge for p in phases], dtype=np.float64)
    return (*_on_own_links(phases, folded), scale, merge)


def _on_own_links(templates, capacity) -> tuple[list, np.ndarray]:
    """The templates with only the links the component uses, twins merged
    (:func:`~hpnsim.engine.twins.merge_twin_links`: a probe reads finish times only), kept
    links numbered in order, and those links' capacities: the engine sizes its state by the
    link count and walks every entry at every event, and a probe's rounds would otherwise
    set up all 72,016 of Lingjun's for the few hundred it loads."""
    arrays, cap = merge_twin_links([t.arrays for t in templates], capacity)
    return [replace(t, arrays=a) for t, a in zip(templates, arrays, strict=True)], cap


def task_level_cost(templates, offsets, limit: float) -> float:
    """Tasks plus link entries a task-level probe appends before every job can be stable
    (``3 x WINDOW + 2`` iterations of the slowest job, at alone speed) or ``limit`` is
    reached.

    >>> from types import SimpleNamespace as T
    >>> jobs = [T(iteration_time=1.0, engine_size=100), T(iteration_time=0.01, engine_size=10)]
    >>> task_level_cost(jobs, [0.0, 0.0], limit=5.0)
    5610.0
    """
    alone = np.array([t.iteration_time for t in templates])
    tasks = np.array([t.engine_size for t in templates], dtype=np.float64)
    span = min(limit, (3 * WINDOW + 2) * alone.max() + float(np.max(offsets, initial=0.0)))
    return float(np.sum(tasks * (span / alone + 1.0)))
