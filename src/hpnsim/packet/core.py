r"""The event loop of the packet engine: arrays in, per-flow finish times and port stats out.

Events (:class:`~hpnsim.packet.kinds.Event`) pop from one heap in (time, insertion) order;
each handler touches one link, flow or QP and pushes at most a few events. Packets live in
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

from hpnsim.packet import dcqcn, heap, link, pool
from hpnsim.packet.kinds import ECN_CE, N_PRIO, Cfg, Event, LinkStat, Pkt, Qp, QpInt
from hpnsim.packet.stats import N_BINS, charge

FLOW, HOP, SIZE, FLAGS = int(Pkt.FLOW), int(Pkt.HOP), int(Pkt.SIZE), int(Pkt.FLAGS)
PAUSED_TIME, FIRST_PAUSED, PAUSE_SINCE = (int(LinkStat.PAUSED_TIME), int(LinkStat.FIRST_PAUSED),
                                         int(LinkStat.PAUSE_SINCE))
LAST_CNP = int(Qp.LAST_CNP)
N_QPF, N_QPI, N_LS = len(Qp), len(QpInt), len(LinkStat)


@njit(cache=True)
def _activate(f, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc, hist, h, cfg):
    """Flow ``f`` may send: join its NIC port's round-robin list."""
    first = topo[6][topo[5][f]]
    lst[7][first] += 1
    link.rr_push(first, f, lst[6], fl[4])
    link.start_next(first, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc, hist, h, cfg)


