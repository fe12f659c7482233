"""EngineState: every array of a resumable run in one NamedTuple, and how it is built.

The compiled kernels (:mod:`hpnsim.engine.loop`) all take this one object. A NamedTuple of
arrays (not a jitclass) so that ``@njit(cache=True)`` still caches them; the scalars that
change (heap sizes, the epoch, the clock) live in the small ``count`` and ``clock`` arrays.
Task columns are fixed between structural changes (new tasks, a reroute); those rebuild the
state with :func:`extend_state`, which keeps every task's progress, the heaps, and the order
of every link's active list (so the solver sees its variables in the same order).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from hpnsim.engine.buffers import room
from hpnsim.engine.maxmin import make_workspace
from hpnsim.engine.taskgraph import GraphArrays

WAITING, STARTED, FLOWING, DONE = 0, 1, 2, 3

# slots of EngineState.count
HEAP_N, COMPLETIONS_N, NEXT_CAPACITY_EVENT, EPOCH, N_EVENTS, QUEUE_N, SAME_PRIORITY = range(7)
# slots of EngineState.clock
NOW, LAST_EVENT = 0, 1


class EngineState(NamedTuple):
    """The arrays of a run (tasks, links, heaps, counters), shared by all kernels.

    Examples
    --------
    >>> s = empty_state(np.array([10.0]), *no_capacity_events())
    >>> s.kind.size, s.cap.tolist(), int(s.count[HEAP_N])
    (0, [10.0], 0)
    """

    # task columns; ``release`` is the effective one: max(release, time the task joined)
    kind: np.ndarray
    amount: np.ndarray
    priority: np.ndarray
    weight: np.ndarray
    latency: np.ndarray
    release: np.ndarray
    ptr: np.ndarray           # task -> entries (links, usage), CSR
    links: np.ndarray
    usage: np.ndarray
    evar: np.ndarray          # entry -> its task
    dep_ptr: np.ndarray       # task -> the tasks it waits for
    deps: np.ndarray
    succ_ptr: np.ndarray      # task -> the tasks waiting for it
    succ: np.ndarray
    # task progress
    start: np.ndarray
    finish: np.ndarray
    remaining: np.ndarray     # bytes left as of last_t (lazily updated)
    status: np.ndarray
    rate: np.ndarray
    new_rate: np.ndarray
    last_t: np.ndarray
    version: np.ndarray       # invalidates stale projected completions
    waiting: np.ndarray       # unfinished dependencies
    is_new: np.ndarray
    vstamp: np.ndarray
    comp: np.ndarray
    # links: capacity, and the flowing entries of each as a swap-remove list inside a CSR
    cap: np.ndarray
    lptr: np.ndarray
    lcnt: np.ndarray
    lact: np.ndarray
    epos: np.ndarray          # entry -> its position in lact
    lstamp: np.ndarray
    queue: np.ndarray         # links changed in this epoch, to re-solve from
    # timed events (ready, flow start, delay end) and projected completions, min-heaps
    ht: np.ndarray
    ha: np.ndarray
    hb: np.ndarray
    ct: np.ndarray
    ca: np.ndarray
    cb: np.ndarray
    # capacity changes scheduled up front (sorted by time)
    ev_time: np.ndarray
    ev_link: np.ndarray
    ev_cap: np.ndarray
    count: np.ndarray
    clock: np.ndarray
    ws: tuple                 # solver workspace (maxmin.make_workspace)
    local: tuple              # a component's problem in its own numbering (local_scratch)


def no_capacity_events():
    """Empty (time, link, capacity) arrays.

    >>> [a.size for a in no_capacity_events()]
    [0, 0, 0]
    """
    return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0)


def empty_state(capacity: np.ndarray, ev_time, ev_link, ev_cap) -> EngineState:
    """A state with no task yet, at time 0 (tasks join with :func:`extend_state`).

    >>> s = empty_state(np.ones(3), *no_capacity_events())
    >>> s.lptr.tolist(), float(s.clock[NOW])
    ([0, 0, 0, 0], 0.0)
    """
    n_links = capacity.shape[0]
    f, i = np.zeros(0), np.zeros(0, dtype=np.int64)
    count = np.zeros(7, dtype=np.int64)
    count[SAME_PRIORITY] = 1
    return EngineState(
        kind=np.zeros(0, dtype=np.int8), amount=f, priority=i, weight=f, latency=f, release=f,
        ptr=np.zeros(1, dtype=np.int64), links=i, usage=f, evar=i,
        dep_ptr=np.zeros(1, dtype=np.int64), deps=i, succ_ptr=np.zeros(1, dtype=np.int64),
        succ=i, start=f, finish=f, remaining=f, status=np.zeros(0, dtype=np.int8), rate=f,
        new_rate=f, last_t=f, version=i, waiting=i, is_new=np.zeros(0, dtype=np.bool_),
        vstamp=i, comp=i, cap=capacity.copy(), lptr=np.zeros(n_links + 1, dtype=np.int64),
        lcnt=np.zeros(n_links, dtype=np.int64), lact=i, epos=i,
        lstamp=np.full(n_links, -1, dtype=np.int64), queue=np.empty(n_links, dtype=np.int64),
        ht=np.empty(1), ha=np.empty(1, dtype=np.int64), hb=np.empty(1, dtype=np.int64),
        ct=np.empty(16), ca=np.empty(16, dtype=np.int64), cb=np.empty(16, dtype=np.int64),
        ev_time=ev_time, ev_link=ev_link, ev_cap=ev_cap, count=count, clock=np.zeros(2),
        ws=make_workspace(n_links, 0), local=local_scratch(0, 0))


def local_scratch(n_tasks: int, n_entries: int) -> tuple:
    """Room for one component's max-min problem renumbered 0..k-1 with the links that more
    than one of its transfers cross (``loop.resolve``): row pointers, links, usage; per
    variable its weight, private-link bound, class, id and rate.

    >>> [a.size for a in local_scratch(2, 5)]
    [3, 5, 5, 2, 2, 2, 2, 2]
    """
    i, f = np.int64, np.float64
    return (np.zeros(n_tasks + 1, dtype=i), np.empty(n_entries, dtype=i),
            np.empty(n_entries, dtype=f), np.empty(n_tasks, dtype=f), np.empty(n_tasks, dtype=f),
            np.empty(n_tasks, dtype=i), np.empty(n_tasks, dtype=i), np.empty(n_tasks, dtype=f))


def _workspace_for(ws: tuple, n: int) -> tuple:
    """The solver workspace with room for ``n`` variables; the per-link scratch (and its
    invariants: local indices -1, stamps behind the round clock) is kept."""
    return ws[:10] + (np.empty(n), np.empty(n, dtype=np.int64), ws[12])


def grown(old: np.ndarray, n_new: int, fill, rooms: dict | None = None,
           name: str = "") -> np.ndarray:
    """``old`` followed by ``n_new`` values ``fill``: a new array, or with ``rooms`` the
    view of a buffer with room (:func:`~hpnsim.engine.buffers.room`) that ``old`` views.

    >>> rooms = {}; a = grown(np.zeros(2), 1, 5.0, rooms, "x"); a.tolist()
    [0.0, 0.0, 5.0]
    >>> b = grown(a, 2, [6.0, 7.0], rooms, "x"); b.tolist(), b.base is a.base
    ([0.0, 0.0, 5.0, 6.0, 7.0], True)
    """
    n = old.size + n_new
    if rooms is None:
        out = np.empty(n, dtype=old.dtype)
        out[:old.size] = old
    else:
        out = room(rooms, name, old, n)
    out[old.size:n] = fill
    return out[:n]


def _heap_copy(size: int, n_live: int, arrays):
    out = []
    for arr in arrays:
        new = np.empty(size, dtype=arr.dtype)
        new[:n_live] = arr[:n_live]
        out.append(new)
    return out


def _rows(old: EngineState, arrays: GraphArrays, routes: dict):
    """CSR (ptr, links, usage): old tasks keep their rows (or take their new route),
    tasks that join take theirs from the graph."""
    n_old = old.kind.size
    first = arrays.ptr[n_old]
    if not routes:
        ptr = np.concatenate([old.ptr, arrays.ptr[n_old + 1:] - first + old.ptr[-1]])
        return (ptr, np.concatenate([old.links, arrays.links[first:]]),
                np.concatenate([old.usage, arrays.usage[first:]]))
    counts = np.diff(old.ptr)
    links, usage, pos = [], [], 0
    for v in sorted(routes):
        links += [old.links[old.ptr[pos]:old.ptr[v]], routes[v][0]]
        usage += [old.usage[old.ptr[pos]:old.ptr[v]], routes[v][1]]
        counts[v] = routes[v][0].size
        pos = v + 1
    links += [old.links[old.ptr[pos]:], arrays.links[first:]]
    usage += [old.usage[old.ptr[pos]:], arrays.usage[first:]]
    ptr = np.zeros(arrays.kind.size + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.concatenate([counts, np.diff(arrays.ptr[n_old:])]))
    return ptr, np.concatenate(links).astype(np.int64), np.concatenate(usage)


@njit(cache=True)
def _relink(old_lptr, old_lcnt, old_lact, old_evar, old_ptr, ptr, links, moved, lptr,
            lcnt, lact, epos):
    """Per-link active lists in the new entry numbering, in the old order; the flowing
    transfers that ``moved`` to a new route go to the end of their new links' lists."""
    for lk in range(old_lcnt.shape[0]):
        for s in range(old_lptr[lk], old_lptr[lk] + old_lcnt[lk]):
            e_old = old_lact[s]
            v = old_evar[e_old]
            if moved[v]:
                continue
            e = ptr[v] + e_old - old_ptr[v]
            p = lptr[lk] + lcnt[lk]
            lact[p] = e
            epos[e] = p
            lcnt[lk] += 1
    for v in range(moved.shape[0]):
        if moved[v]:
            for e in range(ptr[v], ptr[v + 1]):
                lk = links[e]
                p = lptr[lk] + lcnt[lk]
                lact[p] = e
                epos[e] = p
                lcnt[lk] += 1


