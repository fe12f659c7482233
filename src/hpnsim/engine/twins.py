"""Twin links: links that every task of a set of graphs crosses alike, kept once.

Two links are *twins* when exactly the same tasks cross them, each with the same usage. Their
max-min constraints then differ only in capacity, and the tighter one decides: in every
water-filling round the looser twin's fair share is no lower than the tighter one's, over
the same variables, so it never freezes a variable the tighter twin would not freeze in the
same round (:mod:`hpnsim.engine.maxmin`). Dropping the looser twins leaves every rate, and so
every finish time, exactly as it was, while the event loop walks fewer link entries. A
steady-state probe of a cluster's jobs appends many copies of a few iteration templates; the
links a job's ring crosses (its NICs, its ToR ports, its uplinks) are mostly twins of each
other: in the 60-job Lingjun comparison a template keeps about a quarter of its entries.

Only finish times survive the merge: per-link statistics (bytes carried, busy time) of the
dropped links are not computed, so a caller that reads them must not merge.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

__all__ = ["merge_twin_links"]


def merge_twin_links(arrays: list, capacity) -> tuple[list, np.ndarray]:
    """Keep one link of every set of twins across ``arrays`` and number the kept links in
    order.

    Parameters
    ----------
    arrays : list of :class:`~hpnsim.engine.freeze.GraphArrays`
        Graphs whose copies (and only those) will share the links: twins are decided over
        all of them together (a copy of graph ``j`` crosses the links graph ``j`` does).
    capacity : array of float
        Bytes/s per link id used in ``arrays``.

    Returns
    -------
    (list of GraphArrays, numpy.ndarray)
        The graphs with only the kept links' entries (links renumbered ``0..k-1`` in the
        order of their ids) and the kept links' capacities. Of a set of twins the one of
        lowest capacity is kept (ties: the lowest id).

    Examples
    --------
    Links 3 and 7 carry the same two tasks; link 5 carries only the first one:

    >>> from hpnsim.engine import TaskGraph
    >>> g = TaskGraph()
    >>> _ = g.add_transfer([3, 5, 7], 1.0, 10.0); _ = g.add_transfer([3, 7], 1.0, 10.0)
    >>> (a,), cap = merge_twin_links([g.arrays(8)], np.arange(8.0))
    >>> a.links.tolist(), a.ptr.tolist(), cap.tolist()
    ([0, 1, 0], [0, 2, 3], [3.0, 5.0])
    """
    cap = np.asarray(capacity, dtype=np.float64)
    sizes = [a.links.size for a in arrays]
    if not sum(sizes):
        return list(arrays), cap[:0].copy()
    links = np.concatenate([a.links for a in arrays]).astype(np.int64)
    graph = np.repeat(np.arange(len(arrays), dtype=np.int64), sizes)
    task = np.concatenate([np.repeat(np.arange(a.ptr.size - 1), np.diff(a.ptr))
                           for a in arrays]).astype(np.int64)
    usage = np.concatenate([a.usage for a in arrays]).astype(np.float64)
    entry = _entry_ids(graph * (int(task.max()) + 1) + task, usage.view(np.int64))
    used, link_of = np.unique(links, return_inverse=True)
    link_of = link_of.ravel()
    # each link's entries as a sorted run: twins are links with equal runs
    order = np.lexsort((entry, link_of))
    runs = entry[order]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(link_of, minlength=used.size))])
    group = _equal_runs(runs, bounds)
    # per group the link of lowest capacity (ties: the lowest id)
    best = np.lexsort((np.arange(used.size), cap[used], group))
    first = np.concatenate([[True], group[best][1:] != group[best][:-1]])
    keep = np.zeros(used.size, dtype=np.bool_)
    keep[best[first]] = True
    rank = np.cumsum(keep) - 1
    kept_entry = keep[link_of]
    out, start = [], 0
    for a, n in zip(arrays, sizes, strict=True):
        mine = kept_entry[start:start + n]
        rows = task[start:start + n][mine]
        ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=a.ptr.size - 1))])
        out.append(replace(a, ptr=ptr.astype(a.ptr.dtype),
                           links=rank[link_of[start:start + n][mine]].astype(a.links.dtype),
                           usage=a.usage[mine]))
        start += n
    return out, cap[used[keep]]


def _entry_ids(key: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Dense ids of the distinct ``(key, bits)`` pairs."""
    order = np.lexsort((bits, key))
    k, b = key[order], bits[order]
    new = np.concatenate([[True], (k[1:] != k[:-1]) | (b[1:] != b[:-1])])
    ids = np.empty(key.size, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


def _equal_runs(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per run ``values[bounds[i]:bounds[i + 1]]`` (each non-empty) a group id, equal for
    equal runs and only for them: runs are grouped by length and two 64-bit sums of mixed
    values, then checked element by element against their group's first run (a hash
    collision, never seen, falls back to comparing the runs' bytes)."""
    n = bounds.size - 1
    lengths = np.diff(bounds)
    v = values.astype(np.uint64)
    h1 = np.add.reduceat(_mix(v), bounds[:-1])
    h2 = np.add.reduceat(_mix(v ^ np.uint64(0x9E3779B97F4A7C15)), bounds[:-1])
    _, group = np.unique(np.stack([lengths, h1.view(np.int64), h2.view(np.int64)], axis=1),
                         axis=0, return_inverse=True)
    group = group.ravel()
    # the first run of every group, and each element against the same place in it
    first_run = np.full(group.max() + 1, n, dtype=np.int64)
    np.minimum.at(first_run, group, np.arange(n))
    run_of = np.repeat(np.arange(n), lengths)
    offset = np.arange(values.size) - bounds[run_of]
    same = values == values[bounds[first_run[group[run_of]]] + offset]
    if same.all():
        return group
    seen: dict = {}
    return np.array([seen.setdefault(values[bounds[i]:bounds[i + 1]].tobytes(), len(seen))
                     for i in range(n)], dtype=np.int64)


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit finalizer (splitmix64's): every input bit moves every output bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))
