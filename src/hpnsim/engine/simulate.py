"""simulate(graph, capacity) -> SimResult, and run_flows for plain flows."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.engine.loop import FLOWING, run_loop
from hpnsim.engine.maxmin import make_workspace
from hpnsim.engine.taskgraph import TaskGraph
from hpnsim.engine.validate import check_capacity, check_length
from hpnsim.errors import InputError


@dataclass
class SimResult:
    """Per-task times and per-link carried bytes of one simulation.

    ``start``/``finish`` are ``inf`` for tasks that never started/finished. ``stalled`` lists
    the transfers left with bytes to move and a zero rate when nothing else could happen
    (e.g. a link taken down and never restored); ``remaining`` holds their bytes left.
    """

    start: np.ndarray
    finish: np.ndarray
    link_bytes: np.ndarray
    remaining: np.ndarray
    stalled: np.ndarray
    names: list[str] = field(default_factory=list)
    n_events: int = 0

    @property
    def makespan(self) -> float:
        """Finish time of the last task (``inf`` if any task never finished)."""
        return float(self.finish.max()) if self.finish.size else 0.0

    @property
    def complete(self) -> bool:
        """True when every task finished."""
        return bool(np.all(np.isfinite(self.finish)))

    def to_frame(self):
        """Per-task table (pandas, an optional dependency): name, start, finish, duration."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("SimResult.to_frame needs pandas: pip install 'hpnsim[frames]'"
                              ) from exc
        return pd.DataFrame({"name": self.names or [""] * self.start.size,
                             "start": self.start, "finish": self.finish,
                             "duration": self.finish - self.start})

    def to_dict(self) -> dict:
        """Plain-Python view (lists, ``None`` for never), for JSON output."""
        def seconds(arr):
            return [float(x) if np.isfinite(x) else None for x in arr]

        return {
            "makespan": self.makespan if self.complete else None,
            "complete": self.complete,
            "n_events": self.n_events,
            "start": seconds(self.start),
            "finish": seconds(self.finish),
            "names": list(self.names),
            "link_bytes": self.link_bytes.tolist(),
            "stalled": [int(t) for t in self.stalled],
            "stalled_remaining_bytes": [float(self.remaining[t]) for t in self.stalled],
        }


def _capacity_events(events, n_links):
    if len(events) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0)
    try:
        arr = np.asarray(events, dtype=np.float64).reshape(-1, 3)
    except (TypeError, ValueError) as exc:
        raise InputError("capacity_events", "need (time, link, capacity) triples") from exc
    times, link_f, caps = arr[:, 0], arr[:, 1], arr[:, 2]
    for i in range(arr.shape[0]):
        if not np.isfinite(times[i]) or times[i] < 0:
            raise InputError("capacity_events", f"event {i}: time must be finite and >= 0, "
                                                f"got {float(times[i])!r}")
        if link_f[i] != np.round(link_f[i]) or not 0 <= link_f[i] < n_links:
            raise InputError("capacity_events", f"event {i}: unknown link id {link_f[i]!r} "
                                                f"(the fabric has {n_links} links)")
        if not np.isfinite(caps[i]) or caps[i] < 0:
            raise InputError("capacity_events", f"event {i}: link {int(link_f[i])}: capacity "
                                                f"must be finite and >= 0, got {float(caps[i])!r}")
    order = np.argsort(times, kind="stable")
    return times[order], link_f[order].astype(np.int64), caps[order]


def simulate(graph: TaskGraph, capacity, *, capacity_events=()) -> SimResult:
    """Run the task graph on links of the given capacity; exact max-min at every event.

    Parameters
    ----------
    graph : TaskGraph
    capacity : array of float, shape (n_links,)
        Bytes/s per link.
    capacity_events : sequence of (time, link, capacity)
        Set a link's capacity at a time (0 takes it down; a later event restores it).

    Examples
    --------
    Two 100-byte flows share link 0 (10 B/s); the second also needs 50 more bytes:

    >>> g = TaskGraph()
    >>> a = g.add_transfer([0], 1.0, 100.0)
    >>> b = g.add_transfer([0], 1.0, 150.0)
    >>> c = g.add_delay(1.0, deps=[a, b])
    >>> r = simulate(g, [10.0])
    >>> r.finish.tolist(), r.link_bytes.tolist()
    ([20.0, 25.0, 26.0], [250.0])
    """
    cap = check_capacity(capacity)
    arrays = graph.arrays(cap.shape[0])
    ev_time, ev_link, ev_cap = _capacity_events(capacity_events, cap.shape[0])
    n = arrays.kind.shape[0]
    dep_task = np.repeat(np.arange(n, dtype=np.int64), np.diff(arrays.dep_ptr))
    order = np.argsort(arrays.deps, kind="stable")
    succ = dep_task[order]
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    succ_ptr[1:] = np.cumsum(np.bincount(arrays.deps, minlength=n))
    indeg = np.diff(arrays.dep_ptr).astype(np.int64)
    same_priority = bool(n == 0 or np.all(arrays.priority == arrays.priority[0]))
    start, finish, remaining, status, n_events = run_loop(
        arrays.kind, arrays.amount, arrays.priority, arrays.weight, arrays.latency,
        arrays.release, arrays.ptr, arrays.links, arrays.usage, succ_ptr, succ, indeg,
        cap, ev_time, ev_link, ev_cap, cap.shape[0], same_priority,
        make_workspace(cap.shape[0], n))
    moved = np.where(arrays.kind == 0, arrays.amount - remaining, 0.0)
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(arrays.ptr))
    link_bytes = np.bincount(arrays.links, weights=arrays.usage * moved[row],
                             minlength=cap.shape[0])
    return SimResult(start=start, finish=finish, link_bytes=link_bytes,
                     remaining=np.where(status == FLOWING, remaining, 0.0),
                     stalled=np.flatnonzero(status == FLOWING), names=list(graph.names),
                     n_events=int(n_events))


def run_flows(capacity, paths, sizes, starts=None, priority=None) -> np.ndarray:
    """Finish time of each plain flow (one max-min variable per flow).

    Parameters
    ----------
    capacity : array of float
        Bytes/s per link.
    paths : Paths or sequence of sequences of int
        Link ids of each flow (CSR ``ptr``/``links``/``weight`` or plain lists).
    sizes : float or array of float
        Bytes per flow (a scalar, or one value per path).
    starts : float or array of float, optional
        Start time per flow (default 0).
    priority : int or array of int, optional
        Strict priority class per flow (lower first).

    Returns
    -------
    numpy.ndarray
        Finish time per flow (``inf`` if it could not finish).

    Examples
    --------
    Flows of 10 and 30 bytes share a 2 B/s link: both get 1 B/s until t=10, then the
    second gets 2 B/s for its last 20 bytes.

    >>> run_flows([2.0], [[0], [0]], [10.0, 30.0]).tolist()
    [10.0, 20.0]
    """
    graph = TaskGraph()
    n = len(paths.ptr) - 1 if hasattr(paths, "ptr") else len(paths)
    check_length(starts, n, "starts")  # add_transfers checks sizes and priority, not by this name
    graph.add_transfers(paths, sizes, priority=0 if priority is None else priority,
                        release=0.0 if starts is None else starts)
    result = simulate(graph, capacity)
    assert result.finish.shape == (n,)
    return result.finish
