"""Crux's priority assignment: ``P_j = k_j x I_j``, with ``k_j`` from pairwise simulations.

GPU intensity alone ignores how a job's iterations interleave with others (its compute
gaps, its compute/communication overlap). Crux (SIGCOMM 2024, section 4.2; reference/crux.md)
corrects it with a factor ``k_j``: the job with the most traffic is the reference
(``k = 1``); for every other job, the pair is simulated under both strict orders and

    k_j = ΔS_j / ΔS_ref,

where ``ΔS_x`` is the extra transmission time job ``x`` gets (seconds of uncontended
transfer within the horizon) when it is the one prioritised. The simulations here are
:func:`~hpnsim.sched.periodic.simulate_periodic` runs of the two jobs alone on their links.

Edge cases (the paper does not discuss them): a pair that never contends (neither gains
anything from going first) gets ``k = 1``, so intensity decides; a job that gains while
the reference loses nothing gets ``k = inf`` (it goes first at no cost to the reference).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.sched.jobs import SchedJob, job_array
from hpnsim.sched.periodic import simulate_periodic

#: default pairwise horizon, in iterations of the slower job of the pair (an assumption:
#: the paper simulates "a period"; ten iterations make the start-up transient small)
PAIR_ITERATIONS = 10


def reference_job(jobs) -> int:
    """Index of the job with the most bytes per iteration (first one on a tie).

    >>> reference_job([SchedJob("a", 1, 1.0, [0], [2.0]), SchedJob("b", 1, 1.0, [0], [3.0])])
    1
    """
    jobs = job_array(jobs)
    if not jobs:
        raise InputError("jobs", "need at least one job")
    return int(np.argmax([j.total_bytes() for j in jobs]))


def pair_horizon(a: SchedJob, b: SchedJob, capacity, iterations: int = PAIR_ITERATIONS):
    """``iterations`` uncontended iterations of the slower job of the pair (seconds).

    >>> from hpnsim.sched.periodic import worked_example
    >>> pair_horizon(*worked_example(1), [1.0], iterations=3)
    12.0
    """
    return iterations * max(a.iteration_time(capacity), b.iteration_time(capacity))


def transmission_gains(job: SchedJob, ref: SchedJob, capacity, horizon: float):
    """``(ΔS_job, ΔS_ref)``: extra seconds of transfer each gets when prioritised.

    >>> from hpnsim.sched.periodic import worked_example
    >>> ref, job2 = worked_example(1)
    >>> transmission_gains(job2, ref, [1.0], 12.0)
    (3.0, 2.0)
    """
    job_first = simulate_periodic([job, ref], capacity, horizon, priority=[0, 1])
    ref_first = simulate_periodic([job, ref], capacity, horizon, priority=[1, 0])
    gain_job = job_first.transmission[0] - ref_first.transmission[0]
    gain_ref = ref_first.transmission[1] - job_first.transmission[1]
    return float(gain_job), float(gain_ref)


#: k factors already simulated, by what decides them (a cluster re-decides at every arrival
#: and departure, mostly for the same pairs); at most this many are kept
K_CACHE_SIZE = 4096
_k_cache: OrderedDict = OrderedDict()


def _demand_key(job: SchedJob, capacity) -> tuple:
    """What a pairwise simulation sees of a job: its compute, overlap and link demand."""
    cap = np.asarray(capacity, dtype=np.float64)[job.links]
    return (job.compute_time, job.comm_start, job.links.tobytes(), job.link_bytes.tobytes(),
            cap.tobytes())


def cached_k_factor(job: SchedJob, ref: SchedJob, capacity, horizon: float) -> float:
    """:func:`k_factor`, remembered: the same pair of demands and horizon is simulated once.

    >>> from hpnsim.sched.periodic import worked_example
    >>> ref, job2 = worked_example(1)
    >>> cached_k_factor(job2, ref, [1.0], 12.0), cached_k_factor(job2, ref, [1.0], 12.0)
    (1.5, 1.5)
    """
    key = (_demand_key(job, capacity), _demand_key(ref, capacity), float(horizon))
    k = _k_cache.get(key)
    if k is None:
        k = k_factor(job, ref, capacity, horizon)
        _k_cache[key] = k
        if len(_k_cache) > K_CACHE_SIZE:
            _k_cache.popitem(last=False)
    return k


def k_factor(job: SchedJob, ref: SchedJob, capacity, horizon: float | None = None) -> float:
    """``k_j = ΔS_j / ΔS_ref`` (module docstring for the edge cases).

    >>> from hpnsim.sched.periodic import worked_example
    >>> ref, job2 = worked_example(1)
    >>> k_factor(job2, ref, [1.0], horizon=12.0)
    1.5
    """
    if horizon is None:
        horizon = pair_horizon(job, ref, capacity)
    if not np.intersect1d(job.links, ref.links).size:
        return 1.0
    gain_job, gain_ref = transmission_gains(job, ref, capacity, horizon)
    if gain_ref == 0.0:
        return 1.0 if gain_job == 0.0 else (math.inf if gain_job > 0 else -math.inf)
    return gain_job / gain_ref


@dataclass(frozen=True)
class Priorities:
    """Crux's priority of every job.

    Attributes
    ----------
    reference : index of the reference job (k = 1)
    intensity : ``I_j`` per job
    k : ``k_j`` per job
    score : ``P_j = k_j I_j``
    order : job indices, highest priority first (by P, then I, then index)
    """

    reference: int
    intensity: np.ndarray
    k: np.ndarray
    score: np.ndarray
    order: np.ndarray


def _score(k: float, intensity: float) -> float:
    if math.isinf(intensity):          # no traffic: any k > 0 keeps it on top
        return math.inf if k > 0 else -math.inf
    if intensity == 0:
        return 0.0
    return k * intensity


def assign_priorities(jobs, capacity, *, horizon: float | None = None,
                      iterations: int = PAIR_ITERATIONS) -> Priorities:
    """``P_j = k_j I_j`` for every job, ``k_j`` against the job with the most traffic.

    Parameters
    ----------
    jobs : sequence of :class:`~hpnsim.sched.jobs.SchedJob`
    capacity : bytes/s per link
    horizon : seconds of each pairwise simulation (default: ``iterations`` iterations of
        the slower job of the pair)

    Examples
    --------
    Worked example 1: equal intensity, but job 2 gains 1.5 times what the reference
    (job 1, more traffic) gains, so job 2 goes first:

    >>> from hpnsim.sched.periodic import worked_example
    >>> p = assign_priorities(worked_example(1), [1.0], horizon=12.0)
    >>> p.reference, p.k.tolist(), p.score.tolist(), p.order.tolist()
    (0, [1.0, 1.5], [10.0, 15.0], [1, 0])
    """
    jobs = job_array(jobs)
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise InputError("iterations", f"must be an integer >= 1, got {iterations!r}")
    ref = reference_job(jobs)
    intensity = np.array([j.intensity(capacity) for j in jobs])
    k = np.ones(len(jobs))
    for i, job in enumerate(jobs):
        if i != ref:
            h = horizon if horizon is not None else pair_horizon(job, jobs[ref], capacity,
                                                                 iterations)
            k[i] = cached_k_factor(job, jobs[ref], capacity, h)
    score = np.array([_score(ki, ii) for ki, ii in zip(k, intensity, strict=True)])
    order = np.lexsort((np.arange(len(jobs)), -intensity, -score))
    return Priorities(reference=ref, intensity=intensity, k=k, score=score, order=order)
