"""Resumable runs: pieces equal one run, and changes mid-run against hand traces."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from maxmin_reference import reference_simulate

from hpnsim.engine import Simulation, TaskGraph, simulate
from hpnsim.errors import InputError


@st.composite
def task_graphs(draw, max_tasks=8):
    """Capacities, task dicts (the reference's format) and capacity events."""
    n_links = draw(st.integers(1, 4))
    cap = draw(st.lists(st.sampled_from([1.0, 2.0, 4.0, 10.0]), min_size=n_links,
                        max_size=n_links))
    tasks = []
    for i in range(draw(st.integers(1, max_tasks))):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        common = dict(deps=deps, release=draw(st.sampled_from([0.0, 0.0, 1.0, 3.0, 2.2])))
        if draw(st.integers(0, 4)) == 0:
            tasks.append(dict(kind="delay", amount=draw(st.sampled_from([0.0, 0.5, 2.0])),
                              **common))
            continue
        usage = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.0, 0.5]), min_size=n_links,
                              max_size=n_links))
        tasks.append(dict(kind="transfer", usage=usage,
                          amount=draw(st.sampled_from([0.0, 1.0, 4.0, 10.0, 7.3])),
                          priority=draw(st.integers(0, 2)),
                          weight=draw(st.sampled_from([1.0, 1.0, 2.0, 0.5])),
                          latency=draw(st.sampled_from([0.0, 0.0, 0.25])), **common))
    events = draw(st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0, 4.0, 5.5]),
                                     st.integers(0, n_links - 1),
                                     st.sampled_from([0.0, 1.0, 5.0])), max_size=3))
    return np.array(cap), tasks, events


def _add(graph, task, n_links, release=None):
    rel = task["release"] if release is None else release
    if task["kind"] == "delay":
        return graph.add_delay(task["amount"], deps=task["deps"], release=rel)
    return graph.add_transfer(np.arange(n_links), task["usage"], task["amount"],
                              priority=task["priority"], weight=task["weight"],
                              latency=task["latency"], deps=task["deps"], release=rel)


def _graph(tasks, n_links):
    g = TaskGraph()
    for task in tasks:
        _add(g, task, n_links)
    return g


def _event_times(result):
    times = np.concatenate([result.start, result.finish])
    return np.unique(times[np.isfinite(times)])


@settings(max_examples=150, deadline=None)
@given(task_graphs(), st.data())
def test_pieces_equal_one_run(case, data):
    cap, tasks, events = case
    whole = simulate(_graph(tasks, cap.size), cap, capacity_events=events)
    # the whole run is right: the progressive-filling reference, re-solved from scratch
    expected = reference_simulate(cap, tasks, events)
    assert np.array_equal(np.isinf(whole.finish), np.isinf(expected))
    done = np.isfinite(expected)
    np.testing.assert_allclose(whole.finish[done], expected[done], rtol=1e-9, atol=1e-12)

    # stop anywhere, including exactly at event times (starts, finishes, capacity events)
    exact = list(_event_times(whole)) + [ev[0] for ev in events]
    splits = data.draw(st.lists(st.sampled_from(exact) | st.floats(0.0, 30.0), max_size=6))
    sim = Simulation(_graph(tasks, cap.size), cap, capacity_events=events)
    for t in sorted(splits):
        assert sim.run(until=t) == t and sim.now == t
        partial = sim.result()
        # what is known by t is final; nothing after t has happened yet
        known = whole.finish <= t
        assert np.array_equal(partial.finish[known], whole.finish[known])
        assert np.all(np.isinf(partial.start[whole.start > t * (1 + 1e-12)]))
    sim.run()
    pieces = sim.result()
    assert np.array_equal(pieces.start, whole.start)
    assert np.array_equal(pieces.finish, whole.finish)
    assert np.array_equal(pieces.link_bytes, whole.link_bytes)
    assert pieces.stalled.tolist() == whole.stalled.tolist()
    assert sim.done


def test_run_returns_now_and_done():
    g = TaskGraph()
    g.add_transfer([0], 1.0, 10.0)           # 10 B at 2 B/s: done at 5
    sim = Simulation(g, [2.0])
    assert sim.now == 0.0 and not sim.done
    assert sim.run(until=1.0) == 1.0 and not sim.done
    r = sim.result()
    # at t=1: 2 B moved, 8 B left, still flowing (not stalled), not finished
    assert r.remaining.tolist() == [8.0] and r.link_bytes.tolist() == [2.0]
    assert r.stalled.tolist() == [] and math.isinf(r.finish[0]) and not r.complete
    assert sim.run() == 5.0 and sim.done
    assert sim.run(until=9.0) == 9.0 and sim.result().finish.tolist() == [5.0]


