"""Exact max-min fair rates by local-minimum water-filling, on flat CSR arrays.

A *variable* is one rate (a flow or a transfer group). Variable ``v`` loads link
``links[e]`` with ``usage[e] * rate[v]`` for ``e`` in ``ptr[v]:ptr[v+1]``. Weighted max-min
gives ``rate[v] = weight[v] * level[v]`` and maximizes levels lexicographically.

Each round computes every active link's fair share ``rem / sum(usage * weight)`` and freezes
every link whose share is no larger than the share of every link its unfrozen variables
cross (a local minimum). Progressive filling would reach such a link at exactly that level:
shares only rise while lower links freeze. So the result equals one-bottleneck-at-a-time
progressive filling, in far fewer rounds. Strict priority classes (lower number first) are
filled in order on the capacity the earlier classes leave.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.engine.heapfill import _two_sum, fill_class_heap
from hpnsim.engine.validate import check_capacity, check_usage_matrix, check_variable_array


def make_workspace(n_links: int, n_vars: int):
    """Scratch arrays for :func:`solve_subset` (allocated once, reused for every solve).

    Per link: remaining capacity (hi, lo), weight sums (hi, lo), fair share, lowest level
    of a crossing variable, two round stamps, a link list, a local index (-1); per variable:
    level and worklist; and the round clock.
    """
    f = np.zeros((6, n_links))
    i = np.full((4, n_links), -1, dtype=np.int64)
    return (f[0], f[1], f[2], f[3], f[4], f[5], i[0], i[1], i[2], i[3],
            np.empty(n_vars), np.empty(n_vars, dtype=np.int64), np.zeros(1, dtype=np.int64))


@njit(cache=True)
def fill_class(act, n_act, ptr, links, usage, weight, rate, ws, switch_at, bound):
    """Water-fill the variables ``act[:n_act]`` (one priority class) on capacity ``rem``.

    ``bound[v]`` is the lowest fair share of the links that only variable ``v`` crosses
    and that are left out of its row (``inf``: none left out): such a link's share stays
    ``capacity / (usage * weight)`` (nothing else loads it), so it only enters ``v``'s
    level and freezes ``v`` when it is the lowest.

    ``rem`` (in the workspace) is reduced in place by what the class takes; ``rate``
    receives the rates; ``act`` is overwritten (it is the shrinking worklist). Link weight
    sums and remaining capacities are updated incrementally as variables freeze, with
    compensated (two-sum) arithmetic so they stay exact through long cancellations.

    Returns how many variables are left unfrozen: when more than ``switch_at`` remain and a
    round froze under 1/16 of them (``switch_at < 0``: at once), rounds stop paying and the
    caller finishes with the link-share heap. Every frozen rate is final, so the rest is
    the max-min problem of the remaining variables on the remaining capacity.
    """
    if switch_at < 0:
        return n_act
    rem, rem_lo, denom, denom_lo, share, mlink, mstamp, tstamp, touched, _, level, _, clock = ws
    for i in range(n_act):
        v = act[i]
        for e in range(ptr[v], ptr[v + 1]):
            denom[links[e]] = 0.0
            denom_lo[links[e]] = 0.0
    for i in range(n_act):
        v = act[i]
        w = weight[v]
        for e in range(ptr[v], ptr[v + 1]):
            lk = links[e]
            denom[lk], err = _two_sum(denom[lk], usage[e] * w)
            denom_lo[lk] += err
    for i in range(n_act):
        v = act[i]
        for e in range(ptr[v], ptr[v + 1]):
            lk = links[e]
            share[lk] = max(rem[lk] + rem_lo[lk], 0.0) / (denom[lk] + denom_lo[lk])
    n_last = frozen_last = 1
    while n_act > 0:
        if n_act > switch_at and frozen_last * 16 < n_last:
            return n_act
        n_last = n_act
        clock[0] += 1
        rnd = clock[0]
        for i in range(n_act):
            v = act[i]
            m = bound[v]
            for e in range(ptr[v], ptr[v + 1]):
                s = share[links[e]]
                if s < m:
                    m = s
            level[i] = m
            for e in range(ptr[v], ptr[v + 1]):
                lk = links[e]
                if mstamp[lk] != rnd:
                    mstamp[lk] = rnd
                    mlink[lk] = m
                elif m < mlink[lk]:
                    mlink[lk] = m
        kept = 0
        n_touched = 0
        for i in range(n_act):
            v = act[i]
            frozen = bound[v] <= level[i]
            if not frozen:
                for e in range(ptr[v], ptr[v + 1]):
                    lk = links[e]
                    if share[lk] <= mlink[lk]:
                        frozen = True
                        break
            if frozen:
                w = weight[v]
                r = w * level[i]
                rate[v] = r
                for e in range(ptr[v], ptr[v + 1]):
                    lk = links[e]
                    rem[lk], err = _two_sum(rem[lk], -usage[e] * r)
                    rem_lo[lk] += err
                    denom[lk], err = _two_sum(denom[lk], -usage[e] * w)
                    denom_lo[lk] += err
                    if tstamp[lk] != rnd:
                        tstamp[lk] = rnd
                        touched[n_touched] = lk
                        n_touched += 1
            else:
                act[kept] = v
                kept += 1
        frozen_last = n_act - kept
        n_act = kept
        for k in range(n_touched):
            lk = touched[k]
            d = denom[lk] + denom_lo[lk]
            share[lk] = max(rem[lk] + rem_lo[lk], 0.0) / d if d > 0.0 else np.inf
    return 0


@njit(cache=True)
def solve_subset(vars_, priority, ptr, links, usage, weight, capacity, rate, ws, switch_at,
                 bound):
    """Max-min rates of the variables ``vars_`` (sorted by priority) into ``rate``.

    The set must be closed: no variable outside it uses its links. Variables without links
    (and no ``bound``) get an infinite rate (nothing limits them). ``ws`` is from
    :func:`make_workspace`; ``bound`` as in :func:`fill_class`, all ``inf`` unless no more
    than ``switch_at`` variables are solved (the heap fill does not read it).
    Classes are filled by local-minimum rounds (no set-up) and finished with the link-share
    heap (no rescans) once rounds stop paying; see :func:`fill_class` for ``switch_at``.
    """
    rem, rem_lo = ws[0], ws[1]
    act = ws[11]
    n = vars_.shape[0]
    for i in range(n):
        v = vars_[i]
        for e in range(ptr[v], ptr[v + 1]):
            rem[links[e]] = capacity[links[e]]
            rem_lo[links[e]] = 0.0
    start = 0
    while start < n:
        cls = priority[vars_[start]]
        n_act = 0
        stop = start
        while stop < n and priority[vars_[stop]] == cls:
            v = vars_[stop]
            if ptr[v + 1] > ptr[v] or bound[v] < np.inf:
                act[n_act] = v
                n_act += 1
            else:
                rate[v] = np.inf
            stop += 1
        n_act = fill_class(act, n_act, ptr, links, usage, weight, rate, ws, switch_at, bound)
        if n_act > 0:
            fill_class_heap(act, n_act, ptr, links, usage, weight, rate, ws)
        start = stop


#: local-minimum rounds may hand over to the heap only while more variables than this remain
SWITCH_AT = 4096


def solve_csr(capacity, ptr, links, usage, weight, priority, switch_at=SWITCH_AT):
    """Rates of all variables of a validated CSR problem (no copying of the CSR arrays)."""
    n_vars = ptr.shape[0] - 1
    order = np.argsort(priority, kind="stable").astype(np.int64)
    rate = np.zeros(n_vars)
    solve_subset(order, priority, ptr, links, usage, weight, capacity, rate,
                 make_workspace(capacity.shape[0], n_vars), switch_at, np.full(n_vars, np.inf))
    return rate


def maxmin_rates(capacity, usage, priority=None, weight=None) -> np.ndarray:
    """Exact (weighted, strict-priority) max-min fair rate of every variable.

    Parameters
    ----------
    capacity : array of float, shape (n_links,)
        Link capacities in bytes/s (finite, >= 0).
    usage : scipy.sparse matrix, shape (n_vars, n_links)
        ``usage[v, l]`` is how much of variable ``v``'s rate link ``l`` carries (1 per member
        flow crossing it, fractional for spraying). Entries must be finite and >= 0.
    priority : array of int, optional
        Strict priority class per variable; lower numbers are served first.
    weight : array of float, optional
        Weighted max-min: ``rate = weight * level`` (weights > 0; default 1).

    Returns
    -------
    numpy.ndarray
        Rate per variable in bytes/s; ``inf`` for a variable that uses no link.

    Examples
    --------
    Two flows share link 0 (capacity 10); the second also crosses link 1 (capacity 2):

    >>> import scipy.sparse as sp
    >>> usage = sp.csr_matrix([[1.0, 0.0], [1.0, 1.0]])
    >>> maxmin_rates([10.0, 2.0], usage).tolist()
    [8.0, 2.0]
    >>> maxmin_rates([10.0, 2.0], usage, priority=[1, 0]).tolist()
    [8.0, 2.0]
    >>> maxmin_rates([10.0, 20.0], usage, weight=[1.0, 4.0]).tolist()
    [2.0, 8.0]
    """
    cap = check_capacity(capacity)
    ptr, links, coef = check_usage_matrix(usage, cap.shape[0])
    n_vars = ptr.shape[0] - 1
    prio = check_variable_array(priority, n_vars, "priority", np.int64, 0)
    w = check_variable_array(weight, n_vars, "weight", np.float64, 1.0, positive=True)
    return solve_csr(cap, ptr, links, coef, w, prio)
