"""Simulation: a resumable run of a TaskGraph that can stop, change, and continue.

``run(until)`` processes events up to a time; between runs the caller may change link
capacities, move a transfer to another path, change priorities, or add tasks to the graph
(a job arriving). Changes take effect at ``now``: the transfers they touch have their
remaining bytes brought to ``now`` and their connected component is re-solved there.
"""

from __future__ import annotations

import math

import numpy as np

from hpnsim.engine import loop
from hpnsim.engine.simresult import SimResult, capacity_events_arrays
from hpnsim.engine.state import (
    DONE,
    FLOWING,
    LAST_EVENT,
    N_EVENTS,
    NOW,
    SAME_PRIORITY,
    empty_state,
    extend_state,
    grown,
)
from hpnsim.engine.taskgraph import TRANSFER, TaskGraph
from hpnsim.engine.validate import check_capacity, merge_rows, priority_column
from hpnsim.errors import InputError


def _task_ids(tasks, n: int, field: str = "tasks") -> np.ndarray:
    """Task ids as int64, each an integer in [0, n), else an InputError naming ``field``."""
    arr = np.asarray(tasks)
    if arr.dtype == object or arr.dtype.kind not in "iu":
        items = arr.ravel().tolist()
        bad = [t for t in items if isinstance(t, bool) or not isinstance(t, int)]
        if bad:
            raise InputError(field, f"task ids are integers, got {bad[0]!r}")
    arr = arr.astype(np.int64).ravel()
    out = (arr < 0) | (arr >= n)
    if out.any():
        raise InputError(field, f"unknown task {int(arr[out][0])} (the graph has {n} tasks)")
    return arr


def _link_ids(links, n_links: int) -> np.ndarray:
    """Link ids as int64, each an integer in [0, n_links), else an InputError."""
    arr = np.asarray(links).ravel()
    if arr.size and arr.dtype.kind not in "iu":
        raise InputError("links", f"link ids are integers, got {arr.tolist()!r}")
    out = (arr < 0) | (arr >= n_links)
    if out.any():
        raise InputError("links", f"unknown link id {int(arr[out][0])} "
                                  f"(the fabric has {n_links} links)")
    return arr.astype(np.int64)


