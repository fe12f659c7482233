"""Periodic jobs on the engine: the Crux paper's worked examples traced by hand, time
offsets, and the single-bottleneck theorem by brute force over strict orders."""

import itertools

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.sched import SchedJob, order_to_classes, simulate_periodic, worked_example


def test_example1_utilization_traced_by_hand():
    # One 1 B/s link, 12 s. Job 1 (10 GPUs): compute 2 s, send 2 s. Job 2 (10 GPUs):
    # compute 1 s, send 1 s. GPU time available: 20 GPUs x 12 s = 240 GPU-s.
    jobs = worked_example(1)
    # job 1 first: job 1 sends [2,4] [6,8] [10,12] -> iterations end 4, 8, 12; job 2 sends
    # [1,2], waits for [2,4], sends [4,5], waits [6,8], sends [8,9], then waits [10,12]:
    # iterations end 2, 5, 9.  3 x 20 + 3 x 10 = 90 GPU-s of completed computation.
    first1 = simulate_periodic(jobs, [1.0], 12.0, priority=[0, 1])
    assert [f.tolist() for f in first1.iteration_finish] == [[4, 8, 12], [2, 5, 9]]
    assert first1.utilization == pytest.approx(90 / 240)            # 37.5 %
    # job 2 first: it sends [1,2] [3,4] ... [11,12], 6 iterations; job 1 sends in the gaps
    # [2,3] [4,5] (ends 5), computes [5,7], sends [8,9] [10,11] (ends 11).
    first2 = simulate_periodic(jobs, [1.0], 12.0, priority=[1, 0])
    assert [f.tolist() for f in first2.iteration_finish] == [[5, 11], [2, 4, 6, 8, 10, 12]]
    assert first2.utilization == pytest.approx(100 / 240)           # 41.7 %
    assert round(100 * first1.utilization, 1) == 37.5
    assert round(100 * first2.utilization, 1) == 41.7
    # counting every second computed (job 2's 4th compute [9,10] in the first run, job 1's
    # [11,12] in the second) would give 100/240 and 110/240 instead
    assert first1.busy_utilization == pytest.approx(100 / 240)
    assert first2.busy_utilization == pytest.approx(110 / 240)


def test_example1_transmission_times_give_k2():
    jobs = worked_example(1)
    first1 = simulate_periodic(jobs, [1.0], 12.0, priority=[0, 1])
    first2 = simulate_periodic(jobs, [1.0], 12.0, priority=[1, 0])
    # seconds on the link, from the traces above: job 1 6 s vs 4 s, job 2 3 s vs 6 s
    assert first1.transmission.tolist() == [6.0, 3.0]
    assert first2.transmission.tolist() == [4.0, 6.0]
    gain_ref, gain_2 = 6.0 - 4.0, 6.0 - 3.0
    assert gain_2 / gain_ref == 1.5


def test_example2_overlap_favours_job2():
    # Job 1: 2 GPUs, compute 4 s, send 1 s; job 2: 12 GPUs, compute 2 s, send 3 s; each
    # may send from half-way through its compute. 14 GPUs x 12 s = 168 GPU-s.
    jobs = worked_example(2)
    # job 2 first: it sends [1,4] [5,8] [9,12] (ends 4, 8, 12); job 1 waits for [4,5]
    # (ends 5), then sends [8,9] (ends 9): 2 x 8 + 3 x 24 = 88 GPU-s
    first2 = simulate_periodic(jobs, [1.0], 12.0, priority=[1, 0])
    assert [f.tolist() for f in first2.iteration_finish] == [[5, 9], [4, 8, 12]]
    assert first2.utilization == pytest.approx(88 / 168)
    # job 1 first: it sends [2,3] [6,7] [10,11] (ends 4, 8, 12); job 2 sends [1,2] [3,5]
    # (ends 5), [7,10] (ends 10): 3 x 8 + 2 x 24 = 72 GPU-s
    first1 = simulate_periodic(jobs, [1.0], 12.0, priority=[0, 1])
    assert [f.tolist() for f in first1.iteration_finish] == [[4, 8, 12], [5, 10]]
    assert first1.utilization == pytest.approx(72 / 168)


