"""maxmin_rates against the progressive-filling oracle, and the max-min conditions."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from maxmin_reference import reference_maxmin

from hpnsim.engine import maxmin_rates
from hpnsim.engine.maxmin import solve_csr
from hpnsim.errors import InputError


def test_textbook_three_flows():
    # links A (cap 1) and B (cap 2); f0 crosses A and B, f1 crosses A, f2 crosses B.
    # Progressive filling: A saturates at 0.5 (f0, f1); f2 then takes B's remaining 1.5.
    usage = sp.csr_matrix([[1, 1], [1, 0], [0, 1]], dtype=float)
    np.testing.assert_allclose(maxmin_rates([1.0, 2.0], usage), [0.5, 0.5, 1.5])


def test_weighted_usage_halves_a_colliding_ring():
    # one ring of 4 members, two of which share link 0 (usage 2): the ring runs at cap/2
    usage = sp.csr_matrix([[2.0, 1.0, 1.0]])
    assert maxmin_rates([100.0, 100.0, 100.0], usage).tolist() == [50.0]


def test_strict_priority_takes_first():
    usage = sp.csr_matrix([[1.0], [1.0], [1.0]])
    rates = maxmin_rates([9.0], usage, priority=[1, 0, 1])
    # the class-0 flow alone gets all 9; the class-1 flows share nothing left
    assert rates.tolist() == [0.0, 9.0, 0.0]


def test_variable_without_links_is_unbounded():
    usage = sp.csr_matrix((2, 3))
    assert np.isinf(maxmin_rates([1.0, 1.0, 1.0], usage)).all()


@pytest.mark.parametrize("cap", [[-1.0, 1.0], [1.0, np.nan], [np.inf, 1.0]])
def test_bad_capacity_names_link(cap):
    with pytest.raises(InputError, match="capacity: link [01]"):
        maxmin_rates(cap, sp.csr_matrix([[1.0, 1.0]]))


def test_bad_usage_and_weight():
    with pytest.raises(InputError, match="usage"):
        maxmin_rates([1.0], sp.csr_matrix([[-1.0]]))
    with pytest.raises(InputError, match="columns"):
        maxmin_rates([1.0], sp.csr_matrix([[1.0, 1.0]]))
    with pytest.raises(InputError, match="weight"):
        maxmin_rates([1.0], sp.csr_matrix([[1.0]]), weight=[0.0])
    with pytest.raises(InputError, match="priority"):
        maxmin_rates([1.0], sp.csr_matrix([[1.0]]), priority=[0.5])


@st.composite
def problems(draw):
    n_vars = draw(st.integers(1, 9))
    n_links = draw(st.integers(1, 6))
    cap = draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, 7.0, 10.0, 1e3]) |
                        st.floats(0.01, 100.0), min_size=n_links, max_size=n_links))
    usage = np.zeros((n_vars, n_links))
    for v in range(n_vars):
        row = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 1.0, 2.0, 0.25, 0.5]),
                            min_size=n_links, max_size=n_links))
        usage[v] = row
    priority = draw(st.lists(st.integers(0, 2), min_size=n_vars, max_size=n_vars))
    weight = draw(st.lists(st.sampled_from([1.0, 1.0, 2.0, 0.5, 3.0]) | st.floats(0.1, 10.0),
                           min_size=n_vars, max_size=n_vars))
    return np.array(cap), usage, np.array(priority), np.array(weight)


@settings(max_examples=300, deadline=None)
@given(problems())
def test_matches_reference_and_is_max_min(problem):
    cap, usage, priority, weight = problem
    rates = maxmin_rates(cap, sp.csr_matrix(usage), priority=priority, weight=weight)
    expected = reference_maxmin(cap, usage, priority=priority, weight=weight)
    bounded = usage.sum(axis=1) > 0
    assert np.array_equal(np.isinf(rates), ~bounded)
    scale = max(cap.max(), 1.0)
    np.testing.assert_allclose(rates[bounded], expected[bounded], rtol=1e-9, atol=1e-12 * scale)
    # both fillings (local-minimum rounds, link-share heap) are exact
    m = sp.csr_matrix(usage)
    m.eliminate_zeros()
    args = (cap, m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data, weight.astype(float),
            priority.astype(np.int64))
    for switch_at in (-1, 0, 10**9):
        np.testing.assert_allclose(solve_csr(*args, switch_at=switch_at)[bounded],
                                   expected[bounded], rtol=1e-9, atol=1e-12 * scale)

    # feasibility: no link over capacity
    load = usage[bounded].T @ rates[bounded]
    assert np.all(load <= cap * (1 + 1e-9) + 1e-12 * scale)
    # bottleneck condition: a saturated link where no same-class variable has a larger
    # weighted rate
    level = rates / weight
    for v in np.flatnonzero(bounded):
        ok = False
        for link in np.flatnonzero(usage[v] > 0):
            saturated = load[link] >= cap[link] * (1 - 1e-9) - 1e-12 * scale
            peers = (usage[:, link] > 0) & (priority == priority[v])
            if saturated and np.all(level[peers] <= level[v] * (1 + 1e-9) + 1e-12 * scale):
                ok = True
                break
        assert ok, f"variable {v} has no bottleneck link"


def test_rounds_hand_over_to_heap_exactly():
    # 600 flows of 3 random links out of 60: rounds freeze few flows each, so the local-min
    # rounds stop early and the heap finishes; all three ways agree with the oracle
    from hpnsim.engine.maxmin import fill_class, make_workspace

    rng = np.random.default_rng(7)
    n_vars, n_links = 600, 60
    links = np.sort(np.stack([rng.choice(n_links, 3, replace=False) for _ in range(n_vars)]),
                    axis=1).ravel().astype(np.int64)
    ptr = np.arange(0, 3 * n_vars + 1, 3, dtype=np.int64)
    usage = rng.choice([1.0, 2.0, 0.5], links.size)
    weight = rng.choice([1.0, 2.0, 3.0], n_vars)
    priority = rng.integers(0, 2, n_vars)
    cap = rng.uniform(1.0, 100.0, n_links)

    ws = make_workspace(n_links, n_vars)
    ws[0][:] = cap
    act = np.arange(n_vars, dtype=np.int64)
    left = fill_class(act, n_vars, ptr, links, usage, weight, np.zeros(n_vars), ws, 0,
                      np.full(n_vars, np.inf))
    assert 0 < left < n_vars   # the hand-over really happens here

    dense = np.zeros((n_vars, n_links))
    np.add.at(dense, (np.repeat(np.arange(n_vars), 3), links), usage)
    expected = reference_maxmin(cap, dense, priority=priority, weight=weight)
    for switch_at in (-1, 0, 10**9):
        got = solve_csr(cap, ptr, links, usage, weight, priority.astype(np.int64),
                        switch_at=switch_at)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12 * cap.max())
