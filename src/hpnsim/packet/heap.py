"""The event heap: a binary min-heap on flat arrays, ordered by (time, insertion number).

It holds O(links + QPs) events, not O(packets): a link has at most one pending TX_DONE,
one ARRIVE (for the head of its in-flight FIFO) and one LINK_WAKE. Ties in time pop in
insertion order, so a run is deterministic. An event is a (time, key) with
``key = id * 16 + kind`` (:class:`~hpnsim.packet.kinds.Event`).

>>> h = new_heap(4)
>>> push(h, 2.0, 7, 1); push(h, 1.0, 3, 0); push(h, 1.0, 5, 2)
>>> [pop(h) for _ in range(3)]
[(1.0, 3, 0), (1.0, 5, 2), (2.0, 7, 1)]
"""

from __future__ import annotations

import numpy as np
from numba import njit

KIND_BITS = 16


@njit(cache=True)
def new_heap(capacity):
    """``(times, keys, order, counters)``; counters = [size, next insertion number]."""
    return (np.empty(capacity), np.empty(capacity, dtype=np.int64),
            np.empty(capacity, dtype=np.int64), np.zeros(2, dtype=np.int64))


@njit(cache=True)
def _less(ht, ho, i, j):
    return ht[i] < ht[j] or (ht[i] == ht[j] and ho[i] < ho[j])


@njit(cache=True)
def _swap(ht, hk, ho, i, j):
    ht[i], ht[j] = ht[j], ht[i]
    hk[i], hk[j] = hk[j], hk[i]
    ho[i], ho[j] = ho[j], ho[i]


@njit(cache=True)
def push(h, time, ident, kind):
    """Add event ``kind`` for ``ident`` at ``time`` (capacity: see :func:`reserve`)."""
    ht, hk, ho, hn = h
    i = hn[0]
    hn[0] += 1
    ht[i] = time
    hk[i] = ident * KIND_BITS + kind
    ho[i] = hn[1]
    hn[1] += 1
    while i > 0:
        parent = (i - 1) >> 1
        if not _less(ht, ho, i, parent):
            break
        _swap(ht, hk, ho, i, parent)
        i = parent


@njit(cache=True)
def pop(h):
    """Remove the earliest event: ``(time, id, kind)``."""
    ht, hk, ho, hn = h
    t, key = ht[0], hk[0]
    n = hn[0] - 1
    hn[0] = n
    ht[0], hk[0], ho[0] = ht[n], hk[n], ho[n]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        child = left
        if left + 1 < n and _less(ht, ho, left + 1, left):
            child = left + 1
        if not _less(ht, ho, child, i):
            break
        _swap(ht, hk, ho, i, child)
        i = child
    return t, key // KIND_BITS, key % KIND_BITS


@njit(cache=True)
def reserve(h, room):
    """The heap itself, or a copy with twice the capacity when fewer than ``room`` slots are
    free (call before a step that pushes at most ``room`` events)."""
    ht, hk, ho, hn = h
    if hn[0] + room <= ht.shape[0]:
        return h
    cap = 2 * ht.shape[0] + room
    nt, nk, no = np.empty(cap), np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    nt[:hn[0]] = ht[:hn[0]]
    nk[:hn[0]] = hk[:hn[0]]
    no[:hn[0]] = ho[:hn[0]]
    return nt, nk, no, hn
