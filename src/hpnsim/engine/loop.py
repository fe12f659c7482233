"""The compiled event loop: small kernels over one :class:`~hpnsim.engine.state.EngineState`.

An *event* is everything due within a tight relative window (``REL_TOL``) of the earliest
pending time: scheduled capacity changes, transfer completions, and timed task events
(ready, bytes start to flow after the latency, a delay ends). After an event only the
flowing transfers connected (through shared links) to what changed are re-solved: max-min
rates decompose over connected components, so the others keep their exact rates. Remaining
bytes are brought up to date lazily, only when a transfer's rate changes: stopping between
events touches nothing, so a run in pieces equals one run bit for bit.

>>> from hpnsim.engine.state import empty_state, extend_state, no_capacity_events
>>> from hpnsim.engine.taskgraph import TaskGraph
>>> g = TaskGraph(); _ = g.add_transfer([0], 1.0, 30.0); _ = g.add_transfer([0], 1.0, 10.0)
>>> s, ready, at = extend_state(empty_state(np.array([2.0]), *no_capacity_events()),
...                             g.arrays(1), {}, np.zeros(0, bool), 0.0)
>>> push_ready(s, ready, at); advance(s, np.inf)
>>> s.finish.tolist()
[20.0, 10.0]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.engine.heap import heap_pop, heap_push
from hpnsim.engine.heapfill import _two_sum
from hpnsim.engine.maxmin import SWITCH_AT, solve_subset
from hpnsim.engine.state import (
    COMPLETIONS_N,
    DONE,
    EPOCH,
    FLOWING,
    HEAP_N,
    LAST_EVENT,
    N_EVENTS,
    NEXT_CAPACITY_EVENT,
    NOW,
    QUEUE_N,
    SAME_PRIORITY,
    STARTED,
)
from hpnsim.engine.taskgraph import DELAY

#: completions closer than this (relative) to the event time are handled in the same event
REL_TOL = 1e-12

# passed to heap_push as np.int64(...): numba types a bare constant argument as a literal
# and would compile heap_push once per constant (issue 21, cold start)
_READY, _FLOW, _DELAY_DONE = 0, 1, 2


# mark_links and push_ready are called from Python between events: they hand their kernels
# the few arrays they touch, not the state (a kernel taking the 46-array state compiles a
# wrapper that unboxes all of it, about 0.4 s on a fresh install, and unboxes it per call)


def mark_links(s, links):
    """Queue links changed between events; the next :func:`advance` re-solves them at now."""
    _mark_links(s.lstamp, s.queue, s.count, links)


@njit(cache=True)
def _mark_links(lstamp, queue, count, links):
    if count[QUEUE_N] == 0:
        count[EPOCH] += 1
    epoch, qn = count[EPOCH], count[QUEUE_N]
    for lk in links:
        if lstamp[lk] != epoch:
            lstamp[lk] = epoch
            queue[qn] = lk
            qn += 1
    count[QUEUE_N] = qn


def push_ready(s, tasks, times):
    """Tasks whose dependencies are all done become ready at ``times``."""
    _push_ready(s.ht, s.ha, s.hb, s.count, tasks, times)


@njit(cache=True)
def _push_ready(ht, ha, hb, count, tasks, times):
    hn = count[HEAP_N]
    for i in range(tasks.shape[0]):
        hn = heap_push(ht, ha, hb, hn, times[i], tasks[i], np.int64(_READY))
    count[HEAP_N] = hn


@njit(cache=True, inline="always")
def _is_stale(status, version, ca, cb, i):
    v = ca[i]
    return status[v] != FLOWING or cb[i] != version[v]


@njit(cache=True, inline="always")
def next_event_time(s):
    """Time of the next event (``inf`` if none); drops stale completions on the way."""
    # every kernel takes its arrays from the state in its first lines and never again:
    # then numba's reference counting of the state's arrays is pruned away
    count, ct, ca, cb, status, version = s.count, s.ct, s.ca, s.cb, s.status, s.version
    ht, ev_time = s.ht, s.ev_time
    cn = count[COMPLETIONS_N]
    while cn > 0 and _is_stale(status, version, ca, cb, 0):
        cn = heap_pop(ct, ca, cb, cn)
    count[COMPLETIONS_N] = cn
    t = np.inf
    if count[HEAP_N] > 0:
        t = ht[0]
    ei = count[NEXT_CAPACITY_EVENT]
    if ei < ev_time.shape[0] and ev_time[ei] < t:
        t = ev_time[ei]
    if cn > 0 and ct[0] < t:
        t = ct[0]
    return t


@njit(cache=True, inline="always")
def _finish(status, finish, remaining, succ_ptr, succ, waiting, release, ht, ha, hb, hn,
            v, t):
    """Task ``v`` is done at ``t``; successors left with nothing to wait for become ready.
    Returns the timed heap's new size."""
    status[v] = DONE
    finish[v] = t
    remaining[v] = 0.0
    for k in range(succ_ptr[v], succ_ptr[v + 1]):
        u = succ[k]
        waiting[u] -= 1
        if waiting[u] == 0:
            hn = heap_push(ht, ha, hb, hn, max(release[u], t), u, np.int64(_READY))
    return hn


