"""The RC transport at the NICs: in-sequence delivery, control packets back to the sender
(CNP, NACK), and go-back-N retransmission.

*Receiver.* A data packet carries its PSN (its index in the flow). The receiver accepts
only the PSN it expects; a later one is discarded and, once per sequence error, answered
with a NACK naming the expected PSN (InfiniBand's "NAK: PSN sequence error"; go-back-N as
RoCE NICs do it: Mittal et al., "Revisiting Network Support for RDMA", SIGCOMM'18, sec. 2);
an earlier one (a duplicate) is discarded. A marked packet makes the notification point send
a CNP (at most one per ``cnp_interval`` per QP), whatever its PSN.

*Control packets* travel the flow's reverse path as packets, queued at every egress like
data: CNPs in their own class (``cnp_priority``), NACKs in the flow's class (a QP sends its
ACKs and NAKs on its own service level). A flow without a reverse path gets them after the
fixed delay ``FB_CONST + bytes * FB_PER_BYTE`` (propagation plus one serialization per hop,
unqueued).

*Sender.* A NACK for PSN e rewinds the flow to e: every payload byte sent from e on is sent
again (go-back-N), and a flow that had left its QP's queue joins it again. Once a flow is all
sent its retransmission timer runs (``rto``); when it fires without progress of the
receiver's expected PSN since it was armed (what the ACKs would have reported; ACKs are not
simulated as packets, see docs/packet.md), the sender rewinds to that PSN; with progress it
is armed again. After ``retry_count`` timeouts in a row the QP gives up (the flow stays
unfinished), as an RC QP moves to the error state.

Worked case (tests/test_packet_transport.py): one flow, one drop of PSN e. Packet e+1
reaches the receiver at t, its NACK reaches the sender at t + the reverse trip; the sender
has by then started packets 0..m-1, so it sends ``(m - e)`` packets again: the bytes in
flight after the dropped PSN, plus the dropped one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet import dcqcn, heap, link, pool
from hpnsim.packet.kinds import CNP, ECN_CE, NACK, Cfg, Event, Ff, Fi, Lf, Ms, Pkt, Qp

FLOW, SIZE, FLAGS, PSN, PPRIO, BASE, END, HOP = (
    int(Pkt.FLOW), int(Pkt.SIZE), int(Pkt.FLAGS), int(Pkt.PSN), int(Pkt.PRIO),
    int(Pkt.BASE), int(Pkt.END), int(Pkt.HOP))
PRIO, QP, PATH0, RPATH0, RPATH1, CNPS = (int(Fi.PRIO), int(Fi.QP), int(Fi.PATH0),
                                         int(Fi.RPATH0), int(Fi.RPATH1), int(Fi.CNPS))
NEXT_PSN, EXPECT, NACKED, NACK_PSN, LAST_REWIND = (
    int(Fi.NEXT_PSN), int(Fi.EXPECT), int(Fi.NACKED), int(Fi.NACK_PSN), int(Fi.LAST_REWIND))
REWINDS, TIMEOUTS, RETRIES, DISCARDS, RTO_MARK = (
    int(Fi.REWINDS), int(Fi.TIMEOUTS), int(Fi.RETRIES), int(Fi.DISCARDS), int(Fi.RTO_MARK))
FSIZE, SENT, RECV, FINISH, FB_CONST, FB_PER_BYTE, RESENT, RTO_DUE, FIRST_CNP = (
    int(Ff.SIZE), int(Ff.SENT), int(Ff.RECV), int(Ff.FINISH), int(Ff.FB_CONST),
    int(Ff.FB_PER_BYTE), int(Ff.RESENT), int(Ff.RTO_DUE), int(Ff.FIRST_CNP))
LAST_CNP = int(Qp.LAST_CNP)
PACKET = int(Ff.PACKET)
LOSSES = int(Ms.LOSSES)
WAKE_AT = int(Lf.WAKE_AT)


@njit(cache=True, inline="always", _nrt=False)
def send_control(f, flag, psn, now, pk, lk, lf, pq, pf, fi, ff, sw, path_links, ht, hk, ms,
                 hist, cfg, rng):
    """The receiver of flow ``f`` sends a CNP or a NACK (``flag``) toward the sender.
    Returns the link to kick (its reverse path's first link), or -1 (fixed delay)."""
    size = cfg[Cfg.CNP_BYTES] if flag == CNP else cfg[Cfg.ACK_BYTES]
    r0 = fi[f, RPATH0]
    if r0 == fi[f, RPATH1]:
        at = now + ff[f, FB_CONST] + size * ff[f, FB_PER_BYTE]
        if flag == CNP:
            heap.push(ht, hk, ms, at, f, Event.CNP_ARRIVE)
        else:
            fi[f, NACK_PSN] = psn
            heap.push(ht, hk, ms, at, f, Event.NACK_ARRIVE)
        return -1
    p = pool.alloc(pk, ms, f, int(size))
    pk[p, FLAGS] = flag
    pk[p, PSN] = psn
    pk[p, PPRIO] = int(cfg[Cfg.CNP_PRIO]) if flag == CNP else fi[f, PRIO]
    pk[p, BASE] = r0
    pk[p, END] = fi[f, RPATH1]
    first = path_links[r0]
    link.enqueue(first, p, -1, now, pk, lk, lf, pq, pf, fi, sw, ht, hk, ms, hist, cfg, rng)
    return first


@njit(cache=True, inline="always", _nrt=False)
def deliver_data(p, now, pk, lk, lf, pq, pf, fi, ff, qf, sw, path_links, ht, hk, ms, hist,
                 cfg, rng):
    """Data packet ``p`` reached its receiver. Returns ``(kick, done)``: a link that now has
    a control packet to send (-1: none) and whether its flow has all its bytes."""
    f = pk[p, FLOW]
    kick = -1
    q = fi[f, QP]
    if (pk[p, FLAGS] & ECN_CE) and cfg[Cfg.CC] > 0 and \
            now - qf[q, LAST_CNP] >= cfg[Cfg.CNP_DT]:          # notification point
        qf[q, LAST_CNP] = now
        fi[f, CNPS] += 1
        kick = send_control(f, CNP, 0, now, pk, lk, lf, pq, pf, fi, ff, sw, path_links, ht,
                            hk, ms, hist, cfg, rng)
    psn = pk[p, PSN]
    accept = psn == fi[f, EXPECT] or cfg[Cfg.RETRANSMIT] <= 0
    if accept:
        fi[f, EXPECT] = psn + 1
        fi[f, NACKED] = 0
        ff[f, RECV] += pk[p, SIZE] - cfg[Cfg.HEADER]
    else:
        fi[f, DISCARDS] += 1
        if psn > fi[f, EXPECT] and fi[f, NACKED] == 0:       # first sequence error: NAK
            fi[f, NACKED] = 1
            k = send_control(f, NACK, fi[f, EXPECT], now, pk, lk, lf, pq, pf, fi, ff, sw,
                             path_links, ht, hk, ms, hist, cfg, rng)
            if k >= 0:
                kick = k
    pool.release(pk, ms, p)
    return kick, accept and ff[f, RECV] >= ff[f, FSIZE]


@njit(cache=True, inline="always", _nrt=False)
def rewind(f, psn, now, lk, lf, fi, ff, qi, path_links, ht, hk, ms, cfg):
    """Go-back-N: flow ``f`` sends again from ``psn`` (ignored if finished, if it has not
    sent past ``psn``, or if it already rewound to ``psn`` or later)."""
    if ff[f, FINISH] < np.inf or psn >= fi[f, NEXT_PSN] or psn <= fi[f, LAST_REWIND]:
        return
    mtu = ff[f, PACKET]
    was_out = ff[f, SENT] >= ff[f, FSIZE]          # all sent: it had left its QP's queue
    target = min(psn * mtu, ff[f, FSIZE])
    ff[f, RESENT] += ff[f, SENT] - target
    ff[f, SENT] = target
    fi[f, NEXT_PSN] = psn
    fi[f, LAST_REWIND] = psn
    fi[f, REWINDS] += 1
    ff[f, RTO_DUE] = np.inf                         # rearmed when it is all sent again
    if was_out:
        first = path_links[fi[f, PATH0]]
        link.add_flow(first, f, lk, fi, qi)
        if now < lf[first, WAKE_AT]:
            lf[first, WAKE_AT] = now
            heap.push(ht, hk, ms, now, first, Event.LINK_WAKE)


@njit(cache=True, inline="always", _nrt=False)
def on_cnp(f, now, fi, ff, qf, ht, hk, ms, cfg):
    """A CNP for flow ``f`` reached its sender: its QP's reaction point acts."""
    ff[f, FIRST_CNP] = min(ff[f, FIRST_CNP], now)
    dcqcn.on_cnp(qf, fi[f, QP], now, cfg, ht, hk, ms)


@njit(cache=True, inline="always", _nrt=False)
def deliver_control(p, now, pk, lk, lf, fi, ff, qf, qi, path_links, ht, hk, ms, cfg):
    """Control packet ``p`` reached the sender: a CNP cuts its QP's rate, a NACK rewinds."""
    f = pk[p, FLOW]
    if pk[p, FLAGS] & CNP:
        on_cnp(f, now, fi, ff, qf, ht, hk, ms, cfg)
    else:
        rewind(f, pk[p, PSN], now, lk, lf, fi, ff, qi, path_links, ht, hk, ms, cfg)
    pool.release(pk, ms, p)


@njit(cache=True, inline="always", _nrt=False)
def on_loss(now, fi, ff, ht, hk, ms, cfg):
    """A packet was dropped. Retransmission timers are kept as times until the first loss
    (a lossless run then never holds one timer event per flow in its heap); the first loss
    puts every pending timer on the heap."""
    if ms[LOSSES] == 0 and cfg[Cfg.RETRANSMIT] > 0:
        for f in range(fi.shape[0]):
            if ff[f, RTO_DUE] < np.inf and ff[f, FINISH] == np.inf:
                ff[f, RTO_DUE] = max(ff[f, RTO_DUE], now)
                heap.push(ht, hk, ms, ff[f, RTO_DUE], f, Event.RTO)
    ms[LOSSES] += 1


@njit(cache=True, inline="always", _nrt=False)
def on_timeout(f, now, lk, lf, fi, ff, qi, path_links, ht, hk, ms, cfg):
    """Flow ``f``'s retransmission timer fired (ignored if stale or finished)."""
    if now != ff[f, RTO_DUE] or ff[f, FINISH] < np.inf:
        return
    if fi[f, EXPECT] > fi[f, RTO_MARK]:             # progress since armed: wait again
        fi[f, RTO_MARK] = fi[f, EXPECT]
        fi[f, RETRIES] = 0
        ff[f, RTO_DUE] = now + cfg[Cfg.RTO]
        heap.push(ht, hk, ms, ff[f, RTO_DUE], f, Event.RTO)
        return
    fi[f, TIMEOUTS] += 1
    fi[f, RETRIES] += 1
    if fi[f, RETRIES] > cfg[Cfg.RETRY]:             # the QP gives up
        ff[f, RTO_DUE] = np.inf
        return
    fi[f, LAST_REWIND] = -1                          # a timeout may rewind to a PSN again
    rewind(f, fi[f, EXPECT], now, lk, lf, fi, ff, qi, path_links, ht, hk, ms, cfg)

