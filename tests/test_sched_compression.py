"""Priority compression: the max-K-cut DP against brute force over all level assignments,
and the paper's four-job example for Crux, Sincronia and Varys."""

import itertools

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.sched.compression import (
    contention_dag,
    max_k_cut,
    sharing_matrix,
    sincronia_levels,
    split_order,
    varys_levels,
)


def brute_force_cut(weights, k):
    """Heaviest cut over every assignment of levels with no edge pointing upward."""
    n = weights.shape[0]
    src, dst = np.nonzero(weights)
    best = 0.0
    for levels in itertools.product(range(k), repeat=n):
        lv = np.array(levels)
        if np.any(lv[src] < lv[dst]):
            continue
        best = max(best, sum(weights[u, v] for u, v in zip(src, dst, strict=True) if lv[u] > lv[v]))
    return best


def random_dag(rng, n):
    links = [rng.choice(5, size=int(rng.integers(1, 3)), replace=False) for _ in range(n)]
    order = rng.permutation(n)
    intensity = rng.integers(1, 10, size=n).astype(float)
    return contention_dag(sharing_matrix(links), order, intensity), order


@pytest.mark.parametrize("k", [1, 2, 3])
def test_dp_is_optimal_on_small_dags(k):
    rng = np.random.default_rng(k)
    for _ in range(12):
        n = int(rng.integers(2, 7))
        w, order = random_dag(rng, n)
        value, levels = max_k_cut(w, order, k)
        assert value == pytest.approx(brute_force_cut(w, k))
        lv = np.asarray(levels)
        src, dst = np.nonzero(w)
        assert np.all(lv[src] >= lv[dst])                  # no edge points upward
        assert lv.min() >= 0 and lv.max() <= k - 1
        assert value == pytest.approx(sum(w[u, v] for u, v in zip(src, dst, strict=True) if lv[u] > lv[v]))


def test_sampled_orders_on_larger_dags_stay_feasible_and_below_optimum():
    rng = np.random.default_rng(5)
    for _ in range(4):
        w, order = random_dag(rng, 8)
        value, levels = max_k_cut(w, order, 2, samples=10, seed=3)
        lv = np.asarray(levels)
        src, dst = np.nonzero(w)
        assert np.all(lv[src] >= lv[dst])
        assert value <= brute_force_cut(w, 2) + 1e-9
        # same seed, same answer
        assert max_k_cut(w, order, 2, samples=10, seed=3)[1].tolist() == lv.tolist()


def test_dp_on_one_order_equals_brute_force_over_its_splits():
    rng = np.random.default_rng(9)
    w, order = random_dag(rng, 7)
    for k in (2, 3):
        best = 0.0
        for cuts in itertools.combinations_with_replacement(range(8), k - 1):
            bounds = [0, *cuts, 7]
            lv = np.zeros(7, dtype=int)
            for b in range(k):
                lv[order[bounds[b]:bounds[b + 1]]] = k - 1 - b
            best = max(best, sum(w[u, v] for u, v in zip(*np.nonzero(w), strict=True) if lv[u] > lv[v]))
        assert split_order(w, order, k)[0] == pytest.approx(best)


def test_four_job_example():
    # jobs 1..4 in decreasing priority; 1-2 share link 0, 3-4 share link 1; two levels
    share = sharing_matrix([[0], [0], [1], [1]])
    order = [0, 1, 2, 3]
    w = contention_dag(share, order, [4.0, 3.0, 2.0, 1.0])
    assert np.nonzero(w)[0].tolist() == [0, 2] and np.nonzero(w)[1].tolist() == [1, 3]
    value, crux = max_k_cut(w, order, 2)
    assert crux.tolist() == [1, 0, 1, 0] and value == 4.0 + 2.0    # both edges cut
    assert sincronia_levels(order, 2).tolist() == [1, 0, 0, 0]    # only 1->2 cut: 4
    assert varys_levels(order, 2).tolist() == [1, 1, 0, 0]        # neither cut: 0


def test_pairs_example_beyond_exhaustive_size():
    # four such pairs (8 jobs: sampled orders, not exhaustive): every pair split, as the
    # depth order puts all pair heads first
    share = sharing_matrix([[p] for p in (0, 0, 1, 1, 2, 2, 3, 3)])
    order = list(range(8))
    w = contention_dag(share, order, [1.0] * 8)
    value, levels = max_k_cut(w, order, 2, samples=3, seed=0)
    assert levels.tolist() == [1, 0] * 4 and value == 4.0


def test_bad_k():
    w = np.zeros((2, 2))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InputError, match="^K:"):
            max_k_cut(w, [0, 1], bad)
    with pytest.raises(InputError, match="^K:"):
        sincronia_levels([0, 1], 0)
    with pytest.raises(InputError, match="samples"):
        max_k_cut(w, [0, 1], 2, samples=0)
