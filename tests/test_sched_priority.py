"""Crux priority assignment: k_j from pairwise simulations, against hand-traced timelines."""

import math

import pytest

from hpnsim.errors import InputError
from hpnsim.sched import SchedJob, worked_example
from hpnsim.sched.priority import assign_priorities, k_factor, reference_job


def test_example1_k2_is_one_and_a_half():
    # reference: job 1 (2 bytes per iteration vs 1). Traced in test_sched_periodic: over
    # 12 s job 1 sends 6 s first / 4 s second, job 2 sends 6 s first / 3 s second.
    p = assign_priorities(worked_example(1), [1.0], horizon=12.0)
    assert p.reference == 0
    assert p.k.tolist() == [1.0, (6 - 3) / (6 - 4)]
    assert p.score.tolist() == [10.0, 15.0]      # equal intensity 10 GPU-s/s
    assert p.order.tolist() == [1, 0]           # job 2 first: the 41.7 % order


def test_example1_default_horizon_forty_seconds():
    # 10 iterations of the slower job (4 s): 40 s. Job 1 first: job 1 sends 20 s; job 2
    # sends [1,2] and then one second per 4 s cycle [4k, 4k+1], k = 1..9: 10 s. Job 2 first:
    # job 2 sends 20 s; job 1 sends [2,3] [4,5], then 2 s per 6 s cycle (ends 11 ... 35)
    # and [38,39]: 2 + 10 + 1 = 13 s. k_2 = (20 - 10) / (20 - 13) = 10/7.
    p = assign_priorities(worked_example(1), [1.0])
    assert p.k[1] == pytest.approx(10 / 7)
    assert p.order.tolist() == [1, 0]


def test_example2_overlap_puts_job2_first():
    # reference: job 2 (3 bytes). Over 12 s (traced in test_sched_periodic): job 1 sends
    # 3 s when first, 2 s when second; job 2 sends 9 s first, 7 s second: k_1 = 1/2.
    p = assign_priorities(worked_example(2), [1.0], horizon=12.0)
    assert p.reference == 1
    assert p.k.tolist() == [0.5, 1.0]
    assert p.order.tolist() == [1, 0]
    assert assign_priorities(worked_example(2), [1.0]).order.tolist() == [1, 0]


def test_jobs_that_never_meet_keep_intensity_order():
    a = SchedJob("a", 4, 1.0, [0], [4.0])     # I = 1
    b = SchedJob("b", 8, 1.0, [1], [1.0])     # I = 8, another link
    assert k_factor(b, a, [1.0, 1.0], 10.0) == 1.0
    p = assign_priorities([a, b], [1.0, 1.0])
    assert p.order.tolist() == [1, 0]


def test_a_job_without_traffic_goes_first():
    idle = SchedJob("idle", 2, 1.0, [], [])
    busy = SchedJob("busy", 2, 1.0, [0], [1.0])
    p = assign_priorities([busy, idle], [1.0])
    assert math.isinf(p.score[1]) and p.order.tolist() == [1, 0]


def test_reference_and_bad_input():
    jobs = [SchedJob("a", 1, 1.0, [0, 1], [1.0, 1.0]), SchedJob("b", 1, 1.0, [0], [1.5])]
    assert reference_job(jobs) == 0              # 2 bytes over two links beat 1.5
    with pytest.raises(InputError, match="iterations"):
        assign_priorities(jobs, [1.0, 1.0], iterations=0)
    with pytest.raises(InputError, match="jobs"):
        reference_job([])


def test_k_factors_are_simulated_once_per_pair_of_demands(monkeypatch):
    # a cluster re-decides at every event for mostly the same pairs: the second assignment
    # (and one with an equal copy of job 2) reuses the k factor instead of simulating
    from hpnsim.sched import priority

    calls = []
    real = priority.k_factor
    monkeypatch.setattr(priority, "_k_cache", priority.OrderedDict())
    monkeypatch.setattr(priority, "k_factor", lambda *a: calls.append(a) or real(*a))
    ref, job2 = worked_example(1)
    first = assign_priorities([ref, job2], [1.0], horizon=12.0)
    again = assign_priorities([ref, SchedJob("copy", 10, 1.0, [0], [1.0])], [1.0], horizon=12.0)
    assert len(calls) == 1 and first.k.tolist() == again.k.tolist() == [1.0, 1.5]
    assign_priorities([ref, job2], [2.0], horizon=12.0)       # another capacity: simulated
    assert len(calls) == 2
