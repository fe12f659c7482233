"""Baselines as their authors built them: TACCL*'s distance from the hops of each job's
paths on the fabric; CASSINI's time shifts held at every iteration."""

import numpy as np
import pytest
from cluster_tiny import program

from hpnsim.fabrics import fat_tree
from hpnsim.routing.precise import NETWORK_LINKS
from hpnsim.sched.cluster.decide import decide
from hpnsim.sched.cluster.driver import simulate_cluster
from hpnsim.sched.cluster.jobs import ClusterJob, RunningJob, TemplateCache
from hpnsim.sched.policies import mean_network_hops


def _running(fabric, jobs):
    out = []
    for j, (job, gpus) in enumerate(jobs):
        gpus = np.asarray(gpus)
        out.append(RunningJob(j, job, gpus, np.unique(gpus // fabric.gpus_per_host), 0.0))
    return out


def test_taccl_ranks_jobs_by_the_hops_of_their_paths():
    # k=16 fat-tree, one GPU per host, eight hosts per ToR, eight ToRs per pod:
    # a: an 8-GPU ring inside one ToR (NIC -> ToR -> NIC, 2 hops, 16 links);
    # b: 2 GPUs on two ToRs of one pod (NIC -> ToR -> Agg -> ToR -> NIC, 4 hops);
    # c: 2 GPUs in two pods (through a core switch, 6 hops).
    # a loads more links than b: a footprint ranks a first, its distance last.
    f = fat_tree(16, gpus_per_host=1)
    jobs = [(ClusterJob("a", program(0.01, 1e8, dp=8), iterations=1), list(range(8))),
            (ClusterJob("b", program(0.01, 1e8), iterations=1), [8, 16]),
            (ClusterJob("c", program(0.01, 1e8), iterations=1), [100, 200])]
    templates = TemplateCache(f)
    running = _running(f, jobs)
    hops = [mean_network_hops(templates.of(r).links, templates.of(r).link_bytes, f)
            for r in running]
    assert hops == pytest.approx([2.0, 4.0, 6.0], rel=1e-12)
    sizes = [int(np.isin(f.link_kind[templates.of(r).links], NETWORK_LINKS).sum())
             for r in running]
    assert sizes[0] == 16 and sizes[1] < sizes[0]
    decide("taccl", running, templates, f.link_capacity, K=8, seed=0, samples=1,
           candidates=1)
    assert [r.priority for r in running] == [2, 1, 0]        # farther first


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("compute_b", [0.03, 0.08])
def test_cassini_interleaves_so_neither_job_is_slowed(tiny, exact, compute_b):
    # a and b (hosts 0, 2 and 1, 3) share both ToR uplinks; each computes, then all-reduces
    # 1 GB per GPU on the 50 GB/s uplink (t = 20 ms alone). a's period is p_a = c_a + t
    # = 50 ms, b's p_b = 50 or 100 ms. b's communication fits in a's free 30 ms (t <= p_a
    # - t), so on a common circle shifted phases never meet. CASSINI's circle (by hand):
    # a runs m = round(p_b / p_a) iterations per turn of L = max(m p_a, p_b): gates L / m
    # and L. Each iteration k starts at offset + k gate: a job's n iterations
    # end (n - 1) gates + its alone time after its offset (0 <= offset < gate), never
    # later: it is not slowed by the other, only held to the circle.
    # Without shifts (none) both start together and their transfers share the link.
    jobs = [ClusterJob("a", program(0.03, 1e9), iterations=60, gpus=[0, 2]),
            ClusterJob("b", program(compute_b, 1e9), iterations=30, gpus=[1, 3])]
    cassini = simulate_cluster(tiny, jobs, allocator="given", scheduler="cassini",
                               exact=exact)
    none = simulate_cluster(tiny, jobs, allocator="given", scheduler="none", exact=exact)
    a, b = cassini.jobs
    for job, c in ((a, 0.03), (b, compute_b)):
        assert job.alone_iteration_time - c == pytest.approx(1e9 / 50e9, rel=0.05)
    m = round(b.alone_iteration_time / a.alone_iteration_time)
    turn = max(m * a.alone_iteration_time, b.alone_iteration_time)
    for job, gate in ((a, turn / m), (b, turn)):
        offset = job.finish - job.start - (job.iterations - 1) * gate \
            - job.alone_iteration_time
        assert -1e-9 <= offset < gate
    # the circle stretches a period by at most the two jobs' mismatch (here the latency
    # each extra iteration of a adds: 2 p_a - p_b = 0.44 ms, 0.44% of b's period)
    assert turn / m / a.alone_iteration_time < 1.005 and turn / b.alone_iteration_time < 1.005
    assert max(j.slowdown for j in none.jobs) > 1.05


def test_path_selection_counts_the_jobs_own_flows():
    # an 8-GPU ring alternating between ToRs of a k=8 fat-tree, so two of its flows leave
    # each ToR: some routing seeds put both on one uplink (slower alone). With nothing else placed, the choice must be the
    # candidate whose most loaded link (its own bytes) is the least loaded: brute force
    from hpnsim.sched.cluster.decide import choose_seeds

    f = fat_tree(8, gpus_per_host=1)
    job = ClusterJob("a", program(0.01, 1e9, dp=8), iterations=1)
    gpus = [0, 4, 1, 5, 8, 12, 9, 13]
    templates = TemplateCache(f)
    (r,) = _running(f, [(job, gpus)])
    cap = f.link_capacity
    worst = [float((t.link_bytes / cap[t.links]).max())
             for t in (templates.get(job, r.gpus, s) for s in range(8))]
    assert max(worst) > min(worst)                  # some seeds do collide with themselves
    assert worst[2] > min(worst[2:])                # the first candidate tried collides
    choose_seeds([r], "arrival", templates, cap, seed=2, candidates=6)
    assert 2 <= r.seed < 8 and worst[r.seed] == min(worst[2:])


def test_cassini_gates_hold_a_pipeline_job_to_its_own_period_at_phase_level():
    # a pipeline job alone in its group: its gate is its alone period, which holds nothing.
    # Its phase-level model (compute, then its bytes) is shorter than the task-level
    # iteration (the pipeline bubble); a gate must be read on the phase-level clock, not
    # hold the model to the task-level period (that slowed pipeline jobs by their bubble)
    from hpnsim.training.job import TrainJob

    f = fat_tree(4, gpus_per_host=1)
    job = ClusterJob("p", TrainJob("llama3-8b", tp=1, pp=2, dp=2, zero=1), iterations=40)
    for budget in (0, 10**9):           # phase level, task level
        r = simulate_cluster(f, [job], scheduler="cassini", probe_budget=budget)
        assert r.jobs[0].slowdown == pytest.approx(1.0, abs=0.01)
