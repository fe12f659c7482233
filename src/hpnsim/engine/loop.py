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

_READY, _FLOW, _DELAY_DONE = 0, 1, 2


@njit(cache=True, inline="always")
def _mark(lstamp, queue, count, lk):
    """Queue link ``lk`` for the next re-solve (once per epoch)."""
    if lstamp[lk] != count[EPOCH]:
        lstamp[lk] = count[EPOCH]
        queue[count[QUEUE_N]] = lk
        count[QUEUE_N] += 1


@njit(cache=True)
def mark_links(s, links):
    """Queue links changed between events; the next :func:`advance` re-solves them at now."""
    if s.count[QUEUE_N] == 0:
        s.count[EPOCH] += 1
    lstamp, queue, count = s.lstamp, s.queue, s.count
    for lk in links:
        _mark(lstamp, queue, count, lk)


@njit(cache=True)
def push_ready(s, tasks, times):
    """Tasks whose dependencies are all done become ready at ``times``."""
    hn = s.count[HEAP_N]
    ht, ha, hb = s.ht, s.ha, s.hb
    for i in range(tasks.shape[0]):
        hn = heap_push(ht, ha, hb, hn, times[i], tasks[i], _READY)
    s.count[HEAP_N] = hn


@njit(cache=True, inline="always")
def _is_stale(status, version, ca, cb, i):
    v = ca[i]
    return status[v] != FLOWING or cb[i] != version[v]


@njit(cache=True)
def next_event_time(s):
    """Time of the next event (``inf`` if none); drops stale completions on the way."""
    cn = s.count[COMPLETIONS_N]
    ct, ca, cb = s.ct, s.ca, s.cb
    while cn > 0 and _is_stale(s.status, s.version, ca, cb, 0):
        cn = heap_pop(ct, ca, cb, cn)
    s.count[COMPLETIONS_N] = cn
    t = np.inf
    if s.count[HEAP_N] > 0:
        t = s.ht[0]
    ei = s.count[NEXT_CAPACITY_EVENT]
    if ei < s.ev_time.shape[0] and s.ev_time[ei] < t:
        t = s.ev_time[ei]
    if cn > 0 and ct[0] < t:
        t = ct[0]
    return t


@njit(cache=True)
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
            hn = heap_push(ht, ha, hb, hn, max(release[u], t), u, _READY)
    return hn


@njit(cache=True)
def apply_capacity_events(s, t_lim):
    """Scheduled capacity changes due by ``t_lim``; returns whether any was applied."""
    ei = s.count[NEXT_CAPACITY_EVENT]
    progress = False
    while ei < s.ev_time.shape[0] and s.ev_time[ei] <= t_lim:
        lk = s.ev_link[ei]
        s.cap[lk] = s.ev_cap[ei]
        _mark(s.lstamp, s.queue, s.count, lk)
        ei += 1
        progress = True
    s.count[NEXT_CAPACITY_EVENT] = ei
    return progress


@njit(cache=True)
def complete_transfers(s, t_lim):
    """Transfers projected to finish by ``t_lim`` finish; returns whether any did."""
    ct, ca, cb, status, version = s.ct, s.ca, s.cb, s.status, s.version
    ptr, links, lptr, lcnt, lact, epos = s.ptr, s.links, s.lptr, s.lcnt, s.lact, s.epos
    lstamp, queue, count = s.lstamp, s.queue, s.count
    ht, ha, hb = s.ht, s.ha, s.hb
    cn = count[COMPLETIONS_N]
    hn = count[HEAP_N]
    progress = False
    while cn > 0:
        if _is_stale(status, version, ca, cb, 0):
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
            _mark(lstamp, queue, count, lk)
        hn = _finish(status, s.finish, s.remaining, s.succ_ptr, s.succ, s.waiting, s.release,
                     ht, ha, hb, hn, v, tc)
        progress = True
    count[COMPLETIONS_N] = cn
    count[HEAP_N] = hn
    return progress