def extend_state(old: EngineState, arrays: GraphArrays, routes: dict, moved: np.ndarray,
                 now: float, *, rows_kept: bool = False,
                 rooms: dict | None = None) -> tuple[EngineState, np.ndarray, np.ndarray]:
    """The state with the tasks of ``arrays`` beyond ``old``'s joined at ``now``, and the
    rows of the tasks in ``routes`` ({task: (links, usage)}) replaced.

    ``moved`` flags (per old task) the flowing transfers whose route changed. Progress,
    link capacities, counters and heaps carry over. Returns the state and the tasks that
    are ready now with their ready times (the caller pushes them: see ``loop.push_ready``).

    ``rows_kept``: ``old``'s link rows are the first rows of ``arrays`` (no task was
    rerouted since the state was built from the graph); then the state takes the graph's
    rows as they are and numbers only the new entries. ``rooms``: buffers with room
    (:func:`~hpnsim.engine.buffers.room`) that the task columns grow in, kept by the
    caller from one call to the next, so that a state extended round after round (a
    probe) is not copied whole each time. Either way the state is the same, value for
    value.

    >>> from hpnsim.engine.taskgraph import TaskGraph
    >>> g = TaskGraph(); _ = g.add_transfer([0], 1.0, 5.0, release=1.0)
    >>> s = empty_state(np.ones(1), *no_capacity_events())
    >>> s, ready, at = extend_state(s, g.arrays(1), {}, np.zeros(0, bool), 2.0)
    >>> ready.tolist(), at.tolist()
    ([0], [2.0])
    """
    n_old, n = old.kind.size, arrays.kind.size
    n_new = n - n_old
    n_links = old.cap.shape[0]
    if rows_kept and not routes and old.links.size == arrays.ptr[n_old]:
        ptr, links, usage = arrays.ptr, arrays.links, arrays.usage
        e_old = old.links.size
        row = grown(old.evar, links.size - e_old, np.repeat(
            np.arange(n_old, n, dtype=np.int64), np.diff(ptr[n_old:])), rooms, "evar")
        lptr = old.lptr.copy()
        lptr[1:] += np.cumsum(np.bincount(links[e_old:], minlength=n_links))
    else:
        ptr, links, usage = _rows(old, arrays, routes)
        row = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
        lptr = np.zeros(n_links + 1, dtype=np.int64)
        lptr[1:] = np.cumsum(np.bincount(links, minlength=n_links))
    lcnt = np.zeros(n_links, dtype=np.int64)
    lact = np.empty(links.size, dtype=np.int64)
    epos = np.empty(links.size, dtype=np.int64)
    _relink(old.lptr, old.lcnt, old.lact, old.evar, old.ptr, ptr, links,
            np.concatenate([moved, np.zeros(n_new, dtype=np.bool_)]), lptr, lcnt, lact, epos)

    dep_ptr, deps = arrays.dep_ptr, arrays.deps
    dep_task = np.repeat(np.arange(n, dtype=np.int64), np.diff(dep_ptr))
    succ = dep_task[np.argsort(deps, kind="stable")]
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    succ_ptr[1:] = np.cumsum(np.bincount(deps, minlength=n))

    status = grown(old.status, n_new, WAITING, rooms, "status")
    finish = grown(old.finish, n_new, np.inf, rooms, "finish")
    release = grown(old.release, n_new, 0.0, rooms, "release")
    new_release = arrays.release[n_old:]
    release[n_old:] = np.where(new_release < now, now, new_release)
    # the tasks whose wait is (re)counted: those that join, and waiting ones given more deps
    n_deps = np.diff(dep_ptr)
    recount = np.zeros(n, dtype=np.bool_)
    recount[n_old:] = True
    recount[:n_old] = (n_deps[:n_old] != np.diff(old.dep_ptr)) & (old.waiting > 0)
    not_done = status[deps] != DONE
    waiting = grown(old.waiting, n_new, 0, rooms, "waiting")
    waiting[recount] = np.bincount(dep_task[not_done], minlength=n)[recount]
    ready = np.flatnonzero(recount & (waiting == 0))
    at = release[ready]
    if deps.size and ready.size:
        dep_finish = np.full(n, -np.inf)
        np.maximum.at(dep_finish, dep_task, finish[deps])
        at = np.maximum(at, dep_finish[ready])

    priority = grown(old.priority, n_new, arrays.priority[n_old:], rooms, "priority")
    count = old.count
    # the old tasks' classes were all equal when SAME_PRIORITY was last set (here or by a
    # priority change), and none changed since
    same = n == 0 or ((n_old == 0 or bool(count[SAME_PRIORITY]))
                      and bool(np.all(priority[n_old:] == priority[0])))
    count[SAME_PRIORITY] = same
    heap_size = 2 * n + 1
    ht, ha, hb = _heap_copy(heap_size, count[HEAP_N], (old.ht, old.ha, old.hb))
    ct, ca, cb = _heap_copy(max(2 * n + 16, old.ct.size), count[COMPLETIONS_N],
                            (old.ct, old.ca, old.cb))
    state = EngineState(
        kind=arrays.kind, amount=arrays.amount, priority=priority, weight=arrays.weight,
        latency=arrays.latency, release=release, ptr=ptr, links=links, usage=usage, evar=row,
        dep_ptr=dep_ptr, deps=deps, succ_ptr=succ_ptr, succ=succ,
        start=grown(old.start, n_new, np.inf, rooms, "start"), finish=finish,
        remaining=grown(old.remaining, n_new, arrays.amount[n_old:], rooms, "remaining"),
        status=status, rate=grown(old.rate, n_new, 0.0, rooms, "rate"),
        new_rate=grown(old.new_rate, n_new, 0.0, rooms, "new_rate"),
        last_t=grown(old.last_t, n_new, 0.0, rooms, "last_t"),
        version=grown(old.version, n_new, 0, rooms, "version"),
        waiting=waiting, is_new=grown(old.is_new, n_new, False, rooms, "is_new"),
        vstamp=grown(old.vstamp, n_new, -1, rooms, "vstamp"),
        comp=np.empty(n, dtype=np.int64),
        cap=old.cap, lptr=lptr, lcnt=lcnt, lact=lact, epos=epos, lstamp=old.lstamp,
        queue=old.queue, ht=ht, ha=ha, hb=hb, ct=ct, ca=ca, cb=cb, ev_time=old.ev_time,
        ev_link=old.ev_link, ev_cap=old.ev_cap, count=count, clock=old.clock,
        ws=old.ws if n == n_old else _workspace_for(old.ws, n),
        local=old.local if n == n_old and links.size == old.links.size
        else local_scratch(n, links.size))
    return state, ready, at