def _two_flows(sizes, cap):
    g = TaskGraph()
    a, b = g.add_transfers([[0], [0]], sizes, names=["A", "B"]).tolist()
    return g, Simulation(g, cap), a, b


def test_link_halves_at_5_hand_trace():
    # A 100 B and B 300 B share link 0 at 10 B/s: 5 B/s each.
    # t=5: each moved 25 B (A 75 left, B 275 left); the link drops to 5 B/s: 2.5 B/s each.
    # A: 75 / 2.5 = 30 s more -> 35. B moved 25 + 30 * 2.5 = 100, 200 left alone at 5 B/s
    # -> 35 + 40 = 75.
    g, sim, a, b = _two_flows([100.0, 300.0], [10.0])
    sim.run(until=5.0)
    sim.set_capacity([0], 5.0)
    sim.run()
    r = sim.result()
    assert r.finish.tolist() == [35.0, 75.0]
    assert r.link_bytes.tolist() == [400.0]
    upfront = simulate(g, [10.0], capacity_events=[(5.0, 0, 5.0)])
    assert upfront.finish.tolist() == [35.0, 75.0]


def test_link_down_then_up_by_hand():
    # one 100 B flow at 10 B/s; link 0 down at t=2 (20 B moved), back at t=5 -> 80 B / 10 = 13
    g = TaskGraph()
    g.add_transfer([0], 1.0, 100.0)
    sim = Simulation(g, [10.0])
    sim.run(2.0)
    sim.set_capacity(0, 0.0)
    sim.run(5.0)
    r = sim.result()
    assert r.stalled.tolist() == [0] and r.remaining.tolist() == [80.0]
    sim.set_capacity([0], [10.0])
    assert sim.run() == 13.0 and sim.result().finish.tolist() == [13.0]


@settings(max_examples=100, deadline=None)
@given(task_graphs())
def test_set_capacity_matches_capacity_events(case):
    cap, tasks, events = case
    upfront = simulate(_graph(tasks, cap.size), cap, capacity_events=events)
    sim = Simulation(_graph(tasks, cap.size), cap)
    for time, link, value in sorted(events, key=lambda ev: ev[0]):
        sim.run(until=time)
        sim.set_capacity([link], value)
    sim.run()
    r = sim.result()
    assert np.array_equal(np.isinf(r.finish), np.isinf(upfront.finish))
    done = np.isfinite(upfront.finish)
    np.testing.assert_allclose(r.finish[done], upfront.finish[done], rtol=1e-9, atol=1e-12)
    expected = reference_simulate(cap, tasks, events)
    np.testing.assert_allclose(r.finish[done], expected[done], rtol=1e-9, atol=1e-12)


def test_reroute_flowing_transfer_hand_trace():
    # A 100 B and B 160 B share link 0 (10 B/s): 5 B/s each. t=4: each moved 20 B.
    # B moves to link 1 (4 B/s): 140 B left at 4 B/s -> 4 + 35 = 39.
    # A is alone on link 0: 80 B left at 10 B/s -> 4 + 8 = 12.
    # Link 0 carried A's 100 B and B's first 20 B; link 1 B's last 140 B.
    g, sim, a, b = _two_flows([100.0, 160.0], [10.0, 4.0])
    sim.run(until=4.0)
    sim.reroute(b, [1], [1.0])
    sim.run()
    r = sim.result()
    assert r.finish.tolist() == [12.0, 39.0]
    assert r.start.tolist() == [0.0, 0.0]
    assert r.link_bytes.tolist() == [120.0, 140.0]


