"""The packet pool: integer packet records in one preallocated array, and FIFOs through it.

A packet is a row of ``pk`` (columns :class:`~hpnsim.packet.kinds.Pkt`) plus its arrival
time ``pt`` while it is in flight. Every packet is in exactly one FIFO at a time (an egress
queue, a link's in-flight list, or the free list), linked by its ``NEXT`` column, so a FIFO
is just ``(head, tail)`` and moving a packet costs O(1) and allocates nothing.

>>> pk, pt, free = new_pool(4)
>>> a = alloc(pk, free, 0, 1500); b = alloc(pk, free, 1, 9000)
>>> ends = np.full(2, -1, dtype=np.int64)
>>> fifo_push(pk, ends, 0, a); fifo_push(pk, ends, 0, b)
>>> fifo_pop(pk, ends, 0) == a, fifo_pop(pk, ends, 0) == b, ends.tolist()
(True, True, [-1, -1])
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet.kinds import Pkt

FLOW, HOP, SIZE, FLAGS, NEXT = (int(Pkt.FLOW), int(Pkt.HOP), int(Pkt.SIZE), int(Pkt.FLAGS),
                                int(Pkt.NEXT))


N_FIELDS = len(Pkt)


@njit(cache=True)
def new_pool(capacity):
    """``(pk, pt, free)``: records, arrival times, and the free list ``[head, count]``."""
    pk = np.zeros((capacity, N_FIELDS), dtype=np.int64)
    pk[:, NEXT] = np.arange(1, capacity + 1)
    pk[capacity - 1, NEXT] = -1
    return pk, np.zeros(capacity), np.array([0, capacity], dtype=np.int64)


@njit(cache=True)
def alloc(pk, free, flow, size):
    """Take a record from the free list (there must be one: :func:`reserve`)."""
    p = free[0]
    free[0] = pk[p, NEXT]
    free[1] -= 1
    pk[p, FLOW] = flow
    pk[p, HOP] = 0
    pk[p, SIZE] = size
    pk[p, FLAGS] = 0
    pk[p, NEXT] = -1
    return p


@njit(cache=True)
def release(pk, free, p):
    """Return record ``p`` to the free list."""
    pk[p, NEXT] = free[0]
    free[0] = p
    free[1] += 1


@njit(cache=True)
def reserve(pk, pt, free, room):
    """The pool, or a copy twice as large when fewer than ``room`` records are free."""
    if free[1] >= room:
        return pk, pt
    n = pk.shape[0]
    grown = n + max(n, room)
    npk = np.zeros((grown, pk.shape[1]), dtype=np.int64)
    npk[:n] = pk
    npt = np.zeros(grown)
    npt[:n] = pt
    for p in range(n, grown - 1):
        npk[p, NEXT] = p + 1
    npk[grown - 1, NEXT] = free[0]
    free[0] = n
    free[1] += grown - n
    return npk, npt


@njit(cache=True)
def fifo_push(pk, ends, q, p):
    """Append packet ``p`` to FIFO ``q``; ``ends[2q]``, ``ends[2q+1]`` are its head, tail."""
    pk[p, NEXT] = -1
    tail = ends[2 * q + 1]
    if tail < 0:
        ends[2 * q] = p
    else:
        pk[tail, NEXT] = p
    ends[2 * q + 1] = p


@njit(cache=True)
def fifo_pop(pk, ends, q):
    """Remove and return the head of FIFO ``q`` (it must not be empty)."""
    p = ends[2 * q]
    nxt = pk[p, NEXT]
    ends[2 * q] = nxt
    if nxt < 0:
        ends[2 * q + 1] = -1
    return p
