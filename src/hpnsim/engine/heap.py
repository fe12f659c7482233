"""A binary min-heap on three parallel arrays (key, tie-break id, payload) for numba kernels.

Ties on the key are broken by the smaller id, so runs are deterministic.

>>> import numpy as np
>>> keys, ids, data = np.empty(4), np.empty(4, dtype=np.int64), np.empty(4, dtype=np.int64)
>>> n = 0
>>> for k, i in ((3.0, 0), (1.0, 1), (1.0, 0)):
...     n = heap_push(keys, ids, data, n, k, i, 7)
>>> float(keys[0]), int(ids[0])
(1.0, 0)
>>> n = heap_pop(keys, ids, data, n)
>>> float(keys[0]), int(ids[0]), n
(1.0, 1, 2)
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def heap_push(keys, ids, data, n, key, ident, payload):
    """Insert; returns the new size (the arrays must have room)."""
    i = n
    while i > 0:
        p = (i - 1) // 2
        if keys[p] < key or (keys[p] == key and ids[p] <= ident):
            break
        keys[i] = keys[p]
        ids[i] = ids[p]
        data[i] = data[p]
        i = p
    keys[i] = key
    ids[i] = ident
    data[i] = payload
    return n + 1


@njit(cache=True)
def heap_pop(keys, ids, data, n):
    """Remove the top (read it first at index 0); returns the new size."""
    n -= 1
    key, ident, payload = keys[n], ids[n], data[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (keys[c + 1] < keys[c]
                          or (keys[c + 1] == keys[c] and ids[c + 1] < ids[c])):
            c += 1
        if keys[c] < key or (keys[c] == key and ids[c] < ident):
            keys[i] = keys[c]
            ids[i] = ids[c]
            data[i] = data[c]
            i = c
        else:
            break
    keys[i] = key
    ids[i] = ident
    data[i] = payload
    return n
