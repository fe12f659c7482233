"""The event heap: a binary min-heap on flat arrays, ordered by (time, insertion number).

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
N, SEQ = int(Ms.HEAP_N), int(Ms.HEAP_SEQ)


def new_heap(capacity: int):
    """``(ht, hk, ms)``: empty heap arrays and the scalars array they share."""
    return np.empty(capacity), np.empty((capacity, 2), dtype=np.int64), \
        np.zeros(len(Ms), dtype=np.int64)


@njit(cache=True, inline="always", _nrt=False)
def _before(ht, hk, i, j):
    return ht[i] < ht[j] or (ht[i] == ht[j] and hk[i, 1] < hk[j, 1])


@njit(cache=True, inline="always", _nrt=False)
def _swap(ht, hk, i, j):
    ht[i], ht[j] = ht[j], ht[i]
    a, b = hk[i, 0], hk[i, 1]
    hk[i, 0], hk[i, 1] = hk[j, 0], hk[j, 1]
    hk[j, 0], hk[j, 1] = a, b


@njit(cache=True, inline="always", _nrt=False)
def push(ht, hk, ms, time, ident, kind):
    """Add event ``kind`` for ``ident`` at ``time`` (room: see :func:`grow`)."""
    i = ms[N]
    ms[N] += 1
    ht[i] = time
    hk[i, 0] = ident * KIND_BITS + kind
    hk[i, 1] = ms[SEQ]
    ms[SEQ] += 1
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(ht, hk, i, parent):
            break
        _swap(ht, hk, i, parent)
        i = parent


@njit(cache=True, inline="always", _nrt=False)
def pop(ht, hk, ms):
    """Remove the earliest event: ``(time, id, kind)``."""
    t, key = ht[0], hk[0, 0]
    n = ms[N] - 1
    ms[N] = n
    ht[0], hk[0, 0], hk[0, 1] = ht[n], hk[n, 0], hk[n, 1]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _before(ht, hk, child + 1, child):
            child += 1
        if not _before(ht, hk, child, i):
            break
        _swap(ht, hk, i, child)
        i = child
    return t, key // KIND_BITS, key % KIND_BITS


def grow(ht, hk):
    """Copies of the heap arrays with twice the capacity (outside the kernel)."""
    return np.concatenate([ht, np.empty_like(ht)]), np.concatenate([hk, np.empty_like(hk)])
