"""A link's sender: strict-priority egress FIFOs, the NIC's round-robin over its QPs, the
serializer, and the in-flight FIFO that hands packets to the far end after the delay.

A link is busy while it serializes one packet (``size / capacity``); when it is done the
packet joins the link's in-flight FIFO and arrives ``delay`` later. Propagation is the same
for every packet, so arrivals leave that FIFO in order and the link needs one pending
ARRIVE event, for its head. When the serializer frees, the link takes the head of its
highest non-paused priority queue; if every queue is empty and it is a NIC port, its QPs
take turns (round-robin over QPs with a flow to send; a QP sends its flows in order), each
only when its DCQCN rate limiter allows. Which queues hold packets and which priorities are
paused are two bit masks in the link's row (``Lk.QUEUED``, ``Lk.PAUSED``), kept where a
queue fills or empties and where a pause starts or ends, so finding the next packet reads
no per-priority row.

State: ``lk``, ``lf`` per link, ``pq``, ``pf`` per (link, priority), ``fi``, ``ff`` per
flow, ``qf``, ``qi`` per QP (columns in :mod:`hpnsim.packet.kinds`), ``sw`` per switch.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet import dcqcn, heap, pool, stats, switch
from hpnsim.packet.kinds import (
    MARK_DEQUEUE,
    MARK_ENQUEUE,
    N_PRIO,
    Cfg,
    Event,
    Ff,
    Fi,
    Lf,
    Lk,
    Ms,
    Pf,
    Pkt,
    Pq,
    Qp,
    QpI,
)

FLOW, HOP, SIZE, FLAGS, NEXT = (int(Pkt.FLOW), int(Pkt.HOP), int(Pkt.SIZE), int(Pkt.FLAGS),
                                int(Pkt.NEXT))
PSN, PPRIO, BASE, END = int(Pkt.PSN), int(Pkt.PRIO), int(Pkt.BASE), int(Pkt.END)
BUSY, PIPE, RR_HEAD, RR_TAIL, RR_LEN, BUF = (int(Lk.BUSY), int(Lk.PIPE_HEAD), int(Lk.RR_HEAD),
                                             int(Lk.RR_TAIL), int(Lk.RR_LEN), int(Lk.BUF))
PACKETS, DROPS, QUEUED, PAUSED = int(Lk.PACKETS), int(Lk.DROPS), int(Lk.QUEUED), int(Lk.PAUSED)
CAP, DELAY, HEADROOM, WAKE_AT, TX_BYTES = (int(Lf.CAP), int(Lf.DELAY), int(Lf.HEADROOM),
                                           int(Lf.WAKE_AT), int(Lf.TX_BYTES))
FRAMING = int(Lf.FRAMING)
QHEAD = int(Pq.HEAD)
QBYTES = int(Pf.BYTES)
PRIO, QP, FNEXT, PATH0, PATH1 = (int(Fi.PRIO), int(Fi.QP), int(Fi.NEXT), int(Fi.PATH0),
                                 int(Fi.PATH1))
NEXT_PSN, EXPECT, RTO_MARK = int(Fi.NEXT_PSN), int(Fi.EXPECT), int(Fi.RTO_MARK)
QHEAD_F, QTAIL_F, RR_NEXT = int(QpI.HEAD), int(QpI.TAIL), int(QpI.RR_NEXT)
FSIZE, SENT, RTO_DUE, PACKET = int(Ff.SIZE), int(Ff.SENT), int(Ff.RTO_DUE), int(Ff.PACKET)
RC, NEXT_TX, LAST_WIRE = int(Qp.RC), int(Qp.NEXT_TX), int(Qp.LAST_WIRE)
PORT = int(QpI.PORT)
LOSSES = int(Ms.LOSSES)


@njit(cache=True, inline="always", _nrt=False)
def transmit(link, p, now, pk, lk, lf, ht, hk, ms):
    """Start serializing packet ``p`` on ``link`` (its frame plus the link's framing)."""
    lk[link, BUSY] = p
    heap.push(ht, hk, ms, now + (pk[p, SIZE] + lf[link, FRAMING]) / lf[link, CAP], link,
              Event.TX_DONE)


@njit(cache=True, inline="always", _nrt=False)
def tx_done(link, now, pk, pt, lk, lf, ht, hk, ms):
    """The serializer finished: the packet enters the in-flight FIFO."""
    p = lk[link, BUSY]
    lk[link, BUSY] = -1
    lf[link, TX_BYTES] += pk[p, SIZE]
    pt[p] = now + lf[link, DELAY]
    if lk[link, PIPE] < 0:
        heap.push(ht, hk, ms, pt[p], link, Event.ARRIVE)
    pool.fifo_push(pk, lk, link, PIPE, p)


@njit(cache=True, inline="always", _nrt=False)
def arrive(link, pk, pt, lk, ht, hk, ms):
    """The head of the in-flight FIFO reached the far end: pop it, arm the next arrival."""
    p = pool.fifo_pop(pk, lk, link, PIPE)
    nxt = lk[link, PIPE]
    if nxt >= 0:
        heap.push(ht, hk, ms, pt[nxt], link, Event.ARRIVE)
    return p


@njit(cache=True, inline="always", _nrt=False)
def _dequeue(link, k, now, pk, lk, lf, pq, pf, fi, sw, path_links, ht, hk, ms, hist, cfg,
             rng):
    """Take the head of egress queue ``k`` (= link * N_PRIO + prio), free its buffer; at a
    switch marking at dequeue, RED on the bytes it leaves behind (as ns-3's RoCE switch:
    ``SwitchNotifyDequeue`` after the egress count drops)."""
    p = pool.fifo_pop(pk, pq, k, QHEAD)
    if pq[k, QHEAD] < 0:
        lk[link, QUEUED] &= ~(1 << (k - link * N_PRIO))
    size = pk[p, SIZE]
    pf[k, QBYTES] -= size
    stats.change(lf, hist, link, now, -size, False)
    b = lk[link, BUF]
    if b >= 0:
        if cfg[Cfg.ECN] > 0 and cfg[Cfg.MARK_AT] == MARK_DEQUEUE:
            switch.maybe_mark(p, link, pf[k, QBYTES], pk, lk, cfg, rng)
        ingress = path_links[pk[p, BASE] + pk[p, HOP] - 1]
        k_in = ingress * N_PRIO + (k - link * N_PRIO)
        switch.free_bytes(b, k_in, size, sw, pf)
        switch.pfc_check(b, k_in, now, sw, pf, pq, lf, lk, ht, hk, ms, cfg)
    return p


@njit(cache=True, inline="always", _nrt=False)
def _rr_push(link, q, lk, qi):
    """Append QP ``q`` to the round-robin list of NIC port ``link``."""
    qi[q, RR_NEXT] = -1
    tail = lk[link, RR_TAIL]
    if tail < 0:
        lk[link, RR_HEAD] = q
    else:
        qi[tail, RR_NEXT] = q
    lk[link, RR_TAIL] = q


@njit(cache=True, inline="always", _nrt=False)
def add_flow(link, f, lk, fi, qi):
    """Flow ``f`` may send on NIC port ``link``: queue it behind its QP's earlier flows."""
    q = fi[f, QP]
    fi[f, FNEXT] = -1
    tail = qi[q, QTAIL_F]
    qi[q, QTAIL_F] = f
    if tail >= 0:
        fi[tail, FNEXT] = f
        return
    qi[q, QHEAD_F] = f                   # the QP had nothing to send: it joins the port
    lk[link, RR_LEN] += 1
    _rr_push(link, q, lk, qi)


@njit(cache=True, inline="always", _nrt=False)
def wake_qp(q, now, lf, qf, qi, ht, hk, ms):
    """QP ``q``'s rate went up (its next packet may go earlier): if it has a flow to send,
    wake its NIC port when its rate limiter next lets a packet go."""
    port = qi[q, PORT]
    if qi[q, QHEAD_F] < 0 or port < 0:
        return
    t = max(now, qf[q, NEXT_TX])
    if t < lf[port, WAKE_AT]:
        lf[port, WAKE_AT] = t
        heap.push(ht, hk, ms, t, port, Event.LINK_WAKE)


@njit(cache=True, inline="always", _nrt=False)
def top_priority(mask):
    """The highest priority whose bit is set in ``mask`` (> 0): the one the egress scheduler
    serves first (strict priority, N_PRIO - 1 highest).

    >>> top_priority(0b00001000), top_priority(0b10000001)
    (3, 7)
    """
    pr = N_PRIO - 1
    while (mask >> pr) & 1 == 0:
        pr -= 1
    return pr


@njit(cache=True, inline="always", _nrt=False)
def start_next(link, now, pk, lk, lf, pq, pf, fi, ff, qf, qi, sw, path_links, ht, hk, ms,
               hist, cfg, rng):
    """If ``link`` is idle, start its next packet: queued traffic first, then its QPs."""
    if lk[link, BUSY] >= 0:
        return
    base = link * N_PRIO
    ready = lk[link, QUEUED] & ~lk[link, PAUSED]
    if ready != 0:
        p = _dequeue(link, base + top_priority(ready), now, pk, lk, lf, pq, pf, fi, sw,
                     path_links, ht, hk, ms, hist, cfg, rng)
        transmit(link, p, now, pk, lk, lf, ht, hk, ms)
        return
    soonest = np.inf
    for _ in range(lk[link, RR_LEN]):
        q = lk[link, RR_HEAD]                      # pop the head of the round-robin list
        lk[link, RR_HEAD] = qi[q, RR_NEXT]
        if qi[q, RR_NEXT] < 0:
            lk[link, RR_TAIL] = -1
        f = qi[q, QHEAD_F]
        paused = (lk[link, PAUSED] >> fi[f, PRIO]) & 1 != 0
        if not paused and qf[q, NEXT_TX] <= now:
            payload = min(ff[f, PACKET], ff[f, FSIZE] - ff[f, SENT])
            ff[f, SENT] += payload
            wire = int(payload + cfg[Cfg.HEADER])
            p = pool.alloc(pk, ms, f, wire)
            pk[p, PSN] = fi[f, NEXT_PSN]
            fi[f, NEXT_PSN] += 1
            pk[p, PPRIO] = fi[f, PRIO]
            pk[p, BASE] = fi[f, PATH0]
            pk[p, END] = fi[f, PATH1]
            qf[q, NEXT_TX] = now + wire / qf[q, RC]
            qf[q, LAST_WIRE] = wire
            if cfg[Cfg.CC] > 0:
                dcqcn.on_sent(qf, q, wire, cfg)
            if ff[f, SENT] >= ff[f, FSIZE]:        # the flow is all sent: next in the QP
                qi[q, QHEAD_F] = fi[f, FNEXT]
                if fi[f, FNEXT] < 0:
                    qi[q, QTAIL_F] = -1
                if cfg[Cfg.RETRANSMIT] > 0:        # its retransmission timer starts; the
                    ff[f, RTO_DUE] = now + cfg[Cfg.RTO]    # event only once a packet was
                    fi[f, RTO_MARK] = fi[f, EXPECT]        # lost (transport.on_loss)
                    if ms[LOSSES] > 0:
                        heap.push(ht, hk, ms, ff[f, RTO_DUE], f, Event.RTO)
            if qi[q, QHEAD_F] >= 0:
                _rr_push(link, q, lk, qi)
            else:
                lk[link, RR_LEN] -= 1
            transmit(link, p, now, pk, lk, lf, ht, hk, ms)
            return
        if not paused:
            soonest = min(soonest, qf[q, NEXT_TX])
        _rr_push(link, q, lk, qi)
    if soonest < lf[link, WAKE_AT]:
        lf[link, WAKE_AT] = soonest
        heap.push(ht, hk, ms, soonest, link, Event.LINK_WAKE)


@njit(cache=True, inline="always", _nrt=False)
def enqueue(link, p, ingress, now, pk, lk, lf, pq, pf, fi, sw, ht, hk, ms, hist, cfg, rng):
    """Packet ``p`` arrived over ``ingress`` and waits for ``link``: admit it to the
    switch buffer (or drop it), mark it if the switch marks at enqueue (RED on the bytes
    ahead of it), and queue it. Returns False if dropped."""
    pr = pk[p, PPRIO]
    k = link * N_PRIO + pr
    size = pk[p, SIZE]
    b = lk[link, BUF]
    if b >= 0:
        k_in = ingress * N_PRIO + pr
        if switch.admit(b, k_in, k, size, sw, pf, lf[ingress, HEADROOM], cfg) < 0:
            lk[link, DROPS] += 1
            return False
        switch.pfc_check(b, k_in, now, sw, pf, pq, lf, lk, ht, hk, ms, cfg)
        lk[link, PACKETS] += 1
        if cfg[Cfg.ECN] > 0 and cfg[Cfg.MARK_AT] == MARK_ENQUEUE:
            switch.maybe_mark(p, link, pf[k, QBYTES], pk, lk, cfg, rng)
    pf[k, QBYTES] += size
    waits = lk[link, BUSY] >= 0 or (lk[link, PAUSED] >> pr) & 1 != 0
    stats.change(lf, hist, link, now, size, waits)
    pool.fifo_push(pk, pq, k, QHEAD, p)
    lk[link, QUEUED] |= 1 << pr
    return True
