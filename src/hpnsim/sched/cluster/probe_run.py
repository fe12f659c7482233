"""One steady-state probe's run, kept so that the same component probed again with another
limit is answered from it: continued when the limit is later, read back when it is earlier.

A probe (:mod:`hpnsim.sched.cluster.steady`) simulates in rounds: round ``r`` appends the
copies its jobs need to reach ``start + window`` (at alone speed; never past the probe's own
cap of :data:`PROBE_PERIODS` periods), runs the engine to that time or to the limit, and
checks stability at its end. Nothing in a round depends on the limit but where it stops:
copies appended beyond the limit are never ready before it, and a run stopped at a time and
continued equals one run (:class:`~hpnsim.engine.Simulation`). So

- a run cut by a limit ``C`` inside a round, continued to a later limit, finishes that
  round and goes on exactly as a run with the later limit would have;
- a run that went past a limit ``L`` holds what a run with limit ``L`` would have seen: the
  finish times up to ``L`` (a task finished by an event at or before ``L`` finishes no
  later than ``L`` plus the engine's relative tolerance: a finish in that sliver makes the
  answer ambiguous, and it is probed afresh), and the copies its round had appended.

A cluster re-probes a component with the same jobs and decisions at every event of other
components (another limit each time) and in every run of a comparison: in the 60-job
Lingjun comparison, 127 of 563 probes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from hpnsim.engine import Simulation, TaskGraph
from hpnsim.engine.loop import REL_TOL

#: iterations per stability window
WINDOW = 3
#: each round of a probe simulates this many times the previous round's seconds
WINDOW_GROWTH = 1.5
#: a probe runs at most this many alone periods of its slowest job (and at least the
#: 2 x WINDOW iterations stability needs of every job)
PROBE_PERIODS = 400

#: a round cut by a limit appends the copies of its whole length (so that a later limit
#: can continue it) when the limit leaves at least this share of it; a shorter cut appends
#: only what reaches the limit. A compute trade-off, no physical constant; own measurement
#: over the 563 probes of the 60-job Lingjun --compare (probe events / tasks appended):
#: 0 (always whole) 2.53 M / 4.47 M, 0.25 2.58 M / 4.15 M, 0.5 2.60 M / 4.07 M, never
#: continued 2.91 M / 4.45 M
CONTINUABLE = 0.5

#: open runs whose engine state is kept for a later limit; the rest keep only their finish
#: times, for earlier limits. A memory bound: in the 60-job --compare 4, 16 and 64 reused
#: the same runs (a cut run is continued at the component's next event), and keeping all
#: took 4.2 GB of peak memory (own measurement)
KEEP_OPEN = 4

__all__ = ["Probe", "ProbeLevel", "ProbeRun", "ProbeRuns", "RunSlot", "needed_iterations",
           "PROBE_PERIODS", "WINDOW", "WINDOW_GROWTH"]


class ProbeLevel(StrEnum):
    """What a probe simulated: every task of every iteration, or phase-level iterations
    (:mod:`hpnsim.sched.cluster.phase`: periods, but no iteration ends)."""

    TASK = "task"
    PHASE = "phase"


@dataclass
class Probe:
    """What a probe saw: per job its iteration end times (seconds after the segment start),
    its steady ``period``, whether it was ``stable``; ``elapsed``: seconds simulated."""

    ends: list
    period: np.ndarray
    stable: bool
    elapsed: float
    #: per job the iterations the probe appended, when its run depended on neither its
    #: ``limit`` nor the jobs' remaining iterations (else None): see :meth:`repeats`
    copies: np.ndarray | None = None
    level: ProbeLevel = ProbeLevel.TASK

    @property
    def simulated(self) -> float:
        """Seconds simulated task by task (0 for a phase-level probe)."""
        return self.elapsed if self.level is ProbeLevel.TASK else 0.0

    def repeats(self, limit: float, remaining) -> bool:
        """Whether probing the same component again with ``limit`` and ``remaining`` would
        run exactly this probe: it stopped before ``limit`` and no job runs out within the
        iterations it appended.

        >>> p = Probe([np.zeros(3)], np.ones(1), False, 5.0, copies=np.array([4]))
        >>> p.repeats(5.0, [5]), p.repeats(4.9, [5]), p.repeats(9.0, [4])
        (True, False, False)
        """
        if self.copies is None or limit < self.elapsed:
            return False
        return bool(np.all(needed_iterations(remaining) > self.copies))

    def progress(self, j: int, dt: float) -> float:
        """Iterations job ``j`` has done ``dt`` seconds after the segment start: counted
        within the probe (the iteration in progress pro rata), at its period after it."""
        ends, period = self.ends[j], self.period[j]
        if dt >= self.simulated:
            last = ends[-1] if ends.size else 0.0
            return ends.size + max(dt - last, 0.0) / period
        done = int(np.searchsorted(ends, dt, side="right"))
        prev = ends[done - 1] if done else 0.0
        return done + min(max(dt - prev, 0.0) / period, 1.0 - 1e-12)


@dataclass(frozen=True)
class _Round:
    start: float
    #: where the round ends unless the limit comes first
    stop: float
    #: per job the copies appended by the round's start
    copies: np.ndarray


class ProbeRun:
    """A probe of one component with fixed decisions, answering for any limit.

    Parameters are those of :func:`~hpnsim.sched.cluster.steady.probe` but the limit
    (``templates`` on their own links), ``needed``: per job the whole iterations before
    it leaves.
    """

    def __init__(self, templates, priorities, offsets, capacity, *, tolerance: float,
                 needed: np.ndarray, max_tasks: int, gates):
        self.templates, self.priorities = templates, priorities
        self.stage_ends = [t.stage_end for t in templates]
        self.offsets, self.gates = offsets, gates
        self.tolerance, self.needed, self.max_tasks = tolerance, needed, max_tasks
        n = len(templates)
        self.alone = np.array([t.iteration_time for t in templates])
        self.graph = TaskGraph()
        self.chains = [np.zeros(0, dtype=np.int64) for _ in range(n)]
        self.sim = Simulation(self.graph, capacity)
        lead = float(np.max(offsets, initial=0.0))
        self.window = 2.0 * self.alone.max() + lead
        #: the probe's own cap: it never runs longer, whatever the limit
        self.cap = PROBE_PERIODS * self.alone.max() + lead
        self.now = 0.0
        #: per job its iteration ends at :attr:`now`
        self.ends = [np.zeros(0) for _ in range(n)]
        self.rounds: list[_Round] = []
        #: the round is cut by a limit and continues at the next later one
        self.open = False
        #: the answer at :attr:`now` (the limit it was cut at, or where it ended)
        self.last: Probe | None = None
        #: a job ran out of iterations (the answer's copies are None at any limit)
        self.ran_out = False
        #: the open round holds copies up to its limit only: a later limit runs afresh
        self.sealed = False

    def answer(self, limit: float) -> Probe | None:
        """What a fresh probe with ``limit`` would return (None: ambiguous, probe afresh)."""
        if self.last is None or (self.open and limit > self.now):
            return None if self.sealed or self.sim is None else self._run(limit)
        if limit < self.now:
            return self._read_back(limit)
        if self.open:                            # cut at exactly this limit
            return self.last
        # ended on its own at or before the limit: the same run, but whether the limit
        # shaped it (and so whether it would repeat) depends on the limit
        copies = None if self.ran_out else self._copies(limit, self.last.elapsed)
        return self._seen(self.last.ends, self.last.period, self.last.stable,
                          self.last.elapsed, copies)

    def _run(self, limit: float) -> Probe:
        horizon = min(limit, self.cap)
        templates, chains, needed = self.templates, self.chains, self.needed
        while True:
            if not self.open:
                self._append_round(horizon)
            stop = min(self.rounds[-1].stop, horizon)
            self.now = self.sim.run(until=stop)
            ends, period, stable = self._check(self.sim.finish_times(), chains)
            self.ends = ends
            finished = [j for j in range(len(templates)) if ends[j].size >= needed[j]]
            cut = stop < self.rounds[-1].stop
            if finished:
                now = min(float(ends[j][needed[j] - 1]) for j in finished)
                self._keep(ends, period, stable, now, None, cut, ran_out=True)
                return self.last
            if cut or stable or self.now >= self.cap or len(self.graph) >= self.max_tasks:
                self._keep(ends, period, stable, self.now, self._copies(limit, self.now),
                           cut, ran_out=False)
                return self.last
            # every round rebuilds the engine state over the whole graph: widening the
            # window keeps the rounds logarithmic in the probe's length
            self.window *= WINDOW_GROWTH
            self.open = False

    def _append_round(self, horizon: float) -> None:
        """Start a round: enough copies that no job runs dry by its end, or by
        ``horizon`` when that comes much earlier (then the round cannot be continued)."""
        stop = min(self.now + self.window, self.cap)
        self.sealed = horizon - self.now < CONTINUABLE * (stop - self.now)
        reach = horizon if self.sealed else stop
        ends = self.ends
        for j, tpl in enumerate(self.templates):
            want = min(int(self.needed[j]),
                       ends[j].size + int((reach - self.now) / self.alone[j]) + 2)
            chain = self.chains[j]
            if want > chain.size:
                prev = chain[-1] if chain.size else None
                after = [] if prev is None else (prev + tpl.stage_end).tolist()
                release = float(self.offsets[j]) if prev is None else 0.0
                if self.gates[j] > 0:        # the copy's slot on the job's grid
                    release = float(self.offsets[j]) + chain.size * float(self.gates[j])
                firsts = tpl.append_chain(self.graph, want - chain.size, release=release,
                                          after=after, priority=int(self.priorities[j]),
                                          every=float(self.gates[j]))
                self.chains[j] = np.concatenate([chain, firsts])
        self.rounds.append(_Round(self.now, stop,
                                  np.array([c.size for c in self.chains], dtype=np.int64)))
        self.open = True

    def _keep(self, ends, period, stable, elapsed, copies, cut, *, ran_out) -> None:
        self.last = self._seen(ends, period, stable, elapsed, copies)
        self.open, self.ran_out = cut, ran_out

    def _copies(self, limit: float, now: float) -> np.ndarray | None:
        """Per job the copies appended, when the run depended on neither ``limit`` nor a
        job's last iteration."""
        copies = np.array([c.size for c in self.chains], dtype=np.int64)
        if (min(limit, self.cap) == limit and now >= limit) or np.any(self.needed <= copies):
            return None
        return copies

    def release(self) -> None:
        """Drop the graph and the engine state, keeping the finish times: the run can
        still answer for earlier limits, not be continued."""
        if self.sim is not None:
            self._finish = self.sim.finish_times()
            self.sim = self.graph = self.templates = None

    def _read_back(self, limit: float) -> Probe | None:
        """The answer of a run cut at ``limit``, from this longer one."""
        finish = self._finish if self.sim is None else self.sim.finish_times()
        sliver = finish[(finish > limit) & (finish <= limit * (1.0 + 4.0 * REL_TOL))]
        if sliver.size:
            return None
        k = int(np.searchsorted([r.start for r in self.rounds], limit, side="left")) - 1
        if k < 0 or limit > self.rounds[k].stop:
            return None
        finish = np.where(finish <= limit, finish, np.inf)
        chains = [c[:n] for c, n in zip(self.chains, self.rounds[k].copies.tolist(),
                                        strict=True)]
        ends, period, stable = self._check(finish, chains)
        finished = [j for j in range(len(chains)) if ends[j].size >= self.needed[j]]
        now = min(float(ends[j][self.needed[j] - 1]) for j in finished) if finished \
            else limit
        return self._seen(ends, period, stable, now, None)

    def _check(self, finish, chains):
        """Per job its iteration ends, period, and whether every job is stable: leaving out
        its first iteration (the warm-up from an aligned start), the mean iteration times
        of three thirds agree within ``tolerance / 2``."""
        stage_ends, alone = self.stage_ends, self.alone
        ends = [finish[np.add.outer(chains[j], stage_ends[j])].max(axis=1)
                for j in range(len(chains))]
        ends = [e[np.isfinite(e)] for e in ends]
        period = alone.copy()
        stable = True
        for j in range(len(chains)):
            e = ends[j][1:]
            if e.size >= 3 * WINDOW + 1:
                cut = np.linspace(0, e.size - 1, 4).astype(np.int64)
                rates = np.diff(e[cut]) / np.diff(cut)
                period[j] = (e[-1] - e[0]) / (e.size - 1)
                stable &= rates.max() - rates.min() <= 0.5 * self.tolerance * period[j]
            else:
                if ends[j].size:
                    period[j] = max(ends[j][-1] / ends[j].size, alone[j])
                stable = False
        return ends, period, bool(stable)

    @staticmethod
    def _seen(ends, period, stable, elapsed, copies) -> Probe:
        return Probe(ends=list(ends), period=np.maximum(period, 1e-300), stable=stable,
                    elapsed=float(elapsed), copies=copies)


