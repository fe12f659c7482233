"""Priority compression: many jobs' strict order onto the K queues a switch offers.

Crux (SIGCOMM 2024, section 4.3; reference/crux.md) builds a *contention DAG*: a node per
job and an edge ``u -> v`` of weight ``I_u`` when jobs ``u`` and ``v`` share a link and
``u`` comes first in the priority order. Jobs go into ``K`` ordered levels with no edge
pointing upward (a job never sits above one that precedes it and shares a link with it);
an edge whose ends land on different levels keeps its priority, so the goal is the
heaviest such cut (a max K-cut). Heuristic: take a topological order, cut it into ``K``
consecutive blocks by dynamic programming, ``f(i, k) = max_{j <= i} f(j, k-1) + C(j, i)``
with ``C(j, i)`` (the weight of edges from the first ``j`` jobs into jobs ``j..i-1``) read
from 2-D prefix sums; try several topological orders and keep the best.

Levels here are numbered as in the paper: ``K-1`` is the highest, 0 the lowest (the engine's
priority class of a level is ``K-1-level``).
"""

from __future__ import annotations

import itertools

import numpy as np

from hpnsim.errors import InputError

#: with at most this many jobs every topological order is tried (the DP is then optimal)
EXHAUSTIVE_JOBS = 6


def check_levels(k) -> int:
    """``K`` as an int >= 1, else an InputError naming ``K``.

    >>> check_levels(2)
    2
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InputError("K", f"the number of priority classes must be an integer >= 1, "
                              f"got {k!r}")
    return int(k)


def sharing_matrix(job_links) -> np.ndarray:
    """``share[u, v]``: jobs ``u`` and ``v`` (``u != v``) have a link in common.

    >>> sharing_matrix([[0, 1], [1], [2]]).astype(int).tolist()
    [[0, 1, 0], [1, 0, 0], [0, 0, 0]]
    """
    n = len(job_links)
    rows = [np.asarray(links, dtype=np.int64).ravel() for links in job_links]
    # columns: the links some job uses (not every link id up to the largest)
    used = np.unique(np.concatenate(rows or [np.zeros(0, np.int64)]))
    member = np.zeros((n, used.size), dtype=np.float64)
    for j, r in enumerate(rows):
        member[j, np.searchsorted(used, r)] = 1.0
    share = (member @ member.T) > 0
    np.fill_diagonal(share, False)
    return share


def contention_dag(share, order, intensity) -> np.ndarray:
    """Edge weights ``w[u, v] = I_u`` where ``u`` and ``v`` share a link and ``u`` precedes
    ``v`` in ``order`` (job indices, highest priority first); 0 elsewhere.

    >>> contention_dag(sharing_matrix([[0], [0], [1]]), [1, 0, 2], [3.0, 5.0, 1.0]).tolist()
    [[0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    share = np.asarray(share, dtype=bool)
    n = share.shape[0]
    rank = np.empty(n, dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(n)
    before = rank[:, None] < rank[None, :]
    return np.where(share & before, np.asarray(intensity, dtype=np.float64)[:, None], 0.0)


def cut_value(weights, levels) -> float:
    """Weight of the edges whose ends sit on different levels; ``-inf`` if one points up.

    >>> w = np.array([[0, 2.0], [0, 0]])
    >>> cut_value(w, [1, 0]), cut_value(w, [1, 1]), cut_value(w, [0, 1])
    (2.0, 0.0, -inf)
    """
    w = np.asarray(weights, dtype=np.float64)
    lv = np.asarray(levels)
    edge = w > 0
    if np.any(edge & (lv[:, None] < lv[None, :])):
        return -np.inf
    return float(w[edge & (lv[:, None] > lv[None, :])].sum())


def split_order(weights, order, k: int) -> tuple[float, np.ndarray]:
    """Best cut of a topological ``order`` into ``k`` consecutive blocks (levels).

    Returns ``(cut weight, level per job)``; the first block gets level ``k-1``.

    >>> w = np.zeros((4, 4)); w[0, 1] = w[2, 3] = 1.0
    >>> split_order(w, [0, 2, 1, 3], 2)
    (2.0, array([1, 0, 1, 0]))
    """
    order = np.asarray(order, dtype=np.int64)
    n = order.size
    a = np.asarray(weights, dtype=np.float64)[np.ix_(order, order)]
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = a.cumsum(0).cumsum(1)
    # C(j, i) = prefix[j, i] - prefix[j, j]: edges from positions < j into j..i-1
    cross = prefix - np.diag(prefix)[:, None]
    valid = np.triu(np.ones((n + 1, n + 1), dtype=bool))     # j <= i
    f = np.full(n + 1, -np.inf)
    f[0] = 0.0
    choice = np.zeros((k + 1, n + 1), dtype=np.int64)
    for level in range(1, k + 1):
        cand = np.where(valid, f[:, None] + cross, -np.inf)
        choice[level] = np.argmax(cand, axis=0)
        f = cand[choice[level], np.arange(n + 1)]
    levels = np.zeros(n, dtype=np.int64)
    end = n
    for block in range(k, 0, -1):        # block k is the last one (lowest level)
        start = choice[block][end]
        levels[order[start:end]] = k - block
        end = start
    return float(f[n]), levels


def _predecessors(weights) -> list[list[int]]:
    w = np.asarray(weights)
    return [np.flatnonzero(w[:, v] > 0).tolist() for v in range(w.shape[0])]


def depth_order(weights, order) -> np.ndarray:
    """Topological order by longest-path depth, ties by ``order``: jobs that need not wait
    for each other come together (their edges to later jobs can all be cut at once).

    >>> w = np.zeros((4, 4)); w[0, 1] = w[2, 3] = 1.0
    >>> depth_order(w, [0, 1, 2, 3]).tolist()
    [0, 2, 1, 3]
    """
    pred = _predecessors(weights)
    depth = np.zeros(len(pred), dtype=np.int64)
    for v in order:                      # order is topological: predecessors come first
        depth[v] = max((depth[u] + 1 for u in pred[v]), default=0)
    rank = np.empty(len(pred), dtype=np.int64)
    rank[np.asarray(order)] = np.arange(len(pred))
    return np.lexsort((rank, depth))


def random_topological_order(weights, rng) -> np.ndarray:
    """A topological order drawn by Kahn's algorithm with a random ready job each step.

    >>> w = np.zeros((3, 3)); w[0, 1] = 1.0
    >>> o = random_topological_order(w, np.random.default_rng(0)).tolist()
    >>> o.index(0) < o.index(1)
    True
    """
    w = np.asarray(weights) > 0
    indeg = w.sum(axis=0).astype(np.int64)
    ready = sorted(np.flatnonzero(indeg == 0).tolist())
    out = []
    while ready:
        v = ready.pop(int(rng.integers(len(ready))))
        out.append(v)
        for u in np.flatnonzero(w[v]).tolist():
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    return np.asarray(out, dtype=np.int64)


def _all_topological_orders(weights):
    w = np.asarray(weights) > 0
    n = w.shape[0]
    for perm in itertools.permutations(range(n)):
        rank = np.empty(n, dtype=np.int64)
        rank[list(perm)] = np.arange(n)
        src, dst = np.nonzero(w)
        if np.all(rank[src] < rank[dst]):
            yield np.asarray(perm, dtype=np.int64)


def max_k_cut(weights, order, k, *, samples: int = 10, seed: int = 0):
    """Levels (``k-1`` highest) for the jobs of a contention DAG, maximising the cut.

    Tries the priority ``order`` itself, :func:`depth_order` and random topological orders
    (``samples`` in all, seeded); with at most ``EXHAUSTIVE_JOBS`` jobs it tries every
    topological order, so the result is the optimum. Returns ``(cut weight, levels)``.

    Examples
    --------
    The paper's four jobs in decreasing priority, 1-2 sharing a link and 3-4 another,
    two levels:

    >>> w = contention_dag(sharing_matrix([[0], [0], [1], [1]]), [0, 1, 2, 3], [1.0] * 4)
    >>> value, levels = max_k_cut(w, [0, 1, 2, 3], 2)
    >>> value, levels.tolist()
    (2.0, [1, 0, 1, 0])
    """
    k = check_levels(k)
    if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 1:
        raise InputError("samples", f"must be an integer >= 1, got {samples!r}")
    w = np.asarray(weights, dtype=np.float64)
    order = np.asarray(order, dtype=np.int64)
    n = order.size
    if n == 0:
        return 0.0, np.zeros(0, dtype=np.int64)
    if n <= EXHAUSTIVE_JOBS:
        candidates = _all_topological_orders(w)
    else:
        rng = np.random.default_rng(seed)
        fixed = [order, depth_order(w, order)]
        candidates = itertools.chain(
            fixed, (random_topological_order(w, rng) for _ in range(max(0, samples - 2))))
    best_value, best_levels = -np.inf, None
    for cand in candidates:
        value, levels = split_order(w, cand, k)
        if value > best_value:
            best_value, best_levels = value, levels
    return best_value, best_levels


def sincronia_levels(order, k) -> np.ndarray:
    """Sincronia's compression: the first ``k-1`` jobs of the order each get a level of
    their own, from the top; every other job shares the lowest (Crux, section 6).

    >>> sincronia_levels([0, 1, 2, 3], 2).tolist()
    [1, 0, 0, 0]
    """
    k = check_levels(k)
    order = np.asarray(order, dtype=np.int64)
    levels = np.zeros(order.size, dtype=np.int64)
    top = order[:k - 1]
    levels[top] = k - 1 - np.arange(top.size)
    return levels


def varys_levels(order, k) -> np.ndarray:
    """Varys' compression: the order cut into ``k`` blocks of (nearly) equal size, the
    first block highest (reading of the paper's example, where it gives [1, 1, 0, 0]).

    >>> varys_levels([0, 1, 2, 3], 2).tolist(), varys_levels([4, 3, 2, 1, 0], 2).tolist()
    ([1, 1, 0, 0], [0, 0, 1, 1, 1])
    """
    k = check_levels(k)
    order = np.asarray(order, dtype=np.int64)
    n = order.size
    block = (np.arange(n) * min(k, max(n, 1))) // max(n, 1)
    levels = np.zeros(n, dtype=np.int64)
    levels[order] = k - 1 - block
    return levels
