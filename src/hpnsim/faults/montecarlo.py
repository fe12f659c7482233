"""Monte Carlo draws of the failure process that :mod:`hpnsim.faults.reliability` states in
closed form: components fail as Poisson processes and stay down for their repair time; a
failure that finds the job's other side down interrupts it. The monthly spread of the draws
sits beside the closed-form expectation (:func:`~hpnsim.faults.reliability.expected_reliability`).
"""

from __future__ import annotations

import numpy as np

from hpnsim.errors import InputError, check_seed
from hpnsim.faults.reliability import (
    HOURS_PER_MONTH,
    Conditions,
    JobExposure,
    _number,
    expected_reliability,
)

__all__ = ["monte_carlo"]


def _draw(rng, n: int, rate: float, months: float, repair_hours: float, fixed: bool):
    """Failures of ``n`` components over ``months``: (component, start, end), by component."""
    counts = rng.poisson(rate * months, size=n)
    comp = np.repeat(np.arange(n, dtype=np.int64), counts)
    start = rng.uniform(0.0, months, size=comp.size)
    mean = repair_hours / HOURS_PER_MONTH
    length = np.full(comp.size, mean) if fixed else rng.exponential(mean, size=comp.size)
    order = np.lexsort((start, comp))
    return comp[order], start[order], start[order] + length[order]


class _DownIndex:
    """Answers "is component c down at time t" for many (c, t) at once."""

    def __init__(self, comp, start, end, horizon: float):
        self.span = horizon + float(end.max(initial=0.0)) + 1.0
        self.comp = comp
        self.keys = comp * self.span + start
        # latest end among the component's repairs started so far (offsets keep groups apart)
        self.reach = np.maximum.accumulate(comp * self.span + end) if comp.size else end

    def down(self, comp, t) -> np.ndarray:
        if not self.keys.size:
            return np.zeros(np.shape(t), dtype=bool)
        query = comp * self.span + t
        pos = np.searchsorted(self.keys, query, side="left") - 1
        found = pos >= 0
        pos = np.maximum(pos, 0)
        return found & (self.comp[pos] == comp) & (self.reach[pos] > query)


def _interruptions(exposure: JobExposure, cond: Conditions, months: int, rng) -> np.ndarray:
    """Start times (months) of the failures that interrupt the job, one draw of ``months``."""
    r = cond.rates
    fixed = r.repair_distribution == "fixed"
    tor_rate = r.tor_per_month * cond.switch_factor()
    lc, ls, le = _draw(rng, exposure.links, r.link_per_month, months, r.link_repair_hours, fixed)
    tc, ts, te = _draw(rng, exposure.tors, tor_rate, months, r.switch_repair_hours, fixed)
    if exposure.design == "single":
        return np.concatenate([ls, ts])
    sides = exposure.nic_link.shape[1]
    nic, side = lc // sides, lc % sides
    other_link = exposure.nic_link[nic, 1 - side]
    other_tor = exposure.nic_tor[nic, 1 - side]
    links_down, tors_down = _DownIndex(lc, ls, le, months), _DownIndex(tc, ts, te, months)
    link_hit = links_down.down(other_link, ls) | tors_down.down(other_tor, ls)
    tor_hit = tors_down.down(exposure.tor_sibling[tc], ts)
    # a ToR failure during a link's repair cuts that NIC off if the ToR is on the other side
    if tc.size and lc.size:
        key = tc * tors_down.span + ts
        lo = np.searchsorted(key, other_tor * tors_down.span + ls, side="right")
        hi = np.searchsorted(key, other_tor * tors_down.span + le, side="left")
        marks = np.zeros(tc.size + 1, dtype=np.int64)
        np.add.at(marks, lo, 1)
        np.add.at(marks, hi, -1)
        tor_hit |= np.cumsum(marks)[:-1] > 0
    q = cond.pair_loss(exposure.design)
    if q:
        tor_hit |= rng.random(tc.size) < q
    return np.concatenate([ls[link_hit], ts[tor_hit]])


def monte_carlo(exposure: JobExposure, cond: Conditions, years: float = 100,
                seed: int = 0) -> dict:
    """Draw failures over ``years`` and give the monthly spread (mean, p5, p50, p95) of
    interruptions and lost GPU-hours, beside the closed-form expectation.

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.faults.reliability import CheckpointPolicy, FailureRates, job_exposure
    >>> e = job_exposure(hpn7(segments=1, hosts_per_segment=16, dual_tor="single"), 128)
    >>> mc = monte_carlo(e, Conditions(FailureRates(), CheckpointPolicy(), 2.0), 1000, seed=1)
    >>> mc["months"], abs(mc["interruptions_per_month"]["mean"] - 0.07704) < 0.01
    (12000, True)
    """
    years = _number(years, "years")
    months = int(round(years * 12))
    if months < 1:
        raise InputError("years", f"must cover at least one month, got {years!r}")
    rng = np.random.default_rng(check_seed(seed))
    times = _interruptions(exposure, cond, months, rng)
    per_month = np.bincount(np.minimum(times.astype(np.int64), months - 1), minlength=months)
    exp = expected_reliability(exposure, cond)
    per_hit = cond.policy.lost_seconds_per_interruption / 3600 * exposure.gpus
    lost = per_month * per_hit + exp.checkpoint_gpu_hours_per_month

    def spread(x):
        p5, p50, p95 = np.percentile(x, [5, 50, 95])
        return {"mean": float(x.mean()), "std": float(x.std(ddof=1)) if x.size > 1 else 0.0,
                "p5": float(p5), "p50": float(p50), "p95": float(p95)}

    return {"design": exposure.design, "switch": cond.switch, "years": years, "months": months,
            "seed": seed, "interruptions_per_month": spread(per_month.astype(float)),
            "lost_gpu_hours_per_month": spread(lost),
            "cost_per_month": None if cond.gpu_hour_price is None
            else spread(lost * cond.gpu_hour_price),
            "months_with_interruption": float((per_month > 0).mean()),
            "expected": exp.to_dict()}