class ProbeRuns:
    """Probe runs by component (its jobs, decisions and iterations left), each a dict of
    its runs by level (:func:`~hpnsim.sched.cluster.steady.probe`'s ``runs``); the engine
    state of at most ``keep`` open runs is kept (the least recently used is released).

    >>> runs = ProbeRuns(keep=2)
    >>> runs.slot("a") is runs.slot("a"), runs.slot("a") is runs.slot("b")
    (True, False)
    """

    def __init__(self, keep: int = KEEP_OPEN):
        self.keep = keep
        self._slots: dict = {}
        self._live: OrderedDict = OrderedDict()
        self._prepared: dict = {}

    def prepared(self, what, templates, capacity, make):
        """``make()`` for these ``templates`` (by identity) on ``capacity``, once: the same
        jobs are probed again with other decisions. The templates are kept with the answer
        (their ids in the key stay theirs).

        >>> runs, made = ProbeRuns(), []
        >>> tpls, cap = [object()], object()
        >>> runs.prepared("x", tpls, cap, lambda: made.append(1) or 7), len(made)
        (7, 1)
        >>> runs.prepared("x", tpls, cap, lambda: made.append(1) or 7), len(made)
        (7, 1)
        """
        key = (what, tuple(map(id, templates)), id(capacity))
        found = self._prepared.get(key)
        if found is None:
            found = self._prepared[key] = (list(templates), capacity, make())
        return found[2]

    def slot(self, key) -> RunSlot:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = RunSlot(self)
        return slot

    def kept(self, run: ProbeRun, replaced: ProbeRun | None = None) -> None:
        """``run`` answered and stays in its slot (instead of ``replaced``): keep its engine
        state while it can be continued, release it otherwise."""
        if replaced is not None:
            self._live.pop(id(replaced), None)
            replaced.release()
        self._live.pop(id(run), None)
        if run.open and not run.sealed and run.sim is not None:
            self._live[id(run)] = run
            while len(self._live) > self.keep:
                self._live.popitem(last=False)[1].release()
        else:
            run.release()


class RunSlot(dict):
    """One component's runs by level (:class:`~hpnsim.sched.cluster.steady.ProbeLevel`),
    and the :class:`ProbeRuns` they report back to (``owner``)."""

    def __init__(self, owner: ProbeRuns):
        super().__init__()
        self.owner = owner


def needed_iterations(remaining) -> np.ndarray:
    """Whole iterations per job before it leaves (a job that leaves after a duration has no
    iteration count: it never runs dry)."""
    left = np.asarray(remaining, dtype=np.float64)
    # at least one: a job left with a rounding error of an iteration (it finished a hair
    # after a departure) still ends that iteration in the probe
    return np.where(np.isfinite(left), np.maximum(np.ceil(np.minimum(left, 2.0**62) - 1e-9), 1),
                    2.0**62).astype(np.int64)
