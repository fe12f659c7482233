"""The engine's component solve on shared links only (private links folded into a bound)
gives bit for bit the rates of the full solve, and those are the max-min rates."""

import numpy as np
from maxmin_reference import reference_maxmin

from hpnsim.engine.loop import _solve_shared
from hpnsim.engine.maxmin import SWITCH_AT, make_workspace, solve_subset
from hpnsim.engine.state import local_scratch


def _component(rng, n_vars, n_links, n_private):
    """Rows of 1-4 links out of ``n_links`` shared ones plus private links of their own;
    a few variables have private links only."""
    ptr, links, usage = [0], [], []
    next_private = n_links
    for v in range(n_vars):
        shared = [] if v % 7 == 3 else \
            rng.choice(n_links, min(n_links, int(rng.integers(1, 5))), replace=False).tolist()
        own = list(range(next_private, next_private + rng.integers(1 if not shared else 0,
                                                                   n_private + 1)))
        next_private += len(own)
        row = rng.permutation(shared + own).tolist()
        links += row
        usage += rng.choice([1.0, 2.0, 0.5, 0.3], len(row)).tolist()
        ptr.append(len(links))
    return (np.array(ptr, dtype=np.int64), np.array(links, dtype=np.int64),
            np.array(usage), next_private)


def test_shared_link_solve_equals_full_solve_bit_for_bit():
    rng = np.random.default_rng(11)
    for trial in range(40):
        n_vars = int(rng.integers(1, 40))
        ptr, links, usage, total_links = _component(rng, n_vars, int(rng.integers(2, 12)), 4)
        weight = rng.choice([1.0, 2.0, 3.0, 0.7], n_vars)
        priority = rng.integers(0, 3, n_vars) if trial % 2 else np.zeros(n_vars, np.int64)
        cap = rng.uniform(1.0, 100.0, total_links)
        cap[rng.integers(0, total_links)] = 0.0     # a link down
        members = np.argsort(priority, kind="stable").astype(np.int64)
        lcnt = np.bincount(links, minlength=total_links).astype(np.int64)
        assert (lcnt == 1).any() and (lcnt > 1).any()

        full = np.zeros(n_vars)
        solve_subset(members, priority, ptr, links, usage, weight, cap, full,
                     make_workspace(total_links, n_vars), SWITCH_AT, np.full(n_vars, np.inf))
        fast = np.zeros(n_vars)
        local = local_scratch(n_vars, links.size)
        _solve_shared(members, priority, ptr, links, usage, weight, cap, lcnt, fast,
                      make_workspace(total_links, n_vars), local)
        assert np.array_equal(fast.view(np.int64), full.view(np.int64))
        # the fast path really left links out, and the rates are the max-min ones
        assert local[0][n_vars] < links.size
        dense = np.zeros((n_vars, total_links))
        dense[np.repeat(np.arange(n_vars), np.diff(ptr)), links] = usage
        expected = reference_maxmin(cap, dense, priority=priority, weight=weight)
        np.testing.assert_allclose(fast, expected, rtol=1e-9, atol=1e-12 * cap.max())
