"""What a shared-cluster run measured: utilization over time, per-job times, contention.

Utilization (Crux, SIGCOMM 2024; reference/crux.md): the computation the GPUs finish over
the GPU time available. Job ``j`` does ``W_j = G_j x c_j`` GPU-seconds per iteration (``c_j``
its compute and optimizer time per iteration, from its alone run); its progress ``p_j(t)``
(iterations done, the one in progress counted pro rata) is piecewise linear. Over an
interval ``[a, b)`` the cluster's utilization is ``sum_j W_j (p_j(b) - p_j(a)) / (G (b - a))``
with ``G`` the cluster's GPUs; overall it is the same over ``[0, makespan)``.

The paper's Definition 1 measures the computation the GPUs finish in a period ``T``: the
run's *window* ``[t0, t0 + T]`` (default ``[0, makespan]``) gives it per cluster GPU
(``window_utilization``: over ``G T``) and per GPU held (``window_held_utilization``: over
the GPU-seconds jobs held inside the window), so every scheduler on the same trace is
measured over the same period whatever its makespan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.frames import to_frame

__all__ = ["ClusterResult", "JobOutcome"]


@dataclass
class JobOutcome:
    """One job of the trace: where and when it ran, how fast, against running alone.

    ``progress``: ``(times, iterations done)`` breakpoints of its piecewise-linear progress;
    ``gpu_ids``: the GPUs it held, in rank order.
    """

    name: str
    gpus: int
    hosts: list
    arrival: float
    start: float
    finish: float
    iterations: float
    work: float                       # W_j, GPU-seconds per iteration
    alone_iteration_time: float
    progress: tuple = field(default=((), ()), repr=False)
    gpu_ids: list = field(default_factory=list, repr=False)

    @property
    def jct(self) -> float:
        """Job completion time: finish - arrival (queueing included)."""
        return self.finish - self.arrival

    @property
    def wait(self) -> float:
        return self.start - self.arrival

    @property
    def iteration_time(self) -> float:
        """Mean seconds per iteration while it ran."""
        return (self.finish - self.start) / self.iterations

    @property
    def slowdown(self) -> float:
        """Mean iteration time over the iteration time alone on the same GPUs."""
        return self.iteration_time / self.alone_iteration_time

    def done_at(self, t) -> np.ndarray:
        """Iterations done by time(s) ``t``."""
        times, done = self.progress
        return np.interp(t, times, done, left=0.0, right=done[-1] if len(done) else 0.0)

    def row(self) -> dict:
        return {"name": self.name, "gpus": self.gpus, "arrival": self.arrival,
                "start": self.start, "finish": self.finish, "wait": self.wait,
                "jct": self.jct, "iterations": self.iterations,
                "iteration_time": self.iteration_time,
                "alone_iteration_time": self.alone_iteration_time,
                "slowdown": self.slowdown, "hosts": len(self.hosts)}


@dataclass
class ClusterResult:
    """A shared-cluster run (:func:`~hpnsim.sched.cluster.driver.simulate_cluster`).

    Attributes
    ----------
    scheduler, allocator : str
    exact : bool
        Every iteration simulated (else steady-state extrapolation).
    tolerance : float
    cluster_gpus : int
    jobs : list of JobOutcome (trace order); jobs never started are left out
    events : the cluster event times (arrivals, departures), ascending, from 0
    extrapolated_time : seconds of cluster time in which no probe simulated anything
    extrapolated_iterations : iterations advanced at a steady rate instead of simulated
    probes, unstable_probes : components probed, and those that hit the probe limit
    phase_probes : components probed with phase-level iterations (too costly task by task)
    unfinished : names of jobs still running or waiting at the horizon
    window : ``(t0, t0 + T)``, the period utilization is measured over (None: the run)
    """

    scheduler: str
    allocator: str
    exact: bool
    tolerance: float
    cluster_gpus: int
    jobs: list
    events: np.ndarray
    extrapolated_time: float = 0.0
    extrapolated_iterations: float = 0.0
    probes: int = 0
    unstable_probes: int = 0
    phase_probes: int = 0
    unfinished: list = field(default_factory=list)
    window: tuple | None = None

    @property
    def makespan(self) -> float:
        return float(self.events[-1]) if len(self.events) else 0.0

    def computation(self, a: float, b: float) -> float:
        """GPU-seconds of computation finished in ``[a, b)``."""
        return float(sum(j.work * (j.done_at(b) - j.done_at(a)) for j in self.jobs))

    @property
    def gpu_utilization(self) -> float:
        """Computation over ``cluster GPUs x makespan``."""
        span = self.makespan
        return self.computation(0.0, span) / (self.cluster_gpus * span) if span > 0 else 0.0

    @property
    def allocated_utilization(self) -> float:
        """Computation over the GPU time held by jobs (start to finish)."""
        held = sum(j.gpus * (j.finish - j.start) for j in self.jobs)
        return self.computation(0.0, self.makespan) / held if held > 0 else 0.0

    @property
    def window_bounds(self) -> tuple[float, float]:
        """``(t0, t0 + T)``: the measured window (default: the whole run)."""
        if self.window is None:
            return 0.0, self.makespan
        return float(self.window[0]), float(self.window[1])

    def held(self, a: float, b: float) -> float:
        """GPU-seconds jobs held (started, not yet left) inside ``[a, b)``."""
        return float(sum(j.gpus * max(0.0, min(j.finish, b) - max(j.start, a))
                         for j in self.jobs))

    @property
    def window_utilization(self) -> float:
        """Computation finished in the window over ``cluster GPUs x T`` (Definition 1)."""
        a, b = self.window_bounds
        return self.computation(a, b) / (self.cluster_gpus * (b - a)) if b > a else 0.0

    @property
    def window_held_utilization(self) -> float:
        """Computation finished in the window over the GPU-seconds held inside it."""
        a, b = self.window_bounds
        held = self.held(a, b)
        return self.computation(a, b) / held if held > 0 else 0.0

    def window_rates(self) -> list[float]:
        """Per job, iterations per second while it held GPUs inside the window (0: not
        running then)."""
        a, b = self.window_bounds
        out = []
        for j in self.jobs:
            span = min(j.finish, b) - max(j.start, a)
            out.append(float(j.done_at(b) - j.done_at(a)) / span if span > 0 else 0.0)
        return out

    def timeline(self) -> list[dict]:
        """Per interval between cluster events: ``start``, ``end``, ``utilization``,
        ``running`` jobs and ``busy_gpus`` they hold."""
        out = []
        for a, b in zip(self.events[:-1], self.events[1:], strict=True):
            if b <= a:
                continue
            mid = 0.5 * (a + b)
            on = [j for j in self.jobs if j.start <= mid < j.finish]
            out.append({"start": float(a), "end": float(b),
                        "utilization": self.computation(a, b) / (self.cluster_gpus * (b - a)),
                        "running": len(on), "busy_gpus": sum(j.gpus for j in on)})
        return out

    @property
    def mean_jct(self) -> float:
        return float(np.mean([j.jct for j in self.jobs])) if self.jobs else 0.0

    def _contended(self) -> list:
        return [j for j in self.jobs if j.slowdown > 1.0 + self.tolerance]

    @property
    def contended_job_share(self) -> float:
        """Share of jobs slowed by more than the tolerance against running alone."""
        return len(self._contended()) / len(self.jobs) if self.jobs else 0.0

    @property
    def contended_gpu_share(self) -> float:
        """Share of the jobs' GPUs held by such jobs."""
        total = sum(j.gpus for j in self.jobs)
        return sum(j.gpus for j in self._contended()) / total if total else 0.0

    def summary(self) -> dict:
        return {"scheduler": self.scheduler, "allocator": self.allocator, "exact": self.exact,
                "jobs": len(self.jobs), "makespan": self.makespan,
                "gpu_utilization": self.gpu_utilization,
                "allocated_utilization": self.allocated_utilization,
                "window_start": self.window_bounds[0], "window_end": self.window_bounds[1],
                "window_utilization": self.window_utilization,
                "window_held_utilization": self.window_held_utilization,
                "mean_jct": self.mean_jct,
                "mean_slowdown": float(np.mean([j.slowdown for j in self.jobs]))
                if self.jobs else 0.0,
                "contended_job_share": self.contended_job_share,
                "contended_gpu_share": self.contended_gpu_share,
                "extrapolated_time": self.extrapolated_time,
                "extrapolated_iterations": self.extrapolated_iterations,
                "probes": self.probes, "unstable_probes": self.unstable_probes,
                "phase_probes": self.phase_probes,
                "unfinished": list(self.unfinished)}

    def rows(self) -> list[dict]:
        """One row per job, with its ``window_rate`` (iterations per second held inside
        the window)."""
        return [{**j.row(), "window_rate": rate}
                for j, rate in zip(self.jobs, self.window_rates(), strict=True)]

    def to_dict(self) -> dict:
        """JSON-ready: the summary, ``jobs`` rows and the utilization ``timeline``."""
        return {**self.summary(), "jobs": self.rows(), "timeline": self.timeline()}

    def to_frame(self):
        """The per-job rows as a pandas DataFrame."""
        return to_frame(self.rows())
