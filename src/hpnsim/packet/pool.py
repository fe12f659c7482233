"""The packet pool: integer packet records in one preallocated array, and FIFOs through it.

A packet is a row of ``pk`` (int32 columns :class:`~hpnsim.packet.kinds.Pkt`) plus its
arrival time ``pt`` while it is in flight, a float64 stored in the same 64-byte row (``pt``
is a strided view into ``pk``): the kernel touches a packet at every hop, and at hundreds of
GPUs its tens of thousands in flight no longer sit in the caches, so a packet costs one
cache line, not the three of a row of 9 int64 plus a separate time. Every packet is in exactly one FIFO at a time (an egress
queue, a link's in-flight list, or the free list), linked by its ``NEXT`` column, so a FIFO
is a (head, tail) pair of columns in some state row and moving a packet costs O(1) and
allocates nothing. ``ms[FREE_HEAD]``, ``ms[FREE_N]``: the free list.

>>> pk, pt = new_pool(4, ms := np.zeros(8, dtype=np.int64))
>>> pk.shape, pk.dtype.name, pk.ctypes.data % 64, pt.ctypes.data - pk.ctypes.data
((4, 16), 'int32', 0, 40)
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
LINE = 64                 # bytes per cache line
RECORD = 16               # int32 slots per packet record: one line
TIME_SLOT = 5             # the arrival time: float64 slot 5 of a record (int32 slots 10-11)


def rows(n: int, cols: int, dtype, fill=0) -> np.ndarray:
    """A C-ordered ``(n, cols)`` array filled with ``fill`` whose rows start on cache-line
    boundaries (each padded to a whole number of lines; the padding is never read), so the
    first line's worth of a row's columns, which the kernel's state puts first, is one line.

    >>> a = rows(3, 10, np.float64)
    >>> a.shape, a.strides, a.ctypes.data % 64
    ((3, 10), (128, 8), 0)
    """
    item = np.dtype(dtype).itemsize
    width = -(-cols * item // LINE) * LINE // item
    raw = np.full(n * width + LINE // item, fill, dtype=dtype)
    off = (-raw.ctypes.data % LINE) // item
    return raw[off:off + n * width].reshape(n, width)[:, :cols]


def times(pk: np.ndarray) -> np.ndarray:
    """The arrival-time view ``pt`` of pool ``pk``."""
    return pk.view(np.float64)[:, TIME_SLOT]


def new_pool(capacity: int, ms: np.ndarray):
    """``(pk, pt)``: records all on the free list (kept in ``ms``), and arrival times."""
    pk = rows(capacity, RECORD, np.int32)
    pk[:, NEXT] = np.arange(1, capacity + 1)
    pk[-1, NEXT] = -1
    ms[FREE_HEAD], ms[FREE_N] = 0, capacity
    return pk, times(pk)


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
    out = rows(2 * n, RECORD, np.int32)
    out[:n] = pk                                   # the records and their times
    out[n:, NEXT] = np.arange(n + 1, 2 * n + 1)
    out[-1, NEXT] = ms[FREE_HEAD]
    ms[FREE_HEAD] = n
    ms[FREE_N] += n
    return out, times(out)


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
