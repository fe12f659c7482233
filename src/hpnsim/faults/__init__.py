"""Faults: fault events, ToR designs (single, stacked dual, non-stacked dual), failover, and
reliability economics (expected job interruptions, lost GPU-hours and their cost).

>>> from hpnsim.faults import FailureRates
>>> FailureRates().link_per_month
0.00057
"""

from hpnsim.faults.reliability import (
    CheckpointPolicy,
    Conditions,
    FailureRates,
    JobExposure,
    ReliabilityResult,
    compare_designs,
    expected_reliability,
    job_exposure,
    load_rates,
    monte_carlo,
)

__all__ = [
    "CheckpointPolicy", "Conditions", "FailureRates", "JobExposure", "ReliabilityResult", "compare_designs",
    "expected_reliability", "job_exposure", "load_rates", "monte_carlo",
]
