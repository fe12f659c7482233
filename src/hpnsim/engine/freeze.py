"""Freezing a TaskGraph into validated flat arrays (:class:`GraphArrays`), whole or grown.

A graph is frozen before every simulation; one that only grew since its last freeze (a probe
appends copies round after round) is frozen in time proportional to what it gained.
:class:`FrozenColumns` holds the two freezes; :class:`~hpnsim.engine.TaskGraph` inherits them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.engine.buffers import room
from hpnsim.engine.validate import find_cycle
from hpnsim.errors import InputError

__all__ = ["GraphArrays", "FrozenColumns", "TRANSFER", "DELAY"]

#: the kinds of task (``GraphArrays.kind``): a transfer group and a fixed wait
TRANSFER, DELAY = 0, 1

#: the per-task columns (a TaskGraph keeps each as the Column ``_<name>``) and their dtypes
TASK_COLUMNS = (("kind", np.int8), ("amount", np.float64), ("priority", np.int64),
                ("weight", np.float64), ("latency", np.float64), ("release", np.float64),
                ("channel", np.int64))


@dataclass(frozen=True)
class GraphArrays:
    """A TaskGraph frozen into validated flat arrays, ready for the event loop."""

    kind: np.ndarray       # int8, TRANSFER or DELAY
    amount: np.ndarray     # bytes per member (transfer) or seconds (delay)
    priority: np.ndarray   # int64
    weight: np.ndarray     # float64
    latency: np.ndarray    # float64
    release: np.ndarray    # float64
    ptr: np.ndarray        # int64, task -> links CSR (empty rows for delays)
    links: np.ndarray      # int64
    usage: np.ndarray      # float64
    dep_ptr: np.ndarray    # int64, task -> the tasks it waits for
    deps: np.ndarray       # int64
    channel: np.ndarray    # int64, a transfer's connection id (-1: none; flow engine ignores)


class FrozenColumns:
    """The freezes of a :class:`~hpnsim.engine.TaskGraph`'s columns (its attributes
    ``_kind`` ... ``_channel``, entry chunks, dependency lists, ``_acyclic``, ``_frozen``,
    ``_frozen_room``)."""

    def arrays(self, n_links: int) -> GraphArrays:
        """Freeze into validated arrays: link ids in range, deps known and acyclic.

        >>> from hpnsim.engine import TaskGraph
        >>> g = TaskGraph(); _ = g.add_transfer([5], 1.0, 1.0)
        >>> g.arrays(4)
        Traceback (most recent call last):
        ...
        hpnsim.errors.InputError: links: task 0 uses unknown link id 5 (the fabric has 4 links)
        """
        frozen = self._frozen
        if frozen is not None and frozen[1] == n_links:
            if frozen[0].kind.size == len(self._kind):
                return frozen[0]
            grown = self._grown_arrays(*frozen)
            if grown is not None:
                return grown
        n = len(self._kind)
        rows = np.concatenate(self._entry_rows) if self._entry_rows else np.zeros(0, np.int64)
        links = np.concatenate(self._entry_links) if self._entry_links else np.zeros(0, np.int64)
        usage = np.concatenate(self._entry_usage) if self._entry_usage else np.zeros(0)
        self._check_links(rows, links, n_links)
        order = np.argsort(rows, kind="stable")
        ptr = np.zeros(n + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(rows, minlength=n))
        dep_task, dep_on = self._dep_task.values, self._dep_on.values
        self._check_known_deps(dep_task, dep_on, n)
        dep_order = np.argsort(dep_task, kind="stable")
        dep_ptr = np.zeros(n + 1, dtype=np.int64)
        dep_ptr[1:] = np.cumsum(np.bincount(dep_task, minlength=n))
        deps = dep_on[dep_order]
        self._check_acyclic(n, dep_ptr, deps)
        out = GraphArrays(
            **{name: getattr(self, "_" + name).values for name, _ in TASK_COLUMNS},
            ptr=ptr, links=links[order], usage=usage[order], dep_ptr=dep_ptr, deps=deps)
        if dep_task.size == 0 or dep_task.max() < n:
            self._frozen = (out, n_links, len(self._entry_rows), dep_task.size)
        return out

    def _grown_arrays(self, old: GraphArrays, n_links: int, n_chunks: int,
                      n_dep: int) -> GraphArrays | None:
        """:meth:`arrays` as the last freeze ``old`` plus the tasks added since, in time
        proportional to those; ``None`` if an entry or dependency added since belongs to an
        older task (then the caller freezes everything).

        The task columns are the graph's own (views of its
        :class:`~hpnsim.engine.buffers.Column` buffers); the link rows and dependencies
        are written into buffers with room to grow (:func:`~hpnsim.engine.buffers.room`)
        and handed out as views of their first values: a probe freezes its graph every
        round, and copying the whole frozen prefix each time would cost as much as the
        rounds' simulation."""
        n0, n = old.kind.size, len(self._kind)
        chunks = self._entry_rows[n_chunks:]
        rows = np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
        # copies and transfers added one by one bring their entries in task order: then
        # they need no sort, and go to the buffers as they are
        in_order = rows.size < 2 or bool(np.all(rows[1:] >= rows[:-1]))
        dep_task = self._dep_task.values[n_dep:]
        if (rows.size and (rows[0] if in_order else rows.min()) < n0) \
                or (dep_task.size and dep_task.min() < n0):
            return None
        rooms = self._frozen_room
        e0, e1 = old.links.size, old.links.size + rows.size
        entry_links = room(rooms, "links", old.links, e1)
        entry_usage = room(rooms, "usage", old.usage, e1)
        if in_order and chunks:
            np.concatenate(self._entry_links[n_chunks:], out=entry_links[e0:e1])
            np.concatenate(self._entry_usage[n_chunks:], out=entry_usage[e0:e1])
            self._check_links(rows, entry_links[e0:e1], n_links)
        elif chunks:
            links = np.concatenate(self._entry_links[n_chunks:])
            self._check_links(rows, links, n_links)
            # a stable sort of the new entries alone orders them as a stable sort of all
            # would: every earlier entry belongs to an earlier task
            order = np.argsort(rows, kind="stable")
            entry_links[e0:e1] = links[order]
            entry_usage[e0:e1] = np.concatenate(self._entry_usage[n_chunks:])[order]
        dep_on = self._dep_on.values[n_dep:]
        self._check_known_deps(dep_task, dep_on, n)
        if dep_task.size and dep_task.max() >= n:
            return None
        ptr = room(rooms, "ptr", old.ptr, n + 1)
        ptr[n0 + 1:n + 1] = old.ptr[-1] + np.cumsum(np.bincount(rows, minlength=n)[n0:])
        dep_ptr = room(rooms, "dep_ptr", old.dep_ptr, n + 1)
        dep_ptr[n0 + 1:n + 1] = old.dep_ptr[-1] + np.cumsum(np.bincount(dep_task - n0,
                                                                        minlength=n - n0))
        d0, d1 = old.deps.size, old.deps.size + dep_on.size
        deps = room(rooms, "deps", old.deps, d1)
        deps[d0:d1] = dep_on[np.argsort(dep_task, kind="stable")]
        self._check_acyclic(n, dep_ptr[:n + 1], deps[:d1])
        out = GraphArrays(**{name: getattr(self, "_" + name).values for name, _ in TASK_COLUMNS},
                          ptr=ptr[:n + 1], links=entry_links[:e1],
                          usage=entry_usage[:e1], dep_ptr=dep_ptr[:n + 1], deps=deps[:d1])
        self._frozen = (out, n_links, len(self._entry_rows), len(self._dep_task))
        return out

    def _check_links(self, rows, links, n_links: int) -> None:
        if links.size and links.max() >= n_links:
            e = int(np.argmax(links))
            raise InputError("links", f"{self.label(int(rows[e]))} uses unknown link id "
                                      f"{int(links[e])} (the fabric has {n_links} links)")

    def _check_known_deps(self, dep_task, dep_on, n: int) -> None:
        if dep_on.size and dep_on.max() >= n:
            i = int(np.argmax(dep_on))
            raise InputError("deps", f"{self.label(int(dep_task[i]))} depends on unknown task "
                                     f"{int(dep_on[i])} (the graph has {n} tasks)")

    def _check_acyclic(self, n: int, dep_ptr, deps) -> None:
        """Refuse a dependency cycle among the ``n`` tasks (skipped when the graph is known
        acyclic that far), then remember it is acyclic."""
        if self._acyclic != n:
            cycle = find_cycle(n, dep_ptr, deps)
            if cycle is not None:
                names = [self.label(t) for t in cycle] + [self.label(cycle[0])]
                raise InputError("deps", "dependency cycle: " + " waits for ".join(names))
        self._acyclic = n

