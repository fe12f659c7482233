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

from hpnsim.engine.validate import check_capacity, check_usage_matrix, check_variable_array


@njit(cache=True)
def fill_class(act, n_act, ptr, links, usage, weight, rem, rate, denom, share, mlink, level):
    """Water-fill the variables ``act[:n_act]`` (one priority class) on capacity ``rem``.

    ``rem`` is reduced in place by what the class takes; ``rate`` receives the rates.
    ``act`` is overwritten (used as the shrinking worklist). ``denom``, ``share``, ``mlink``
    are per-link scratch, ``level`` per-position scratch (length >= n_act).
    """
    while n_act > 0:
        for i in range(n_act):
            v = act[i]
            for e in range(ptr[v], ptr[v + 1]):
                denom[links[e]] = 0.0
        for i in range(n_act):
            v = act[i]
            w = weight[v]
            for e in range(ptr[v], ptr[v + 1]):
                denom[links[e]] += usage[e] * w
        for i in range(n_act):
            v = act[i]
            for e in range(ptr[v], ptr[v + 1]):
                lk = links[e]
                r = rem[lk]
                if r < 0.0:
                    r = 0.0
                share[lk] = r / denom[lk]
                mlink[lk] = np.inf
        for i in range(n_act):
            v = act[i]
            m = np.inf
            for e in range(ptr[v], ptr[v + 1]):
                s = share[links[e]]
                if s < m:
                    m = s
            level[i] = m
            for e in range(ptr[v], ptr[v + 1]):
                lk = links[e]
                if m < mlink[lk]:
                    mlink[lk] = m
        kept = 0
        for i in range(n_act):
            v = act[i]
            frozen = False
            for e in range(ptr[v], ptr[v + 1]):
                lk = links[e]
                if share[lk] <= mlink[lk]:
                    frozen = True
                    break
            if frozen:
                r = weight[v] * level[i]
                rate[v] = r
                for e in range(ptr[v], ptr[v + 1]):
                    rem[links[e]] -= usage[e] * r
            else:
                act[kept] = v
                level[kept] = level[i]
                kept += 1
        n_act = kept


@njit(cache=True)
def solve_subset(vars_, priority, ptr, links, usage, weight, capacity, rate,
                 rem, denom, share, mlink, level, act):
    """Max-min rates of the variables ``vars_`` (sorted by priority) into ``rate``.

    The set must be closed: no variable outside it uses its links. Variables without links
    get an infinite rate (nothing limits them).
    """
    n = vars_.shape[0]
    for i in range(n):
        v = vars_[i]
        for e in range(ptr[v], ptr[v + 1]):
            rem[links[e]] = capacity[links[e]]
    start = 0
    while start < n:
        cls = priority[vars_[start]]
        n_act = 0
        stop = start
        while stop < n and priority[vars_[stop]] == cls:
            v = vars_[stop]
            if ptr[v + 1] > ptr[v]:
                act[n_act] = v
                n_act += 1
            else:
                rate[v] = np.inf
            stop += 1
        fill_class(act, n_act, ptr, links, usage, weight, rem, rate, denom, share, mlink, level)
        start = stop


def solve_csr(capacity, ptr, links, usage, weight, priority) -> np.ndarray:
    """Rates of all variables of a validated CSR problem (no copying of the CSR arrays)."""
    n_vars = ptr.shape[0] - 1
    n_links = capacity.shape[0]
    order = np.argsort(priority, kind="stable").astype(np.int64)
    rate = np.zeros(n_vars)
    solve_subset(order, priority, ptr, links, usage, weight, capacity, rate,
                 np.empty(n_links), np.empty(n_links), np.empty(n_links), np.empty(n_links),
                 np.empty(n_vars), np.empty(n_vars, dtype=np.int64))
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
