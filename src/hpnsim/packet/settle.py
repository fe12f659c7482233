"""When a noisy window of step ends has settled: batch means with their standard error.

A window's step ends ``e[0..k-1]`` are taken as ``e[i] = a + r i + D[i]``: a steady per-step
time r plus a deviation D that stays bounded (DCQCN cuts that delay a ring's chunks and are
made up later, a period in the step time). The window's projection extends r over the steps
it did not simulate, so the question a settle test answers is *how well r is known*, not
whether consecutive step times agree: under DCQCN a 448-GPU DCN+ Multi-AllReduce's latest
step end moves by 64-643 us a step around a 212-us floor (docs/benchmarks.md, "DCN+
Multi-AllReduce at 448 GPUs does not settle"), so two block means can agree within 1% by
chance while each is uncertain by several per cent, or never agree while r is already known.

:func:`batch_span` is the textbook answer for a correlated stationary output (the method of
batch means: Law, *Simulation Modeling and Analysis*, 5th ed., section 9.5.3): cut the
window's second half (its first half holds the start-up) into B = 4 batches of w steps; each
batch's mean step time ``r_j = (e[end_j] - e[start_j]) / w`` is nearly independent of the
others when w is long against the deviation's memory. Then, at level ``alpha``:

* *no trend*: the least-squares slope of ``r_j`` against j is not significantly different
  from zero (t-test with B - 2 degrees of freedom): a drifting step time is not settled,
  however small its noise;
* *precise*: the half-width of the confidence interval of their mean,
  ``t(B-1) s / sqrt(B)`` (s their standard deviation), is within ``tol`` of the mean: the
  pace past the window is known within ``tol``, so the time it projects is too (the steps
  left times the pace's error, over at least as many steps at that pace);
* not under the floor (the busiest link's time per step), as for
  :func:`~hpnsim.packet.ring.steady_rate`.

A batch of fewer than ``min_batch`` steps does not count (its mean is mostly the deviation
at its two ends), so the test needs a window of ``2 B min_batch`` steps (32).

Step ends of a unit step time, each off by 2% of a step at random (so consecutive step
times differ by up to 10%), settle over the window's second half; a step time that grows
from 1 to 1.3 over the window does not, nor does one whose ends are off by a fifth of a
step (its pace is known to a few per cent only).

>>> rng = np.random.default_rng(0)
>>> flat = np.arange(64) + 0.02 * rng.standard_normal(64)
>>> drift = np.cumsum(np.linspace(1.0, 1.3, 64))
>>> noisy = np.arange(64) + 0.2 * rng.standard_normal(64)
>>> batch_span(flat, 0.9), batch_span(drift, 0.9), batch_span(noisy, 0.9)
(32, None, None)
"""

from __future__ import annotations

import numpy as np

__all__ = ["BATCHES", "MIN_BATCH", "batch_span", "batch_stats"]

#: batches the window's second half is cut into (a t-test on their slope keeps 2 degrees of
#: freedom; more batches are shorter ones at a given window)
BATCHES = 4
#: the fewest steps a batch may hold (:func:`batch_span`)
MIN_BATCH = 4


def batch_stats(ends, batches: int = BATCHES, min_batch: int = MIN_BATCH) -> dict | None:
    """The batch means of a window's second half (:func:`batch_span`): ``span`` (steps
    covered, ``batches`` x the batch length), ``rate`` (their mean: the series' advance over
    ``span`` steps, per step), ``half_width`` (the 95% confidence interval's, relative to the
    rate), ``trend_t`` (the slope over its standard error) and ``trend_limit`` (the
    t-quantile it is held to); None under ``2 batches min_batch`` steps.

    >>> s = batch_stats(np.cumsum(np.tile([1.0, 1.2], 32)))      # period 2: batches agree
    >>> s["span"], round(s["rate"], 6), round(s["half_width"], 6)
    (32, 1.1, 0.0)
    """
    ends = np.asarray(ends, dtype=np.float64)
    w = ends.size // 2 // batches
    if w < min_batch:
        return None
    span = w * batches
    r = np.diff(ends[ends.size - 1 - span:][::w]) / w          # batch means, oldest first
    rate = float(r.mean())
    x = np.arange(batches) - (batches - 1) / 2
    slope = float(x @ r / (x @ x))
    resid = r - rate - slope * x
    se_slope = float(np.sqrt(resid @ resid / (batches - 2) / (x @ x)))
    from scipy.stats import t as student

    half = float(student.ppf(0.975, batches - 1) * r.std(ddof=1) / np.sqrt(batches))
    # a slope within rounding of zero is no trend (an exactly periodic series: se 0 too)
    tiny = 1e-9 * abs(rate)
    trend_t = 0.0 if abs(slope) <= tiny else abs(slope) / max(se_slope, tiny)
    return {"span": span, "rate": rate, "half_width": half / abs(rate) if rate else np.inf,
            "trend_t": trend_t, "trend_limit": float(student.ppf(0.975, batches - 2))}


def batch_span(ends, floor: float, tol: float = 0.01, batches: int = BATCHES,
               min_batch: int = MIN_BATCH) -> int | None:
    """Over how many of its last step intervals a window has settled by batch means (see
    the module docstring): its second half's batch means show no significant trend, their
    mean's 95% confidence interval is within ``tol`` of it, and it is not under ``floor``;
    None where not (or under ``2 batches min_batch`` steps).

    Batches of a period-2 series agree exactly; its last interval is 1.2, so a floor of 1.15
    leaves it unsettled (the mean is 1.1).

    >>> ends = np.cumsum(np.tile([1.0, 1.2], 32))
    >>> batch_span(ends, 1.0), batch_span(ends, 1.15), batch_span(ends[:31], 1.0)
    (32, None, None)
    """
    s = batch_stats(ends, batches, min_batch)
    if s is None:
        return None
    settled = (s["trend_t"] <= s["trend_limit"] and s["half_width"] <= tol
               and s["rate"] >= (1 - tol) * floor)
    return s["span"] if settled else None