def test_reroute_onto_a_shared_link_with_usage():
    # A 60 B on link 0 (cap 12), B 60 B on link 1 (cap 12): 12 B/s each.
    # t=2: B moved 24 B (36 left) and moves to link 0 with usage 2 (a 2-member group):
    # max-min on link 0: A + 2 B <= 12 -> both at 4 B/s. A moved 24 by t=2, 36 left.
    # Both have 36 B left at 4 B/s -> 2 + 9 = 11. Link 0 carried A 60 + 2 x 36 = 132.
    g = TaskGraph()
    a, b = g.add_transfers([[0], [1]], 60.0).tolist()
    sim = Simulation(g, [12.0, 12.0])
    sim.run(2.0)
    sim.reroute(b, [0], 2.0)
    sim.run()
    r = sim.result()
    assert r.finish.tolist() == [11.0, 11.0]
    assert r.link_bytes.tolist() == [132.0, 24.0]


def test_reroute_before_start_and_during_latency():
    # B waits for a 3 s delay; rerouted at t=1 before it starts: it runs on link 1 only.
    # C starts at 0 with 2 s latency; rerouted at t=1 (no byte moved yet) to link 1.
    # From t=3, B (10 B) and C (10 B) share link 1 (2 B/s): 1 B/s each -> 3 + 10 = 13.
    g = TaskGraph()
    d = g.add_delay(3.0)
    b = g.add_transfer([0], 1.0, 10.0, deps=[d])
    c = g.add_transfer([0], 1.0, 10.0, latency=3.0)
    sim = Simulation(g, [100.0, 2.0])
    sim.run(1.0)
    sim.reroute(b, [1])
    sim.reroute(c, [1])
    sim.run()
    r = sim.result()
    assert r.finish[[b, c]].tolist() == [13.0, 13.0]
    assert r.link_bytes.tolist() == [0.0, 20.0]


def test_set_priority_mid_run_hand_trace():
    # A and B, 100 B each, share link 0 (10 B/s): 5 B/s each until t=4 (20 B each moved).
    # B becomes class -1: it takes all 10 B/s, 80 B left -> 12. A waits (0 B/s), then has the
    # link alone from 12: 80 B at 10 B/s -> 20.
    g, sim, a, b = _two_flows([100.0, 100.0], [10.0])
    sim.run(4.0)
    sim.set_priority([b], -1)
    sim.run(6.0)
    assert sim.result().stalled.tolist() == [a]   # A has a zero rate for now
    sim.run()
    assert sim.result().finish.tolist() == [20.0, 12.0]


def test_set_priority_before_start_applies_when_it_flows():
    # C (class 0) and D (class 0, released at 2) on link 0 (10 B/s), 40 B each.
    # D is made class -1 at t=1, before it starts: from t=2 D takes the link, 40 B -> 6;
    # C moved 20 B by t=2, then waits, then 20 B at 10 B/s -> 8.
    g = TaskGraph()
    c = g.add_transfer([0], 1.0, 40.0)
    d = g.add_transfer([0], 1.0, 40.0, release=2.0)
    sim = Simulation(g, [10.0])
    sim.run(1.0)
    sim.set_priority(d, -1)
    sim.run()
    assert sim.result().finish[[c, d]].tolist() == [8.0, 6.0]


@settings(max_examples=100, deadline=None)
@given(task_graphs(max_tasks=10), st.data())
def test_tasks_added_mid_run_equal_upfront_with_release(case, data):
    cap, tasks, _ = case
    k = data.draw(st.integers(0, len(tasks)))
    at = data.draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.6, 4.0]))
    # upfront: the late tasks are released no earlier than when they are added
    upfront = TaskGraph()
    for i, task in enumerate(tasks):
        _add(upfront, task, cap.size, release=max(task["release"], at) if i >= k else None)
    expected = simulate(upfront, cap)

    g = TaskGraph()
    for task in tasks[:k]:
        _add(g, task, cap.size)
    sim = Simulation(g, cap)
    sim.run(until=at)
    for task in tasks[k:]:
        _add(g, task, cap.size)   # deps may name earlier tasks, finished or not
    sim.run()
    r = sim.result()
    assert np.array_equal(np.isinf(r.finish), np.isinf(expected.finish))
    done = np.isfinite(expected.finish)
    np.testing.assert_allclose(r.finish[done], expected.finish[done], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r.start[done], expected.start[done], rtol=1e-9, atol=1e-12)


