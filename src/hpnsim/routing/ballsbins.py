"""Exact balls-into-bins figures: what ideal random hashing of m flows onto n paths gives.

These are the yardsticks for ECMP: a perfect hash places each flow on one of n equal
paths uniformly and independently, so collisions follow the balls-into-bins law. The
figures are exact (integer counting, no sampling), so simulated hashing can be compared
with them within sampling error.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb, factorial

import numpy as np

from hpnsim.errors import InputError


def _check(m: int, n: int) -> None:
    if int(m) != m or m < 0:
        raise InputError("m", f"number of flows must be an integer >= 0, got {m!r}")
    if int(n) != n or n < 1:
        raise InputError("n", f"number of paths must be an integer >= 1, got {n!r}")


def no_collision_probability(m: int, n: int) -> float:
    """Probability that m flows hashed uniformly onto n paths all land on distinct paths.

    ``n! / ((n - m)! n^m)``; for m = n this is ``n!/n^n``.

    >>> no_collision_probability(4, 4)   # 24 / 256
    0.09375
    """
    _check(m, n)
    if m > n:
        return 0.0
    return float(Fraction(factorial(n) // factorial(n - m), n**m))


def assignments_with_max_at_most(m: int, n: int, cap: int) -> int:
    """Number of the n^m assignments of m labelled flows to n paths with no path above ``cap``.

    ``m! [x^m] (sum_{j<=cap} x^j / j!)^n``, counted exactly with integers.

    >>> assignments_with_max_at_most(3, 3, 1)    # the 3! permutations
    6
    """
    _check(m, n)
    ways = [1] + [0] * m          # ways[t]: assignments of t chosen flows to the bins so far
    for _ in range(n):
        ways = [sum(comb(t, j) * ways[t - j] for j in range(min(cap, t) + 1))
                for t in range(m + 1)]
    return ways[m]


def max_load_distribution(m: int, n: int) -> np.ndarray:
    """``P(max load == k)`` for k = 0..m when m flows hash uniformly onto n paths.

    >>> max_load_distribution(2, 2).tolist()    # both on one path half the time
    [0.0, 0.5, 0.5]
    """
    _check(m, n)
    total = n**m
    at_most = []
    for cap in range(m + 1):
        # once every assignment fits under the cap, larger caps change nothing
        at_most.append(total if at_most and at_most[-1] == total
                       else assignments_with_max_at_most(m, n, cap))
    exact = [at_most[0]] + [at_most[k] - at_most[k - 1] for k in range(1, m + 1)]
    return np.array([float(Fraction(c, total)) for c in exact])


def expected_max_load(m: int, n: int) -> float:
    """Expected maximum number of flows on one path (m flows, n paths, ideal hashing).

    >>> expected_max_load(4, 4)    # brute force over the 256 assignments gives 544/256
    2.125
    """
    dist = max_load_distribution(m, n)
    return float(np.dot(np.arange(m + 1), dist))


def expected_distinct_paths(m: int, n: int) -> float:
    """Expected number of distinct paths used: ``n (1 - (1 - 1/n)^m)``.

    >>> expected_distinct_paths(60, 60) > 37.9
    True
    """
    _check(m, n)
    return n * (1.0 - (1.0 - 1.0 / n) ** m)


def expected_excess_flows(m: int, n: int) -> float:
    """Expected flows beyond the ideal spread: sum over paths of ``max(0, load - ceil(m/n))``.

    For m <= n this is ``m - E[distinct paths]`` (every flow past the first on a path).
    Counted exactly from the multinomial law for m > n.

    >>> round(expected_excess_flows(2, 2), 6)
    0.5
    """
    _check(m, n)
    ideal = -(-m // n)
    if m <= n:
        return m - expected_distinct_paths(m, n)
    # one path's load is Binomial(m, 1/n); linearity of expectation over the n paths
    p = 1.0 / n
    loads = np.arange(m + 1)
    pmf = np.array([comb(m, k) * p**k * (1 - p) ** (m - k) for k in range(m + 1)])
    return float(n * np.dot(np.maximum(loads - ideal, 0), pmf))
