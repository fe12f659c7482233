"""A link's sender: strict-priority egress FIFOs, the NIC's round-robin over its QPs, the
serializer, and the in-flight FIFO that hands packets to the far end after the delay.

A link is busy while it serializes one packet (``size / capacity``); when it is done the
packet joins the link's in-flight FIFO and arrives ``delay`` later. Propagation is the same
for every packet, so arrivals leave that FIFO in order and the link needs one pending
ARRIVE event, for its head. When the serializer frees, the link takes the head of its
highest non-paused priority queue; if every queue is empty and it is a NIC port, its QPs
take turns (round-robin over active flows), each only when its DCQCN rate limiter allows.

State tuples (built in :mod:`hpnsim.packet.core`):
``topo = (capacity, delay, link_buf, headroom, buf_shared, path_ptr, path_links)``,
``lst = (busy, queue_ends, qbytes, qtot, paused, wake_at, rr_ends, rr_len, pipe_ends)``,
``fl = (size, prio, qp, sent, flow_next)``, ``sw = (buf_used, ing, hdrm, xoff)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet import dcqcn, heap, pool, stats, switch
from hpnsim.packet.kinds import ECN_CE, N_PRIO, Cfg, Event, LinkCount, LinkStat, Pkt, Qp

FLOW, HOP, SIZE, FLAGS = int(Pkt.FLOW), int(Pkt.HOP), int(Pkt.SIZE), int(Pkt.FLAGS)
RC, NEXT_TX = int(Qp.RC), int(Qp.NEXT_TX)
TX_BYTES = int(LinkStat.TX_BYTES)
PACKETS, MARKS, DROPS = int(LinkCount.PACKETS), int(LinkCount.MARKS), int(LinkCount.DROPS)


@njit(cache=True)
def transmit(link, p, now, pk, topo, lst, h):
    """Start serializing packet ``p`` on ``link``."""
    lst[0][link] = p
    heap.push(h, now + pk[p, SIZE] / topo[0][link], link, Event.TX_DONE)


@njit(cache=True)
def tx_done(link, now, pk, pt, topo, lst, ls, h):
    """The serializer finished: the packet enters the in-flight FIFO."""
    busy, pipe = lst[0], lst[8]
    p = busy[link]
    busy[link] = -1
    ls[link, TX_BYTES] += pk[p, SIZE]
    pt[p] = now + topo[1][link]
    if pipe[2 * link] < 0:
        heap.push(h, pt[p], link, Event.ARRIVE)
    pool.fifo_push(pk, pipe, link, p)


@njit(cache=True)
def arrive(link, pk, pt, lst, h):
    """The head of the in-flight FIFO reached the far end: pop it, arm the next arrival."""
    pipe = lst[8]
    p = pool.fifo_pop(pk, pipe, link)
    nxt = pipe[2 * link]
    if nxt >= 0:
        heap.push(h, pt[nxt], link, Event.ARRIVE)
    return p


@njit(cache=True)
def _dequeue(link, pr, now, pk, topo, lst, fl, sw, ls, lc, hist, h, cfg):
    qends, qbytes, qtot = lst[1], lst[2], lst[3]
    k = link * N_PRIO + pr
    p = pool.fifo_pop(pk, qends, k)
    size = pk[p, SIZE]
    qbytes[k] -= size
    stats.change(ls, hist, qtot, link, now, -size)
    b = topo[2][link]
    if b >= 0:
        f = pk[p, FLOW]
        ingress = topo[6][topo[5][f] + pk[p, HOP] - 1]
        k_in = ingress * N_PRIO + pr
        buf_used, ing, hdrm, xoff = sw
        switch.free_bytes(b, k_in, size, buf_used, ing, hdrm)
        switch.pfc_check(b, k_in, now, buf_used, topo[4], ing, hdrm, xoff, topo[1], ls, lc, h,
                         cfg)
    return p


@njit(cache=True)
def start_next(link, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc, hist, h, cfg):
    """If ``link`` is idle, start its next packet: queued traffic first, then its QPs."""
    busy, qends, paused, wake_at, rr_ends, rr_len = lst[0], lst[1], lst[4], lst[5], lst[6], lst[7]
    if busy[link] >= 0:
        return
    base = link * N_PRIO
    for pr in range(N_PRIO - 1, -1, -1):
        if qends[2 * (base + pr)] >= 0 and paused[base + pr] == 0:
            p = _dequeue(link, pr, now, pk, topo, lst, fl, sw, ls, lc, hist, h, cfg)
            transmit(link, p, now, pk, topo, lst, h)
            return
    size, prio, qp, sent, flow_next = fl
    n = rr_len[link]
    soonest = np.inf
    for _ in range(n):
        f = rr_ends[2 * link]                      # pop the head of the round-robin list
        rr_ends[2 * link] = flow_next[f]
        if flow_next[f] < 0:
            rr_ends[2 * link + 1] = -1
        q = qp[f]
        if paused[base + prio[f]] == 0 and qf[q, NEXT_TX] <= now:
            payload = min(cfg[Cfg.MTU], size[f] - sent[f])
            sent[f] += payload
            wire = int(payload + cfg[Cfg.HEADER])
            p = pool.alloc(pk, free, f, wire)
            qf[q, NEXT_TX] = now + wire / qf[q, RC]
            if cfg[Cfg.CC] > 0:
                dcqcn.on_sent(qf, qi, q, wire, cfg)
            if sent[f] < size[f]:
                rr_push(link, f, rr_ends, flow_next)
            else:
                rr_len[link] -= 1
            transmit(link, p, now, pk, topo, lst, h)
            return
        if paused[base + prio[f]] == 0:
            soonest = min(soonest, qf[q, NEXT_TX])
        rr_push(link, f, rr_ends, flow_next)
    if soonest < wake_at[link]:
        wake_at[link] = soonest
        heap.push(h, soonest, link, Event.LINK_WAKE)


@njit(cache=True)
def rr_push(link, f, rr_ends, flow_next):
    """Append flow ``f`` to the round-robin list of NIC port ``link``."""
    flow_next[f] = -1
    tail = rr_ends[2 * link + 1]
    if tail < 0:
        rr_ends[2 * link] = f
    else:
        flow_next[tail] = f
    rr_ends[2 * link + 1] = f


@njit(cache=True)
def enqueue(link, p, ingress, now, pk, topo, lst, fl, sw, ls, lc, hist, h, cfg, rng):
    """Packet ``p`` arrived over ``ingress`` and waits for ``link``: admit it to the
    switch buffer (or drop it), maybe mark it, and queue it. Returns False if dropped."""
    qends, qbytes, qtot = lst[1], lst[2], lst[3]
    pr = fl[1][pk[p, FLOW]]
    k = link * N_PRIO + pr
    size = pk[p, SIZE]
    b = topo[2][link]
    if b >= 0:
        buf_used, ing, hdrm, xoff = sw
        k_in = ingress * N_PRIO + pr
        where = switch.admit(b, k_in, k, size, buf_used, topo[4], ing, hdrm, topo[3][ingress],
                             qbytes, cfg)
        if where < 0:
            lc[link, DROPS] += 1
            return False
        switch.pfc_check(b, k_in, now, buf_used, topo[4], ing, hdrm, xoff, topo[1], ls, lc, h,
                         cfg)
        lc[link, PACKETS] += 1
        if cfg[Cfg.ECN] > 0:
            prob = switch.mark_probability(qbytes[k], cfg)
            if prob > 0 and (prob >= 1 or switch.uniform(rng) < prob):
                pk[p, FLAGS] |= ECN_CE
                lc[link, MARKS] += 1
    qbytes[k] += size
    stats.change(ls, hist, qtot, link, now, size, lst[0][link] >= 0 or lst[4][k] != 0)
    pool.fifo_push(pk, qends, k, p)
    return True
