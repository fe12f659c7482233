"""TaskGraph: the work of a simulation as flat arrays (transfer groups, delays, dependencies).

A *transfer* is one rate variable: it loads link ``links[i]`` with ``usage[i]`` times its rate
and finishes when ``size`` bytes have moved at that rate (a ring step of N member flows is one
transfer with ``size`` = bytes per member and usage = members per link). A *delay* is a fixed
wait (compute). A task starts at ``max(release, finish of every dependency)``; a transfer's
bytes start flowing ``latency`` seconds after it starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.engine.validate import (
    as_link_ids,
    check_length,
    check_values,
    dependency_ids,
    find_cycle,
    merge_rows,
    paths_arrays,
    priority_column,
)
from hpnsim.errors import InputError

TRANSFER, DELAY = 0, 1


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


class TaskGraph:
    """Transfers, delays and dependencies, stored as flat columns.

    Examples
    --------
    >>> g = TaskGraph()
    >>> a = g.add_transfer([0, 1], [1.0, 2.0], 100.0, name="a")
    >>> b = g.add_delay(0.5, deps=[a], name="compute")
    >>> len(g), g.label(b)
    (2, "task 'compute' (id 1)")
    """

    def __init__(self):
        self._kind: list[int] = []
        self._amount: list[float] = []
        self._priority: list[int] = []
        self._weight: list[float] = []
        self._latency: list[float] = []
        self._release: list[float] = []
        self._names: list[str] = []
        self._channel: list[int] = []
        self._entry_rows: list[np.ndarray] = []
        self._entry_links: list[np.ndarray] = []
        self._entry_usage: list[np.ndarray] = []
        self._dep_task: list[int] = []
        self._dep_on: list[int] = []
        # the first tasks known to form no cycle: a validated graph, grown only by
        # append_copy (a copy of an acyclic graph waiting on earlier tasks adds no cycle)
        self._acyclic = 0
        # the last freeze, (arrays, n_links, entry chunks, dep entries): tasks added since
        # only bring rows and dependencies of their own, so the next freeze appends theirs
        self._frozen = None
        # member routes of transfers added from paths, for engines that move each member on
        # its own path (hpnsim.packet): (task of each row, ptr, links, bytes per member byte)
        self._members: list[tuple] = []

    def __len__(self) -> int:
        return len(self._kind)

    @property
    def names(self) -> list[str]:
        """Task names ('' where none was given)."""
        return self._names

    @property
    def channels(self) -> list[int]:
        """Per task, the connection id its transfer runs on, as the caller that added it gave
        it (``channel=``; the collective compiler gives
        :attr:`hpnsim.collectives.schedule.Stage.channel`), or -1: none (delays too).

        >>> g = TaskGraph(); _ = g.add_transfer([0], 1.0, 8.0, channel=7); _ = g.add_delay(1.0)
        >>> g.channels
        [7, -1]
        """
        return self._channel

    def label(self, task: int) -> str:
        """How errors and reports name a task: its name if given, and always its id."""
        name = self._names[task] if 0 <= task < len(self._names) else ""
        return f"task {name!r} (id {task})" if name else f"task {task}"

    def transfers_in(self, first: int, end: int) -> np.ndarray:
        """Ids of the transfer tasks among ``first:end``, ascending.

        >>> g = TaskGraph(); _ = g.add_delay(1.0); _ = g.add_transfer([0], 1.0, 1.0)
        >>> g.transfers_in(0, 2).tolist()
        [1]
        """
        kinds = np.asarray(self._kind[first:end], dtype=np.int8)
        return first + np.flatnonzero(kinds == TRANSFER)

    def _next_label(self, name: str) -> str:
        task = len(self._kind)
        return f"task {name!r} (id {task})" if name else f"task {task}"

    def _append(self, kind, amount, priority, weight, latency, release, name, deps,
                channel=-1):
        label = self._next_label(name)
        if isinstance(priority, bool) or not isinstance(priority, int | np.integer):
            raise InputError("priority", f"{label}: must be an integer, got {priority!r}")
        check_values(weight, "weight", lambda i: label, positive=True)
        check_values(latency, "latency", lambda i: label)
        check_values(release, "release", lambda i: label)
        dep_ids = dependency_ids(deps, label)
        task = len(self._kind)
        self._dep_task.extend([task] * dep_ids.size)
        self._dep_on.extend(dep_ids.tolist())
        self._kind.append(kind)
        self._amount.append(float(amount))
        self._priority.append(int(priority))
        self._weight.append(float(weight))
        self._latency.append(float(latency))
        self._release.append(float(release))
        self._names.append(str(name))
        self._channel.append(channel)
        return task

    def add_transfer(self, links, usage, size, *, priority=0, weight=1.0, latency=0.0,
                     deps=(), release=0.0, name="", channel=-1) -> int:
        """Add one transfer group (one rate variable); returns its task id.

        Parameters
        ----------
        links : sequence of int
            Link ids the group loads (duplicates add up).
        usage : float or sequence of float
            Load on ``links[i]`` per unit of the group's rate (members crossing it).
        size : float
            Bytes each member moves; the group finishes when ``size`` bytes moved at its rate.
        priority, weight : int, float
            Strict priority class (lower first) and max-min weight.
        latency : float
            Seconds after the start before bytes flow (alpha terms, propagation).
        deps, release : sequence of int, float
            Tasks that must finish first; earliest start time.
        channel : int
            The connection the transfer runs on (a non-negative id; transfers of one id
            reuse their connections' QPs in the packet engine), or -1: none.

        >>> g = TaskGraph()
        >>> g.add_transfer([3, 3, 4], 1.0, 1e6)
        0
        """
        label = self._next_label(name)
        link_ids = as_link_ids(links, label)
        coef = np.broadcast_to(np.asarray(usage, dtype=np.float64), link_ids.shape) \
            if np.ndim(usage) == 0 else np.asarray(usage, dtype=np.float64).ravel()
        if coef.shape != link_ids.shape:
            raise InputError("usage", f"{label}: needs one value per link ({link_ids.size}), "
                                      f"got {coef.size}")
        check_values(coef, "usage", lambda i: label)
        check_values(size, "size", lambda i: label)
        channel = _channel_id(channel, label)
        _, merged_links, merged_usage = merge_rows(
            np.zeros(link_ids.size, dtype=np.int64), link_ids, np.array(coef))
        task = self._append(TRANSFER, size, priority, weight, latency, release, name, deps,
                            channel)
        self._entry_rows.append(np.full(merged_links.size, task, dtype=np.int64))
        self._entry_links.append(merged_links)
        self._entry_usage.append(merged_usage)
        return task

    def add_transfer_paths(self, paths, size, *, members=None, **options) -> int:
        """Add one transfer group from its member paths (``Paths``: CSR ptr/links/weight).

        Every member's path loads its links with the member's weight (1, or the sprayed
        fraction); see :meth:`add_transfer` for the options. The member paths are kept
        (:meth:`member_paths`), or ``members`` instead: the same routes weighted by payload
        bytes per member byte, where ``paths`` carry wire-byte weights.

        >>> g = TaskGraph()
        >>> g.add_transfer_paths([[0, 1], [1, 2]], 8e6, name="ring-step")
        0
        """
        _, links, weight = paths_arrays(paths)
        task = self.add_transfer(links, weight, size, **options)
        ptr, links, weight = paths_arrays(paths if members is None else members)
        self._members.append((np.full(ptr.size - 1, task, dtype=np.int64), ptr, links, weight))
        return task

    def add_transfers(self, paths, sizes, *, priority=0, weight=1.0, latency=0.0,
                      release=0.0, names=None, deps=(), members=None,
                      channel=-1) -> np.ndarray:
        """Add one independent transfer per path (plain flows); returns their task ids.
        Each path is kept as its transfer's member (or the path of ``members``, as in
        :meth:`add_transfer_paths`).

        ``sizes``, ``priority``, ``weight``, ``latency`` and ``release`` are scalars or one
        value per path; ``channel`` (as :meth:`add_transfer`) one id for all; every transfer waits for all the task ids in ``deps``. Every argument
        is checked before the graph changes: a call that raises adds nothing.

        >>> g = TaskGraph()
        >>> g.add_transfers([[0], [0, 1]], [1e6, 2e6]).tolist()
        [0, 1]
        >>> g.add_transfers([[1]], 1e6, deps=[0, 1]).tolist()
        [2]
        """
        ptr, links, coef = paths_arrays(paths)
        n, first = ptr.size - 1, len(self._kind)
        if names is not None:
            names = [names] if isinstance(names, str) else list(names)
            if len(names) != n:
                raise InputError("names", f"need one name per path ({n}), got {len(names)}")
        for field, values in (("sizes", sizes), ("priority", priority), ("weight", weight),
                              ("latency", latency), ("release", release)):
            check_length(values, n, field)

        def label_of(i):
            nm = names[i] if names is not None else ""
            return f"task {nm!r} (id {first + i})" if nm else f"task {first + i}"

        def column(values, field, positive=False):
            arr = np.broadcast_to(np.asarray(values, dtype=np.float64), (n,))
            return check_values(arr, field, label_of, positive)

        size = column(sizes, "size")
        wgt = column(weight, "weight", positive=True)
        lat, rel = column(latency, "latency"), column(release, "release")
        prio = priority_column(priority, n, label_of)
        row = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
        link_ids = np.asarray(links)
        if link_ids.size and (not np.issubdtype(link_ids.dtype, np.integer)
                              and not np.array_equal(link_ids, np.round(link_ids))):
            raise InputError("links", f"{label_of(0)}: link ids must be integers")
        link_ids = link_ids.astype(np.int64)
        if link_ids.size and link_ids.min() < 0:
            i = int(row[np.argmin(link_ids)])
            raise InputError("links", f"{label_of(i)}: unknown link id {int(link_ids.min())}")
        check_values(coef, "weight", lambda e: label_of(int(row[e])))
        dep_ids = dependency_ids(deps, label_of(0) if n else self._next_label(""))
        channel = _channel_id(channel, label_of(0) if n else self._next_label(""))
        rows, merged_links, merged_usage = merge_rows(row, link_ids, coef)
        self._entry_rows.append(rows + first)
        self._entry_links.append(merged_links)
        self._entry_usage.append(merged_usage)
        self._kind.extend([TRANSFER] * n)
        self._amount.extend(size.tolist())
        self._priority.extend(prio.tolist())
        self._weight.extend(wgt.tolist())
        self._latency.extend(lat.tolist())
        self._release.extend(rel.tolist())
        self._names.extend([""] * n if names is None else [str(x) for x in names])
        self._channel.extend([channel] * n)
        m_ptr, m_links, m_weight = (ptr, link_ids, coef) if members is None \
            else paths_arrays(members)
        self._members.append((np.arange(first, first + n, dtype=np.int64), m_ptr, m_links,
                              m_weight))
        if dep_ids.size:
            self._dep_task.extend(np.repeat(np.arange(first, first + n), dep_ids.size).tolist())
            self._dep_on.extend(np.tile(dep_ids, n).tolist())
        return np.arange(first, first + n, dtype=np.int64)

    def member_paths(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(task, ptr, links, weight)``: every kept member path (CSR ``ptr``/``links``),
        the transfer it belongs to and the bytes it moves per byte of the transfer's size.
        Transfers added by :meth:`add_transfer` or copied (:meth:`append_chain`) have none.

        >>> g = TaskGraph(); _ = g.add_delay(1.0)
        >>> _ = g.add_transfer_paths([[0, 1], [1, 2]], 8.0); _ = g.add_transfers([[3]], 1.0)
        >>> task, ptr, links, weight = g.member_paths()
        >>> task.tolist(), ptr.tolist(), links.tolist()
        ([1, 1, 2], [0, 2, 4, 5], [0, 1, 1, 2, 3])
        """
        if not self._members:
            z = np.zeros(0, dtype=np.int64)
            return z, np.zeros(1, dtype=np.int64), z, np.zeros(0)
        tasks = np.concatenate([m[0] for m in self._members])
        offsets = np.cumsum([0] + [m[1][-1] for m in self._members])
        ptr = np.concatenate([[0]] + [m[1][1:] + o for m, o in zip(self._members, offsets,
                                                                     strict=False)])
        links = np.concatenate([np.asarray(m[2], dtype=np.int64) for m in self._members])
        weight = np.concatenate([np.asarray(m[3], dtype=np.float64) for m in self._members])
        return tasks, ptr.astype(np.int64), links, weight

    def add_delay(self, duration, *, deps=(), release=0.0, name="") -> int:
        """Add a fixed wait (compute, a timer); returns its task id.

        >>> g = TaskGraph()
        >>> g.add_delay(1e-3, name="fwd")
        0
        """
        check_values(duration, "duration", lambda i: self._next_label(name))
        return self._append(DELAY, duration, 0, 1.0, 0.0, release, name, deps)

    def append_copy(self, arrays: GraphArrays, *, release: float = 0.0, after=(),
                    priority: int = 0) -> int:
        """Append a copy of a frozen graph (already validated: no per-task checks); returns
        the id of its first task. The copy's task 0 is released at ``release`` and waits for
        ``after`` instead of its own dependencies; every transfer is in class ``priority``.

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

    def add_dependency(self, task: int, dep: int) -> None:
        """Make ``task`` wait for ``dep`` as well (ids may refer to tasks added later).

        >>> g = TaskGraph(); a = g.add_delay(1.0); b = g.add_delay(1.0)
        >>> g.add_dependency(a, b)
        """
        for value in (task, dep):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise InputError("deps", f"dependencies are task ids, got {value!r}")
        self._dep_task.append(int(task))
        self._dep_on.append(int(dep))
        self._acyclic = 0
        self._frozen = None    # an earlier task may wait for more: freeze everything anew

    def arrays(self, n_links: int) -> GraphArrays:
        """Freeze into validated arrays: link ids in range, deps known and acyclic.

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
        if links.size and links.max() >= n_links:
            e = int(np.argmax(links))
            raise InputError("links", f"{self.label(int(rows[e]))} uses unknown link id "
                                      f"{int(links[e])} (the fabric has {n_links} links)")
        order = np.argsort(rows, kind="stable")
        ptr = np.zeros(n + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(rows, minlength=n))
        dep_task = np.asarray(self._dep_task, dtype=np.int64)
        dep_on = np.asarray(self._dep_on, dtype=np.int64)
        if dep_on.size and dep_on.max() >= n:
            i = int(np.argmax(dep_on))
            raise InputError("deps", f"{self.label(int(dep_task[i]))} depends on unknown task "
                                     f"{int(dep_on[i])} (the graph has {n} tasks)")
        dep_order = np.argsort(dep_task, kind="stable")
        dep_ptr = np.zeros(n + 1, dtype=np.int64)
        dep_ptr[1:] = np.cumsum(np.bincount(dep_task, minlength=n))
        deps = dep_on[dep_order]
        cycle = None if self._acyclic == n else find_cycle(n, dep_ptr, deps)
        if cycle is not None:
            names = [self.label(t) for t in cycle] + [self.label(cycle[0])]
            raise InputError("deps", "dependency cycle: " + " waits for ".join(names))
        self._acyclic = n
        out = GraphArrays(
            kind=np.asarray(self._kind, dtype=np.int8),
            amount=np.asarray(self._amount, dtype=np.float64),
            priority=np.asarray(self._priority, dtype=np.int64),
            weight=np.asarray(self._weight, dtype=np.float64),
            latency=np.asarray(self._latency, dtype=np.float64),
            release=np.asarray(self._release, dtype=np.float64),
            ptr=ptr, links=links[order], usage=usage[order], dep_ptr=dep_ptr, deps=deps,
            channel=np.asarray(self._channel, dtype=np.int64),
        )
        if dep_task.size == 0 or dep_task.max() < n:
            self._frozen = (out, n_links, len(self._entry_rows), dep_task.size)
        return out

    def _grown_arrays(self, old: GraphArrays, n_links: int, n_chunks: int,
                      n_dep: int) -> GraphArrays | None:
        """:meth:`arrays` as the last freeze ``old`` plus the tasks added since, in time
        proportional to those; ``None`` if an entry or dependency added since belongs to an
        older task (then the caller freezes everything)."""
        n0, n = old.kind.size, len(self._kind)
        rows = self._entry_rows[n_chunks:]
        rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        dep_task = np.asarray(self._dep_task[n_dep:], dtype=np.int64)
        if (rows.size and rows.min() < n0) or (dep_task.size and dep_task.min() < n0):
            return None
        links = np.concatenate(self._entry_links[n_chunks:]) if rows.size \
            else np.zeros(0, np.int64)
        usage = np.concatenate(self._entry_usage[n_chunks:]) if rows.size else np.zeros(0)
        if links.size and links.max() >= n_links:
            e = int(np.argmax(links))
            raise InputError("links", f"{self.label(int(rows[e]))} uses unknown link id "
                                      f"{int(links[e])} (the fabric has {n_links} links)")
        dep_on = np.asarray(self._dep_on[n_dep:], dtype=np.int64)
        if dep_on.size and dep_on.max() >= n:
            i = int(np.argmax(dep_on))
            raise InputError("deps", f"{self.label(int(dep_task[i]))} depends on unknown task "
                                     f"{int(dep_on[i])} (the graph has {n} tasks)")
        if dep_task.size and dep_task.max() >= n:
            return None
        # a stable sort of the new entries alone orders them as a stable sort of all would:
        # every earlier entry belongs to an earlier task
        order = np.argsort(rows, kind="stable")
        ptr = np.empty(n + 1, dtype=np.int64)
        ptr[:n0 + 1] = old.ptr
        ptr[n0 + 1:] = old.ptr[-1] + np.cumsum(np.bincount(rows - n0, minlength=n - n0))
        dep_ptr = np.empty(n + 1, dtype=np.int64)
        dep_ptr[:n0 + 1] = old.dep_ptr
        dep_ptr[n0 + 1:] = old.dep_ptr[-1] + np.cumsum(np.bincount(dep_task - n0,
                                                                   minlength=n - n0))
        deps = np.concatenate([old.deps, dep_on[np.argsort(dep_task, kind="stable")]])
        if self._acyclic != n:
            cycle = find_cycle(n, dep_ptr, deps)
            if cycle is not None:
                names = [self.label(t) for t in cycle] + [self.label(cycle[0])]
                raise InputError("deps", "dependency cycle: " + " waits for ".join(names))
            self._acyclic = n

        def column(values, old_column, dtype):
            return np.concatenate([old_column, np.asarray(values[n0:], dtype=dtype)])

        out = GraphArrays(
            kind=column(self._kind, old.kind, np.int8),
            amount=column(self._amount, old.amount, np.float64),
            priority=column(self._priority, old.priority, np.int64),
            weight=column(self._weight, old.weight, np.float64),
            latency=column(self._latency, old.latency, np.float64),
            release=column(self._release, old.release, np.float64),
            ptr=ptr, links=np.concatenate([old.links, links[order]]),
            usage=np.concatenate([old.usage, usage[order]]), dep_ptr=dep_ptr, deps=deps,
            channel=column(self._channel, old.channel, np.int64))
        self._frozen = (out, n_links, len(self._entry_rows), len(self._dep_task))
        return out


def _channel_id(channel, label: str) -> int:
    """``channel`` as a connection id: a non-negative integer, or -1 (none)."""
    if isinstance(channel, bool) or not isinstance(channel, int | np.integer) or channel < -1:
        raise InputError("channel", f"{label}: a connection id >= 0 or -1 (none), "
                                    f"got {channel!r}")
    return int(channel)
