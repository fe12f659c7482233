"""Arrays that grow at their end in amortized constant time per value: a buffer with room,
handed out as views of its first values.

A probe appends copies of iterations to one graph round after round; freezing the graph and
extending the engine state by copying every earlier value each round would cost as much as
simulating the rounds. Writing only the new values into a buffer with room, and reallocating
(at :data:`GROWTH` times the size) only when it is full, costs time proportional to what was
added.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Column", "room", "GROWTH"]

#: how many times the size needed a full buffer is reallocated at. A probe's rounds grow
#: its graph about 1.5x to 2.5x each (probe_run.WINDOW_GROWTH): at 2x half the rounds
#: reallocate; at 4x about one in three, and the replay of the 60-job --compare's probes
#: spent ~0.5 s CPU less outside the event loop (own measurement, loaded 2-core machine).
GROWTH = 4


def room(buffers: dict, name: str, values: np.ndarray, size: int) -> np.ndarray:
    """The buffer ``buffers[name]`` whose first values ``values`` views, if it holds ``size``
    values; else a new one starting with a copy of ``values`` (and kept in ``buffers``):
    ``GROWTH`` times ``size``, or just ``size`` when ``values`` is empty (an array filled
    once, a whole simulation's state, takes no more than it needs). The caller writes only
    past ``values`` and hands out the view of the first ``size``: every view handed out
    before stays as it was.

    >>> buffers = {}; a = room(buffers, "x", np.arange(3), 5); a[3:5] = [7, 8]
    >>> b = room(buffers, "x", a[:5], 6); b is a, a[:5].tolist(), a.size
    (True, [0, 1, 2, 7, 8], 20)
    >>> room(buffers, "x", np.arange(5), 6) is a     # not a view of it: a new buffer
    False
    """
    buffer = buffers.get(name)
    if buffer is None or values.base is not buffer or buffer.size < size:
        buffer = np.empty(GROWTH * size if values.size else size, dtype=values.dtype)
        buffer[:values.size] = values
        buffers[name] = buffer
    return buffer


class Column:
    """A typed column that grows at its end like a list (``append``, ``extend``), its values
    in a buffer with room; :attr:`values` views them. Values added one at a time or as a
    list wait in a Python list (as cheap as a list's append) and join the buffer, converted,
    when the column is read or extended by an array. A value is written once, when it joins
    (or, by the caller that added it, through the view :meth:`extend_tiled` returns, before
    anyone reads it), so every view handed out stays as it was.

    >>> c = Column(np.float64); c.append(1.0); c.extend([2.0, 3.0]); len(c)
    3
    >>> c.extend_tiled(np.array([4.0, 5.0]), 2).tolist(), c.values.tolist()
    ([4.0, 5.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0, 4.0, 5.0])
    >>> c[1:3].tolist()          # a copy
    [2.0, 3.0]
    """

    __slots__ = ("_buffer", "_size", "_pending")

    def __init__(self, dtype):
        self._buffer = np.empty(16, dtype=dtype)
        self._size = 0
        self._pending: list = []

    def __len__(self) -> int:
        return self._size + len(self._pending)

    def __getitem__(self, key):
        out = self.values[key]
        return out.copy() if isinstance(out, np.ndarray) else out

    @property
    def values(self) -> np.ndarray:
        """The values, as a view (read it, never write it)."""
        if self._pending:
            self._join_pending()
        return self._buffer[:self._size]

    def _join_pending(self) -> None:
        pending, self._pending = self._pending, []
        end = self._size + len(pending)
        self._reserve(end)
        self._buffer[self._size:end] = pending
        self._size = end

    def _reserve(self, size: int) -> None:
        if size > self._buffer.size:
            buffer = np.empty(max(2 * size, 16), dtype=self._buffer.dtype)
            buffer[:self._size] = self._buffer[:self._size]
            self._buffer = buffer

    def append(self, value) -> None:
        """Add one value at the end."""
        self._pending.append(value)

    def extend(self, values) -> None:
        """Add values (a list, or an array) at the end."""
        if isinstance(values, list):
            self._pending.extend(values)
            return
        if self._pending:
            self._join_pending()
        values = np.asarray(values, dtype=self._buffer.dtype).ravel()
        end = self._size + values.size
        self._reserve(end)
        self._buffer[self._size:end] = values
        self._size = end

    def extend_tiled(self, values: np.ndarray, count: int) -> np.ndarray:
        """Add ``count`` copies of ``values`` at the end; returns the view of what was added,
        for the caller to finish (before anyone reads it)."""
        if self._pending:
            self._join_pending()
        start, end = self._size, self._size + values.size * count
        self._reserve(end)
        added = self._buffer[start:end]
        added.reshape(count, values.size)[:] = values
        self._size = end
        return added
