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
    # each entry as the (graph, task, usage) that a twin must repeat exactly
    graph = np.repeat(np.arange(len(arrays)), sizes)
    task = np.concatenate([np.repeat(np.arange(a.ptr.size - 1), np.diff(a.ptr))
                           for a in arrays])
    usage = np.concatenate([a.usage for a in arrays]).astype(np.float64)
    _, entry_id = np.unique(np.stack([graph, task, usage.view(np.int64)]), axis=1,
                            return_inverse=True)
    used, link_of = np.unique(links, return_inverse=True)
    order = np.lexsort((entry_id.ravel(), link_of))
    bounds = np.searchsorted(link_of[order], np.arange(used.size + 1))
    ids = entry_id.ravel()[order]
    signature = [ids[bounds[i]:bounds[i + 1]].tobytes() for i in range(used.size)]
    keep = np.zeros(used.size, dtype=np.bool_)
    best: dict = {}
    for i, sig in enumerate(signature):
        j = best.get(sig)
        if j is None or cap[used[i]] < cap[used[j]]:
            best[sig] = i
    keep[list(best.values())] = True
    rank = np.cumsum(keep) - 1
    kept_entry = keep[link_of]
    out, start = [], 0
    for a, n in zip(arrays, sizes, strict=True):
        mine = kept_entry[start:start + n]
        rows = np.repeat(np.arange(a.ptr.size - 1), np.diff(a.ptr))
        ptr = np.concatenate([[0], np.cumsum(np.bincount(rows[mine],
                                                         minlength=a.ptr.size - 1))])
        out.append(replace(a, ptr=ptr.astype(a.ptr.dtype),
                           links=rank[link_of[start:start + n][mine]].astype(a.links.dtype),
                           usage=a.usage[mine]))
        start += n
    return out, cap[used[keep]]