@njit(cache=True)
def run(capacity, delay, link_buf, headroom, buf_shared, path_ptr, path_links, size, start,
        prio, qp, feedback, succ_ptr, succ, n_pred, qp_line, qp_flows, watch, watch_flows,
        max_samples, with_hist, cfg, seed, pool_size):
    """Simulate; see :func:`hpnsim.packet.api.simulate_flows` for the meaning of the inputs.

    Returns ``(finish, recv, cnps, ls, lc, hist, samples, flow_samples, counts)`` with
    ``counts = [events processed, end time, pool records]``.
    """
    n_links, n_flows, n_qps = capacity.shape[0], size.shape[0], qp_line.shape[0]
    header = cfg[Cfg.HEADER]
    # --- state -------------------------------------------------------------------------
    h = heap.new_heap(4 * n_links + 2 * n_flows + 4 * n_qps + 64)
    pk, pt, free = pool.new_pool(pool_size)
    lst = (np.full(n_links, -1, dtype=np.int64),                # busy: packet in service
           np.full(2 * n_links * N_PRIO, -1, dtype=np.int64),   # egress FIFO ends
           np.zeros(n_links * N_PRIO),                          # egress bytes per priority
           np.zeros(n_links),                                   # egress bytes per port
           np.zeros(n_links * N_PRIO, dtype=np.int64),          # paused by PFC
           np.full(n_links, np.inf),                            # pending LINK_WAKE time
           np.full(2 * n_links, -1, dtype=np.int64),            # round-robin list ends
           np.zeros(n_links, dtype=np.int64),                   # round-robin list length
           np.full(2 * n_links, -1, dtype=np.int64))            # in-flight FIFO ends
    sent, flow_next = np.zeros(n_flows), np.full(n_flows, -1, dtype=np.int64)
    fl = (size, prio, qp, sent, flow_next)
    topo = (capacity, delay, link_buf, headroom, buf_shared, path_ptr, path_links)
    sw = (np.zeros(buf_shared.shape[0]), np.zeros(n_links * N_PRIO),
          np.zeros(n_links * N_PRIO), np.zeros(n_links * N_PRIO, dtype=np.int64))
    qf = np.zeros((n_qps, N_QPF))
    qi = np.zeros((n_qps, N_QPI), dtype=np.int64)
    for q in range(n_qps):
        qf[q, Qp.RC] = qf[q, Qp.RT] = qf[q, Qp.LINE] = qp_line[q]
        qf[q, Qp.ALPHA] = 1.0                       # DCQCN paper: alpha starts at 1
        qf[q, Qp.LAST_CNP] = -np.inf
        qf[q, Qp.LAST_CUT] = -np.inf
    qp_left = qp_flows.copy()
    ls = np.zeros((n_links, N_LS))
    ls[:, LinkStat.FIRST_XOFF] = np.inf
    ls[:, LinkStat.FIRST_PAUSED] = np.inf
    lc = np.zeros((n_links, 5), dtype=np.int64)
    hist = np.zeros((n_links if with_hist else 0, N_BINS))
    finish = np.full(n_flows, np.inf)
    recv, cnps = np.zeros(n_flows), np.zeros(n_flows, dtype=np.int64)
    pending, released = n_pred.copy(), np.zeros(n_flows, dtype=np.bool_)
    samples = np.zeros((max_samples, watch.shape[0]))
    flow_samples = np.zeros((max_samples, watch_flows.shape[0]))
    n_samples = 0
    rng = np.array([np.uint64(seed) * np.uint64(0x2545F4914F6CDD1D) + np.uint64(1)])
    for f in range(n_flows):
        heap.push(h, start[f], f, Event.FLOW_START)
    if watch.shape[0] + watch_flows.shape[0] > 0 and max_samples > 0:
        heap.push(h, 0.0, 0, Event.SAMPLE)
    # --- loop ----------------------------------------------------------------------------
    n_done, events, now = 0, 0, 0.0
    while h[3][0] > 0 and n_done < n_flows:
        if h[3][0] + 16 > h[0].shape[0]:
            h = heap.reserve(h, 16)
        if free[1] < 4:
            pk, pt = pool.reserve(pk, pt, free, 4)
        t, ident, kind = heap.pop(h)
        if t > cfg[Cfg.T_END]:
            break
        now = t
        events += 1
        if kind == Event.TX_DONE:
            link.tx_done(ident, now, pk, pt, topo, lst, ls, h)
            link.start_next(ident, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc, hist, h, cfg)
        elif kind == Event.ARRIVE:
            p = link.arrive(ident, pk, pt, lst, h)
            f = pk[p, FLOW]
            hop = pk[p, HOP] + 1
            if path_ptr[f] + hop < path_ptr[f + 1]:
                nxt = path_links[path_ptr[f] + hop]
                pk[p, HOP] = hop
                if link.enqueue(nxt, p, ident, now, pk, topo, lst, fl, sw, ls, lc, hist, h,
                                cfg, rng):
                    link.start_next(nxt, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc,
                                    hist, h, cfg)
                else:
                    pool.release(pk, free, p)
                continue
            recv[f] += pk[p, SIZE] - header                      # delivered
            q = qp[f]
            if (pk[p, FLAGS] & ECN_CE) and cfg[Cfg.CC] > 0 and \
                    now - qf[q, LAST_CNP] >= cfg[Cfg.CNP_DT]:    # notification point
                qf[q, LAST_CNP] = now
                cnps[f] += 1
                heap.push(h, now + feedback[f], q, Event.CNP_ARRIVE)
            pool.release(pk, free, p)
            if recv[f] >= size[f]:
                finish[f] = now
                n_done += 1
                qp_left[q] -= 1
                for e in range(succ_ptr[f], succ_ptr[f + 1]):
                    g = succ[e]
                    pending[g] -= 1
                    if pending[g] == 0 and released[g]:
                        _activate(g, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc, hist,
                                  h, cfg)
        elif kind == Event.LINK_WAKE:
            if lst[5][ident] == now:
                lst[5][ident] = np.inf
                link.start_next(ident, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc, hist,
                                h, cfg)
        elif kind == Event.FLOW_START:
            released[ident] = True                # a zero-byte flow sends one header
            if pending[ident] == 0:
                _activate(ident, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc, hist, h, cfg)
        elif kind == Event.CNP_ARRIVE:
            dcqcn.on_cnp(qf, qi, ident, now, cfg, h)
        elif kind == Event.ALPHA_TIMER:
            dcqcn.on_alpha_timer(qf, qi, ident, now, cfg, h, qp_left[ident] > 0)
        elif kind == Event.INC_TIMER:
            dcqcn.on_inc_timer(qf, qi, ident, now, cfg, h, qp_left[ident] > 0)
        elif kind == Event.PAUSE_ON:
            if lst[4][ident] == 0:
                lk = ident // N_PRIO
                lst[4][ident] = 1
                if lc[lk, 4] == 0:
                    ls[lk, PAUSE_SINCE] = now
                lc[lk, 4] += 1
                ls[lk, FIRST_PAUSED] = min(ls[lk, FIRST_PAUSED], now)
        elif kind == Event.PAUSE_OFF:
            if lst[4][ident] == 1:
                lk = ident // N_PRIO
                lst[4][ident] = 0
                lc[lk, 4] -= 1
                if lc[lk, 4] == 0:
                    ls[lk, PAUSED_TIME] += now - ls[lk, PAUSE_SINCE]
                link.start_next(lk, now, pk, free, topo, lst, fl, sw, qf, qi, ls, lc, hist, h,
                                cfg)
        elif kind == Event.SAMPLE:
            for i in range(watch.shape[0]):
                samples[n_samples, i] = lst[3][watch[i]]
            for i in range(watch_flows.shape[0]):
                flow_samples[n_samples, i] = recv[watch_flows[i]]
            n_samples += 1
            if n_samples < max_samples:
                heap.push(h, n_samples * cfg[Cfg.SAMPLE_DT], 0, Event.SAMPLE)
    # --- close the books at the end time ---------------------------------------------------
    for lk in range(n_links):
        charge(ls, hist, lst[3], lk, now)
        if lc[lk, 4] > 0:
            ls[lk, PAUSED_TIME] += now - ls[lk, PAUSE_SINCE]
    counts = np.array([float(events), now, float(pk.shape[0])])
    return (finish, recv, cnps, ls, lc, hist, samples[:n_samples], flow_samples[:n_samples],
            counts)
