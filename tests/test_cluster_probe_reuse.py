"""A probe that stopped on its own (budget, not the segment's end or a job's last
iteration) is replayed instead of re-run: Probe.repeats must say yes exactly when a new
probe of the same component would give the same iteration ends."""

import numpy as np
import pytest
from cluster_tiny import program

import hpnsim.sched.cluster.steady as steady
from hpnsim.sched.cluster.driver import ClusterDriver, ClusterJob
from hpnsim.sched.cluster.jobs import TemplateCache


def _probe(tpls, cap, limit, remaining):
    # a small task budget
    return steady.probe(tpls, [0, 0], [0.0, 0.0], cap, tolerance=1e-9, limit=limit,
                        remaining=remaining, max_tasks=200)


def test_repeats_exactly_when_a_new_probe_runs_the_same(tiny):
    # two jobs on the one shared uplink; a tolerance no probe meets, a small task budget:
    # the probe stops at the budget, before any limit
    cache = TemplateCache(tiny)
    tpls = [cache.get(ClusterJob("a", program(0.010, 3e8), iterations=1), [0, 2], 0),
            cache.get(ClusterJob("b", program(0.004, 2e8), iterations=1), [1, 3], 0)]
    cap = np.asarray(tiny.link_capacity, dtype=np.float64)
    first = _probe(tpls, cap, 100.0, [np.inf, np.inf])
    assert not first.stable and first.copies is not None and first.elapsed < 100.0
    same = _probe(tpls, cap, first.elapsed, first.copies + 1)
    assert first.repeats(first.elapsed, first.copies + 1)
    for a, b in zip(first.ends, same.ends, strict=True):
        assert np.array_equal(a, b)
    # a job that would leave within the copies, or a limit before the probe's end: re-run
    short = first.copies.copy()
    short[0] -= 1
    assert not first.repeats(100.0, short)
    assert not first.repeats(0.5 * first.elapsed, [np.inf, np.inf])
    cut = _probe(tpls, cap, 0.5 * first.elapsed, [np.inf, np.inf])
    assert cut.elapsed == pytest.approx(0.5 * first.elapsed) and cut.copies is None


def test_a_replayed_probe_gives_the_result_of_re_probing(tiny, monkeypatch):
    # a and b share the uplink and never settle within the budget; c and d arrive while
    # every host is busy (they queue), so the unchanged a+b component meets three events
    jobs = [ClusterJob("a", program(0.010, 3e8), duration=20.0, gpus=[0, 2]),
            ClusterJob("b", program(0.004, 2e8), duration=20.0, gpus=[1, 3]),
            ClusterJob("c", program(0.004, 2e8), arrival=5.0, iterations=3, gpus=[0, 2]),
            ClusterJob("d", program(0.004, 2e8), arrival=10.0, iterations=3, gpus=[1, 3])]
    replayed = ClusterDriver(tiny, jobs, allocator="given", tolerance=1e-6,
                             probe_tasks=300).run()
    monkeypatch.setattr(steady.Probe, "repeats", lambda self, limit, remaining: False)
    reprobed = ClusterDriver(tiny, jobs, allocator="given", tolerance=1e-6,
                             probe_tasks=300).run()
    # a+b probed once, not at 0, 5 and 10 s; then c+d (placed together at 20 s) once
    assert (replayed.probes, reprobed.probes) == (2, 4)
    for x, y in zip(replayed.jobs, reprobed.jobs, strict=True):
        assert x.finish == y.finish and x.iterations == y.iterations
