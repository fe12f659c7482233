"""Which state rows the next event will read: asked for early, while this event runs.

At hundreds of GPUs the kernel's state (links, packets, flows, QPs) is far larger than the
caches and consecutive events touch unrelated rows, so without help each event waits on
several cache misses in turn. The next event is the heap's top as soon as this one is
popped; :func:`next_event_rows` then asks for the rows its handler reads first (the packet
it delivers or finishes, the queue it serves next), and :func:`next_hop_rows`, once this
event has pushed whatever it pushes, for the rows one step further (the link and queue an
arriving packet enters, the flow a NIC port sends from next, a free pool slot). Both only
prefetch (:func:`~hpnsim.packet.prefetch.prefetch_row`): no state is written, so a run's
events and results are byte-identical with or without them (``tools/packet_fingerprint.py``).

>>> import numpy as np
>>> from hpnsim.packet import heap
>>> from hpnsim.packet.kinds import Event, Lk, Pkt
>>> ht, hk, ms = heap.new_heap(4)
>>> heap.push(ht, hk, ms, 1.0, 2, Event.TX_DONE)     # next: link 2 finishes packet 5
>>> lk = np.zeros((3, len(Lk)), dtype=np.int32); lk[2, Lk.BUSY] = 5; lk[:, Lk.RR_HEAD] = -1
>>> pk = np.zeros((8, len(Pkt)), dtype=np.int32)
>>> state = (hk, ms, pk, lk, np.zeros((24, 3), np.int32), np.zeros((2, 3), np.int32),
...          np.zeros((2, 4)))
>>> before = [a.copy() for a in state]
>>> next_event_rows(*state)
>>> all((a == b).all() for a, b in zip(state, before))     # nothing written
True
"""

from __future__ import annotations

from numba import njit

from hpnsim.packet import heap, link
from hpnsim.packet.kinds import N_PRIO, Event, Lk, Ms, Pkt, Pq, QpI
from hpnsim.packet.prefetch import prefetch_row

BUSY, PIPE_HEAD, RR_HEAD = int(Lk.BUSY), int(Lk.PIPE_HEAD), int(Lk.RR_HEAD)
QUEUED, PAUSED = int(Lk.QUEUED), int(Lk.PAUSED)
FLOW, HOP, BASE, END, PRIO = (int(Pkt.FLOW), int(Pkt.HOP), int(Pkt.BASE), int(Pkt.END),
                              int(Pkt.PRIO))
HEAP_N, FREE_HEAD = int(Ms.HEAP_N), int(Ms.FREE_HEAD)
QUEUE_HEAD, QP_HEAD_FLOW = int(Pq.HEAD), int(QpI.HEAD)


@njit(cache=True, inline="always", _nrt=False)
def _ready_queue(lk, lnk):
    """The egress queue row ``lnk * N_PRIO + priority`` link ``lnk`` serves next, or -1."""
    ready = lk[lnk, QUEUED] & ~lk[lnk, PAUSED]
    if ready == 0:
        return -1
    return lnk * N_PRIO + link.top_priority(ready)


@njit(cache=True, inline="always", _nrt=False)
def next_event_rows(hk, ms, pk, lk, pq, qi, qf):
    """Prefetch what the next event's handler reads first: for an ARRIVE, the packet at the
    head of the link's in-flight FIFO; for a TX_DONE, the packet finishing and the queue
    (or, at a NIC port, the round-robin head QP) it serves next. Call right after a pop."""
    if ms[HEAP_N] == 0:
        return
    key = hk[0, 0]
    kind = key % heap.KIND_BITS
    lnk = key // heap.KIND_BITS
    if kind == Event.ARRIVE:
        prefetch_row(pk, lk[lnk, PIPE_HEAD])
    elif kind == Event.TX_DONE:
        prefetch_row(pk, lk[lnk, BUSY])
        row = _ready_queue(lk, lnk)
        if row >= 0:
            prefetch_row(pq, row)
        elif lk[lnk, RR_HEAD] >= 0:
            prefetch_row(qi, lk[lnk, RR_HEAD])
            prefetch_row(qf, lk[lnk, RR_HEAD])


@njit(cache=True, inline="always", _nrt=False)
def next_hop_rows(hk, ms, pk, lk, lf, pq, pf, fi, ff, qi, path_links):
    """Prefetch one step further, once this event is done: for an ARRIVE next, the link
    (both rows) and egress queue its packet enters, or its flow's row at the last hop; for
    a TX_DONE next, the packet it will start (or the flow its NIC port sends from next) and
    the pool's free slot a new packet takes."""
    if ms[HEAP_N] == 0:
        return
    key = hk[0, 0]
    kind = key % heap.KIND_BITS
    lnk = key // heap.KIND_BITS
    if kind == Event.ARRIVE:
        p = lk[lnk, PIPE_HEAD]
        at = pk[p, BASE] + pk[p, HOP] + 1
        if at < pk[p, END]:
            nxt = path_links[at]
            prefetch_row(lk, nxt)
            prefetch_row(lf, nxt)
            prefetch_row(pf, nxt * N_PRIO + pk[p, PRIO])
        else:
            prefetch_row(ff, pk[p, FLOW])
    elif kind == Event.TX_DONE:
        row = _ready_queue(lk, lnk)
        if row >= 0:
            prefetch_row(pk, pq[row, QUEUE_HEAD])
        elif lk[lnk, RR_HEAD] >= 0:
            f = qi[lk[lnk, RR_HEAD], QP_HEAD_FLOW]
            if f >= 0:
                prefetch_row(fi, f)
                prefetch_row(ff, f)
        prefetch_row(pk, ms[FREE_HEAD])
