"""A recorded piece of a TaskGraph, appended again in one step (a replay without its checks).

A training iteration adds the same collective (same group, size, algorithm, routes) many
times, each time after other tasks: every ZeRO-3 unit every micro-batch, every gradient
bucket. Adding it task by task validates and merges every path again each time. A
:class:`GraphFragment` records, once, the tasks such a sequence of calls appended after a
graph's first ``first`` tasks, with the tasks it waited on outside itself (``externals``) as
placeholders; :meth:`GraphFragment.append_to` appends the same tasks, link entries and
dependencies, in the same order, with the placeholders replaced by the given task ids. The
graph it builds is the one the calls would have built, entry for entry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError

__all__ = ["GraphFragment"]


@dataclass(frozen=True)
class GraphFragment:
    """Tasks recorded from a graph (ids relative to the fragment's first task).

    Attributes
    ----------
    kind, amount, priority, weight, latency, release : per task, as the graph's columns
    names : per task its name
    channel : per task its connection id (-1: none), as the graph's ``channels``
    rows, links, usage : link entries (row = task), as merged when first added
    dep_task, dep_on : dependencies in the order they were added; ``dep_on < 0`` is
        external ``-1 - dep_on``
    n_external : how many external tasks it waits on
    members : the kept member paths of its transfers (task relative, ptr, links, weight),
        as :meth:`~hpnsim.engine.TaskGraph.member_paths` gives them to the packet engine

    The graph checks the appended tasks for cycles at its next freeze (they are past its
    acyclic prefix), as it would have the calls' tasks.
    """

    kind: list
    amount: list
    priority: list
    weight: list
    latency: list
    release: list
    names: list
    channel: list
    rows: np.ndarray
    links: np.ndarray
    usage: np.ndarray
    dep_task: np.ndarray
    dep_on: np.ndarray
    n_external: int
    members: tuple = ()

    @classmethod
    def record(cls, graph, first: int, externals) -> GraphFragment:
        """The tasks of ``graph`` from ``first`` on; ``externals`` (ids below ``first``)
        are the tasks they wait on outside, in the order :meth:`append_to` takes them.

        >>> from hpnsim.engine import TaskGraph
        >>> g = TaskGraph(); a = g.add_delay(1.0)
        >>> t = g.add_transfer([0, 1], 1.0, 8.0, deps=[a])
        >>> frag = GraphFragment.record(g, 1, [a])
        >>> b = g.add_delay(2.0); again = frag.append_to(g, [b])
        >>> again, g.arrays(2).deps.tolist()          # task 3 waits for task 2
        (3, [0, 2])
        """
        externals = [int(e) for e in externals]
        if any(e >= first for e in externals):
            raise InputError("externals", f"tasks before the fragment's first ({first})")
        chunks = [i for i, r in enumerate(graph._entry_rows) if r.size and r.min() >= first]
        mixed = [r for r in graph._entry_rows if r.size and r.min() < first <= r.max()]
        if mixed:
            raise InputError("first", "a link entry chunk spans the fragment's start")
        rows = np.concatenate([graph._entry_rows[i] for i in chunks]) - first \
            if chunks else np.zeros(0, np.int64)
        links = np.concatenate([graph._entry_links[i] for i in chunks]) \
            if chunks else np.zeros(0, np.int64)
        usage = np.concatenate([graph._entry_usage[i] for i in chunks]) if chunks \
            else np.zeros(0)
        dep_task, dep_on = graph._dep_task.values, graph._dep_on.values
        mine = dep_task >= first
        dep_task, dep_on = dep_task[mine] - first, dep_on[mine]
        inside = dep_on >= first
        outside = {e: i for i, e in enumerate(externals)}
        for e in dep_on[~inside].tolist():
            if e not in outside:
                raise InputError("externals", f"the fragment waits on task {e}, not listed")
        mapped = np.where(inside, dep_on - first,
                          -1 - np.array([outside.get(e, 0) for e in dep_on.tolist()],
                                        dtype=np.int64).reshape(dep_on.shape))
        members = tuple((task - first, ptr, links, weight)
                        for task, ptr, links, weight in graph._members
                        if task.size and task.min() >= first)
        if any(task.size and task.min() < first <= task.max()
               for task, *_ in graph._members):
            raise InputError("first", "a transfer's member paths span the fragment's start")
        # lists: a graph's column extended by a list takes them as a list's extend would
        return cls(kind=graph._kind[first:].tolist(), amount=graph._amount[first:].tolist(),
                   priority=graph._priority[first:].tolist(),
                   weight=graph._weight[first:].tolist(),
                   latency=graph._latency[first:].tolist(),
                   release=graph._release[first:].tolist(),
                   names=graph._names[first:], rows=rows, links=links, usage=usage,
                   dep_task=dep_task, dep_on=mapped,
                   n_external=len(externals), members=members,
                   channel=graph._channel[first:].tolist())

    def append_to(self, graph, externals) -> int:
        """Append the fragment to ``graph`` waiting on ``externals`` (as recorded);
        returns the id of its first task."""
        externals = np.asarray([int(e) for e in externals], dtype=np.int64)
        if externals.size != self.n_external:
            raise InputError("externals", f"the fragment waits on {self.n_external} tasks, "
                                          f"got {externals.size}")
        base = len(graph)
        graph._kind.extend(self.kind)
        graph._amount.extend(self.amount)
        graph._priority.extend(self.priority)
        graph._weight.extend(self.weight)
        graph._latency.extend(self.latency)
        graph._release.extend(self.release)
        graph._names.extend(self.names)
        graph._channel.extend(self.channel)
        if self.rows.size:
            graph._entry_rows.append(self.rows + base)
            graph._entry_links.append(self.links)
            graph._entry_usage.append(self.usage)
        graph._members.extend((task + base, ptr, links, weight)
                              for task, ptr, links, weight in self.members)
        if self.dep_task.size:
            on = np.where(self.dep_on >= 0, self.dep_on + base,
                          externals[np.maximum(-1 - self.dep_on, 0)] if externals.size
                          else 0)
            graph._dep_task.extend((self.dep_task + base).tolist())
            graph._dep_on.extend(on.tolist())
        return base
