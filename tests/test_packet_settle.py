"""The window's batch-means settle test (hpnsim.packet.settle) on hand-built step series."""

from __future__ import annotations

import numpy as np
import pytest

from hpnsim.packet.ring import steady_span
from hpnsim.packet.settle import batch_span, batch_stats


def _ends(intervals) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(intervals)])


def test_batch_means_and_their_confidence_interval_by_hand():
    # 32 intervals: the first half at 1.0, the second half in four batches of four steps at
    # 1.00, 1.02, 0.98, 1.00. Batch means 1, 1.02, 0.98, 1: mean 1, sd sqrt(8e-4 / 3);
    # half-width t(0.975, 3) sd / 2 = 3.1824 * 0.016330 / 2 = 2.598%. Slope against batch
    # index (-1.5, -0.5, 0.5, 1.5): -0.02 / 5 = -0.004, residuals (-6, 18, -18, 6) e-3, its
    # standard error sqrt(7.2e-4 / 2 / 5) = 0.008485: t = 0.471 against t(0.975, 2) = 4.303.
    ends = _ends([1.0] * 16 + [1.0] * 4 + [1.02] * 4 + [0.98] * 4 + [1.0] * 4)
    s = batch_stats(ends)
    assert s["span"] == 16
    assert s["rate"] == pytest.approx(1.0, rel=1e-12)
    assert s["half_width"] == pytest.approx(3.182446 * np.sqrt(8e-4 / 3) / 2, rel=1e-5)
    assert s["trend_t"] == pytest.approx(0.004 / np.sqrt(7.2e-4 / 10), rel=1e-6)
    assert s["trend_limit"] == pytest.approx(4.302653, rel=1e-6)
    # known within 2.6%: not within 1%, within 3%
    assert batch_span(ends, 0.9) is None
    assert batch_span(ends, 0.9, tol=0.03) == 16
    assert batch_span(ends, 1.05, tol=0.03) is None          # 1 under 0.97 x 1.05


def test_a_stationary_noisy_step_series_settles_and_its_pace_is_within_the_interval():
    # step ends of a unit step time, each off by 2% of a step (consecutive step times
    # differ by up to ~10%, so three of them never agree within 1%): the batch means of the
    # second half know the pace within 1%, and it is the true one within that interval
    rng = np.random.default_rng(1)
    ends = np.arange(64.0) + 0.02 * rng.standard_normal(64)
    assert np.ptp(np.diff(ends)[-3:]) > 0.01
    assert batch_span(ends, 0.9) == 32
    s = batch_stats(ends)
    assert abs(s["rate"] - 1.0) <= s["half_width"] * s["rate"]


def test_a_drifting_step_series_does_not_settle_however_smooth():
    # the step time grows by 0.1% a step: batch means rise in a straight line (a trend
    # with no residual), though they differ by less than the tolerance from batch to batch
    intervals = 1.0 + 1e-3 * np.arange(64)
    ends = _ends(intervals)
    s = batch_stats(ends)
    assert s["trend_t"] > s["trend_limit"]
    assert batch_span(ends, 0.9) is None
    # with the same drift under noise of 2% of a step, still unsettled at every window
    rng = np.random.default_rng(2)
    noisy = ends + 0.02 * rng.standard_normal(ends.size)
    assert all(batch_span(noisy[:k], 0.9) is None for k in (32, 48, 64))


def test_a_series_too_noisy_to_know_its_pace_does_not_settle():
    # ends off by a fifth of a step: the batch means are uncertain by several per cent;
    # the block test of steady_span may still agree by chance, this one does not
    rng = np.random.default_rng(3)
    ends = np.arange(64.0) + 0.2 * rng.standard_normal(64)
    s = batch_stats(ends)
    assert s["half_width"] > 0.01
    assert batch_span(ends, 0.9) is None


def test_periodic_series_settle_on_whole_periods_and_short_windows_never():
    # period 2 (1.0, 1.2): every batch of 8 steps averages 1.1 exactly
    ends = _ends(np.tile([1.0, 1.2], 32))
    assert batch_span(ends, 1.0) == 32
    assert batch_stats(ends)["rate"] == pytest.approx(1.1, rel=1e-12)
    assert batch_span(ends[:31], 1.0) is None                 # batches under 4 steps
    assert steady_span(ends, 1.0) == 32                       # the block test agrees
