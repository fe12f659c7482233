"""Hand-written kernels that replace numba's generic numpy functions (issue 21, cold start:
those compile seconds of error reporting on a fresh install) give numpy's exact answers.

References: numpy's stable argsort (``kind="mergesort"``) for the order the event loop
solves a component in, ``np.searchsorted`` (side left) for the candidate lookup.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hpnsim.engine.loop import _by_priority
from hpnsim.routing.kernels import _first_at_least


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-3, 3), max_size=300), st.randoms(use_true_random=False))
def test_by_priority_is_numpys_stable_argsort_order(priorities, rnd):
    priority = np.array(priorities, dtype=np.int64)
    members = np.array(rnd.sample(range(priority.size), priority.size), dtype=np.int64)
    expected = members[np.argsort(priority[members], kind="mergesort")]
    assert _by_priority(members, priority).tolist() == expected.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-50, 50), max_size=200), st.integers(-60, 60))
def test_first_at_least_is_searchsorted_left(values, key):
    keys = np.sort(np.array(values, dtype=np.int64))
    assert _first_at_least(keys, np.int64(key)) == np.searchsorted(keys, key, side="left")