def _link_capacities(capacity, ids: np.ndarray) -> np.ndarray:
    """One finite capacity >= 0 per link id (a scalar is broadcast), else an InputError."""
    try:
        values = np.asarray(capacity, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError("capacity", f"must be numbers, got {capacity!r}") from exc
    if values.ndim and values.shape != ids.shape:
        raise InputError("capacity", f"needs one value per link ({ids.size}), "
                                     f"got {values.size}")
    values = np.broadcast_to(values, ids.shape)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError("capacity", f"link {int(ids[i])}: must be finite and >= 0, "
                                     f"got {float(values[i])!r}")
    return values


class Simulation:
    """A run of ``graph`` on links of the given capacity, in pieces, with changes between.

    Parameters
    ----------
    graph : TaskGraph
        Kept by reference: tasks added to it later join at the next :meth:`run`.
    capacity : array of float, shape (n_links,)
        Bytes/s per link.
    capacity_events : sequence of (time, link, capacity), optional
        Capacity changes scheduled up front (as in :func:`~hpnsim.engine.simulate`).

    Examples
    --------
    Two 100-byte flows share link 0 (10 B/s). At t=4 one moves to link 1 (10 B/s): each
    moved 20 B by then and has 80 B left at 10 B/s, so both finish at 4 + 8 = 12.

    >>> g = TaskGraph()
    >>> a, b = g.add_transfers([[0], [0]], 100.0).tolist()
    >>> sim = Simulation(g, [10.0, 10.0])
    >>> sim.run(until=4.0)
    4.0
    >>> sim.reroute(b, [1])
    >>> sim.run()
    12.0
    >>> sim.result().finish.tolist(), sim.done
    ([12.0, 12.0], True)
    """

    def __init__(self, graph: TaskGraph, capacity, *, capacity_events=()):
        if not isinstance(graph, TaskGraph):
            raise InputError("graph", f"must be a TaskGraph, got {type(graph).__name__}")
        cap = check_capacity(capacity)
        self.graph = graph
        self._routes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._state = empty_state(cap, *capacity_events_arrays(capacity_events, cap.shape[0]))
        n = cap.shape[0]
        self._link_base = np.zeros(n)    # bytes carried on paths that transfers left
        self._moved_base = np.zeros(0)   # per task: bytes moved before its last reroute
        # the state's link rows are the graph's until a transfer is rerouted
        self._rows_kept = True
        self._rooms: dict[str, np.ndarray] = {}   # buffers the task columns grow in
        self._join()

    @property
    def now(self) -> float:
        """The current simulated time (seconds).

        >>> Simulation(TaskGraph(), [1.0]).now
        0.0
        """
        return float(self._state.clock[NOW])

    @property
    def capacity(self) -> np.ndarray:
        """Current capacity per link (a copy).

        >>> Simulation(TaskGraph(), [1.0, 2.0]).capacity.tolist()
        [1.0, 2.0]
        """
        return self._state.cap.copy()

    @property
    def done(self) -> bool:
        """True when nothing more can happen (no event left, no change pending).

        >>> sim = Simulation(TaskGraph(), [1.0]); sim.done
        True
        """
        s = self._state
        if self._routes or len(self.graph) > s.kind.size or s.count[loop.QUEUE_N] > 0:
            return False
        return loop.next_event_time(s) == math.inf

    def _join(self) -> None:
        """Bring new tasks and pending reroutes into the state (a structural rebuild)."""
        old, now = self._state, self.now
        n_old = old.kind.size
        if len(self.graph) == n_old and not self._routes:
            return
        arrays = self.graph.arrays(old.cap.shape[0])
        n_deps = np.diff(arrays.dep_ptr[:n_old + 1])
        grew = np.flatnonzero((n_deps != np.diff(old.dep_ptr)) & (old.waiting == 0))
        if grew.size:
            raise InputError("deps", f"{self.graph.label(int(grew[0]))} is ready or running; "
                                     "it cannot wait for more tasks")
        moved = np.zeros(n_old, dtype=np.bool_)
        flowing = [v for v in sorted(self._routes) if old.status[v] == FLOWING]
        moved[flowing] = True
        for v in flowing:
            # the bytes moved so far stay on the old path's links
            left = old.remaining[v] - old.rate[v] * (now - old.last_t[v])
            old.remaining[v] = left if left > 0.0 else 0.0
            old.last_t[v] = now
            row = slice(old.ptr[v], old.ptr[v + 1])
            carried = old.amount[v] - old.remaining[v] - self._moved_base[v]
            np.add.at(self._link_base, old.links[row], old.usage[row] * carried)
            self._moved_base[v] = old.amount[v] - old.remaining[v]
            loop.mark_links(old, old.links[row])
        state, ready, at = extend_state(old, arrays, self._routes, moved, now,
                                        rows_kept=self._rows_kept, rooms=self._rooms)
        self._rows_kept = self._rows_kept and not self._routes
        self._routes = {}
        self._moved_base = grown(self._moved_base, state.kind.size - n_old, 0.0, self._rooms,
                                  "moved_base")
        for v in flowing:
            state.is_new[v] = True   # forces a new projected completion on the new path
            loop.mark_links(state, state.links[state.ptr[v]:state.ptr[v + 1]])
        loop.push_ready(state, ready, at)
        self._state = state

    def run(self, until: float = math.inf) -> float:
        """Process every event at a time <= ``until``; returns :attr:`now`.

        ``now`` becomes ``until`` when it is finite, else the time of the last event.
        Running in pieces gives exactly the times of one run.

        >>> g = TaskGraph(); _ = g.add_transfer([0], 1.0, 10.0)
        >>> sim = Simulation(g, [2.0])
        >>> sim.run(1.5), sim.run(), sim.run()
        (1.5, 5.0, 5.0)
        """
        try:
            until = float(until)
        except (TypeError, ValueError) as exc:
            raise InputError("until", f"must be a time in seconds, got {until!r}") from exc
        if math.isnan(until) or until < self.now:
            raise InputError("until", f"must be >= now ({self.now!r}), got {until!r}")
        self._join()
        s = self._state
        loop.advance(s, until)
        s.clock[NOW] = until if until < math.inf else max(s.clock[NOW], s.clock[LAST_EVENT])
        return self.now

    def set_capacity(self, links, capacity) -> None:
        """Set links' capacities (bytes/s) from now on; 0 takes a link down.

        >>> g = TaskGraph(); _ = g.add_transfer([0], 1.0, 100.0)
        >>> sim = Simulation(g, [10.0]); _ = sim.run(5.0)
        >>> sim.set_capacity([0], 5.0)    # 50 B left at 5 B/s
        >>> sim.run()
        15.0
        """
        s = self._state
        ids = _link_ids(links, s.cap.shape[0])
        caps = _link_capacities(capacity, ids)
        changed = s.cap[ids] != caps
        s.cap[ids] = caps
        loop.mark_links(s, ids[changed])

    def reroute(self, task: int, links, usage=1.0) -> None:
        """From now on, transfer ``task`` loads ``links[i]`` with ``usage[i]`` x its rate.

        A flowing transfer keeps its progress: its remaining bytes continue on the new
        path. The task must be a transfer that has not finished; the path needs a link.

        >>> g = TaskGraph(); t = g.add_transfer([0], 1.0, 10.0)
        >>> sim = Simulation(g, [1.0, 5.0]); _ = sim.run(5.0)
        >>> sim.reroute(t, [1]); sim.run()    # 5 B left at 5 B/s
        6.0
        """
        (v,) = _task_ids(task, len(self.graph), "task")
        v = int(v)
        if v >= self._state.kind.size:
            self._join()
        s = self._state
        if s.kind[v] != TRANSFER:
            raise InputError("task", f"{self.graph.label(v)} is a delay, not a transfer")
        if s.status[v] == DONE:
            raise InputError("task", f"{self.graph.label(v)} has already finished")
        ids = _link_ids(links, s.cap.shape[0])
        coef = np.broadcast_to(np.asarray(usage, dtype=np.float64), ids.shape) \
            if np.ndim(usage) == 0 else np.asarray(usage, dtype=np.float64).ravel()
        if coef.shape != ids.shape:
            raise InputError("usage", f"needs one value per link ({ids.size}), got {coef.size}")
        if not np.all(np.isfinite(coef) & (coef >= 0)):
            raise InputError("usage", f"{self.graph.label(v)}: must be finite and >= 0")
        _, merged_links, merged_usage = merge_rows(np.zeros(ids.size, np.int64), ids,
                                                    np.array(coef))
        if merged_links.size == 0:
            raise InputError("links", f"{self.graph.label(v)}: the new path needs a link "
                                      "with usage > 0")
        self._routes[v] = (merged_links, merged_usage)

    def set_priority(self, tasks, priority) -> None:
        """Strict priority class (lower first) of ``tasks`` from now on.

        >>> g = TaskGraph(); a, b = g.add_transfers([[0], [0]], 10.0).tolist()
        >>> sim = Simulation(g, [2.0]); _ = sim.run(2.0)   # 2 B each, 8 B left each
        >>> sim.set_priority([b], -1)   # b alone at 2 B/s: done at 6; then a: 8 B by 10
        >>> _ = sim.run(); sim.result().finish.tolist()
        [10.0, 6.0]
        """
        ids = _task_ids(tasks, len(self.graph))
        if ids.size and ids.max() >= self._state.kind.size:
            self._join()
        s = self._state
        prio = priority_column(priority, ids.size, lambda i: self.graph.label(int(ids[i])))
        changed = ids[s.priority[ids] != prio]
        s.priority[ids] = prio
        s.count[SAME_PRIORITY] = bool(np.all(s.priority == s.priority[0])) if s.kind.size \
            else True
        flowing = changed[s.status[changed] == FLOWING]
        if flowing.size:
            rows = [s.links[s.ptr[v]:s.ptr[v + 1]] for v in flowing.tolist()]
            loop.mark_links(s, np.concatenate(rows))

    def finish_times(self) -> np.ndarray:
        """Finish time per task (``inf`` if not yet): ``result().finish`` without the rest.

        >>> g = TaskGraph(); _ = g.add_delay(1.0); _ = g.add_delay(5.0)
        >>> sim = Simulation(g, [1.0]); _ = sim.run(2.0); sim.finish_times().tolist()
        [1.0, inf]
        """
        s = self._state
        return np.concatenate([s.finish, np.full(len(self.graph) - s.kind.size, np.inf)])

    def result(self) -> SimResult:
        """Start/finish per task (``inf`` if not yet), and bytes carried per link so far.

        Tasks added to the graph but not yet joined show as not started.

        >>> g = TaskGraph(); _ = g.add_transfer([0], 1.0, 10.0)
        >>> sim = Simulation(g, [2.0]); _ = sim.run(2.0)
        >>> r = sim.result(); r.finish.tolist(), r.remaining.tolist(), r.link_bytes.tolist()
        ([inf], [6.0], [4.0])
        """
        s = self._state
        flowing = s.status == FLOWING
        remaining = s.remaining.copy()
        remaining[flowing] -= s.rate[flowing] * (s.clock[NOW] - s.last_t[flowing])
        moved = np.where(s.kind == TRANSFER, s.amount - remaining, 0.0)
        if self._moved_base.any():
            moved = moved - self._moved_base
        row = s.evar
        link_bytes = np.bincount(s.links, weights=s.usage * moved[row],
                                 minlength=s.cap.shape[0])
        if self._link_base.any():
            link_bytes = link_bytes + self._link_base
        extra = len(self.graph) - s.kind.size
        never = np.full(extra, np.inf)
        return SimResult(
            start=np.concatenate([s.start, never]), finish=np.concatenate([s.finish, never]),
            link_bytes=link_bytes,
            remaining=np.concatenate([np.where(flowing, remaining, 0.0), np.zeros(extra)]),
            stalled=np.flatnonzero(flowing & (s.rate == 0.0)), names=list(self.graph.names),
            n_events=int(s.count[N_EVENTS]))

