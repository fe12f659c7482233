"""Periodic jobs on the engine: iterations of compute and communication over a horizon.

Each job repeats: compute for ``compute_time``; its communication (one coupled transfer
loading every link ``e`` with ``M_{j,e}`` bytes) may start once ``comm_start`` of the
compute is done; the next iteration starts when both are done. Jobs share links through
the engine: strict priority classes (lower first) and weighted max-min sharing inside a
class, exactly as the switch queues of a scheduled cluster.

Utilization (Crux, SIGCOMM 2024, section 3 and the worked examples of reference/crux.md):
the computation the GPUs finish within the horizon over the GPU time available,
``sum_j n_j W_j / (sum_j G_j x H)``, where ``n_j`` is the number of job ``j``'s iterations
*completed* (communication included) by the horizon and ``W_j = G_j x compute``. Computing
whose iteration has not finished its communication by the horizon is not counted: with
this reading the paper's example 1 gives exactly 37.5% and 41.7% (counting every second of
compute instead would give 41.7% and 45.8%, reported here as ``busy_utilization``).

The transmission time ``S_j`` a job gets is the bytes it moved within the horizon in units
of its uncontended transfer time (``S_j = moved / M_bottleneck x t_j``, seconds): Crux's
``k_j = ΔS_j / ΔS_ref`` compares how much more each job sends when it is the one
prioritised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpnsim.engine import Simulation, TaskGraph
from hpnsim.engine.twins import merge_twin_links
from hpnsim.errors import InputError
from hpnsim.sched.jobs import SchedJob, job_array

#: an iteration finishing within this relative distance after the horizon (floating-point
#: error of event times) counts as completed
_HORIZON_RTOL = 1e-9


@dataclass(frozen=True)
class PeriodicResult:
    """What each job achieved over the horizon.

    Attributes
    ----------
    horizon : float
    names : list of str
    iterations : int array, iterations completed by the horizon
    computation : GPU-seconds of the completed iterations (``n_j x W_j``)
    transmission : ``S_j``, seconds of uncontended transfer each job got
    busy : GPU-seconds spent computing within the horizon (completed or not)
    gpus : int array
    iteration_finish : per job, the finish times of its completed iterations
    """

    horizon: float
    names: list
    iterations: np.ndarray
    computation: np.ndarray
    transmission: np.ndarray
    busy: np.ndarray
    gpus: np.ndarray
    iteration_finish: list

    @property
    def utilization(self) -> float:
        """Cluster GPU utilization: completed computation over ``sum G_j x H``."""
        return float(self.computation.sum() / (self.gpus.sum() * self.horizon))

    @property
    def job_utilization(self) -> np.ndarray:
        """Per job: its completed computation over ``G_j x H``."""
        return self.computation / (self.gpus * self.horizon)

    @property
    def busy_utilization(self) -> float:
        """Every second of compute within the horizon over ``sum G_j x H``."""
        return float(self.busy.sum() / (self.gpus.sum() * self.horizon))

    def to_dict(self) -> dict:
        """Plain-Python summary (JSON-ready)."""
        return {"horizon": self.horizon, "utilization": self.utilization,
                "busy_utilization": self.busy_utilization,
                "jobs": [{"name": n, "iterations": int(i), "computation": float(c),
                          "transmission": float(s), "utilization": float(u)}
                         for n, i, c, s, u in zip(self.names, self.iterations,
                                                  self.computation, self.transmission,
                                                  self.job_utilization, strict=True)]}


def order_to_classes(order, n: int) -> np.ndarray:
    """Strict priority classes (0 first) from an order of job indices, first = highest.

    >>> order_to_classes([2, 0, 1], 3).tolist()
    [1, 2, 0]
    """
    order = [int(j) for j in order]
    if sorted(order) != list(range(n)):
        raise InputError("order", f"must list every job index 0..{n - 1} once, got {order}")
    classes = np.empty(n, dtype=np.int64)
    classes[order] = np.arange(n)
    return classes


def _per_job(values, n: int, name: str, default: float) -> np.ndarray:
    if values is None:
        return np.full(n, default, dtype=np.float64)
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise InputError(name, f"needs one value per job ({n}), got {arr.size}")
    return arr


def simulate_periodic(jobs, capacity, horizon: float, *, priority=None, weights=None,
                      offsets=None) -> PeriodicResult:
    """Run periodic jobs on shared links for ``horizon`` seconds with the engine.

    Parameters
    ----------
    jobs : sequence of :class:`~hpnsim.sched.jobs.SchedJob`
    capacity : array of float
        Bytes/s per link (indexed by the jobs' link ids).
    horizon : float
        Seconds simulated.
    priority : sequence of int, optional
        Strict priority class per job (lower first; default: all in one class).
    weights : sequence of float, optional
        Max-min weight per job inside its class (default 1).
    offsets : sequence of float, optional
        Start time of each job's first iteration (CASSINI's time shifts; default 0).

    Examples
    --------
    Crux worked example 1: two 10-GPU jobs on one 1 B/s link, job 1 computes 2 s then
    sends 2 s, job 2 computes 1 s then sends 1 s, over 12 s:

    >>> j1 = SchedJob("job1", 10, 2.0, [0], [2.0])
    >>> j2 = SchedJob("job2", 10, 1.0, [0], [1.0])
    >>> first1 = simulate_periodic([j1, j2], [1.0], 12.0, priority=[0, 1])
    >>> first2 = simulate_periodic([j1, j2], [1.0], 12.0, priority=[1, 0])
    >>> round(first1.utilization, 4), round(first2.utilization, 4)
    (0.375, 0.4167)
    >>> first1.iterations.tolist(), first2.iterations.tolist()
    ([3, 3], [2, 6])
    """
    jobs = job_array(jobs)
    n = len(jobs)
    if n == 0:
        raise InputError("jobs", "need at least one job")
    try:
        horizon = float(horizon)
    except (TypeError, ValueError) as exc:
        raise InputError("horizon", f"must be a time in seconds, got {horizon!r}") from exc
    if not math.isfinite(horizon) or horizon <= 0:
        raise InputError("horizon", f"must be finite and > 0, got {horizon!r}")
    cap = np.asarray(capacity, dtype=np.float64)
    prio = np.zeros(n, dtype=np.int64) if priority is None else np.asarray(priority)
    if prio.shape != (n,) or prio.dtype.kind not in "iu":
        raise InputError("priority", f"needs one integer class per job ({n})")
    weight = _per_job(weights, n, "weights", 1.0)
    offset = _per_job(offsets, n, "offsets", 0.0)
    if np.any(~np.isfinite(offset) | (offset < 0)):
        raise InputError("offsets", "must be finite and >= 0")
    for j in jobs:
        if j.links.size and j.links.max() >= cap.size:
            raise InputError("links", f"job {j.name!r} uses link {int(j.links.max())}, "
                                      f"capacity has {cap.size} links")
        if j.iteration_time(cap) == 0:
            raise InputError("compute_time", f"job {j.name!r} has neither compute nor "
                                             "traffic: its iterations take no time")

    # the engine runs on the jobs' links only, twins merged (a transfer crosses every link
    # of its job: thousands of entries, most of them twins), numbered in order (its state
    # is sized by the link count; the order of the links, and so every step, is kept)
    used = np.unique(np.concatenate([j.links for j in jobs]))
    if not used.size:
        used = np.arange(cap.size)
    iterations_of, ends_of, t_of = [], [], []
    for j, job in enumerate(jobs):
        t = job.transfer_time(cap)
        t_of.append(t)
        # one iteration (compute in two parts, the transfer after the first), chained:
        # each starts when the one before has computed and sent
        one = TaskGraph()
        head = one.add_delay(job.comm_start * job.compute_time)
        ends = [one.add_delay((1.0 - job.comm_start) * job.compute_time, deps=[head])]
        if t > 0:
            # size in seconds of uncontended transfer: usage M_e / t_j makes the rate 1 alone
            ends.append(one.add_transfer(np.searchsorted(used, job.links), job.link_bytes / t,
                                         t, weight=float(weight[j]), deps=[head]))
        iterations_of.append(one.arrays(used.size))
        ends_of.append(ends)
    iterations_of, link_cap = merge_twin_links(iterations_of, cap[used])
    graph = TaskGraph()
    iteration_ends, transfers, computes = [], [], []
    for j, (job, one, ends) in enumerate(zip(jobs, iterations_of, ends_of, strict=True)):
        n_iter = int((horizon - offset[j]) // job.iteration_time(cap)) + 1 \
            if offset[j] <= horizon else 0
        firsts = graph.append_chain(one, n_iter, release=float(offset[j]),
                                    priority=int(prio[j]), chain=ends)
        iteration_ends.append(firsts[:, None] + np.asarray(ends, dtype=np.int64))
        transfers.append(firsts + ends[1] if t_of[j] > 0 else np.zeros(0, dtype=np.int64))
        computes.append(np.stack([firsts, firsts + ends[0]], axis=1).ravel())

    sim = Simulation(graph, link_cap)
    sim.run(until=horizon)
    res = sim.result()
    limit = horizon * (1.0 + _HORIZON_RTOL)
    iterations = np.zeros(n, dtype=np.int64)
    transmission = np.zeros(n)
    busy = np.zeros(n)
    finishes = []
    for j, job in enumerate(jobs):
        done = res.finish[iteration_ends[j]].max(axis=1, initial=-math.inf)
        done = done[done <= limit]
        finishes.append(done)
        iterations[j] = done.size
        xs = np.asarray(transfers[j], dtype=np.int64)
        if xs.size:
            moved = np.where(np.isfinite(res.finish[xs]), t_of[j],
                             np.where(np.isfinite(res.start[xs]), t_of[j] - res.remaining[xs],
                                      0.0))
            transmission[j] = moved.sum()
        cs = np.asarray(computes[j], dtype=np.int64)
        if cs.size:
            start = np.minimum(res.start[cs], horizon)
            end = np.minimum(res.finish[cs], horizon)
            busy[j] = job.gpus * np.sum(end - start)
    gpus = np.array([j.gpus for j in jobs], dtype=np.int64)
    work = np.array([j.work for j in jobs])
    return PeriodicResult(horizon=horizon, names=[j.name for j in jobs],
                          iterations=iterations, computation=iterations * work,
                          transmission=transmission, busy=busy, gpus=gpus,
                          iteration_finish=finishes)


def worked_example(example: int) -> list[SchedJob]:
    """The jobs of the Crux paper's worked example 1 or 2, on one 1 B/s link (link 0).

    Transfer times become bytes on that link. The paper's ``W`` (10 and 5; 10 and 30) are
    proportional to GPUs x compute time (20 and 10; 8 and 24 GPU-seconds), so intensities
    keep their ratios: equal in both examples.

    >>> [j.intensity([1.0]) for j in worked_example(1)], [j.intensity([1.0]) for j in worked_example(2)]
    ([10.0, 10.0], [8.0, 8.0])
    """
    if example not in (1, 2):
        raise InputError("example", f"the paper has worked examples 1 and 2, got {example!r}")
    if example == 1:
        return [SchedJob("job1", 10, 2.0, [0], [2.0]), SchedJob("job2", 10, 1.0, [0], [1.0])]
    return [SchedJob("job1", 2, 4.0, [0], [1.0], comm_start=0.5),
            SchedJob("job2", 12, 2.0, [0], [3.0], comm_start=0.5)]
