r"""The event loop of the packet engine: arrays in, per-flow finish times and port stats out.

Events (:class:`~hpnsim.packet.kinds.Event`) pop from one heap in (time, insertion) order;
each handler touches one link, flow or QP and pushes at most a few events. A flow's packets
carry its own payload size (``Ff.PACKET``: the MTU, or coarser on NVLink). Packets live in
the pool (:mod:`.pool`), queues and in-flight lists are FIFOs through it (:mod:`.link`).

Worked system
-------------
Two senders A, B each on a NIC link of capacity C into switch S, S -> receiver R over one
link of capacity C; every link has propagation delay d; packets of w wire bytes.

* One packet A -> R crosses 2 links store-and-forward: it is fully received at
  ``2 (w/C + d)``; over k links of capacities C_i and delays d_i: ``sum_i (w/C_i + d_i)``.
  n back-to-back packets on equal links add ``(n-1) w/C`` (the pipeline).
* 2:1 incast at line rate: both first packets reach S at ``t0 = w/C + d``; from then S
  receives 2C and sends C, so the queue at S -> R grows at exactly ``C`` bytes/s until a
  mechanism acts: the first CNP is sent when a marked packet reaches R (queue above Kmin
  at S), and cuts A and B one feedback delay later; PFC sends XOFF when an ingress holds
  ``pfc_alpha * (B_shared - used)`` bytes; with both ingresses equal,
  ``q_x = 2 a B / (1 + 2a)``, from ``q/2 = a (B - q)``.
* PFC headroom: after XOFF leaves S at t, the sender stops at ``t + d``; by then the link
  still carries what it sent in ``[t - d, t + d]`` plus the packet it was serializing:
  at most ``2 d C + 2 w`` bytes, which the headroom must hold.
* DCQCN on N flows sharing R's link converges to C/N each; the fluid model (Zhu et al.,
  CoNEXT'16) puts the marking probability near ``p* = cbrt(R_AI N^2 / (tau' C^2)
  (1/B + N/(T C))^2)`` (rates in packets) and the queue at ``Kmin + p*/Pmax (Kmax - Kmin)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet import dcqcn, heap, link, lookahead, pool, transport
from hpnsim.packet.kinds import CONTROL, N_PRIO, Cfg, Event, Ff, Fi, Lf, Lk, Ms, Pkt, Qp
from hpnsim.packet.stats import charge

FLOW, HOP, FLAGS, BASE, END = (int(Pkt.FLOW), int(Pkt.HOP), int(Pkt.FLAGS), int(Pkt.BASE),
                               int(Pkt.END))
PAUSED_TIME, FIRST_PAUSED, PAUSE_SINCE, WAKE_AT, QTOT = (
    int(Lf.PAUSED_TIME), int(Lf.FIRST_PAUSED), int(Lf.PAUSE_SINCE), int(Lf.WAKE_AT),
    int(Lf.QTOT))
PAUSED = int(Lk.PAUSED)
QP, PATH0, PATH1, PENDING, RELEASED, SUCC0, SUCC1, NACK_PSN = (
    int(Fi.QP), int(Fi.PATH0), int(Fi.PATH1), int(Fi.PENDING), int(Fi.RELEASED), int(Fi.SUCC0),
    int(Fi.SUCC1), int(Fi.NACK_PSN))
FSIZE, RECV, FINISH = int(Ff.SIZE), int(Ff.RECV), int(Ff.FINISH)
LEFT = int(Qp.LEFT)
HEAP_N, FREE_N, N_DONE, EVENTS, SAMPLES, RESERVE = (
    int(Ms.HEAP_N), int(Ms.FREE_N), int(Ms.N_DONE), int(Ms.EVENTS), int(Ms.SAMPLES),
    int(Ms.RESERVE))
DONE, ROOM = 0, 1          # statuses of run()


@njit(cache=True, _nrt=False)
def _activate(f, now, lk, lf, fi, ff, qi, path_links, ht, hk, ms):
    """Flow ``f`` may send: queue it at its QP and wake its NIC port now. A wait (a flow
    without links) instead finishes ``ff[f, SIZE]`` seconds from now."""
    if fi[f, PATH0] == fi[f, PATH1]:
        heap.push(ht, hk, ms, now + ff[f, FSIZE], f, Event.WAIT_DONE)
        return
    first = path_links[fi[f, PATH0]]
    link.add_flow(first, f, lk, fi, qi)
    if now < lf[first, WAKE_AT]:
        lf[first, WAKE_AT] = now
        heap.push(ht, hk, ms, now, first, Event.LINK_WAKE)


@njit(cache=True, _nrt=False)
def _finished(f, now, lk, lf, fi, ff, qf, qi, path_links, succ, ht, hk, ms):
    """Flow ``f`` delivered its last byte: release the successors it was holding."""
    ff[f, FINISH] = now
    ms[N_DONE] += 1
    qf[fi[f, QP], LEFT] -= 1
    for e in range(fi[f, SUCC0], fi[f, SUCC1]):
        g = succ[e]
        fi[g, PENDING] -= 1
        if fi[g, PENDING] == 0 and fi[g, RELEASED]:
            _activate(g, now, lk, lf, fi, ff, qi, path_links, ht, hk, ms)


@njit(cache=True, _nrt=False)
def start(fi, start_times, ht, hk, ms, sampling):
    """Push every flow's FLOW_START (and the first SAMPLE if ``sampling``)."""
    for f in range(fi.shape[0]):
        heap.push(ht, hk, ms, start_times[f], f, Event.FLOW_START)
    if sampling:
        heap.push(ht, hk, ms, 0.0, 0, Event.SAMPLE)


