"""Event loop: hand-checked traces, transfer groups, priorities, capacity events, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from maxmin_reference import reference_run_flows, reference_simulate

from hpnsim.engine import TaskGraph, run_flows, simulate
from hpnsim.errors import InputError


def test_shared_link_one_finishes_early_other_speeds_up():
    # cap 10: both at 5 B/s; A (100 B) done at 20; B moved 100, its 200 left at 10 B/s -> 40
    assert run_flows([10.0], [[0], [0]], [100.0, 300.0]).tolist() == [20.0, 40.0]


def test_bottleneck_moves_when_a_flow_leaves():
    # link0 (10) shared by A (50 B) and B (200 B); B also crosses link1 (6).
    # Fair share 5 each until A ends at t=10; then B is capped by link1 at 6 B/s:
    # 150 B left / 6 = 25 s more -> 35.
    finish = run_flows([10.0, 6.0], [[0], [0, 1]], [50.0, 200.0])
    np.testing.assert_allclose(finish, [10.0, 35.0], rtol=1e-12)


def test_staggered_start():
    # A alone at 10 B/s for 4 s (60 B left); B joins at t=4, both 5 B/s; B (30 B) ends at 10;
    # A then has 30 B left at 10 B/s -> 13
    finish = run_flows([10.0], [[0], [0]], [100.0, 30.0], starts=[0.0, 4.0])
    np.testing.assert_allclose(finish, [13.0, 10.0], rtol=1e-12)


def test_priority_and_weight():
    assert run_flows([10.0], [[0], [0]], [50.0, 50.0], priority=[1, 0]).tolist() == [10.0, 5.0]
    g = TaskGraph()
    g.add_transfer([0], 1.0, 60.0, weight=3.0)   # 6 B/s -> done at 10
    g.add_transfer([0], 1.0, 60.0)               # 2 B/s: 40 left at 10, then 8 B/s -> 15
    np.testing.assert_allclose(simulate(g, [8.0]).finish, [10.0, 15.0], rtol=1e-12)


def test_transfer_group_usage_latency_and_deps():
    g = TaskGraph()
    # a 3-member ring step: members 0,1 collide on link 0 -> usage 2; link 0 (cap 10) gives 5
    ring = g.add_transfer_paths([[0, 1], [0, 2], [3]], 20.0, latency=1.0, name="ring")
    g.add_delay(2.0, deps=[ring], name="compute")
    g.add_delay(1.0, deps=[ring], release=10.0, name="late")
    r = simulate(g, [10.0, 10.0, 10.0, 10.0])
    # ring: starts 0, bytes flow from 1, 20 B at 5 B/s -> 5; compute 5..7; late waits to 10
    assert r.start.tolist() == [0.0, 5.0, 10.0]
    assert r.finish.tolist() == [5.0, 7.0, 11.0]
    assert r.link_bytes.tolist() == [40.0, 20.0, 20.0, 20.0]
    assert r.to_dict()["makespan"] == 11.0


def test_chain_of_groups_sums_step_times():
    g = TaskGraph()
    prev = ()
    for step in range(5):
        prev = [g.add_transfer([0, 1], [1.0, 2.0], 30.0, deps=prev, name=f"s{step}")]
    r = simulate(g, [30.0, 30.0])   # usage 2 on link 1 -> 15 B/s -> 2 s per step
    np.testing.assert_allclose(r.finish, [2.0, 4.0, 6.0, 8.0, 10.0], rtol=1e-12)


def test_capacity_down_and_back():
    # 100 B at 10 B/s; link down during [2, 5): 20 B moved, 80 B left at 10 B/s from 5 -> 13
    r = simulate(_one_flow(100.0), [10.0], capacity_events=[(2.0, 0, 0.0), (5.0, 0, 10.0)])
    assert r.finish.tolist() == [13.0] and r.complete and r.stalled.size == 0


def test_capacity_down_forever_reports_stall():
    r = simulate(_one_flow(100.0), [10.0], capacity_events=[(2.0, 0, 0.0)])
    assert not r.complete and np.isinf(r.finish[0])
    assert r.stalled.tolist() == [0] and r.remaining[0] == pytest.approx(80.0)
    assert r.link_bytes[0] == pytest.approx(20.0)
    d = r.to_dict()
    assert d["finish"] == [None] and d["stalled_remaining_bytes"] == [pytest.approx(80.0)]


def test_link_bytes_of_a_flow_stalled_mid_transfer():
    # 10 B on link 0 at 1 B/s from t=0; link 0 goes to 0 at t=4 and never comes back:
    # 4 B moved, 6 B left, never finishes
    r = simulate(_one_flow(10.0), [1.0], capacity_events=[(4.0, 0, 0.0)])
    assert r.stalled.tolist() == [0] and not r.complete
    assert r.start.tolist() == [0.0] and np.isinf(r.finish[0])
    assert r.remaining.tolist() == [6.0]
    assert r.link_bytes.tolist() == [4.0]


def test_link_bytes_of_a_stalled_group_count_usage():
    # one 2-member group of 10 B per member: members [0, 1] and [0], so link 0 has usage 2
    # and link 1 usage 1. Caps [4, 10]: rate r with 2r <= 4, r <= 10 -> r = 2 B/s.
    # Link 1 goes down at t=1 forever: the group (one rate variable) stops at 2 B/member.
    # Link 0 carried both members: 2 x 2 = 4 B; link 1 carried one member: 2 B; link 2 unused.
    g = TaskGraph()
    g.add_transfer_paths([[0, 1], [0]], 10.0, name="ring")
    r = simulate(g, [4.0, 10.0, 7.0], capacity_events=[(1.0, 1, 0.0)])
    assert r.stalled.tolist() == [0] and r.remaining.tolist() == [8.0]
    assert r.link_bytes.tolist() == [4.0, 2.0, 0.0]


def test_link_bytes_when_a_shared_link_frees_up_then_a_link_fails():
    # A: 20 B on [0]; B: 100 B on [0, 1]; caps [10, 10]. Both 5 B/s on link 0 until A ends
    # at t=4 (B moved 20). B alone: 10 B/s for 2 s until link 1 fails at t=6 (B moved 40,
    # 60 left, stalled). Link 0 carried 20 (A) + 40 (B) = 60; link 1 carried 40 (B).
    g = TaskGraph()
    g.add_transfers([[0], [0, 1]], [20.0, 100.0], names=["A", "B"])
    r = simulate(g, [10.0, 10.0], capacity_events=[(6.0, 1, 0.0)])
    assert r.finish[0] == 4.0 and np.isinf(r.finish[1])
    assert r.stalled.tolist() == [1] and r.remaining[1] == 60.0
    assert r.link_bytes.tolist() == [60.0, 40.0]


def test_link_bytes_when_a_sharer_stalls_and_the_other_speeds_up():
    # A: 100 B on [0]; B: 100 B on [0, 1]; caps [10, 10]. Both 5 B/s until link 1 fails at
    # t=4 (20 B each). B stalls with 80 left; A gets all of link 0: 80 B at 10 B/s -> t=12.
    # Link 0 carried 100 (A) + 20 (B) = 120; link 1 carried 20 (B).
    g = TaskGraph()
    g.add_transfers([[0], [0, 1]], 100.0)
    r = simulate(g, [10.0, 10.0], capacity_events=[(4.0, 1, 0.0)])
    assert r.finish[0] == 12.0 and np.isinf(r.finish[1])
    assert r.stalled.tolist() == [1] and r.remaining[1] == 80.0
    assert r.link_bytes.tolist() == [120.0, 20.0]


def test_identical_completions_are_one_event():
    n = 50
    g = TaskGraph()
    g.add_transfers([[0]] * n, 1e6)
    r = simulate(g, [1e9])
    np.testing.assert_allclose(r.finish, n * 1e6 / 1e9, rtol=1e-12)
    assert r.n_events == 2   # start of all, completion of all


def _one_flow(size):
    g = TaskGraph()
    g.add_transfer([0], 1.0, size)
    return g


def test_errors_name_the_task_or_link():
    with pytest.raises(InputError, match="capacity: link 1"):
        simulate(_one_flow(1.0), [1.0, -2.0])
    with pytest.raises(InputError, match=r"task 'x' \(id 0\) uses unknown link id 7"):
        g = TaskGraph()
        g.add_transfer([0, 7], 1.0, 1.0, name="x")
        simulate(g, [1.0, 1.0])
    with pytest.raises(InputError, match="size: task 'n'"):
        TaskGraph().add_transfer([0], 1.0, float("nan"), name="n")
    with pytest.raises(InputError, match="size: task 1"):
        TaskGraph().add_transfers([[0], [0]], [1.0, -1.0])
    with pytest.raises(InputError, match="unknown link id"):
        run_flows([1.0], [[0], [3]], [1.0, 1.0])
    with pytest.raises(InputError, match="capacity_events: event 0: unknown link"):
        simulate(_one_flow(1.0), [1.0], capacity_events=[(1.0, 5, 1.0)])
    with pytest.raises(InputError, match="depends on unknown task 9"):
        g = TaskGraph()
        g.add_delay(1.0, deps=[9])
        simulate(g, [1.0])


def test_failed_add_leaves_graph_unchanged():
    g = TaskGraph()
    g.add_delay(1.0, name="first")
    with pytest.raises(InputError, match=r"names: need one name per path \(2\), got 1"):
        g.add_transfers([[0], [0]], 1.0, names=["a"])
    with pytest.raises(InputError, match=r"size: task 'b' \(id 2\)"):
        g.add_transfers([[0], [0]], [1.0, -1.0], names=["a", "b"])
    with pytest.raises(InputError, match="sizes: needs one value per path"):
        g.add_transfers([[0], [0]], [1.0, 2.0, 3.0])
    with pytest.raises(InputError, match=r"deps: task 'x' \(id 1\).*-1"):
        g.add_transfer([0], 1.0, 1.0, deps=[0, -1], name="x")   # first dep is valid
    with pytest.raises(InputError, match="deps"):
        g.add_delay(1.0, deps=[0, "y"])
    assert len(g) == 1 and g.names == ["first"]
    later = g.add_transfer([0], 1.0, 5.0, name="later")
    assert g.label(later) == "task 'later' (id 1)"
    arrays = g.arrays(1)
    assert arrays.deps.tolist() == [] and arrays.ptr.tolist() == [0, 0, 1]
    # no dependency leaked from the failed calls: "later" starts at 0, 5 B at 1 B/s -> 5
    r = simulate(g, [1.0])
    assert r.names == ["first", "later"]
    assert r.start.tolist() == [0.0, 0.0] and r.finish.tolist() == [1.0, 5.0]


@pytest.mark.parametrize("field, kwargs", [
    ("sizes", dict(sizes=[1.0, 2.0, 3.0])),
    ("sizes", dict(sizes=[1.0])),
    ("starts", dict(sizes=1.0, starts=[0.0, 0.0, 0.0])),
    ("starts", dict(sizes=1.0, starts=[0.0])),
    ("priority", dict(sizes=1.0, priority=[0, 1, 2])),
])
def test_run_flows_wrong_length_names_the_argument(field, kwargs):
    with pytest.raises(InputError, match=rf"^{field}: needs one value per path \(2\), got"):
        run_flows([1.0], [[0], [0]], **kwargs)


@pytest.mark.parametrize("priority, message", [
    ([0, 1.5], "task 1: must be an integer, got 1.5"),
    ([True], "task 0: must be an integer, got True"),
    ([0, True], "task 1: must be an integer, got True"),
    (np.array([False, True]), "task 0: must be an integer, got False"),
    ([0, float("nan")], "task 1: must be an integer, got nan"),
])
def test_per_flow_priority_must_be_integers_naming_the_task(priority, message):
    paths = [[0]] * len(priority)
    with pytest.raises(InputError) as info:
        run_flows([1.0], paths, 1.0, priority=priority)
    assert str(info.value) == "priority: " + message


def test_per_flow_priority_error_uses_the_task_name():
    with pytest.raises(InputError, match=r"priority: task 'b' \(id 1\): must be an integer"):
        TaskGraph().add_transfers([[0], [0]], 1.0, priority=[0, 0.5], names=["a", "b"])


def test_cycle_lists_its_tasks():
    g = TaskGraph()
    a = g.add_delay(1.0, name="a")
    b = g.add_delay(1.0, deps=[a], name="b")
    c = g.add_delay(1.0, deps=[b], name="c")
    g.add_delay(1.0, name="free")
    g.add_dependency(a, c)
    with pytest.raises(InputError) as info:
        simulate(g, [1.0])
    message = str(info.value)
    assert message.startswith("deps: dependency cycle")
    for name in ("'a'", "'b'", "'c'"):
        assert name in message
    assert "free" not in message


@st.composite
def flow_sets(draw):
    n_links = draw(st.integers(1, 5))
    n = draw(st.integers(1, 7))
    cap = draw(st.lists(st.sampled_from([1.0, 2.0, 5.0, 10.0]), min_size=n_links,
                        max_size=n_links))
    paths = [draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=3, unique=True))
             for _ in range(n)]
    sizes = draw(st.lists(st.sampled_from([1.0, 3.0, 10.0, 7.5]) | st.floats(0.5, 50.0),
                          min_size=n, max_size=n))
    starts = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.5]), min_size=n, max_size=n))
    return np.array(cap), paths, np.array(sizes), np.array(starts)


@settings(max_examples=150, deadline=None)
@given(flow_sets())
def test_run_flows_matches_reference(case):
    cap, paths, sizes, starts = case
    finish = run_flows(cap, paths, sizes, starts=starts)
    np.testing.assert_allclose(finish, reference_run_flows(cap, paths, sizes, starts),
                               rtol=1e-9)
    g = TaskGraph()
    g.add_transfers(paths, sizes, release=starts)
    r = simulate(g, cap)
    assert np.array_equal(r.finish, finish)
    # (per-link carried bytes are checked by hand in the test_link_bytes_* tests)
    # no flow beats its solo time on its slowest link
    solo = starts + sizes / np.array([cap[p].min() for p in paths])
    assert np.all(finish >= solo * (1 - 1e-12))


@st.composite
def task_graphs(draw):
    n_links = draw(st.integers(1, 4))
    cap = draw(st.lists(st.sampled_from([1.0, 2.0, 4.0, 10.0]), min_size=n_links,
                        max_size=n_links))
    tasks = []
    for i in range(draw(st.integers(1, 8))):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        common = dict(deps=deps, release=draw(st.sampled_from([0.0, 0.0, 1.0, 3.0])))
        if draw(st.integers(0, 4)) == 0:
            tasks.append(dict(kind="delay", amount=draw(st.sampled_from([0.0, 0.5, 2.0])),
                              **common))
            continue
        usage = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.0, 0.5]), min_size=n_links,
                              max_size=n_links))
        tasks.append(dict(kind="transfer", usage=usage,
                          amount=draw(st.sampled_from([0.0, 1.0, 4.0, 10.0, 7.3])),
                          priority=draw(st.integers(0, 1)),
                          weight=draw(st.sampled_from([1.0, 1.0, 2.0, 0.5])),
                          latency=draw(st.sampled_from([0.0, 0.0, 0.25])), **common))
    events = draw(st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0, 4.0]),
                                     st.integers(0, n_links - 1),
                                     st.sampled_from([0.0, 1.0, 5.0])), max_size=3))
    return np.array(cap), tasks, events


@settings(max_examples=150, deadline=None)
@given(task_graphs())
def test_simulate_matches_reference(case):
    cap, tasks, events = case
    g = TaskGraph()
    for task in tasks:
        if task["kind"] == "delay":
            g.add_delay(task["amount"], deps=task["deps"], release=task["release"])
        else:
            g.add_transfer(np.arange(cap.size), task["usage"], task["amount"],
                           priority=task["priority"], weight=task["weight"],
                           latency=task["latency"], deps=task["deps"], release=task["release"])
    # the engine applies same-time capacity events in list order; so does the reference
    r = simulate(g, cap, capacity_events=events)
    expected = reference_simulate(cap, tasks, events)
    assert np.array_equal(np.isinf(r.finish), np.isinf(expected))
    done = np.isfinite(expected)
    np.testing.assert_allclose(r.finish[done], expected[done], rtol=1e-9, atol=1e-12)
    # stalled transfers are exactly the unfinished ones that had started flowing
    assert set(r.stalled.tolist()) <= set(np.flatnonzero(~done).tolist())


def test_fat_tree_flows_match_reference():
    # a k=8 fat-tree with random ECMP paths: many components merging and splitting
    from hpnsim.benchmarks.engine import FatTreeIds

    ft = FatTreeIds(8)
    rng = np.random.default_rng(5)
    n = 120
    src = rng.integers(0, ft.n_hosts, n)
    dst = (src + rng.integers(1, ft.n_hosts, n)) % ft.n_hosts
    ptr, links = ft.paths(src, dst, rng)
    paths = [links[ptr[i]:ptr[i + 1]] for i in range(n)]
    sizes = rng.choice([1e3, 1e4, 5e4], n)
    starts = rng.choice([0.0, 1e-7, 5e-7], n)
    cap = rng.choice([1e9, 2e9], ft.n_links)
    finish = run_flows(cap, paths, sizes, starts=starts)
    np.testing.assert_allclose(finish, reference_run_flows(cap, paths, sizes, starts),
                               rtol=1e-9)


def test_paths_object_with_spraying_weights():
    class Paths:   # the routing package's CSR layout
        ptr = np.array([0, 3])
        links = np.array([0, 1, 2])
        weight = np.array([1.0, 0.5, 0.5])   # a member sprayed half over links 1 and 2

    g = TaskGraph()
    g.add_transfer_paths(Paths(), 10.0)
    r = simulate(g, [10.0, 2.0, 10.0])
    # link 1 carries half the rate: rate <= 2 / 0.5 = 4 -> 10 B take 2.5 s
    assert r.finish.tolist() == [2.5]
    assert r.link_bytes.tolist() == [10.0, 5.0, 5.0]


def test_add_transfers_deps_equal_per_flow_dependencies():
    def build(batch: bool):
        g = TaskGraph()
        a = g.add_delay(1.0)
        b = g.add_transfer([0], 1.0, 2e9)
        paths, sizes = [[0], [1], [0, 1]], [1e9, 2e9, 3e9]
        if batch:
            tasks = g.add_transfers(paths, sizes, deps=[a, b])
        else:
            tasks = g.add_transfers(paths, sizes)
            for t in tasks.tolist():
                for d in (a, b):
                    g.add_dependency(t, d)
        return g, tasks

    (g1, t1), (g2, t2) = build(True), build(False)
    assert t1.tolist() == t2.tolist()
    arrays1, arrays2 = g1.arrays(2), g2.arrays(2)
    for name in arrays1.__dataclass_fields__:
        assert np.array_equal(getattr(arrays1, name), getattr(arrays2, name)), name
    r = simulate(g1, [1e9, 1e9])
    # all three wait for the 2 s transfer; then link 0 carries flows 0 and 2, link 1 flows 1
    # and 2: max-min gives each 0.5e9 until flow 0 ends at 4 s, ...
    assert r.start[t1].tolist() == [2.0, 2.0, 2.0]
    assert np.array_equal(r.finish, simulate(g2, [1e9, 1e9]).finish)
    assert r.finish[t1[0]] == pytest.approx(4.0)
    with pytest.raises(InputError, match="deps"):
        TaskGraph().add_transfers([[0]], 1.0, deps=[-1])
