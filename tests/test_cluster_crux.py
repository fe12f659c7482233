"""Crux against no scheduling on two jobs contending on one link (docs/cluster.md, "Crux vs
none"): the theorem's setting (both jobs stay, the computation rate counts) and a finite
trace (fixed iterations, the makespan counts), where strict priority legitimately loses."""

import numpy as np
import pytest
from cluster_tiny import program

from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster
from hpnsim.sched.cluster.jobs import TemplateCache
from hpnsim.sched.periodic import simulate_periodic

# a: 4 ms of compute, 800 MB to reduce (link-bound, low GPU intensity);
# b: 30 ms of compute, 200 MB (compute-bound, 30x the intensity)
A, B = program(0.004, 8e8), program(0.030, 2e8)


@pytest.mark.parametrize("exact", [True, False])
def test_crux_on_two_jobs_sharing_a_link_beats_none(tiny, exact):
    # the theorem's setting: the set of jobs is fixed for the whole horizon (both stay 2 s)
    # and utilization is the computation finished in it over the GPU time
    jobs = [ClusterJob("a", A, duration=2.0, gpus=[0, 2]),
            ClusterJob("b", B, duration=2.0, gpus=[1, 3])]
    none = simulate_cluster(tiny, jobs, scheduler="none", allocator="given", exact=exact)
    crux = simulate_cluster(tiny, jobs, scheduler="crux", allocator="given", exact=exact)
    assert crux.gpu_utilization >= none.gpu_utilization
    # brute force over the strict orders of the pair, with the periodic model on the jobs'
    # measured profiles (alone iteration, compute, bytes on the link) over the same horizon:
    # Crux's choice is the better order, and the runner agrees with the model within one
    # iteration of the faster job (the model counts completed iterations only)
    cache = TemplateCache(tiny)
    cap = tiny.link_capacity
    sched = [cache.get(j, j.gpus, 0).sched_job(j.name, j.n_gpus, cap) for j in jobs]
    by_order = {order: simulate_periodic(sched, cap, 2.0, priority=list(order)).utilization
                for order in ((0, 1), (1, 0))}
    best = max(by_order, key=by_order.get)
    assert best == (1, 0)                                      # b (more intense) first
    assert crux.gpu_utilization == pytest.approx(by_order[best], rel=0.02)
    assert none.gpu_utilization < by_order[best]
    # with b first, b runs as if alone: its iterations in 2 s are 2 s over its alone time
    b = crux.jobs[1]
    assert b.iterations == pytest.approx(2.0 / b.alone_iteration_time, rel=1e-6)


def test_finite_trace_crux_faster_while_both_run_but_longer_makespan(tiny):
    # the same pair with a fixed number of iterations: the work is fixed, so the overall
    # utilization is work / (GPUs x makespan) and the makespan is a's finish. Crux serves b
    # first (higher rate while both run, as the theorem says), b leaves earlier, and a has
    # more of its link-bound work left to do alone at a low rate: a legitimate loss
    jobs = [ClusterJob("a", A, iterations=200, gpus=[0, 2]),
            ClusterJob("b", B, iterations=60, gpus=[1, 3])]
    none = simulate_cluster(tiny, jobs, scheduler="none", allocator="given", exact=True)
    crux = simulate_cluster(tiny, jobs, scheduler="crux", allocator="given", exact=True)
    for r in (none, crux):
        a, b = r.jobs
        work = 200 * 2 * 0.004 + 60 * 2 * 0.030                   # GPU-seconds
        assert r.gpu_utilization == pytest.approx(work / (4 * a.finish), rel=1e-9)
        assert b.finish < a.finish
    both = [r.computation(0.0, r.jobs[1].finish) / (4 * r.jobs[1].finish)
            for r in (none, crux)]
    assert both[1] > both[0]                      # Crux's rate while both run is higher
    assert crux.jobs[1].finish < none.jobs[1].finish          # b leaves earlier
    assert crux.makespan > none.makespan                      # a finishes later
    assert crux.gpu_utilization < none.gpu_utilization
    assert np.isfinite(crux.makespan)