def test_task_added_after_its_deps_finished_starts_now():
    # A (2 s delay) and T (10 B at 5 B/s, done at 2) finish by t=2; at t=5 a job arrives:
    # B waits for A (1 s) -> starts 5, ends 6; C waits for T, 10 B on link 0 -> 5 + 2 = 7;
    # D (release 1.0, in the past) -> starts at 5 too, no deps, 3 s -> 8.
    g = TaskGraph()
    a = g.add_delay(2.0)
    t = g.add_transfer([0], 1.0, 10.0)
    sim = Simulation(g, [5.0])
    assert sim.run(5.0) == 5.0 and sim.done
    b = g.add_delay(1.0, deps=[a])
    c = g.add_transfer([0], 1.0, 10.0, deps=[t])
    d = g.add_delay(3.0, release=1.0)
    assert not sim.done
    r = sim.result()    # not joined yet: not started
    assert np.isinf(r.start[[b, c, d]]).all() and len(r.names) == 5
    sim.run()
    r = sim.result()
    assert r.start[[b, c, d]].tolist() == [5.0, 5.0, 5.0]
    assert r.finish[[b, c, d]].tolist() == [6.0, 7.0, 8.0]


def test_task_added_waiting_for_an_unfinished_task():
    # X: 20 B at 2 B/s -> 10. At t=4 Y (a 1 s delay) is added waiting for X -> 10..11.
    g = TaskGraph()
    x = g.add_transfer([0], 1.0, 20.0)
    sim = Simulation(g, [2.0])
    sim.run(4.0)
    y = g.add_delay(1.0, deps=[x])
    sim.run()
    assert sim.result().start[y] == 10.0 and sim.result().finish[y] == 11.0


def _sim():
    g = TaskGraph()
    g.add_transfer([0], 1.0, 10.0, name="flow")
    g.add_delay(1.0, name="compute")
    return g, Simulation(g, [1.0, 1.0])


@pytest.mark.parametrize("call, field, message", [
    (lambda s: s.set_capacity([2], 1.0), "links", "unknown link id 2"),
    (lambda s: s.set_capacity([-1], 1.0), "links", "unknown link id -1"),
    (lambda s: s.set_capacity([0.5], 1.0), "links", "integers"),
    (lambda s: s.set_capacity([0], -1.0), "capacity", "link 0: must be finite and >= 0"),
    (lambda s: s.set_capacity([1], float("nan")), "capacity", "link 1"),
    (lambda s: s.set_capacity([0, 1], [1.0, 2.0, 3.0]), "capacity", "one value per link"),
    (lambda s: s.reroute(7, [0]), "task", "unknown task 7"),
    (lambda s: s.reroute(True, [0]), "task", "integers"),
    (lambda s: s.reroute(1, [0]), "task", "'compute' (id 1) is a delay"),
    (lambda s: s.reroute(0, [5]), "links", "unknown link id 5"),
    (lambda s: s.reroute(0, [0, 1], [1.0]), "usage", "one value per link"),
    (lambda s: s.reroute(0, [0], -1.0), "usage", "must be finite and >= 0"),
    (lambda s: s.reroute(0, [0], 0.0), "links", "needs a link"),
    (lambda s: s.set_priority([0], 0.5), "priority", "must be an integer, got 0.5"),
    (lambda s: s.set_priority([0], True), "priority", "must be an integer"),
    (lambda s: s.set_priority([3], 1), "tasks", "unknown task 3"),
    (lambda s: s.set_priority(["a"], 1), "tasks", "integers"),
    (lambda s: s.run(until=float("nan")), "until", "must be >= now"),
    (lambda s: s.run(until="soon"), "until", "must be a time"),
])
def test_bad_arguments_name_the_field(call, field, message):
    _, sim = _sim()
    with pytest.raises(InputError, match=re.escape(message)) as info:
        call(sim)
    assert info.value.field == field


def test_errors_that_depend_on_progress():
    g, sim = _sim()
    sim.run(20.0)
    with pytest.raises(InputError, match="until: must be >= now") as info:
        sim.run(until=3.0)
    with pytest.raises(InputError, match=r"'flow' \(id 0\) has already finished") as info:
        sim.reroute(0, [1])
    assert info.value.field == "task"
    # a dependency added to a task that already ran cannot be honoured
    late = g.add_delay(1.0)
    g.add_dependency(1, late)
    with pytest.raises(InputError, match=r"'compute' \(id 1\) is ready or running") as info:
        sim.run()
    assert info.value.field == "deps"
    with pytest.raises(InputError, match="graph: must be a TaskGraph"):
        Simulation([], [1.0])
    with pytest.raises(InputError, match="capacity: link 0"):
        Simulation(TaskGraph(), [-1.0])