@njit(cache=True, inline="always")
def apply_capacity_events(s, t_lim):
    """Scheduled capacity changes due by ``t_lim``; returns whether any was applied."""
    count, ev_time = s.count, s.ev_time
    ev_link, ev_cap, cap, lstamp, queue = s.ev_link, s.ev_cap, s.cap, s.lstamp, s.queue
    ei = count[NEXT_CAPACITY_EVENT]
    if ei == ev_time.shape[0] or ev_time[ei] > t_lim:
        return False
    epoch, qn = count[EPOCH], count[QUEUE_N]
    while ei < ev_time.shape[0] and ev_time[ei] <= t_lim:
        lk = ev_link[ei]
        cap[lk] = ev_cap[ei]
        if lstamp[lk] != epoch:  # queue each changed link once per event
            lstamp[lk] = epoch
            queue[qn] = lk
            qn += 1
        ei += 1
    count[NEXT_CAPACITY_EVENT] = ei
    count[QUEUE_N] = qn
    return True


@njit(cache=True, inline="always")
def complete_transfers(s, t_lim):
    """Transfers projected to finish by ``t_lim`` finish; returns whether any did."""
    count, ct = s.count, s.ct
    ca, cb, status, version = s.ca, s.cb, s.status, s.version
    ptr, links, lptr, lcnt, lact, epos = s.ptr, s.links, s.lptr, s.lcnt, s.lact, s.epos
    lstamp, queue = s.lstamp, s.queue
    ht, ha, hb = s.ht, s.ha, s.hb
    finish, remaining, succ_ptr, succ = s.finish, s.remaining, s.succ_ptr, s.succ
    waiting, release = s.waiting, s.release
    if count[COMPLETIONS_N] == 0 or ct[0] > t_lim:  # (stale entries at the top are rare)
        return False
    cn, hn = count[COMPLETIONS_N], count[HEAP_N]
    epoch, qn = count[EPOCH], count[QUEUE_N]
    progress = False
    while cn > 0:
        if status[ca[0]] != FLOWING or cb[0] != version[ca[0]]:  # stale
            cn = heap_pop(ct, ca, cb, cn)
            continue
        if ct[0] > t_lim:
            break
        v, tc = ca[0], ct[0]
        cn = heap_pop(ct, ca, cb, cn)
        for e in range(ptr[v], ptr[v + 1]):
            lk = links[e]
            p = epos[e]
            moved = lact[lptr[lk] + lcnt[lk] - 1]
            lact[p] = moved
            epos[moved] = p
            lcnt[lk] -= 1
            if lstamp[lk] != epoch:
                lstamp[lk] = epoch
                queue[qn] = lk
                qn += 1
        hn = _finish(status, finish, remaining, succ_ptr, succ, waiting, release, ht, ha, hb,
                     hn, v, tc)
        progress = True
    count[COMPLETIONS_N], count[HEAP_N], count[QUEUE_N] = cn, hn, qn
    return progress


