"""Shared-cluster runs: sharing, queueing, steady state against exact, schedulers."""

import numpy as np
import pytest
from cluster_tiny import program

from hpnsim.errors import InputError
from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster


def test_two_identical_jobs_on_one_link_get_half(tiny):
    # jobs a (hosts 0, 2) and b (hosts 1, 3): both rings cross the one uplink of each ToR.
    # Identical, they start their all-reduces together and each gets half the link: the
    # all-reduce takes twice as long as alone, the compute does not change.
    c = 0.01
    jobs = [ClusterJob("a", program(c, 1e9), iterations=20, gpus=[0, 2]),
            ClusterJob("b", program(c, 1e9), iterations=20, gpus=[1, 3])]
    r = simulate_cluster(tiny, jobs, allocator="given", exact=True)
    for job in r.jobs:
        alone_comm = job.alone_iteration_time - c
        # alone the 2-GPU ring moves 1 GB per GPU over a 50 GB/s link (plus NCCL overheads)
        assert alone_comm == pytest.approx(1e9 / 50e9, rel=0.05)
        assert job.iteration_time == pytest.approx(c + 2 * alone_comm, rel=1e-3)
        assert job.finish == pytest.approx(20 * (c + 2 * alone_comm), rel=1e-3)
    # utilization: 2 jobs x 20 iterations x 2 GPUs x c over 4 GPUs x makespan
    assert r.gpu_utilization == pytest.approx(2 * 20 * 2 * c / (4 * r.makespan), rel=1e-9)
    assert r.contended_job_share == 1.0 and r.contended_gpu_share == 1.0


def test_a_job_waits_for_a_full_cluster(tiny):
    # a holds all four hosts; b arrives at 0.05 s, waits, starts when a leaves
    a = ClusterJob("a", program(0.02, 2e8, dp=4), iterations=10)
    b = ClusterJob("b", program(0.01, 1e8), arrival=0.05, iterations=5)
    for exact in (True, False):
        r = simulate_cluster(tiny, [a, b], exact=exact)
        ra, rb = r.jobs
        assert ra.start == 0.0 and ra.finish == pytest.approx(10 * ra.alone_iteration_time)
        assert rb.start == pytest.approx(ra.finish)
        assert rb.wait == pytest.approx(ra.finish - 0.05)
        assert rb.finish == pytest.approx(rb.start + 5 * rb.alone_iteration_time)
        assert rb.hosts == [0, 1]                            # packed: the lowest hosts
        assert r.contended_job_share == 0.0


def test_steady_state_agrees_with_exact(tiny):
    # three jobs, arrivals and departures, a few hundred iterations: utilization per run and
    # per interval within 1% between steady-state extrapolation and the exact run
    jobs = [ClusterJob("a", program(0.010, 3e8), iterations=300, gpus=[0, 2]),
            ClusterJob("b", program(0.004, 2e8), arrival=0.8, iterations=400, gpus=[1, 3]),
            ClusterJob("c", program(0.007, 1e8), arrival=3.0, iterations=200, gpus=[1, 3])]
    exact = simulate_cluster(tiny, jobs, allocator="given", exact=True)
    steady = simulate_cluster(tiny, jobs, allocator="given", exact=False)
    assert steady.extrapolated_time > 0.2 * steady.makespan
    assert steady.gpu_utilization == pytest.approx(exact.gpu_utilization, rel=0.01)
    # a and b drift through each other's phases in a slow beat: finish times come within 2%
    for e, s in zip(exact.jobs, steady.jobs, strict=True):
        assert s.finish == pytest.approx(e.finish, rel=0.02)
        assert s.start == pytest.approx(e.start, rel=0.01)
    # c waited for b's hosts
    assert exact.jobs[2].start == pytest.approx(exact.jobs[1].finish)


@pytest.mark.parametrize("kwargs, field", [
    ({"scheduler": "fifo"}, "scheduler"), ({"K": 0}, "K"),
    ({"allocator": "best"}, "allocator")])
def test_bad_arguments(tiny, kwargs, field):
    jobs = [ClusterJob("a", program(0.01, 1e8), iterations=2)]
    with pytest.raises(InputError) as err:
        simulate_cluster(tiny, jobs, **kwargs)
    assert err.value.field == field


def test_bad_jobs(tiny):
    with pytest.raises(InputError, match="cluster has 4"):
        simulate_cluster(tiny, [ClusterJob("a", program(0.01, 1e8, dp=8), iterations=2)])
    with pytest.raises(InputError) as err:
        ClusterJob("a", program(0.01, 1e8), arrival=-1.0, iterations=2)
    assert err.value.field == "arrival"
    assert np.isfinite(1.0)
