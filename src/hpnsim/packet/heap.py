"""The event heap: a 4-ary min-heap on flat arrays, ordered by (time, insertion number).

It holds O(links + QPs) events, not O(packets): a link has at most one pending TX_DONE,
one ARRIVE (for the head of its in-flight FIFO) and one LINK_WAKE. Ties in time pop in
insertion order, so a run is deterministic. An event is a time ``ht[i]`` and
``hk[i] = (id * 16 + kind, insertion number)`` (kind: :class:`~hpnsim.packet.kinds.Event`);
``ms[HEAP_N]`` is the size and ``ms[HEAP_SEQ]`` the next insertion number.

>>> ht, hk, ms = new_heap(4)
>>> push(ht, hk, ms, 2.0, 7, 1); push(ht, hk, ms, 1.0, 3, 0); push(ht, hk, ms, 1.0, 5, 2)
>>> [pop(ht, hk, ms) for _ in range(3)]
[(1.0, 3, 0), (1.0, 5, 2), (2.0, 7, 1)]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet.kinds import Ms

KIND_BITS = 16
#: children per node: half the levels of a binary heap, and a node's children are
#: adjacent (the kernel pops once per event; a pop's sift-down was a quarter of its time)
ARITY = 4
N, SEQ = int(Ms.HEAP_N), int(Ms.HEAP_SEQ)


def new_heap(capacity: int):
    """``(ht, hk, ms)``: empty heap arrays and the scalars array they share."""
    return np.empty(capacity), np.empty((capacity, 2), dtype=np.int64), \
        np.zeros(len(Ms), dtype=np.int64)


@njit(cache=True, inline="always", _nrt=False)
def push(ht, hk, ms, time, ident, kind):
    """Add event ``kind`` for ``ident`` at ``time`` (room: see :func:`grow`). Its insertion
    number is the largest yet, so it rises only past events strictly later."""
    i = ms[N]
    ms[N] += 1
    seq = ms[SEQ]
    ms[SEQ] += 1
    while i > 0:
        parent = (i - 1) >> 2
        if not time < ht[parent]:
            break
        ht[i] = ht[parent]                      # move the parent down into the hole
        hk[i, 0], hk[i, 1] = hk[parent, 0], hk[parent, 1]
        i = parent
    ht[i] = time
    hk[i, 0] = ident * KIND_BITS + kind
    hk[i, 1] = seq


@njit(cache=True, inline="always", _nrt=False)
def _before(ht, hk, a, b):
    """Whether the event in slot ``a`` pops before the one in slot ``b``."""
    return ht[a] < ht[b] or (ht[a] == ht[b] and hk[a, 1] < hk[b, 1])


@njit(cache=True, inline="always", _nrt=False)
def pop(ht, hk, ms):
    """Remove the earliest event: ``(time, id, kind)``.

    The sift-down picks the earliest of a node's four children as a tournament of two
    pairs (two independent comparisons, then one), by time with a branch-free select; the
    insertion numbers are read only on a tie in time, which is rare.
    """
    t, key = ht[0], hk[0, 0]
    n = ms[N] - 1
    ms[N] = n
    lt, lkey, lseq = ht[n], hk[n, 0], hk[n, 1]     # the last event fills the hole at the root
    i = 0
    while True:
        child = ARITY * i + 1
        if child + 3 < n:                          # four children (nearly every level)
            t0, t1, t2, t3 = ht[child], ht[child + 1], ht[child + 2], ht[child + 3]
            x = t1 < t0
            if t1 == t0:
                x = hk[child + 1, 1] < hk[child, 1]
            y = t3 < t2
            if t3 == t2:
                y = hk[child + 3, 1] < hk[child + 2, 1]
            a, at = child + int(x), t1 if t1 < t0 else t0
            b, bt = child + 2 + int(y), t3 if t3 < t2 else t2
            z = bt < at
            if bt == at:
                z = hk[b, 1] < hk[a, 1]
            best = a + int(z) * (b - a)
            bt = ht[best]
        elif child < n:                            # the last parent: one to three children
            best, bt = child, ht[child]
            for c in range(child + 1, n):
                if _before(ht, hk, c, best):
                    best, bt = c, ht[c]
        else:
            break
        if not (bt < lt or (bt == lt and hk[best, 1] < lseq)):
            break
        ht[i] = bt
        hk[i, 0], hk[i, 1] = hk[best, 0], hk[best, 1]
        i = best
    ht[i] = lt
    hk[i, 0], hk[i, 1] = lkey, lseq
    return t, key // KIND_BITS, key % KIND_BITS


def grow(ht, hk):
    """Copies of the heap arrays with twice the capacity (outside the kernel)."""
    return np.concatenate([ht, np.empty_like(ht)]), np.concatenate([hk, np.empty_like(hk)])