@njit(cache=True, inline="always")
def fire_timed_events(s, t_lim):
    """Task starts, flow starts (after the latency) and delay ends due by ``t_lim``."""
    count, ht = s.count, s.ht
    ha, hb, status, ptr, links = s.ha, s.hb, s.status, s.ptr, s.links
    lptr, lcnt, lact, epos, lstamp, queue = s.lptr, s.lcnt, s.lact, s.epos, s.lstamp, s.queue
    start, kind, amount, latency, last_t, rate = s.start, s.kind, s.amount, s.latency, \
        s.last_t, s.rate
    is_new, finish, remaining, succ_ptr, succ = s.is_new, s.finish, s.remaining, s.succ_ptr, \
        s.succ
    waiting, release = s.waiting, s.release
    hn = count[HEAP_N]
    if hn == 0 or ht[0] > t_lim:
        return False
    epoch, qn = count[EPOCH], count[QUEUE_N]
    progress = False
    while hn > 0 and ht[0] <= t_lim:
        te, v, what = ht[0], ha[0], hb[0]
        hn = heap_pop(ht, ha, hb, hn)
        progress = True
        if what == _READY:
            start[v] = te
            status[v] = STARTED
            if kind[v] == DELAY:
                hn = heap_push(ht, ha, hb, hn, te + amount[v], v, np.int64(_DELAY_DONE))
            else:
                hn = heap_push(ht, ha, hb, hn, te + latency[v], v, np.int64(_FLOW))
        elif what == _FLOW and amount[v] > 0.0 and ptr[v + 1] > ptr[v]:
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
        else:  # a delay ends, or a transfer with nothing to move or no link to cross
            hn = _finish(status, finish, remaining, succ_ptr, succ, waiting, release, ht, ha,
                         hb, hn, v, te)
    count[HEAP_N], count[QUEUE_N] = hn, qn
    return progress


@njit(cache=True, inline="always")
def collect_component(s):
    """The flowing transfers connected to the queued links, into ``comp``; returns how many."""
    lstamp, queue, count, vstamp, comp = s.lstamp, s.queue, s.count, s.vstamp, s.comp
    ptr, links, lptr, lcnt, lact, evar = s.ptr, s.links, s.lptr, s.lcnt, s.lact, s.evar
    epoch, qn = count[EPOCH], count[QUEUE_N]
    head = 0
    nc = 0
    while head < qn:
        lk = queue[head]
        head += 1
        for k in range(lptr[lk], lptr[lk] + lcnt[lk]):
            v = evar[lact[k]]
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
    count[QUEUE_N] = 0
    return nc


@njit(cache=True)
def _compact_completions(ct, ca, cb, status, version, cn):
    """Drop stale projected completions and re-heap the rest in place; returns the size.

    At most one entry per flowing transfer is live, so this frees at least half the heap.
    """
    k = 0
    for i in range(cn):
        if not _is_stale(status, version, ca, cb, i):
            ct[k], ca[k], cb[k] = ct[i], ca[i], cb[i]
            k += 1
    for i in range(k):  # each push reads entry i before it may be overwritten
        heap_push(ct, ca, cb, i, ct[i], ca[i], cb[i])
    return k


@njit(cache=True)
def _by_priority(members, priority):
    """``members`` stably sorted by ``priority[members]`` (bottom-up merge sort).

    The order of ``np.argsort(priority[members], kind="mergesort")``, without compiling
    numba's generic sort on a fresh install (about a second, issue 21).
    """
    n = members.shape[0]
    src = members.copy()
    dst = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                # the left run wins ties: stable
                if j >= hi or (i < mid and priority[src[i]] <= priority[src[j]]):
                    dst[k] = src[i]
                    i += 1
                else:
                    dst[k] = src[j]
                    j += 1
        src, dst = dst, src
        width *= 2
    return src


@njit(cache=True)
def _solve_shared(members, priority, ptr, links, usage, weight, cap, lcnt, rate, ws, local):
    """Max-min rates of ``members`` (a closed component, sorted by class) into ``rate``,
    solved on the links that two or more of them cross.

    A link only one flowing transfer crosses (``lcnt == 1``) keeps the share
    ``capacity / (usage * weight)`` through the whole solve: it is folded into that
    variable's ``bound`` (computed exactly as the full solve computes the share) and left
    out of the rounds, which then scan only the shared entries (about half of a probe's).
    The rates are bit for bit those of ``solve_subset`` on the full rows.
    """
    lp, ll, lu, lw, lb, lprio, lvars, lrate = local
    nc = members.shape[0]
    k = 0
    for i in range(nc):
        v = members[i]
        w = weight[v]
        b = np.inf
        for e in range(ptr[v], ptr[v + 1]):
            lk = links[e]
            if lcnt[lk] == 1:
                d, err = _two_sum(0.0, usage[e] * w)
                share = max(cap[lk] + 0.0, 0.0) / (d + (0.0 + err))
                if share < b:
                    b = share
            else:
                ll[k] = lk
                lu[k] = usage[e]
                k += 1
        lp[i + 1] = k
        lw[i], lb[i], lprio[i], lvars[i] = w, b, priority[v], i
    solve_subset(lvars[:nc], lprio, lp, ll, lu, lw, cap, lrate, ws, SWITCH_AT, lb)
    for i in range(nc):
        rate[members[i]] = lrate[i]


