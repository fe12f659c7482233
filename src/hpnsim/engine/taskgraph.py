"""TaskGraph: the work of a simulation as flat arrays (transfer groups, delays, dependencies).

A *transfer* is one rate variable: it loads link ``links[i]`` with ``usage[i]`` times its rate
and finishes when ``size`` bytes have moved at that rate (a ring step of N member flows is one
transfer with ``size`` = bytes per member and usage = members per link). A *delay* is a fixed
wait (compute). A task starts at ``max(release, finish of every dependency)``; a transfer's
bytes start flowing ``latency`` seconds after it starts.
"""

from __future__ import annotations

import numpy as np

from hpnsim.engine.buffers import Column
from hpnsim.engine.copies import CopyAppends
from hpnsim.engine.freeze import DELAY, TASK_COLUMNS, TRANSFER, FrozenColumns, GraphArrays
from hpnsim.engine.validate import (
    as_link_ids,
    check_length,
    check_values,
    dependency_ids,
    merge_rows,
    paths_arrays,
    priority_column,
)
from hpnsim.errors import InputError

__all__ = ["TaskGraph", "GraphArrays", "TRANSFER", "DELAY"]


class TaskGraph(FrozenColumns, CopyAppends):
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
        # the per-task columns (freeze.TASK_COLUMNS: _kind ... _channel) grow in buffers
        # that a freeze views rather than converts (a probe appends ~10^6 tasks by copies)
        for column, dtype in TASK_COLUMNS:
            setattr(self, "_" + column, Column(dtype))
        self._names: list[str] = []
        self._entry_rows: list[np.ndarray] = []
        self._entry_links: list[np.ndarray] = []
        self._entry_usage: list[np.ndarray] = []
        self._dep_task = Column(np.int64)
        self._dep_on = Column(np.int64)
        # the first tasks known to form no cycle: a validated graph, grown only by
        # append_copy (a copy of an acyclic graph waiting on earlier tasks adds no cycle)
        self._acyclic = 0
        # the last freeze, (arrays, n_links, entry chunks, dep entries): tasks added since
        # only bring rows and dependencies of their own, so the next freeze appends theirs
        self._frozen = None
        # the buffers the last freeze's arrays view, with room for the next (buffers.room)
        self._frozen_room: dict[str, np.ndarray] = {}
        # per copied graph (by id) what its copies repeat (CopyAppends._copy_plan)
        self._copy_plans: dict[int, tuple] = {}
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
        :attr:`hpnsim.collectives.schedules.schedule.Stage.channel`), or -1: none (delays too).

        >>> g = TaskGraph(); _ = g.add_transfer([0], 1.0, 8.0, channel=7); _ = g.add_delay(1.0)
        >>> g.channels
        [7, -1]
        """
        return self._channel.values.tolist()

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
        return first + np.flatnonzero(self._kind.values[first:end] == TRANSFER)

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


def _channel_id(channel, label: str) -> int:
    """``channel`` as a connection id: a non-negative integer, or -1 (none)."""
    if isinstance(channel, bool) or not isinstance(channel, int | np.integer) or channel < -1:
        raise InputError("channel", f"{label}: a connection id >= 0 or -1 (none), "
                                    f"got {channel!r}")
    return int(channel)
