"""Exact mode of a cluster run: every iteration of every job on one resumable engine run.

A placed job's iterations are appended to one shared TaskGraph (copies of its
:class:`~hpnsim.sched.cluster.jobs.IterationTemplate`), the first released at its start
plus its offset. At a cluster event a new decision changes the class of every unfinished
transfer of a job (``Simulation.set_priority``) and moves those whose path differs under
the job's new routing seed (``Simulation.reroute``); a job leaving after a ``duration``
has its unfinished transfers parked on a link of capacity 0.

CASSINI's gated jobs (a time shift held at every iteration: iteration ``k`` of a slot
schedule starts no earlier than ``anchor + offset + k x gate``) are appended lazily, up to
the next event the run goes to, each iteration waiting for a zero-length *slot* task
released at its slot. When the set of jobs sharing links with a gated job changes (a job
arrives or leaves), CASSINI recomputes the shifts: :meth:`ExactCluster.reslot` re-anchors
the job's slots at that moment and cancels its iterations not yet started (they wait
forever on a task that never ends, and are dropped from the job); the next one takes the
first new slot at or after the end of the iteration in progress, whose end is found by
simulation like a departure (below).

Departures of jobs that leave after their iterations are found by simulation, after the
fact: the run goes to the next known event, and when a job turns out to have finished
before it, the engine is rebuilt and replayed up to that departure (the engine is
deterministic, and every change is logged with its time), so the scheduler re-decides at the
departure itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpnsim.engine import Simulation, TaskGraph

__all__ = ["ExactCluster"]


@dataclass
class SlotSchedule:
    """A gated job's slots: ``slot(i) = anchor + offset + i x gate``; the next iteration
    appended waits for ``slot(next_slot)``; the job does ``total`` iterations at most."""

    template: object
    priority: int
    anchor: float
    offset: float
    gate: float
    total: int
    next_slot: int = 0

    def slot(self, i: int) -> float:
        return self.anchor + self.offset + i * self.gate


class ExactCluster:
    """The shared engine run of exact mode (used by :func:`simulate_cluster`)."""

    def __init__(self, capacity):
        self.capacity = np.append(np.asarray(capacity, dtype=np.float64), 0.0)
        self.park = self.capacity.size - 1
        self.graph = TaskGraph()
        self.sim = Simulation(self.graph, self.capacity)
        self.log: list = []           # (time, method, args) applied to the engine
        self.copies: dict = {}        # job -> [(first task, template)]
        self.slots: dict[int, SlotSchedule] = {}   # gated jobs' schedules
        self.slot_tasks: dict[int, list[int]] = {}  # per gated job, each copy's slot task
        self._never: int | None = None              # a task that never ends
        #: re-anchored gated jobs whose iteration in progress has not ended: its end tasks
        self.awaiting: dict[int, np.ndarray] = {}
        self.replays = 0

    def _apply(self, method: str, *args) -> None:
        self.log.append((self.sim.now, method, args))
        getattr(self.sim, method)(*args)

    def place(self, j: int, template, n_iterations: int, start: float, offset: float,
              priority: int, gate: float = 0.0) -> None:
        """Append job ``j``'s iterations, the first at ``start + offset``; with ``gate >
        0`` iteration ``k`` no earlier than ``start + offset + k * gate``, appended as the
        run reaches their slots (:meth:`reslot` moves them)."""
        if gate > 0:
            self.copies[j], self.slot_tasks[j] = [], []
            self.slots[j] = SlotSchedule(template, int(priority), start, offset, gate,
                                         n_iterations)
            return
        chain, after = [], []
        for k in range(n_iterations):
            release = start + offset if k == 0 else 0.0
            first = template.append(self.graph, release=release,
                                    after=after, priority=priority)
            chain.append((first, template))
            after = (first + template.stage_end).tolist()
        self.copies[j] = chain

    def _unfinished_transfers(self, j: int):
        finish = self.sim.result().finish
        for first, tpl in self.copies[j]:
            for k in tpl.transfers.tolist():
                if not math.isfinite(finish[first + k]):
                    yield first + k, k, tpl

    def _append_slots(self, until: float) -> None:
        """Append every gated job's iterations whose slots come by ``until``."""
        for j, s in self.slots.items():
            if j in self.awaiting:
                continue
            chain = self.copies[j]
            while len(chain) < s.total and s.slot(s.next_slot) <= until:
                gate = self.graph.add_delay(0.0, release=s.slot(s.next_slot))
                after = [gate]
                if chain:
                    first, tpl = chain[-1]
                    after += (first + tpl.stage_end).tolist()
                chain.append((s.template.append(self.graph, after=after,
                                                priority=s.priority), s.template))
                self.slot_tasks[j].append(gate)
                s.next_slot += 1

    def reslot(self, j: int, offset: float, gate: float) -> None:
        """CASSINI's shifts recomputed now for gated job ``j``: its slots are
        ``now + offset + k x gate`` from now on. Its iterations not yet started are
        cancelled; the next one starts at the first new slot at or after the end of the
        one in progress (found by :meth:`advance`), or at ``now + offset`` when none is.
        ``gate == 0``: no slots from now on (a job left alone on its links)."""
        s = self.slots[j]
        start, finish = self.sim.result().start, self.sim.finish_times()
        kept = []
        for (first, tpl), slot_task in zip(self.copies[j], self.slot_tasks[j], strict=True):
            if math.isfinite(start[first]):
                kept.append(((first, tpl), slot_task))
            else:
                self.graph.add_dependency(first, self._never_ending())
        s.anchor, s.offset, s.gate, s.next_slot = self.sim.now, offset, gate, 0
        self.copies[j] = [c for c, _ in kept]
        self.slot_tasks[j] = [g for _, g in kept]
        if kept and gate > 0:       # without slots the next iteration just follows
            first, tpl = kept[-1][0]
            if not np.isfinite(finish[first + tpl.stage_end]).all():
                self.awaiting[j] = first + tpl.stage_end

    def _first_slot_after(self, j: int, t: float) -> None:
        """Job ``j``'s iteration in progress at its re-anchoring ended at ``t``: its next
        iteration takes the first slot at or after ``t``."""
        s = self.slots[j]
        s.next_slot = max(0, math.ceil((t - s.slot(0)) / s.gate - 1e-9))
        del self.awaiting[j]

    def _never_ending(self) -> int:
        """A transfer on the link of capacity 0: what a cancelled iteration waits for."""
        if self._never is None:
            self._never = self.graph.add_transfer([self.park], 1.0, 1.0)
        return self._never

    def decide(self, j: int, priority: int, template) -> None:
        """From now on job ``j``'s transfers are in ``priority`` on ``template``'s paths."""
        if j in self.slots:
            self.slots[j].priority = int(priority)
            if not self.copies[j]:
                self.slots[j].template = template
                return
        todo = list(self._unfinished_transfers(j))
        if todo:
            self._apply("set_priority", [t for t, _, _ in todo], int(priority))
        if template.n_tasks != self.copies[j][0][1].n_tasks:
            return                                  # a different structure: keep the paths
        for task, k, tpl in todo:
            if tpl is template:
                continue
            links, usage = template.path_of(k)
            old_links, old_usage = tpl.path_of(k)
            if not (np.array_equal(links, old_links) and np.array_equal(usage, old_usage)):
                self._apply("reroute", task, links.copy(), usage.copy())
        self.copies[j] = [(first, template) for first, _ in self.copies[j]]
        if j in self.slots:
            self.slots[j].template = template

    def stop(self, j: int) -> None:
        """Job ``j`` leaves now: its unfinished transfers stop moving."""
        if j in self.slots:
            self.slots[j].total = len(self.copies[j])       # nothing more is appended
            self.awaiting.pop(j, None)
        for task, _, _ in self._unfinished_transfers(j):
            self._apply("reroute", task, [self.park])

    def iteration_ends(self, j: int) -> np.ndarray:
        finish = self.sim.result().finish
        return np.array([finish[first + tpl.stage_end].max() for first, tpl in self.copies[j]])

    def advance(self, until: float, counted: dict) -> tuple[float, list]:
        """Run to ``until``; ``counted``: job -> iterations after which it leaves.

        Returns ``(time, leaving)``: the earliest such departure before ``until`` (the
        engine replayed up to it) or ``until``, and the jobs leaving then. A re-anchored
        job's iteration in progress ending first (:meth:`reslot`) is found the same way:
        the engine is replayed to its end, the next iteration appended, and the run goes on.
        """
        now, limit = self.sim.now, until
        while True:
            self._append_slots(limit)
            until = self.sim.run(until=limit)     # infinite: until nothing more happens
            finish = self.sim.finish_times()
            ended = {j: float(finish[tasks].max()) for j, tasks in self.awaiting.items()}
            ended = {j: t for j, t in ended.items() if math.isfinite(t) and t <= until}
            done = {}
            for j, n in counted.items():
                ends = self.iteration_ends(j)
                done[j] = float(ends[n - 1]) if ends.size >= n else math.inf
            early = {j: t for j, t in done.items() if math.isfinite(t) and t <= until}
            t_end = min(ended.values(), default=math.inf)
            t = min(early.values(), default=math.inf)
            if ended and t_end <= t:              # ties: the next iteration first
                if t_end < until:
                    self._replay(t_end)
                for j in [j for j, e in ended.items() if e == t_end]:
                    self._first_slot_after(j, t_end)
                continue
            if not early:
                return until, []
            if t < until:
                self._replay(t)
            return max(t, now), sorted(j for j, d in early.items() if d == t)

    def _replay(self, until: float) -> None:
        self.replays += 1
        sim = Simulation(self.graph, self.capacity)
        for when, method, args in self.log:
            sim.run(until=when)
            getattr(sim, method)(*args)
        sim.run(until=until)
        self.sim = sim
