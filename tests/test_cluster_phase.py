"""Phase-level probes: closed forms, merging fast jobs, and agreement with the exact run."""

from types import SimpleNamespace

import numpy as np
import pytest
from cluster_tiny import program

from hpnsim.engine import TaskGraph
from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster
from hpnsim.sched.cluster.phase import phase_templates
from hpnsim.sched.cluster.steady import probe
from hpnsim.sched.jobs import SchedJob


def fake_template(job: SchedJob, capacity, engine_size: int = 10**9):
    """A job as the probe sees it, so costly task by task that it is probed phase-level."""
    return SimpleNamespace(iteration_time=job.iteration_time(capacity), engine_size=engine_size,
                           sched_job=lambda *args: job)


def test_fast_job_next_to_bulk_transfer_closed_form():
    # One 1 B/s link. Job A computes 1 s then sends 1 B; job B computes 1 ms then sends
    # 300 B, so it is on the link all but 1 ms of every iteration, and A (150 times faster)
    # runs merged, 7 iterations per phase-level copy.
    cap = np.array([1.0])
    a = SchedJob("a", 1, 1.0, [0], [1.0])
    b = SchedJob("b", 1, 1e-3, [0], [300.0])
    templates = [fake_template(a, cap), fake_template(b, cap)]
    assert [p.merge for p in phase_templates(templates, cap)[0]] == [7, 1]
    found = probe(templates, [0, 0], [0.0, 0.0], cap,
                  tolerance=0.01, limit=1e5, remaining=[1e9, 1e9])
    assert found.level == "phase" and found.stable
    # A: 1 s compute + its 1 B at half rate (2 s). B per 3 s of A's cycle: 1 B while A
    # computes, 1 B while A sends (half of 2 s): 2 B per 3 s, so 300 B take 450 s.
    assert found.period[0] == pytest.approx(3.0, rel=0.01)
    assert found.period[1] == pytest.approx(450.0, rel=0.01)
    assert found.simulated == 0.0 and found.ends[0].size == 0     # only periods are kept


def test_merging_does_not_move_the_periods():
    # the same pair with A not merged: the periods agree within the tolerance
    cap = np.array([1.0])
    jobs = [SchedJob("a", 1, 1.0, [0], [1.0]), SchedJob("b", 1, 1e-3, [0], [300.0])]
    args = ([fake_template(j, cap) for j in jobs], [0, 0], [0.0, 0.0], cap)
    kwargs = {"tolerance": 0.01, "limit": 1e5, "remaining": [1e9, 1e9]}
    merged = probe(*args, **kwargs)
    # no merging, and room for 1,000s of A
    single = probe(*args, **kwargs, max_spread=10**9, max_tasks=10**6)
    assert single.level == "phase"
    assert [p.merge for p in phase_templates(args[0], cap, max_spread=10**9)[0]] == [1, 1]
    np.testing.assert_allclose(merged.period, single.period, rtol=0.01)


def test_phase_level_steady_state_agrees_with_exact(tiny):
    # the trace of test_cluster's steady-vs-exact test, every component probed phase-level:
    # utilization within 2% of the exact run, every finish within 2% (measured: 1.5%, 1.6%)
    jobs = [ClusterJob("a", program(0.010, 3e8), iterations=300, gpus=[0, 2]),
            ClusterJob("b", program(0.004, 2e8), arrival=0.8, iterations=400, gpus=[1, 3]),
            ClusterJob("c", program(0.007, 1e8), arrival=3.0, iterations=200, gpus=[1, 3])]
    exact = simulate_cluster(tiny, jobs, allocator="given", exact=True)
    phase = simulate_cluster(tiny, jobs, allocator="given", probe_budget=0)
    assert phase.phase_probes == phase.probes > 0
    assert phase.gpu_utilization == pytest.approx(exact.gpu_utilization, rel=0.02)
    for e, p in zip(exact.jobs, phase.jobs, strict=True):
        assert p.finish == pytest.approx(e.finish, rel=0.02)


def test_append_chain_equals_copies_appended_one_by_one():
    g = TaskGraph()
    a = g.add_delay(1.0)
    b = g.add_transfer([0, 2], [1.0, 0.5], 8.0, deps=[a], latency=1e-6)
    c = g.add_delay(2.0, deps=[a])
    tpl, ends = g.arrays(3), np.array([b, c])
    one, chained = TaskGraph(), TaskGraph()
    pre = [one.add_delay(0.5), chained.add_delay(0.5)]
    first = None
    for _ in range(4):
        after = [pre[0]] if first is None else (first + ends).tolist()
        first = one.append_copy(tpl, release=0.25 if first is None else 0.0, after=after,
                                priority=2)
    firsts = chained.append_chain(tpl, 4, release=0.25, after=[pre[1]], priority=2,
                                  chain=ends)
    assert firsts.tolist() == [1, 4, 7, 10]
    x, y = one.arrays(3), chained.arrays(3)
    for name in ("kind", "amount", "priority", "weight", "latency", "release", "ptr",
                 "links", "usage", "dep_ptr"):
        np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)
    for t in range(len(one)):     # the same dependencies, in any order
        row = slice(x.dep_ptr[t], x.dep_ptr[t + 1])
        assert sorted(x.deps[row]) == sorted(y.deps[row])


def test_phase_probe_replays_only_when_no_job_runs_out():
    # the fast/bulk pair: A runs 7 iterations per copy; the probe stopped on its own, so it
    # is replayed at a later event unless a job has no more iterations left than it ran
    cap = np.array([1.0])
    jobs = [SchedJob("a", 1, 1.0, [0], [1.0]), SchedJob("b", 1, 1e-3, [0], [300.0])]
    found = probe([fake_template(j, cap) for j in jobs], [0, 0], [0.0, 0.0], cap,
                  tolerance=0.01, limit=1e5, remaining=[1e9, 1e9])
    ran = found.copies
    assert ran is not None and ran[0] % 7 == 0          # counted in A's iterations
    assert found.repeats(1e5, [ran[0] + 1, ran[1] + 1])
    assert not found.repeats(1e5, [ran[0], ran[1] + 1])   # A would leave within the probe
