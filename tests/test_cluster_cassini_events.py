"""CASSINI in exact mode recomputes its time shifts when the jobs on shared links change:
a third job arrives and the circle is re-anchored with all three interleaved; when the
others leave, the remaining job runs at its own period."""

import numpy as np
import pytest
from cluster_tiny import program

from hpnsim.fabrics import from_lingjun
from hpnsim.sched.cluster.decide import decide
from hpnsim.sched.cluster.driver import simulate_cluster
from hpnsim.sched.cluster.jobs import ClusterJob, RunningJob, TemplateCache

# two ToRs of three one-GPU hosts, one 400G uplink each: a job on (h0, h3), (h1, h4) or
# (h2, h5) crosses both uplinks, which all three jobs share
TOPO = "ip,DSW,PSW,ASW\n" + "".join(f"h{i},G1,P1,S{1 + i // 3}\n" for i in range(6))
T1, T2 = 1.0, 2.0          # c arrives; a and b leave
TAU = 1e9 / 50e9           # a 2-GPU all-reduce of 1 GB per GPU on a 50 GB/s uplink


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    path = tmp_path_factory.mktemp("topo") / "topo.csv"
    path.write_text(TOPO)
    return from_lingjun(str(path), gpus_per_host=1, tor_uplinks=1, aggs_per_psw=1)


def _ends(job) -> np.ndarray:
    """End of every completed iteration (the exact trajectory's integer points)."""
    times, done = (np.asarray(x) for x in job.progress)
    return times[1:][done[1:] == np.round(done[1:])]


def _comm_phases_disjoint(offsets, computes, taus, circle) -> bool:
    """By hand: communication of job j occupies [o_j + c_j, o_j + c_j + tau_j) mod L."""
    spans = []
    for o, c, t in zip(offsets, computes, taus, strict=True):
        a = (o + c) % circle
        spans += [(a, a + t)] if a + t <= circle else [(a, circle), (0.0, a + t - circle)]
    spans.sort()
    return all(x[1] <= y[0] + 1e-12 for x, y in zip(spans, spans[1:], strict=False))


def test_cassini_recomputes_its_shifts_on_arrival_and_departure(six):
    # a, b: 50 ms compute then 1 GB; c: 48 ms. Alone, p = compute + TAU (+ latencies).
    # CASSINI's circle (by hand): every p is within 5% of the longest, so one turn holds
    # one iteration of each: L = p_a, every gate L (c held 2.9% slower than alone). Three
    # 20 ms transfers fit in L = 70 ms, so with the right shifts no two ever overlap.
    jobs = [ClusterJob("a", program(0.05, 1e9), duration=T2, gpus=[0, 3]),
            ClusterJob("b", program(0.05, 1e9), duration=T2, gpus=[1, 4]),
            ClusterJob("c", program(0.048, 1e9), arrival=T1, duration=2.5, gpus=[2, 5])]
    run = simulate_cluster(six, jobs, allocator="given", scheduler="cassini", exact=True)
    a, b, c = run.jobs
    p = {j.name: j.alone_iteration_time for j in run.jobs}
    compute = {"a": 0.05, "b": 0.05, "c": 0.048}
    tau = {n: p[n] - compute[n] for n in p}
    assert tau["a"] == pytest.approx(TAU, rel=0.05) and tau["c"] == pytest.approx(tau["a"])
    circle = p["a"]
    assert 1 < circle / p["c"] < 1.05

    # the shifts CASSINI computes for the jobs sharing the uplinks (before and after T1)
    templates = TemplateCache(six)

    def shifts(members):
        running = [RunningJob(i, jobs[i], np.array(jobs[i].gpus), np.array(jobs[i].gpus), 0.0)
                   for i in members]
        decide("cassini", running, templates, six.link_capacity, K=8, seed=0, samples=1,
               candidates=1)
        assert [r.gate for r in running] == pytest.approx([circle] * len(members))
        return [r.offset for r in running]

    pair, trio = shifts([0, 1]), shifts([0, 1, 2])
    names = ["a", "b", "c"]
    assert _comm_phases_disjoint(pair, [compute[n] for n in "ab"], [tau[n] for n in "ab"],
                                 circle)
    assert _comm_phases_disjoint(trio, [compute[n] for n in names],
                                 [tau[n] for n in names], circle)

    def on_slots(ends, anchor, offset, period):
        # iteration k of the schedule ends exactly at anchor + offset + k L + p: it
        # started on its slot and was not slowed
        k = (ends - anchor - offset - period) / circle
        return np.allclose(k, np.round(k), rtol=0, atol=1e-9) and (k > -1e-9).all()

    for job, o_pair, o_trio in ((a, pair[0], trio[0]), (b, pair[1], trio[1])):
        ends = _ends(job)
        # before c: on the pair's circle from t = 0, every iteration alone-fast
        assert on_slots(ends[ends < T1], 0.0, o_pair, p[job.name])
        # after c arrives: re-anchored at T1 on the trio's shifts, after the iteration
        # in progress at T1 and at most one wait for a slot
        later = ends[ends > T1 + 2 * circle]
        assert later.size > 10 and on_slots(later, T1, o_trio, p[job.name])
    ends_c = _ends(c)
    three = ends_c[ends_c < T2]
    assert on_slots(three, T1, trio[2], p["c"])
    assert np.diff(three) == pytest.approx(circle, rel=1e-9)       # held to the circle
    # a and b leave at T2: c is alone on its links, its shifts and its gate are dropped:
    # from the iteration in progress at T2 on it runs back to back at its own period
    alone = ends_c[ends_c > T2]
    assert alone.size > 10
    assert np.diff(alone) == pytest.approx(p["c"], rel=1e-9)
    assert c.iterations == pytest.approx(three.size + (2.5 + T1 - alone[0]) / p["c"] + 1,
                                         rel=1e-9)
