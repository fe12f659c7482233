"""Per-port queue statistics: time-weighted mean, maximum and a histogram for percentiles.

Every change of a port's egress occupancy first charges the time since the last change to
the old occupancy: ``area += q * dt`` (so mean = area / T) and ``hist[bin(q)] += dt``. Bins
are geometric, 8 per octave from 64 B (bin 0 holds an empty queue), so a percentile is
exact to one bin: within 9%.

>>> import numpy as np
>>> edges = bin_edges()
>>> int(queue_bin(0.0)), int(queue_bin(64.0)), float(edges[9])   # 9th bin starts at 128 B
(0, 1, 128.0)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet.kinds import Lf

BINS_PER_OCTAVE = 8
BASE_BYTES = 64.0
N_BINS = 1 + BINS_PER_OCTAVE * 34          # up to 64 B * 2**34 = 1 TiB
QTOT, Q_MAX, Q_AREA, Q_LAST = int(Lf.QTOT), int(Lf.Q_MAX), int(Lf.Q_AREA), int(Lf.Q_LAST)


@njit(cache=True, inline="always", _nrt=False)
def queue_bin(q):
    """Histogram bin of occupancy ``q`` bytes."""
    if q <= 0.0:
        return 0
    k = 1 + int(np.floor(BINS_PER_OCTAVE * np.log2(max(q, BASE_BYTES) / BASE_BYTES)))
    return min(k, N_BINS - 1)


def bin_edges() -> np.ndarray:
    """Lower edge of each bin in bytes (bin 0: exactly 0)."""
    k = np.arange(N_BINS - 1)
    return np.concatenate([[0.0], BASE_BYTES * 2.0 ** (k / BINS_PER_OCTAVE)])


@njit(cache=True, inline="always", _nrt=False)
def charge(lf, hist, link, now):
    """Charge the time since the link's last occupancy change to its current occupancy."""
    dt = now - lf[link, Q_LAST]
    if dt > 0:
        q = lf[link, QTOT]
        lf[link, Q_AREA] += q * dt
        if hist.shape[0] > 0:
            hist[link, queue_bin(q)] += dt
        lf[link, Q_LAST] = now


@njit(cache=True, inline="always", _nrt=False)
def change(lf, hist, link, now, delta, waits):
    """Occupancy of ``link`` changes by ``delta`` bytes at ``now``; ``waits=False``: the
    packet leaves in this same instant (an idle link), so it cannot raise the maximum."""
    charge(lf, hist, link, now)
    lf[link, QTOT] += delta
    if waits and lf[link, QTOT] > lf[link, Q_MAX]:
        lf[link, Q_MAX] = lf[link, QTOT]


def percentiles(hist: np.ndarray, qs) -> np.ndarray:
    """``len(qs)`` percentiles per port from time histograms: the upper edge of the bin where
    the cumulative time first reaches ``q`` percent (0 for an empty queue).

    >>> h = np.zeros((1, N_BINS)); h[0, 0], h[0, 9] = 3.0, 1.0   # empty 3/4 of the time
    >>> percentiles(h, [50, 99]).round(1).tolist()
    [[0.0, 139.6]]
    """
    edges = bin_edges()
    upper = np.concatenate([[0.0], edges[2:], [np.inf]])
    cum = np.cumsum(hist, axis=1)
    total = cum[:, -1:]
    out = np.zeros((hist.shape[0], len(qs)))
    for j, q in enumerate(qs):
        idx = np.argmax(cum >= (q / 100.0) * total * (1 - 1e-12), axis=1)
        out[:, j] = np.where(total[:, 0] > 0, upper[idx], 0.0)
    return out
