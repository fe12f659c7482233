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
        rows, own_task, own_on, transfer = self._copy_plan(arrays)
        self._kind.extend_tiled(arrays.kind, count)
        self._amount.extend_tiled(arrays.amount, count)
        self._priority.extend_tiled(np.where(transfer, int(priority), arrays.priority), count)
        self._weight.extend_tiled(arrays.weight, count)
        self._latency.extend_tiled(arrays.latency, count)
        rel = self._release.extend_tiled(arrays.release, count)
        rel[0] = float(release)
        if count > 1:
            rel[n::n] = float(release) + float(every) * np.arange(1, count) if every > 0 \
                else 0.0
        self._names.extend([""] * (n * count))
        self._channel.extend_tiled(arrays.channel, count)
        if arrays.links.size:
            self._entry_rows.append((rows + firsts[:, None]).ravel())
            self._entry_links.append(np.broadcast_to(arrays.links, (count, rows.size)).ravel())
            self._entry_usage.append(np.broadcast_to(arrays.usage, (count, rows.size)).ravel())
        self._dep_task.extend(np.concatenate([
            np.full(after_ids.size, base, dtype=np.int64), (own_task + firsts[:, None]).ravel(),
            np.repeat(firsts[1:], chain.size)]))
        self._dep_on.extend(np.concatenate([
            after_ids, (own_on + firsts[:, None]).ravel(), (chain + firsts[:-1, None]).ravel()]))
        return firsts

    def _copy_plan(self, arrays: GraphArrays) -> tuple:
        """What every copy of ``arrays`` repeats, worked out once per copied graph: the task
        of each link entry, the dependencies of its tasks other than task 0 (task, on), and
        which tasks are transfers."""
        plan = self._copy_plans.get(id(arrays))
        if plan is None or plan[0] is not arrays:
            n = arrays.kind.size
            rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(arrays.ptr))
            dep_task = np.repeat(np.arange(n, dtype=np.int64), np.diff(arrays.dep_ptr))
            keep = dep_task != 0
            # the copied graph is kept with its plan: its id is not reused while cached
            plan = (arrays, rows, dep_task[keep], arrays.deps[keep], arrays.kind == TRANSFER)
            self._copy_plans[id(arrays)] = plan
        return plan[1:]
