"""SimResult: per-task times and per-link carried bytes of a (possibly unfinished) run."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.errors import InputError


@dataclass
class SimResult:
    """Per-task times and per-link carried bytes of one simulation.

    ``start``/``finish`` are ``inf`` for tasks that never started/finished. ``remaining``
    holds the bytes left of every transfer still flowing (0 elsewhere); ``stalled`` lists
    those among them with a zero rate: at the end of a run, the transfers that could not
    finish (e.g. a link taken down and never restored).

    >>> r = SimResult(np.zeros(1), np.ones(1), np.array([8.0]), np.zeros(1), np.zeros(0, int))
    >>> r.makespan, r.complete
    (1.0, True)
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

    def rows(self) -> list[dict]:
        """One row per task (in task-id order): name, start, finish, duration (``inf`` for
        never).

        >>> r = SimResult(np.zeros(1), np.ones(1), np.zeros(1), np.zeros(1), np.zeros(0, int))
        >>> r.rows()
        [{'name': '', 'start': 0.0, 'finish': 1.0, 'duration': 1.0}]
        """
        names = self.names or [""] * self.start.size
        return [{"name": name, "start": s, "finish": f, "duration": f - s}
                for name, s, f in zip(names, self.start.tolist(), self.finish.tolist(),
                                      strict=True)]

    def to_frame(self):
        """:meth:`rows` as a pandas DataFrame (pandas: the optional ``frames`` extra)."""
        from hpnsim.frames import to_frame

        return to_frame(self.rows(), columns=["name", "start", "finish", "duration"])

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


def capacity_events_arrays(events, n_links: int):
    """Sorted (times, links, capacities) arrays of ``(time, link, capacity)`` triples, checked.

    >>> [a.tolist() for a in capacity_events_arrays([(2.0, 1, 0.0), (1.0, 0, 5.0)], 2)]
    [[1.0, 2.0], [0, 1], [5.0, 0.0]]
    """
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
