"""The cost of a synchronous step across N GPUs whose compute times vary.

Every GPU of a data-parallel job computes the same work each step, but not in the same time:
each step's compute on GPU ``i`` is ``C (1 + sigma Z_i)`` with ``Z_i`` standard normal draws,
``sigma`` the per-GPU coefficient of variation (:data:`GPU_VARIATION`). A synchronous step
(gradients reduce over every replica; TP and PP ranks wait for each other at every collective
and message) waits for the slowest GPU, so it ends ``C sigma E[max of N draws]`` after a GPU of
mean speed would have: the straggler term, ``C sigma e_N`` with

    e_N = E[max(Z_1..Z_N)] = integral of x N phi(x) Phi(x)^(N-1) dx

(``e_1 = 0``, ``e_2 = 1/sqrt(pi)``, ``e_3 = 3/(2 sqrt(pi))``; 3.25 at 1,024 GPUs and 3.97 at
16,384). :func:`expected_max_normal` integrates it numerically on a fixed grid.

hpnsim charges the term on the compute stream: every compute kernel of a pass is ``sigma e_N``
longer, and the extra seconds are accounted as their own part, ``straggler``, of the iteration
(:mod:`hpnsim.training.account`): the slowest GPU's pace is the pace of every GPU it
synchronizes with.

>>> round(expected_max_normal(2), 6) == round(1 / 3.141592653589793 ** 0.5, 6)
True
>>> round(straggler_fraction(1024), 4)
0.0227
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

import numpy as np

from hpnsim.errors import InputError

#: Per-GPU, per-step coefficient of variation of compute time: 0.0070. Measured on
#: ByteDance-Seed/StragglerAnalysis (commit 8efcd7f37f, Apache-2.0; the artifact of Lin et al.,
#: "Understanding Stragglers in Large Model Training Using What-if Analysis", OSDI 2025),
#: ``data/trace-ST.parquet``: a production job of 8 GPUs (PP 4 x DP 2, TP 1), 32 steps. The
#: two data-parallel replicas of each stage compute the same micro-batches, so the spread of
#: their per-step forward + backward compute (sum of ``forward-compute`` and
#: ``backward-compute`` durations) is GPU variation: the relative difference of the pair has
#: a standard deviation of 0.98% over the 128 (step, stage) pairs, sigma = 0.98% / sqrt(2).
#: (The trace's job is slowed by stage imbalance, which both replicas share.)
GPU_VARIATION = 0.0070
_GRID = np.linspace(-12.0, 12.0, 48001)   # standard-normal abscissae for the integral


def straggler_variation(value) -> float:
    """A job's ``gpu_variation``: the measured default, or a given coefficient in [0, 1).

    >>> straggler_variation(None), straggler_variation(0)
    (0.007, 0.0)
    >>> straggler_variation(-0.1)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: gpu_variation: a coefficient of variation in [0, 1), got -0.1
    """
    if value is None:
        return GPU_VARIATION
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not 0 <= value < 1):
        raise InputError("gpu_variation", f"a coefficient of variation in [0, 1), got {value!r}")
    return float(value)


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """``E[max of n standard normal draws]``, by the trapezoid rule on a fine grid.

    >>> expected_max_normal(1)
    0.0
    >>> round(expected_max_normal(3), 6) == round(3 / (2 * math.sqrt(math.pi)), 6)
    True
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise InputError("gpus", f"must be a positive integer, got {n!r}")
    if n == 1:
        return 0.0
    x = _GRID
    log_cdf = np.log(np.clip(0.5 * (1.0 + _erf(x / math.sqrt(2.0))), 1e-300, 1.0))
    density = np.exp(-0.5 * x * x - 0.5 * math.log(2 * math.pi) + (n - 1) * log_cdf)
    return float(np.trapezoid(x * n * density, x))


def straggler_fraction(gpus: int, variation: float = GPU_VARIATION) -> float:
    """Extra compute time of a synchronous step over ``gpus`` GPUs, as a fraction of one
    GPU's mean compute: ``variation x E[max of gpus draws]``.

    >>> straggler_fraction(1), round(straggler_fraction(8, 0.01), 5)
    (0.0, 0.01424)
    """
    return straggler_variation(variation) * expected_max_normal(gpus)


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x)
