"""The two ways a cluster run advances between events, as strategies of one interface.

:class:`ExactMode` simulates every iteration on one resumable engine run
(:class:`~hpnsim.sched.cluster.exact.ExactCluster`). :class:`SteadyMode` probes each group of
link-sharing jobs until its iteration times are stable
(:func:`~hpnsim.sched.cluster.steady.probe`) and advances the clock at those rates; a group
whose jobs and decisions did not change reuses its rates. Both answer the same four
questions for the driver (:class:`AdvanceMode`): where the run gets to before ``limit`` and
who leaves then, what a departure does, a job's progress for the result, and how much was
extrapolated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hpnsim.sched.cluster.exact import ExactCluster
from hpnsim.sched.cluster.jobs import RunningJob, TemplateCache
from hpnsim.sched.cluster.probe_run import ProbeRuns
from hpnsim.sched.cluster.steady import (
    MAX_PROBE_SIZE,
    MAX_PROBE_TASKS,
    Probe,
    ProbeLevel,
    components,
    probe,
)

__all__ = ["AdvanceMode", "ExactMode", "Extrapolation", "SteadyMode"]


@dataclass
class Extrapolation:
    """How much of a run was not simulated (all 0 in exact mode).

    ``extrapolated_time``: seconds of cluster time in which no probe simulated anything;
    ``extrapolated_iterations``: iterations advanced at a steady rate instead of simulated;
    ``probes``, ``unstable_probes``, ``phase_probes``: components probed, those that hit the
    probe limit, those probed with phase-level iterations.
    """

    extrapolated_time: float = 0.0
    extrapolated_iterations: float = 0.0
    probes: int = 0
    unstable_probes: int = 0
    phase_probes: int = 0


class AdvanceMode(Protocol):
    """What the cluster driver asks of a mode."""

    exact: bool

    def advance(self, running: dict[int, RunningJob], placed: list[int], t: float,
                limit: float) -> tuple[float, list[int]]:
        """Advance from ``t`` (``placed``: jobs placed at ``t``) to the earliest departure
        before ``limit``, or to ``limit``; returns ``(time, jobs leaving then)``."""

    def leave(self, run: RunningJob) -> None:
        """``run`` leaves the cluster now."""

    def trajectory(self, run: RunningJob, still_running: bool, t_end: float,
                   alone: float) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
        """``(finish, (times, iterations done))`` of a job for the result."""

    def extrapolation(self) -> Extrapolation:
        """What was extrapolated instead of simulated."""


class ExactMode:
    """Every iteration simulated: jobs leave when the engine says their last iteration
    ended (or their ``duration`` is up, or the run's ``end``).

    A job's task graph holds the iterations it can start before it leaves or the run ends,
    never more: no iteration is shorter than its compute time per GPU (compute and
    optimizer run one after the other on a GPU), whatever the paths and the contention, so
    ``ceil(span / compute) + 1`` copies cover any span."""

    exact = True

    def __init__(self, capacity: np.ndarray, templates: TemplateCache,
                 end: float = math.inf):
        self.engine = ExactCluster(capacity)
        self.templates = templates
        self.end = end
        self.sized: dict[int, int] = {}
        #: per gated (CASSINI) job, the jobs it shares links with when its slots were set
        self.sharing: dict[int, frozenset] = {}

    def advance(self, running, placed, t, limit):
        sharing = _sharing(running, self.templates)
        for j, r in running.items():
            tpl = self.templates.of(r)
            if j in placed:
                n = self.sized[j] = _copies(r, tpl, self.end)
                self.engine.place(j, tpl, n, r.start, r.offset, r.priority, r.gate)
            else:
                self.engine.decide(j, r.priority, tpl)
                if r.gate > 0 and j in self.engine.slots and sharing[j] != self.sharing[j]:
                    # CASSINI recomputes its shifts when the jobs on its links change; a
                    # job left alone on them has nothing to interleave with: no slots
                    alone = len(sharing[j]) == 1
                    self.engine.reslot(j, 0.0 if alone else r.offset,
                                       0.0 if alone else r.gate)
            if r.gate > 0:
                self.sharing[j] = sharing[j]
        counted = {j: r.spec.iterations for j, r in running.items()
                   if r.spec.iterations is not None and r.spec.iterations <= self.sized[j]}
        t_new, leaving = self.engine.advance(limit, counted)
        for j, r in running.items():
            if r.spec.duration is not None and r.start + r.spec.duration <= t_new:
                leaving.append(j)
        return t_new, sorted(set(leaving))

    def leave(self, run):
        if run.spec.duration is not None:     # its last iteration is cut short
            self.engine.stop(run.job)

    def trajectory(self, run, still_running, t_end, alone):
        ends = self.engine.iteration_ends(run.job)
        if still_running:
            stop = t_end
        elif run.spec.iterations is not None:
            stop = float(ends[run.spec.iterations - 1])
        else:
            stop = min(run.start + run.spec.duration, t_end)
        ends = ends[ends <= stop]
        times = [run.start, *ends.tolist()]
        done = list(range(len(times)))
        if stop > times[-1]:          # the iteration in progress, pro rata of its alone time
            times.append(stop)
            done.append(done[-1] + min((stop - times[-2]) / alone, 1.0 - 1e-12))
        return stop, (np.array(times), np.array(done, dtype=float))

    def extrapolation(self):
        return Extrapolation()


class SteadyMode:
    """Steady-state extrapolation: each component of link-sharing jobs is probed (or its
    earlier probe reused) and every job advances at its period to the next event."""

    exact = False

    def __init__(self, capacity: np.ndarray, templates: TemplateCache, *, tolerance: float,
                 budget: int = MAX_PROBE_SIZE, max_tasks: int = MAX_PROBE_TASKS):
        self.capacity, self.templates = capacity, templates
        self.tolerance, self.budget, self.max_tasks = tolerance, budget, max_tasks
        self.counters = Extrapolation()
        #: a component's stable periods, by its jobs and their decisions
        self.periods: dict[tuple, list[float]] = {}
        #: a component's last probe (stable or not), replayed when it would run the same
        self.probes: dict[tuple, Probe] = {}
        #: probes of every run on these templates with these settings, by the component's
        #: templates and decisions (class ranks, offsets, gates): a run that would probe a
        #: component as another run did takes that probe when it had the same limit and
        #: iterations left (``exact``), or when it repeats (:meth:`Probe.repeats`, ``last``):
        #: either way the probe it would have run
        self.shared = templates.store("probes", float(tolerance), int(budget), int(max_tasks))
        #: probes taken from :attr:`shared` instead of run
        self.shared_hits = 0
        #: link-sharing components by the running jobs' templates
        self.component_sets = templates.store("components")
        #: the probes' runs, continued or read back when the component is probed again
        #: with another limit (:mod:`hpnsim.sched.cluster.probe_run`), shared likewise
        self.runs = templates.store("probe runs", float(tolerance), int(budget),
                                    int(max_tasks)).setdefault("runs", ProbeRuns())

    def advance(self, running, placed, t, limit):
        runs = list(running.values())
        tpls = [self.templates.of(r) for r in runs]
        remaining = np.array([r.spec.iterations - r.done if r.spec.iterations is not None
                              else math.inf for r in runs])
        probes, elapsed = self._probe_components(runs, tpls, remaining, t, limit)
        leave_at = np.full(len(runs), math.inf)
        for i, p in enumerate(probes):
            if math.isfinite(remaining[i]):
                leave_at[i] = t + _time_to(p, remaining[i])
            if runs[i].spec.duration is not None:
                leave_at[i] = min(leave_at[i], runs[i].start + runs[i].spec.duration)
        t_new = min(limit, float(leave_at.min()))
        dt = t_new - t
        self.counters.extrapolated_time += dt - min(elapsed, dt)
        leaving = []
        for i, (r, p) in enumerate(zip(runs, probes, strict=True)):
            gained = p.progress(0, dt)
            simulated = p.progress(0, min(dt, p.elapsed)) if p.elapsed > 0 else 0.0
            self.counters.extrapolated_iterations += max(gained - simulated, 0.0)
            if leave_at[i] <= t_new * (1 + 1e-12):
                leaving.append(r.job)
                if r.spec.iterations is not None:
                    gained = remaining[i]
            r.done += gained
            r.progress.append((t_new, r.done))
        return t_new, leaving

    def _probe_components(self, runs, tpls, remaining, t, limit):
        """Per job its probe (one job's view of its component's), and the seconds the
        probes simulated."""
        probes: list[Probe | None] = [None] * len(runs)
        net = [i for i, tpl in enumerate(tpls) if tpl.links.size]
        for i, tpl in enumerate(tpls):
            if not tpl.links.size:     # nothing shared: its alone rate
                probes[i] = Probe([np.zeros(0)], np.array([tpl.iteration_time]), True, 0.0)
        elapsed = 0.0
        for comp in self._components([tpls[i] for i in net]):
            members = [net[c] for c in comp]
            ranks = np.unique([runs[i].priority for i in members], return_inverse=True)[1]
            key = tuple((runs[i].job, runs[i].seed, int(k), runs[i].offset, runs[i].gate)
                        for i, k in zip(members, ranks.ravel().tolist(), strict=True))
            period = self.periods.get(key)
            if period is not None:
                for i, p in zip(members, period, strict=True):
                    probes[i] = Probe([np.zeros(0)], np.array([p]), True, 0.0)
                continue
            found = self.probes.get(key)
            if found is None or not found.repeats(limit - t, remaining[members]):
                found = self._shared_probe(runs, tpls, members, key, remaining, limit - t)
                self.counters.probes += 1
                self.counters.unstable_probes += not found.stable
                self.counters.phase_probes += found.level is ProbeLevel.PHASE
                self.probes[key] = found
            elapsed = max(elapsed, found.simulated)
            if found.stable:
                self.periods[key] = found.period.tolist()
            for k, i in enumerate(members):
                probes[i] = Probe([found.ends[k]], found.period[k:k + 1], found.stable,
                                  found.simulated)
        return probes, elapsed

    def _components(self, tpls) -> list[list[int]]:
        """:func:`components` of these templates' links, once per set of templates for
        every run on these templates (the running set recurs across a comparison's runs)."""
        key = tuple(map(id, tpls))
        found = self.component_sets.get(key)
        if found is None:       # the templates are kept with it: their ids stay theirs
            found = self.component_sets[key] = (tpls, components([t.links for t in tpls]))
        return found[1]

    def _shared_probe(self, runs, tpls, members, key, remaining, limit) -> Probe:
        """The component's probe: another run's that repeats here, else a new one."""
        decided = tuple((id(tpls[i]), *k[2:]) for i, k in zip(members, key, strict=True))
        left = remaining[members]
        exact = ("exact", decided, float(limit), left.tobytes())
        found = self.shared.get(exact)
        if found is None:
            last = self.shared.get(("last", decided))
            if last is not None and last[1].repeats(limit, left):
                found = last
        if found is not None:
            self.shared_hits += 1
            return found[1]
        found = probe([tpls[i] for i in members], [runs[i].priority for i in members],
                      [runs[i].offset for i in members], self.capacity,
                      tolerance=self.tolerance, limit=limit, remaining=left,
                      budget=self.budget, max_tasks=self.max_tasks,
                      gates=[runs[i].gate for i in members],
                      runs=self.runs.slot((decided, left.tobytes())))
        # the templates are kept with it: their ids in the keys stay theirs
        entry = ([tpls[i] for i in members], found)
        self.shared[exact] = self.shared[("last", decided)] = entry
        return found

    def leave(self, run):
        pass

    def trajectory(self, run, still_running, t_end, alone):
        times, done = zip(*run.progress, strict=True)
        return times[-1], (np.array(times), np.array(done))

    def extrapolation(self):
        return self.counters


def _sharing(running: dict[int, RunningJob], templates: TemplateCache) -> dict[int, frozenset]:
    """Per running job, the running jobs of its component of link-sharing jobs."""
    jobs = list(running)
    out = {}
    for comp in components([templates.of(running[j]).links for j in jobs]):
        group = frozenset(jobs[c] for c in comp)
        out.update({j: group for j in group})
    return out


def _copies(run: RunningJob, tpl, end: float) -> int:
    """Iterations to append for a job placed now (:class:`ExactMode`)."""
    n = run.spec.iterations if run.spec.iterations is not None else math.inf
    span = min(end, run.start + run.spec.duration if run.spec.duration is not None
               else math.inf) - run.start
    fastest = tpl.compute_time if tpl.compute_time > 0 else tpl.iteration_time
    if math.isfinite(span) and fastest > 0:
        n = min(n, math.ceil(span / fastest) + 1)
    if not math.isfinite(n):
        raise ValueError("a job with neither iterations nor an end")
    return int(max(n, 1))


def _time_to(p: Probe, iterations: float) -> float:
    """Seconds after the segment start at which the probe's job has done ``iterations``."""
    ends, period = p.ends[0], float(p.period[0])
    need = math.ceil(iterations - 1e-9)
    if ends.size >= need and need >= 1 and abs(need - iterations) < 1e-9:
        return float(ends[need - 1])
    last = float(ends[-1]) if ends.size else 0.0
    return last + (iterations - ends.size) * period
