"""A graph grown round after round (a steady-state probe's rounds) is frozen and joined
incrementally: into buffers with room, the graph's columns viewed rather than copied, the
engine state's columns grown in place. Each incremental path must give, array for array, what
the whole path gives: one freeze of the finished graph, and extend_state without its shortcuts.
"""

import dataclasses

import numpy as np
import pytest

from hpnsim.engine import TaskGraph
from hpnsim.engine.buffers import Column, room
from hpnsim.engine.fragment import GraphFragment
from hpnsim.engine.loop import advance, mark_links, push_ready
from hpnsim.engine.state import NOW, EngineState, empty_state, extend_state, no_capacity_events

N_LINKS = 7


def _template() -> object:
    """A three-task iteration (start delay, a transfer, a transfer after both)."""
    tpl = TaskGraph()
    start = tpl.add_delay(0.5, release=1.0)
    a = tpl.add_transfer([2, 1, 2], [1.0, 2.0, 0.5], 4.0, deps=[start])
    tpl.add_transfer([3, 6], 1.0, 2.0, deps=[a, start], latency=0.1)
    return tpl.arrays(N_LINKS)


def _grow(graph: TaskGraph, rng, steps: int, freeze_at: set) -> list:
    """Random additions of every kind; freezes after the steps in ``freeze_at``. Returns
    each freeze's arrays with a copy of them taken when frozen."""
    tpl = _template()
    frozen = []
    for step in range(steps):
        n = len(graph)
        deps = rng.choice(n, size=min(n, int(rng.integers(0, 3))), replace=False).tolist() \
            if n else []
        kind = int(rng.integers(0, 6))
        if kind == 0:
            links = rng.integers(0, N_LINKS, int(rng.integers(1, 4))).tolist()
            graph.add_transfer(links, rng.uniform(0.5, 2.0, len(links)), float(rng.uniform(1, 9)),
                               deps=deps, priority=int(rng.integers(0, 3)),
                               release=float(rng.choice([0.0, 1.5])))
        elif kind == 1:
            graph.add_delay(float(rng.uniform(0, 3)), deps=deps)
        elif kind == 2:
            paths = [rng.integers(0, N_LINKS, int(rng.integers(1, 3))).tolist()
                     for _ in range(int(rng.integers(1, 4)))]
            graph.add_transfers(paths, rng.uniform(1, 5, len(paths)), deps=deps,
                                priority=int(rng.integers(0, 2)))
        elif kind == 3:
            graph.append_chain(tpl, int(rng.integers(1, 5)), release=float(rng.uniform(0, 2)),
                               after=deps, priority=int(rng.integers(0, 3)), chain=[2],
                               every=float(rng.choice([0.0, 0.75])))
        elif kind == 4:
            graph.append_copy(tpl, release=0.5, after=deps, priority=1)
        else:
            # two tasks recorded as a fragment, then replayed waiting for other tasks
            first = len(graph)
            graph.add_transfer([1, 4], 1.0, 3.0, deps=deps)
            graph.add_delay(1.0, deps=[first])
            frag = GraphFragment.record(graph, first, deps)
            frag.append_to(graph, rng.choice(len(graph), size=len(deps), replace=False).tolist())
        if step in freeze_at:
            arrays = graph.arrays(N_LINKS)
            frozen.append((arrays, {f.name: getattr(arrays, f.name).copy()
                                    for f in dataclasses.fields(arrays)}))
    return frozen


@pytest.mark.parametrize("seed", range(12))
def test_incremental_freezes_equal_one_freeze_of_the_random_graph(seed):
    steps = 40
    freeze_at = set(np.random.default_rng(100 + seed).choice(steps, 12, replace=False).tolist())
    pieces, whole = TaskGraph(), TaskGraph()
    frozen = _grow(pieces, np.random.default_rng(seed), steps, freeze_at)
    _grow(whole, np.random.default_rng(seed), steps, set())
    got = pieces.arrays(N_LINKS)
    whole._frozen = None          # freeze everything at once, from its columns
    want = whole.arrays(N_LINKS)
    assert got.kind.size == want.kind.size > 40
    for f in dataclasses.fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        assert a.dtype == b.dtype and np.array_equal(a, b), f.name
    # arrays handed out by earlier freezes view buffers that kept growing: unchanged
    for arrays, copy in frozen:
        for name, values in copy.items():
            assert np.array_equal(getattr(arrays, name), values), name