@njit(cache=True)
def fire_timed_events(s, t_lim):
    """Task starts, flow starts (after the latency) and delay ends due by ``t_lim``."""
    ht, ha, hb, status, ptr, links = s.ht, s.ha, s.hb, s.status, s.ptr, s.links
    lptr, lcnt, lact, epos = s.lptr, s.lcnt, s.lact, s.epos
    lstamp, queue, count = s.lstamp, s.queue, s.count
    hn = count[HEAP_N]
    progress = False
    while hn > 0 and ht[0] <= t_lim:
        te, v, what = ht[0], ha[0], hb[0]
        hn = heap_pop(ht, ha, hb, hn)
        progress = True
        if what == _READY:
            s.start[v] = te
            status[v] = STARTED
            if s.kind[v] == DELAY:
                hn = heap_push(ht, ha, hb, hn, te + s.amount[v], v, _DELAY_DONE)
            else:
                hn = heap_push(ht, ha, hb, hn, te + s.latency[v], v, _FLOW)
        elif what == _FLOW and s.amount[v] > 0.0 and ptr[v + 1] > ptr[v]:
            status[v] = FLOWING
            s.last_t[v] = te
            s.rate[v] = 0.0
            s.is_new[v] = True
            for e in range(ptr[v], ptr[v + 1]):
                lk = links[e]
                p = lptr[lk] + lcnt[lk]
                lact[p] = e
                epos[e] = p
                lcnt[lk] += 1
                _mark(lstamp, queue, count, lk)
        else:  # a delay ends, or a transfer with nothing to move or no link to cross
            hn = _finish(status, s.finish, s.remaining, s.succ_ptr, s.succ, s.waiting,
                         s.release, ht, ha, hb, hn, v, te)
    count[HEAP_N] = hn
    return progress


@njit(cache=True)
def collect_component(s):
    """The flowing transfers connected to the queued links, into ``comp``; returns how many."""
    lstamp, queue, count, vstamp, comp = s.lstamp, s.queue, s.count, s.vstamp, s.comp
    ptr, links, lptr, lcnt, lact, evar = s.ptr, s.links, s.lptr, s.lcnt, s.lact, s.evar
    epoch = count[EPOCH]
    head = 0
    nc = 0
    while head < count[QUEUE_N]:
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
                _mark(lstamp, queue, count, links[e])
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
def resolve(s, t):
    """Re-solve the component of the queued links at time ``t``; reschedule completions
    of the transfers whose rate changed (their remaining bytes are brought to ``t``)."""
    nc = collect_component(s)
    if nc == 0:
        return
    members = s.comp[:nc]
    if not s.count[SAME_PRIORITY]:
        members = members[np.argsort(s.priority[members], kind="mergesort")]
    new_rate, rate, remaining, last_t = s.new_rate, s.rate, s.remaining, s.last_t
    is_new, version, ct, ca, cb = s.is_new, s.version, s.ct, s.ca, s.cb
    solve_subset(members, s.priority, s.ptr, s.links, s.usage, s.weight, s.cap, new_rate,
                 s.ws, SWITCH_AT)
    cn = s.count[COMPLETIONS_N]
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
                cn = _compact_completions(ct, ca, cb, s.status, version, cn)
            cn = heap_push(ct, ca, cb, cn, t + remaining[v] / r, v, version[v])
    s.count[COMPLETIONS_N] = cn


@njit(cache=True)
def process_event(s, t):
    """Everything due within ``REL_TOL`` of ``t``, then the re-solve of what it changed."""
    s.count[N_EVENTS] += 1
    s.count[EPOCH] += 1
    s.count[QUEUE_N] = 0
    t_lim = t + REL_TOL * abs(t)
    progress = True
    while progress:
        # all three run every round: each can make the others due
        changed = apply_capacity_events(s, t_lim)
        completed = complete_transfers(s, t_lim)
        fired = fire_timed_events(s, t_lim)
        progress = changed or completed or fired
    s.clock[LAST_EVENT] = t
    resolve(s, t)


@njit(cache=True)
def advance(s, until):
    """Re-solve what changed since the last event (at now), then process every event due
    at or before ``until``. The clock's NOW is left to the caller."""
    if s.count[QUEUE_N] > 0:
        resolve(s, s.clock[NOW])
    while True:
        t = next_event_time(s)
        if t == np.inf or t > until:
            break
        process_event(s, t)
