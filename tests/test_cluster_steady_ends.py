"""steady._iteration_ends keeps the ends of the leading copies that had all ended and looks up
only the later ones: over rounds in which tasks finish in any order, it must give what looking
up every copy gives (each copy's latest stage end, the copies that have ended, in order)."""

import numpy as np
import pytest

from hpnsim.sched.cluster.steady import _iteration_ends


@pytest.mark.parametrize("seed", range(8))
def test_iteration_ends_equal_the_full_lookup_round_after_round(seed):
    rng = np.random.default_rng(seed)
    n_tasks, size = 400, 4
    stage_end = np.array([1, 3])
    finish = np.full(n_tasks, np.inf)
    firsts = np.zeros(0, dtype=np.int64)
    settled = [np.zeros(0)]
    gaps = 0
    for _ in range(12):
        # more copies join, and some tasks finish: early copies mostly, a few out of order
        firsts = np.arange(0, min(n_tasks, firsts.size * size + 40), size)
        pending = np.flatnonzero(np.isinf(finish[:firsts.size * size]))
        done = pending[:int(rng.integers(0, pending.size + 1))]
        ahead = rng.choice(firsts, 2)[:, None] + np.arange(size)     # whole later copies
        done = np.union1d(done, ahead.ravel()[np.isinf(finish[ahead.ravel()])])
        finish[done] = rng.uniform(0, 100, done.size)
        got = _iteration_ends(finish, firsts, stage_end, settled, 0)
        full = finish[np.add.outer(firsts, stage_end)].max(axis=1)
        want = full[np.isfinite(full)]
        assert got.tobytes() == want.tobytes()
        gaps += settled[0].size < want.size      # an ended copy after one still running
    assert gaps > 0