def _snapshot(state: EngineState) -> dict:
    return {name: np.array(value, copy=True) for name, value in state._asdict().items()
            if isinstance(value, np.ndarray)}


def _rounds(fast: bool, seed: int) -> list:
    """A probe's rounds: append chained copies and loose transfers, join, run a while."""
    rng = np.random.default_rng(seed)
    tpl = _template()
    graph = TaskGraph()
    state = empty_state(np.array([3.0, 1.0, 2.0, 5.0, 1.5, 4.0, 2.5]), *no_capacity_events())
    rooms = {} if fast else None
    last = None
    snapshots = []
    for k in range(6):
        after = [] if last is None else [int(last) + 2]
        firsts = graph.append_chain(tpl, int(rng.integers(1, 4)), release=0.5 * k, after=after,
                                    priority=int(rng.integers(0, 2)), chain=[2])
        last = firsts[-1]
        graph.add_transfer(rng.integers(0, N_LINKS, 2).tolist(), 1.0, float(rng.uniform(1, 6)),
                           deps=[int(rng.integers(0, len(graph)))])
        now = float(state.clock[NOW])
        state, ready, at = extend_state(state, graph.arrays(N_LINKS), {},
                                        np.zeros(state.kind.size, dtype=np.bool_), now,
                                        rows_kept=fast, rooms=rooms)
        push_ready(state, ready, at)
        mark_links(state, np.zeros(0, dtype=np.int64))
        advance(state, now + 6.0)
        state.clock[NOW] = now + 6.0
        snapshots.append(_snapshot(state))
    return snapshots


@pytest.mark.parametrize("seed", range(6))
def test_extend_state_in_place_equals_the_whole_rebuild(seed):
    fast, plain = _rounds(True, seed), _rounds(False, seed)
    done = np.isfinite(plain[-1]["finish"])
    assert 10 < done.sum() < done.size      # the rounds ran tasks, and stopped mid-run
    for k, (a, b) in enumerate(zip(fast, plain, strict=True)):
        assert a.keys() == b.keys()
        for name in b:
            if name in ("lact", "epos", "comp", "ht", "ha", "hb", "ct", "ca", "cb", "queue"):
                continue      # scratch or slots past a list's count: compared below
            assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), \
                (k, name)
        # the active lists (each link's first lcnt slots) and the heaps' live entries
        for lk in range(N_LINKS):
            live = slice(b["lptr"][lk], b["lptr"][lk] + b["lcnt"][lk])
            assert np.array_equal(a["lact"][live], b["lact"][live]), (k, lk)
        for heap, n in (("ht", 0), ("ct", 1)):
            size = int(b["count"][n])
            assert np.array_equal(a[heap][:size], b[heap][:size]), (k, heap)


def test_column_behaves_as_a_list():
    rng = np.random.default_rng(3)
    col, ref = Column(np.float64), []
    views = []
    for _ in range(300):
        op = int(rng.integers(0, 5))
        if op == 0:
            x = float(rng.uniform())
            col.append(x)
            ref.append(x)
        elif op == 1:
            xs = rng.uniform(size=int(rng.integers(0, 40))).tolist()
            col.extend(xs)
            ref.extend(xs)
        elif op == 2:
            xs = rng.uniform(size=int(rng.integers(0, 40)))
            col.extend(xs)
            ref.extend(xs.tolist())
        elif op == 3:
            xs, count = rng.uniform(size=int(rng.integers(1, 4))), int(rng.integers(1, 30))
            col.extend_tiled(xs, count)
            ref.extend(xs.tolist() * count)
        else:
            views.append((col.values, list(ref)))
        assert len(col) == len(ref)
    assert col.values.tolist() == ref
    assert col[5:9].tolist() == ref[5:9] and col[7] == ref[7]
    for view, then in views:           # views handed out earlier are unchanged
        assert view.tolist() == then


def test_room_reuses_its_buffer_only_for_a_view_of_it():
    buffers = {}
    a = room(buffers, "x", np.zeros(0), 4)
    assert a.size == 4                      # an empty start takes just what it needs
    a[:4] = [1, 2, 3, 4]
    b = room(buffers, "x", a[:4], 5)        # full: a new buffer with room, values copied
    assert b is not a and b.size >= 5 and b[:4].tolist() == [1, 2, 3, 4]
    b[4] = 5
    assert room(buffers, "x", b[:5], 6) is b
    assert room(buffers, "x", b[:5].copy(), 6) is not b    # a copy is not a view of it
