"""The compiled event loop: task starts, latency ends, delays, completions, capacity changes.

Everything that happens within a tight relative time window (``REL_TOL``) is one event. After
an event only the variables connected (through shared links) to what changed are re-solved:
max-min rates decompose over connected components, so the others keep their exact rates.
Per link, the flowing variables are kept in a swap-remove list for O(1) updates.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.engine.heap import heap_pop as _pop
from hpnsim.engine.heap import heap_push as _push
from hpnsim.engine.maxmin import SWITCH_AT, solve_subset

#: completions closer than this (relative) to the event time are handled in the same event
REL_TOL = 1e-12

WAITING, STARTED, FLOWING, DONE = 0, 1, 2, 3
_READY, _FLOW, _DELAY_DONE = 0, 1, 2


@njit(cache=True)
def run_loop(kind, amount, priority, weight, latency, release, ptr, links, usage,
             succ_ptr, succ, indeg, capacity, ev_time, ev_link, ev_cap, n_links, same_priority, ws):
    """Simulate; returns (start, finish, remaining bytes, status, events processed).

    ``ws`` is the solver workspace (:func:`hpnsim.engine.maxmin.make_workspace`).
    """
    n = kind.shape[0]
    nnz = links.shape[0]
    start = np.full(n, np.inf)
    finish = np.full(n, np.inf)
    remaining = amount.copy()
    status = np.zeros(n, dtype=np.int8)
    rate = np.zeros(n)
    new_rate = np.zeros(n)
    last_t = np.zeros(n)
    version = np.zeros(n, dtype=np.int64)
    waiting = indeg.copy()
    cap = capacity.copy()

    # link -> flowing entries, swap-remove lists inside a static CSR
    evar = np.empty(nnz, dtype=np.int64)
    for v in range(n):
        for e in range(ptr[v], ptr[v + 1]):
            evar[e] = v
    lptr = np.zeros(n_links + 1, dtype=np.int64)
    for e in range(nnz):
        lptr[links[e] + 1] += 1
    for lk in range(n_links):
        lptr[lk + 1] += lptr[lk]
    lcnt = np.zeros(n_links, dtype=np.int64)
    lact = np.empty(nnz, dtype=np.int64)
    epos = np.empty(nnz, dtype=np.int64)

    # timed events (task starts, latency ends, delay ends): at most two live per task
    ht = np.empty(2 * n + 1)
    ha = np.empty(2 * n + 1, dtype=np.int64)
    hb = np.empty(2 * n + 1, dtype=np.int64)
    hn = 0
    # projected completions, lazily invalidated by a version number
    ccap = 2 * n + 16
    ct = np.empty(ccap)
    ca = np.empty(ccap, dtype=np.int64)
    cb = np.empty(ccap, dtype=np.int64)
    cn = 0

    lstamp = np.full(n_links, -1, dtype=np.int64)
    vstamp = np.full(n, -1, dtype=np.int64)
    queue = np.empty(n_links, dtype=np.int64)
    comp = np.empty(n, dtype=np.int64)
    is_new = np.zeros(n, dtype=np.bool_)

    for v in range(n):
        if waiting[v] == 0:
            hn = _push(ht, ha, hb, hn, release[v], v, _READY)

    n_events = 0
    ei = 0
    n_ev = ev_time.shape[0]
    epoch = 0
    t_end = 0.0
    while True:
        while cn > 0 and (status[ca[0]] != FLOWING or cb[0] != version[ca[0]]):
            cn = _pop(ct, ca, cb, cn)
        t = np.inf
        if hn > 0:
            t = ht[0]
        if ei < n_ev and ev_time[ei] < t:
            t = ev_time[ei]
        if cn > 0 and ct[0] < t:
            t = ct[0]
        if t == np.inf:
            break
        t_end = t
        t_lim = t + REL_TOL * abs(t)
        n_events += 1
        epoch += 1
        qn = 0
        progress = True
        while progress:
            progress = False
            while ei < n_ev and ev_time[ei] <= t_lim:
                lk = ev_link[ei]
                cap[lk] = ev_cap[ei]
                if lstamp[lk] != epoch:
                    lstamp[lk] = epoch
                    queue[qn] = lk
                    qn += 1
                ei += 1
                progress = True
            while cn > 0:
                v = ca[0]
                if status[v] != FLOWING or cb[0] != version[v]:
                    cn = _pop(ct, ca, cb, cn)
                    continue
                if ct[0] > t_lim:
                    break
                tc = ct[0]
                cn = _pop(ct, ca, cb, cn)
                status[v] = DONE
                finish[v] = tc
                remaining[v] = 0.0
                for e in range(ptr[v], ptr[v + 1]):
                    lk = links[e]
                    p = epos[e]
                    last = lptr[lk] + lcnt[lk] - 1
                    moved = lact[last]
                    lact[p] = moved
                    epos[moved] = p
                    lcnt[lk] -= 1
                    if lstamp[lk] != epoch:
                        lstamp[lk] = epoch
                        queue[qn] = lk
                        qn += 1
                for s in range(succ_ptr[v], succ_ptr[v + 1]):
                    u = succ[s]
                    waiting[u] -= 1
                    if waiting[u] == 0:
                        hn = _push(ht, ha, hb, hn, max(release[u], tc), u, _READY)
                progress = True
            while hn > 0 and ht[0] <= t_lim:
                te, v, what = ht[0], ha[0], hb[0]
                hn = _pop(ht, ha, hb, hn)
                progress = True
                if what == _READY:
                    start[v] = te
                    status[v] = STARTED
                    if kind[v] == 1:
                        hn = _push(ht, ha, hb, hn, te + amount[v], v, _DELAY_DONE)
                    else:
                        hn = _push(ht, ha, hb, hn, te + latency[v], v, _FLOW)
                    continue
                if what == _FLOW and amount[v] > 0.0 and ptr[v + 1] > ptr[v]:
                    status[v] = FLOWING
                    last_t[v] = te
                    rate[v] = 0.0
                    is_new[v] = True
                    for e in range(ptr[v], ptr[v + 1]):
                        lk = links[e]
                        p = lptr[lk] + lcnt[lk]
                        lact[p] = e
                        epos[e] = p
                        lcnt[lk] += 1
                        if lstamp[lk] != epoch:
                            lstamp[lk] = epoch
                            queue[qn] = lk
                            qn += 1
                    continue
                # a delay ends, or a transfer with nothing to move or no link to cross
                status[v] = DONE
                finish[v] = te
                remaining[v] = 0.0
                for s in range(succ_ptr[v], succ_ptr[v + 1]):
                    u = succ[s]
                    waiting[u] -= 1
                    if waiting[u] == 0:
                        hn = _push(ht, ha, hb, hn, max(release[u], te), u, _READY)

        # the flowing variables connected to the changed links
        head = 0
        nc = 0
        while head < qn:
            lk = queue[head]
            head += 1
            for s in range(lptr[lk], lptr[lk] + lcnt[lk]):
                v = evar[lact[s]]
                if vstamp[v] == epoch:
                    continue
                vstamp[v] = epoch
                comp[nc] = v
                nc += 1
                for e in range(ptr[v], ptr[v + 1]):
                    l2 = links[e]
                    if lstamp[l2] != epoch:
                        lstamp[l2] = epoch
                        queue[qn] = l2
                        qn += 1
        if nc == 0:
            continue
        members = comp[:nc]
        if not same_priority:
            members = members[np.argsort(priority[members], kind="mergesort")]
        solve_subset(members, priority, ptr, links, usage, weight, cap, new_rate, ws,
                     SWITCH_AT)
        for i in range(nc):
            v = members[i]
            r = new_rate[v]
            if r == rate[v] and not is_new[v]:
                continue
            is_new[v] = False
            remaining[v] -= rate[v] * (t - last_t[v])
            if remaining[v] < 0.0:
                remaining[v] = 0.0
            last_t[v] = t
            rate[v] = r
            version[v] += 1
            if r > 0.0:
                if cn == ccap:
                    ccap *= 2
                    ct2 = np.empty(ccap)
                    ca2 = np.empty(ccap, dtype=np.int64)
                    cb2 = np.empty(ccap, dtype=np.int64)
                    ct2[:cn] = ct[:cn]
                    ca2[:cn] = ca[:cn]
                    cb2[:cn] = cb[:cn]
                    ct, ca, cb = ct2, ca2, cb2
                cn = _push(ct, ca, cb, cn, t + remaining[v] / r, v, version[v])

    for v in range(n):
        if status[v] == FLOWING:
            remaining[v] -= rate[v] * (t_end - last_t[v])
    return start, finish, remaining, status, n_events
