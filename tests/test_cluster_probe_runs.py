"""A component probed again with another limit is answered from its kept run (continued to a
later limit, read back at an earlier one): every answer must be the one a fresh probe with
that limit gives, field for field and bit for bit."""

import numpy as np
import pytest
from cluster_tiny import program

import hpnsim.sched.cluster.steady as steady
from hpnsim.sched.cluster.driver import ClusterJob
from hpnsim.sched.cluster.jobs import TemplateCache
from hpnsim.sched.cluster.probe_run import ProbeRun, ProbeRuns


def _same(a, b):
    assert (a.elapsed, a.stable, a.level) == (b.elapsed, b.stable, b.level)
    assert np.array_equal(a.period, b.period)
    assert (a.copies is None) == (b.copies is None)
    if a.copies is not None:
        assert np.array_equal(a.copies, b.copies)
    assert len(a.ends) == len(b.ends)
    for x, y in zip(a.ends, b.ends, strict=True):
        assert np.array_equal(x, y)


@pytest.fixture
def component(tiny):
    # two jobs of unrelated periods on the shared uplink: they drift through each other's
    # phases, so the probe runs many rounds before it settles
    cache = TemplateCache(tiny)
    tpls = [cache.get(ClusterJob("a", program(0.010, 3e8), iterations=1), [0, 2], 0),
            cache.get(ClusterJob("b", program(0.0037, 2e8), iterations=1), [1, 3], 0)]
    return tpls, np.asarray(tiny.link_capacity, dtype=np.float64)


def _probe(component, limit, remaining=(np.inf, np.inf), runs=None, **kw):
    tpls, cap = component
    return steady.probe(tpls, [0, 1], [0.0, 0.002], cap, tolerance=1e-9, limit=limit,
                        remaining=list(remaining), max_tasks=2_000, runs=runs, **kw)


def test_every_answer_of_a_kept_run_is_a_fresh_probe(component):
    full = _probe(component, 100.0)
    assert full.elapsed < 100.0         # ended on its own (the task budget)
    # limits later and earlier, mid-round and at round ends, in a shuffled order
    rng = np.random.default_rng(1)
    limits = np.concatenate([full.elapsed * rng.uniform(0.01, 1.2, 25), [full.elapsed]])
    runs = ProbeRuns().slot("component")
    for limit in sorted(limits[:8].tolist()) + limits[8:].tolist():
        _same(_probe(component, limit, runs=runs), _probe(component, limit))
    run = runs[steady.ProbeLevel.TASK][0]
    assert len(run.rounds) > 3                      # a run of several rounds was reused


def test_a_run_cut_by_a_limit_is_continued_not_rerun(component, monkeypatch):
    full = _probe(component, 100.0)
    runs = ProbeRuns().slot("component")
    first = _probe(component, 0.6 * full.elapsed, runs=runs)
    assert first.copies is None and first.elapsed == pytest.approx(0.6 * full.elapsed)
    run = runs[steady.ProbeLevel.TASK][0]
    # a later limit must not build a new run: it continues the kept one
    monkeypatch.setattr(steady, "ProbeRun", None)
    later = _probe(component, 0.9 * full.elapsed, runs=runs)
    assert runs[steady.ProbeLevel.TASK][0] is run
    monkeypatch.undo()
    _same(later, _probe(component, 0.9 * full.elapsed))


def test_jobs_that_run_out_and_released_runs(component):
    # b leaves after 30 iterations: the run ends there at any later limit; read back
    # earlier; once released (no engine state) a later limit probes afresh
    runs = ProbeRuns(keep=0).slot("component")
    remaining = (np.inf, 30)
    out = _probe(component, 100.0, remaining, runs=runs)
    assert out.copies is None and out.ends[1].size >= 30
    run = runs[steady.ProbeLevel.TASK][0]
    assert run.sim is None                          # released: keep=0
    for limit in (out.elapsed * 0.5, out.elapsed, out.elapsed * 2):
        _same(_probe(component, limit, remaining, runs=runs),
              _probe(component, limit, remaining))


def test_a_finish_just_past_the_limit_is_ambiguous(component):
    tpls, cap = component
    local, c = steady._on_own_links(tpls, cap)
    run = ProbeRun(local, [0, 1], [0.0, 0.002], c, tolerance=1e-9,
                   needed=np.array([2**62, 2**62]), max_tasks=2_000, gates=np.zeros(2))
    run.answer(1.0)
    finish = run.sim.finish_times()
    t = float(np.sort(finish[np.isfinite(finish)])[len(finish) // 4])
    # a limit a hair before a finish: an event at the limit could have finished it
    assert run.answer(t * (1 - 1e-13)) is None
    assert run.answer(t) is not None
