"""Exact mode of a cluster run: every iteration of every job on one resumable engine run.

A placed job's iterations are all appended to one shared TaskGraph (copies of its
:class:`~hpnsim.sched.cluster.jobs.IterationTemplate`), the first released at its start
plus its offset. At a cluster event a new decision changes the class of every unfinished
transfer of a job (``Simulation.set_priority``) and moves those whose path differs under
the job's new routing seed (``Simulation.reroute``); a job leaving after a ``duration``
has its unfinished transfers parked on a link of capacity 0.

Departures of jobs that leave after their iterations are found by simulation, after the
fact: the run goes to the next known event, and when a job turns out to have finished
before it, the engine is rebuilt and replayed up to that departure (the engine is
deterministic, and every change is logged with its time), so the scheduler re-decides at the
departure itself.
"""

from __future__ import annotations

import math

import numpy as np

from hpnsim.engine import Simulation, TaskGraph

__all__ = ["ExactCluster"]


class ExactCluster:
    """The shared engine run of exact mode (used by :func:`simulate_cluster`)."""

    def __init__(self, capacity):
        self.capacity = np.append(np.asarray(capacity, dtype=np.float64), 0.0)
        self.park = self.capacity.size - 1
        self.graph = TaskGraph()
        self.sim = Simulation(self.graph, self.capacity)
        self.log: list = []           # (time, method, args) applied to the engine
        self.copies: dict = {}        # job -> [(first task, template)]
        self.replays = 0

    def _apply(self, method: str, *args) -> None:
        self.log.append((self.sim.now, method, args))
        getattr(self.sim, method)(*args)

    def place(self, j: int, template, n_iterations: int, start: float, offset: float,
              priority: int, gate: float = 0.0) -> None:
        """Append job ``j``'s iterations, the first at ``start + offset``; with ``gate >
        0`` iteration ``k`` no earlier than ``start + offset + k * gate`` (set once, when
        the job is placed)."""
        chain, after = [], []
        for k in range(n_iterations):
            release = start + offset + k * gate if k == 0 or gate > 0 else 0.0
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

    def decide(self, j: int, priority: int, template) -> None:
        """From now on job ``j``'s transfers are in ``priority`` on ``template``'s paths."""
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

    def stop(self, j: int) -> None:
        """Job ``j`` leaves now: its unfinished transfers stop moving."""
        for task, _, _ in self._unfinished_transfers(j):
            self._apply("reroute", task, [self.park])

    def iteration_ends(self, j: int) -> np.ndarray:
        finish = self.sim.result().finish
        return np.array([finish[first + tpl.stage_end].max() for first, tpl in self.copies[j]])

    def advance(self, until: float, counted: dict) -> tuple[float, list]:
        """Run to ``until``; ``counted``: job -> iterations after which it leaves.

        Returns ``(time, leaving)``: the earliest such departure before ``until`` (the
        engine replayed up to it) or ``until``, and the jobs leaving then.
        """
        now = self.sim.now
        until = self.sim.run(until=until)      # infinite: until nothing more happens
        done = {j: float(self.iteration_ends(j)[n - 1]) for j, n in counted.items()}
        early = {j: t for j, t in done.items() if math.isfinite(t) and t <= until}
        if not early:
            return until, []
        t = min(early.values())
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
