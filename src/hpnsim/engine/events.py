"""The event core of a run driver: typed events in time order, dispatched by type.

A driver that changes a resumable :class:`~hpnsim.engine.Simulation` as a run goes (faults
start and end, timeouts expire) keeps its events here. An event is any object, typically a
frozen dataclass; the queue knows nothing of what it means. Events due at the same time come
out together, in the order they were pushed, so a driver can apply all changes of one
instant before it looks at their consequences.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Ping:
...     name: str
>>> q = EventQueue()
>>> q.push(2.0, Ping("late")); q.push(1.0, Ping("a")); q.push(1.0, Ping("b"))
>>> q.pop_batch()
(1.0, [Ping(name='a'), Ping(name='b')])
>>> dispatch({Ping: lambda e: e.name.upper()}, Ping("x"))
'X'
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping

__all__ = ["EventQueue", "dispatch"]


class EventQueue:
    """Events by time; ties in push order (a sequence number breaks them, so events
    themselves are never compared)."""

    def __init__(self):
        self._heap: list = []
        self._seq = 0

    def push(self, time: float, event) -> None:
        """Schedule ``event`` at ``time`` (seconds)."""
        heapq.heappush(self._heap, (time, self._seq, event))
        self._seq += 1

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def pop_batch(self) -> tuple[float, list]:
        """``(time, events)``: every event due at the earliest time, in push order."""
        now = self._heap[0][0]
        batch = []
        while self._heap and self._heap[0][0] == now:
            batch.append(heapq.heappop(self._heap)[2])
        return now, batch


def dispatch(handlers: Mapping[type, Callable], event, *args):
    """Call the handler registered for ``type(event)`` with the event and ``args``.

    >>> dispatch({int: lambda e, k: e * k}, 3, 2)
    6
    >>> dispatch({int: print}, "x")
    Traceback (most recent call last):
    ...
    TypeError: no handler for str events
    """
    handler = handlers.get(type(event))
    if handler is None:
        raise TypeError(f"no handler for {type(event).__name__} events")
    return handler(event, *args)