def test_offsets_interleave_communication():
    # two jobs: compute 1 s then send 1 s on one link. Together they share [1,3] at half
    # rate and end 3, 6, 9. Shifting job B by 1 s: A sends [1,2] while B computes, and so on:
    # A ends 2, 4, ..., 10 and B ends 3, 5, 7, 9.
    jobs = [SchedJob("a", 1, 1.0, [0], [1.0]), SchedJob("b", 1, 1.0, [0], [1.0])]
    shared = simulate_periodic(jobs, [1.0], 10.0)
    assert shared.iterations.tolist() == [3, 3]
    shifted = simulate_periodic(jobs, [1.0], 10.0, offsets=[0.0, 1.0])
    assert shifted.iterations.tolist() == [5, 4]


def test_weights_share_within_a_class():
    # 3 bytes each on a 3 B/s link, weights 2:1. Job a sends from the start of its 5 s
    # compute; b has no compute. Rates 2 and 1 until a's bytes are done at 1.5 s; b sends
    # its last 1.5 B alone at 3 B/s (done at 2), then 1 s per iteration (3, 4, 5); a's
    # iteration ends with its compute at 5.
    jobs = [SchedJob("a", 1, 5.0, [0], [3.0], comm_start=0.0),
            SchedJob("b", 1, 0.0, [0], [3.0])]
    r = simulate_periodic(jobs, [3.0], 5.0, weights=[2.0, 1.0])
    assert r.iteration_finish[0].tolist() == [5.0]
    assert r.iteration_finish[1].tolist() == pytest.approx([2.0, 3.0, 4.0, 5.0])


def _comm_bound_jobs(rng, comm_start):
    jobs = []
    for i in range(3):
        compute = float(rng.uniform(0.2, 2.0))
        send = compute * float(rng.uniform(1.0, 3.0))
        jobs.append(SchedJob(f"j{i}", int(rng.integers(1, 17)), compute, [0], [send],
                             comm_start=comm_start))
    return jobs


@pytest.mark.parametrize("comm_start", [0.0, 0.5, 1.0])
def test_intensity_order_is_best_on_one_bottleneck(comm_start):
    """Crux's theorem: on one link, strict priority by GPU intensity maximises utilization.

    Its exchange argument (a second of link time given to job j yields I_j of computation)
    holds when jobs always want the link (communication-bound: t_j >= compute). The
    theorem is about rates over a long horizon: a horizon H can cut at most one iteration
    per job short, so orders may differ by up to sum_j W_j / (sum_j G_j H) at the end.
    """
    rng = np.random.default_rng(11 + int(10 * comm_start))
    for _ in range(8):
        jobs = _comm_bound_jobs(rng, comm_start)
        intensity = np.array([j.intensity([1.0]) for j in jobs])
        horizon = 30 * max(j.iteration_time([1.0]) for j in jobs)
        util = {order: simulate_periodic(jobs, [1.0], horizon,
                                         priority=order_to_classes(order, 3)).utilization
                for order in itertools.permutations(range(3))}
        by_intensity = tuple(np.argsort(-intensity, kind="stable").tolist())
        edge = sum(j.work for j in jobs) / (sum(j.gpus for j in jobs) * horizon)
        assert util[by_intensity] >= max(util.values()) - edge


def test_bad_input():
    job = SchedJob("a", 1, 1.0, [0], [1.0])
    with pytest.raises(InputError, match="horizon"):
        simulate_periodic([job], [1.0], 0.0)
    with pytest.raises(InputError, match="priority"):
        simulate_periodic([job], [1.0], 1.0, priority=[0, 1])
    with pytest.raises(InputError, match="links"):
        simulate_periodic([SchedJob("b", 1, 1.0, [3], [1.0])], [1.0], 1.0)
    with pytest.raises(InputError, match="jobs"):
        simulate_periodic([job, job], [1.0], 1.0)
    with pytest.raises(InputError, match="comm_start"):
        SchedJob("c", 1, 1.0, [0], [1.0], comm_start=1.5)
    with pytest.raises(InputError, match="gpus"):
        SchedJob("c", 0, 1.0, [0], [1.0])
    with pytest.raises(InputError, match="order"):
        order_to_classes([0, 0], 2)