@njit(cache=True, _nrt=False)
def run(lk, lf, pq, pf, fi, ff, qf, qi, sw, path_links, succ, watch, watch_flows,
        samples, flow_samples, hist, cfg, rng, pk, pt, ht, hk, ms, now):
    """Process events from the state (built by :func:`hpnsim.packet.api.simulate_flows`,
    seeded by :func:`start`) until every flow has finished, no event is left or
    ``cfg[T_END]`` (status DONE), or the heap or the pool needs room (status ROOM: grow
    them and call again). Returns ``(status, now)``. An event after ``cfg[T_END]`` stays on
    the heap, so a call with a later ``T_END`` resumes the same run exactly.

    Compiled without numba's reference counting (``_nrt=False``): it allocates nothing,
    so every array stays owned by the caller and no call pays for atomic increments.
    """
    n_flows = fi.shape[0]
    max_samples = samples.shape[0]
    while ms[HEAP_N] > 0 and ms[N_DONE] < n_flows:
        if ms[HEAP_N] + ms[RESERVE] > ht.shape[0] or ms[FREE_N] < 4:
            return ROOM, now
        if ht[0] > cfg[Cfg.T_END]:        # left on the heap: a later call resumes here
            break
        t, ident, kind = heap.pop(ht, hk, ms)
        now = t
        ms[EVENTS] += 1
        lookahead.next_event_rows(hk, ms, pk, lk, pq, qi, qf)
        kick = -1                                    # the link that may start a packet
        if kind == Event.TX_DONE:
            link.tx_done(ident, now, pk, pt, lk, lf, ht, hk, ms)
            kick = ident
        elif kind == Event.ARRIVE:
            p = link.arrive(ident, pk, pt, lk, ht, hk, ms)
            hop = pk[p, HOP] + 1
            if pk[p, BASE] + hop < pk[p, END]:                 # on to the next link
                nxt = path_links[pk[p, BASE] + hop]
                pk[p, HOP] = hop
                if link.enqueue(nxt, p, ident, now, pk, lk, lf, pq, pf, fi, sw, ht, hk, ms,
                                hist, cfg, rng):
                    kick = nxt
                else:
                    pool.release(pk, ms, p)
                    transport.on_loss(now, fi, ff, ht, hk, ms, cfg)
            elif pk[p, FLAGS] & CONTROL:                       # a CNP or NACK at the sender
                transport.deliver_control(p, now, pk, lk, lf, fi, ff, qf, qi, path_links, ht,
                                          hk, ms, cfg)
            else:                                              # data at the receiver
                f = pk[p, FLOW]
                kick, done = transport.deliver_data(p, now, pk, lk, lf, pq, pf, fi, ff, qf, sw,
                                                    path_links, ht, hk, ms, hist, cfg, rng)
                if done:
                    _finished(f, now, lk, lf, fi, ff, qf, qi, path_links, succ, ht, hk, ms)
        elif kind == Event.LINK_WAKE:
            if lf[ident, WAKE_AT] == now:
                lf[ident, WAKE_AT] = np.inf
                kick = ident
        elif kind == Event.FLOW_START:
            fi[ident, RELEASED] = 1                  # a zero-byte flow sends one header
            if fi[ident, PENDING] == 0:
                _activate(ident, now, lk, lf, fi, ff, qi, path_links, ht, hk, ms)
        elif kind == Event.WAIT_DONE:
            _finished(ident, now, lk, lf, fi, ff, qf, qi, path_links, succ, ht, hk, ms)
        elif kind == Event.CNP_ARRIVE:
            transport.on_cnp(ident, now, fi, ff, qf, ht, hk, ms, cfg)
        elif kind == Event.ALPHA_TIMER:
            dcqcn.on_alpha_timer(qf, ident, now, cfg, ht, hk, ms, qf[ident, LEFT] > 0)
        elif kind == Event.INC_TIMER:
            dcqcn.on_inc_timer(qf, ident, now, cfg, ht, hk, ms, qf[ident, LEFT] > 0)
            link.wake_qp(ident, now, lf, qf, qi, ht, hk, ms)
        elif kind == Event.PAUSE_ON:                 # ident: link * N_PRIO + priority
            lk_id = ident // N_PRIO
            bit = 1 << (ident - lk_id * N_PRIO)
            if lk[lk_id, PAUSED] & bit == 0:
                if lk[lk_id, PAUSED] == 0:
                    lf[lk_id, PAUSE_SINCE] = now
                lk[lk_id, PAUSED] |= bit
                lf[lk_id, FIRST_PAUSED] = min(lf[lk_id, FIRST_PAUSED], now)
        elif kind == Event.PAUSE_OFF:
            lk_id = ident // N_PRIO
            bit = 1 << (ident - lk_id * N_PRIO)
            if lk[lk_id, PAUSED] & bit != 0:
                lk[lk_id, PAUSED] &= ~bit
                if lk[lk_id, PAUSED] == 0:
                    lf[lk_id, PAUSED_TIME] += now - lf[lk_id, PAUSE_SINCE]
                kick = lk_id
        elif kind == Event.NACK_ARRIVE:
            transport.rewind(ident, fi[ident, NACK_PSN], now, lk, lf, fi, ff, qi, path_links,
                             ht, hk, ms, cfg)
        elif kind == Event.RTO:
            transport.on_timeout(ident, now, lk, lf, fi, ff, qi, path_links, ht, hk, ms, cfg)
        elif kind == Event.SAMPLE:
            k = ms[SAMPLES]
            for i in range(watch.shape[0]):
                samples[k, i] = lf[watch[i], QTOT]
            for i in range(watch_flows.shape[0]):
                flow_samples[k, i] = ff[watch_flows[i], RECV]
            ms[SAMPLES] = k + 1
            if k + 1 < max_samples:
                heap.push(ht, hk, ms, (k + 1) * cfg[Cfg.SAMPLE_DT], 0, Event.SAMPLE)
        if kick >= 0:
            link.start_next(kick, now, pk, lk, lf, pq, pf, fi, ff, qf, qi, sw, path_links, ht,
                            hk, ms, hist, cfg, rng)
        lookahead.next_hop_rows(hk, ms, pk, lk, lf, pq, pf, fi, ff, qi, path_links)
    return DONE, now


@njit(cache=True, _nrt=False)
def close(lk, lf, hist, now):
    """Close the books at the end time: charge queues and pauses still open to ``now``."""
    for lk_id in range(lk.shape[0]):
        charge(lf, hist, lk_id, now)
        if lk[lk_id, PAUSED] != 0:
            lf[lk_id, PAUSED_TIME] += now - lf[lk_id, PAUSE_SINCE]
