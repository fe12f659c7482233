"""Appending copies of a frozen graph to a TaskGraph, one or a chain of them, without
per-task checks (a copied iteration is already validated).

:class:`CopyAppends` holds the two appends; :class:`~hpnsim.engine.TaskGraph` inherits them.
"""

from __future__ import annotations

import numpy as np

from hpnsim.engine.freeze import TRANSFER, GraphArrays
from hpnsim.engine.validate import check_values, dependency_ids
from hpnsim.errors import InputError

__all__ = ["CopyAppends"]


class CopyAppends:
    """Copies of frozen graphs appended to a :class:`~hpnsim.engine.TaskGraph`."""

    def append_copy(self, arrays: GraphArrays, *, release: float = 0.0, after=(),
                    priority: int = 0) -> int:
        """Append a copy of a frozen graph (already validated: no per-task checks); returns
        the id of its first task. The copy's task 0 is released at ``release`` and waits for
        ``after`` instead of its own dependencies; every transfer is in class ``priority``.

        >>> from hpnsim.engine import TaskGraph
        >>> g = TaskGraph(); a = g.add_delay(1.0); b = g.add_transfer([0], 1.0, 8.0, deps=[a])
        >>> h = TaskGraph(); first = h.append_copy(g.arrays(1), release=2.0, priority=3)
        >>> first, len(h), h.arrays(1).priority.tolist(), h.arrays(1).deps.tolist()
        (0, 2, [0, 3], [0])
        """
        return int(self.append_chain(arrays, 1, release=release, after=after,
                                     priority=priority)[0])

    def append_chain(self, arrays: GraphArrays, count: int, *, release: float = 0.0,
                     after=(), priority: int = 0, chain=(), every: float = 0.0) -> np.ndarray:
        """Append ``count`` copies of a frozen graph, each copy's task 0 waiting for the
        tasks ``chain`` (ids within the frozen graph) of the copy before it; returns the
        copies' first task ids. The first copy is :meth:`append_copy`'s (``release``,
        ``after``); the others have their own release times, or, with ``every > 0``, copy
        ``k`` starts no earlier than ``release + k * every`` (a start held to a period).

        >>> from hpnsim.engine import TaskGraph
        >>> g = TaskGraph(); a = g.add_delay(1.0); b = g.add_transfer([0], 1.0, 8.0, deps=[a])
        >>> h = TaskGraph(); h.append_chain(g.arrays(1), 3, chain=[1]).tolist()
        [0, 2, 4]
        >>> h.arrays(1).deps.tolist()      # 1 waits for 0, 2 for 1, 3 for 2, ...
        [0, 1, 2, 3, 4]
        """
        if isinstance(priority, bool) or not isinstance(priority, int | np.integer):
            raise InputError("priority", f"must be an integer, got {priority!r}")
        check_values(release, "release", lambda i: "task copy")
        base, n, count = len(self._kind), int(arrays.kind.size), int(count)
        chain = np.asarray(chain, dtype=np.int64)
        if count < 1 or n == 0:
            return np.zeros(0, dtype=np.int64)
        if count > 1 and (chain.size == 0 or chain.min() < 0 or chain.max() >= n):
            raise InputError("chain", f"ids of the copied graph's tasks (0..{n - 1}), "
                                      f"got {chain.tolist()}")
        after_ids = dependency_ids(after, "task copy")
        if self._acyclic == base and not (after_ids >= base).any():
            self._acyclic = base + n * count
        firsts = base + n * np.arange(count, dtype=np.int64)
        # one copy's column as a list, repeated: list repetition is far cheaper than
        # converting the tiled array (a probe appends copies ~20,000 times)
        self._kind.extend(arrays.kind.tolist() * count)
        self._amount.extend(arrays.amount.tolist() * count)
        prio = np.where(arrays.kind == TRANSFER, int(priority), arrays.priority)
        self._priority.extend(prio.tolist() * count)
        self._weight.extend(arrays.weight.tolist() * count)
        self._latency.extend(arrays.latency.tolist() * count)
        rel = arrays.release.tolist() * count
        rel[0] = float(release)
        for k in range(1, count):
            rel[k * n] = float(release) + float(every) * k if every > 0 else 0.0
        self._release.extend(rel)
        self._names.extend([""] * (n * count))
        self._channel.extend(arrays.channel.tolist() * count)
        if arrays.links.size:
            rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(arrays.ptr))
            self._entry_rows.append((rows + (firsts - base)[:, None]).ravel() + base)
            self._entry_links.append(np.tile(arrays.links, count))
            self._entry_usage.append(np.tile(arrays.usage, count))
        dep_task = np.repeat(np.arange(n, dtype=np.int64), np.diff(arrays.dep_ptr))
        keep = dep_task != 0
        own_task = (dep_task[keep] + firsts[:, None]).ravel()
        own_on = (arrays.deps[keep] + firsts[:, None]).ravel()
        link_task = np.repeat(firsts[1:], chain.size)
        link_on = (chain + firsts[:-1, None]).ravel()
        self._dep_task.extend([base] * after_ids.size + own_task.tolist()
                              + link_task.tolist())
        self._dep_on.extend(after_ids.tolist() + own_on.tolist() + link_on.tolist())
        return firsts