@njit(cache=True, inline="always")
def resolve(s, t, nc):
    """Re-solve the ``nc`` transfers collected in ``comp`` at time ``t``; reschedule the
    completions of those whose rate changed (their remaining bytes are brought to ``t``)."""
    comp, count, priority, ptr, links, usage = s.comp, s.count, s.priority, s.ptr, s.links, \
        s.usage
    weight, cap, ws, status, lcnt, local = s.weight, s.cap, s.ws, s.status, s.lcnt, s.local
    new_rate, rate, remaining, last_t = s.new_rate, s.rate, s.remaining, s.last_t
    is_new, version, ct, ca, cb = s.is_new, s.version, s.ct, s.ca, s.cb
    if nc == 0:
        return
    members = comp[:nc]
    if not count[SAME_PRIORITY]:
        members = _by_priority(members, priority)
    if nc <= SWITCH_AT:     # the rounds never hand over to the heap fill (no bounds there)
        _solve_shared(members, priority, ptr, links, usage, weight, cap, lcnt, new_rate, ws,
                      local)
    else:
        solve_subset(members, priority, ptr, links, usage, weight, cap, new_rate, ws,
                     SWITCH_AT, np.full(ptr.shape[0] - 1, np.inf))
    cn = count[COMPLETIONS_N]
    for i in range(nc):
        v = members[i]
        r = new_rate[v]
        if r == rate[v] and not is_new[v]:
            continue
        is_new[v] = False
        left = remaining[v] - rate[v] * (t - last_t[v])
        remaining[v] = left if left > 0.0 else 0.0
        last_t[v] = t
        rate[v] = r
        version[v] += 1
        if r > 0.0:
            if cn == ct.shape[0]:
                cn = _compact_completions(ct, ca, cb, status, version, cn)
            cn = heap_push(ct, ca, cb, cn, t + remaining[v] / r, v, version[v])
    count[COMPLETIONS_N] = cn


@njit(cache=True)
def advance(s, until):
    """Re-solve what changed since the last event (at now), then process every event due
    at or before ``until``: everything within ``REL_TOL`` of the earliest pending time is
    one event, followed by one re-solve of what it changed. NOW is left to the caller."""
    count, clock, ev_time, ht, ct = s.count, s.clock, s.ev_time, s.ht, s.ct
    # one call site each for collect_component and resolve (inlined kernels: every call
    # site is compiled anew): the re-solve at now, then the one after each event
    t = clock[NOW]
    changed = count[QUEUE_N] > 0
    while True:
        if changed:
            resolve(s, t, collect_component(s))
        t = next_event_time(s)
        if t == np.inf or t > until:
            break
        count[N_EVENTS] += 1
        count[EPOCH] += 1
        count[QUEUE_N] = 0
        t_lim = t + REL_TOL * abs(t)
        progress = True
        while progress:
            # all three run every round (each can make the others due), but only when
            # something of theirs is due: a kernel call is not free
            ei = count[NEXT_CAPACITY_EVENT]
            applied = completed = fired = False
            if ei < ev_time.shape[0] and ev_time[ei] <= t_lim:
                applied = apply_capacity_events(s, t_lim)
            if count[COMPLETIONS_N] > 0 and ct[0] <= t_lim:
                completed = complete_transfers(s, t_lim)
            if count[HEAP_N] > 0 and ht[0] <= t_lim:
                fired = fire_timed_events(s, t_lim)
            progress = applied or completed or fired
        clock[LAST_EVENT] = t
        changed = True
