"""The packet pool: integer packet records in one preallocated array, and FIFOs through it.

A packet is a row of ``pk`` (columns :class:`~hpnsim.packet.kinds.Pkt`) plus its arrival
time ``pt`` while it is in flight. Every packet is in exactly one FIFO at a time (an egress
queue, a link's in-flight list, or the free list), linked by its ``NEXT`` column, so a FIFO
is a (head, tail) pair of columns in some state row and moving a packet costs O(1) and
allocates nothing. ``ms[FREE_HEAD]``, ``ms[FREE_N]``: the free list.

>>> pk, pt = new_pool(4, ms := np.zeros(8, dtype=np.int64))
>>> a = alloc(pk, ms, 0, 1500); b = alloc(pk, ms, 1, 9000)
>>> ends = np.full((1, 2), -1, dtype=np.int64)           # one FIFO: head, tail in row 0
>>> fifo_push(pk, ends, 0, 0, a); fifo_push(pk, ends, 0, 0, b)
>>> fifo_pop(pk, ends, 0, 0) == a, fifo_pop(pk, ends, 0, 0) == b, ends.tolist()
(True, True, [[-1, -1]])
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet.kinds import Ms, Pkt

FLOW, HOP, SIZE, FLAGS, NEXT = (int(Pkt.FLOW), int(Pkt.HOP), int(Pkt.SIZE), int(Pkt.FLAGS),
                                int(Pkt.NEXT))
FREE_HEAD, FREE_N = int(Ms.FREE_HEAD), int(Ms.FREE_N)


def new_pool(capacity: int, ms: np.ndarray):
    """``(pk, pt)``: records all on the free list (kept in ``ms``), and arrival times."""
    pk = np.zeros((capacity, len(Pkt)), dtype=np.int64)
    pk[:, NEXT] = np.arange(1, capacity + 1)
    pk[-1, NEXT] = -1
    ms[FREE_HEAD], ms[FREE_N] = 0, capacity
    return pk, np.zeros(capacity)


@njit(cache=True, inline="always", _nrt=False)
def alloc(pk, ms, flow, size):
    """Take a record from the free list (there must be one: :func:`grow`)."""
    p = ms[FREE_HEAD]
    ms[FREE_HEAD] = pk[p, NEXT]
    ms[FREE_N] -= 1
    pk[p, FLOW] = flow
    pk[p, HOP] = 0
    pk[p, SIZE] = size
    pk[p, FLAGS] = 0
    pk[p, NEXT] = -1
    return p


@njit(cache=True, inline="always", _nrt=False)
def release(pk, ms, p):
    """Return record ``p`` to the free list."""
    pk[p, NEXT] = ms[FREE_HEAD]
    ms[FREE_HEAD] = p
    ms[FREE_N] += 1


def grow(pk, pt, ms):
    """Copies of the pool twice as large, the new records on the free list (outside the
    kernel)."""
    n = pk.shape[0]
    new = np.zeros_like(pk)
    new[:, NEXT] = np.arange(n + 1, 2 * n + 1)
    new[-1, NEXT] = ms[FREE_HEAD]
    ms[FREE_HEAD] = n
    ms[FREE_N] += n
    return np.concatenate([pk, new]), np.concatenate([pt, np.zeros_like(pt)])


@njit(cache=True, inline="always", _nrt=False)
def fifo_push(pk, ends, row, col, p):
    """Append packet ``p`` to the FIFO whose head and tail are ``ends[row, col:col+2]``."""
    pk[p, NEXT] = -1
    tail = ends[row, col + 1]
    if tail < 0:
        ends[row, col] = p
    else:
        pk[tail, NEXT] = p
    ends[row, col + 1] = p


@njit(cache=True, inline="always", _nrt=False)
def fifo_pop(pk, ends, row, col):
    """Remove and return the head of that FIFO (it must not be empty)."""
    p = ends[row, col]
    nxt = pk[p, NEXT]
    ends[row, col] = nxt
    if nxt < 0:
        ends[row, col + 1] = -1
    return p
