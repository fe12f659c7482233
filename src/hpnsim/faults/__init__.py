"""Faults: fault events, ToR designs (single, stacked dual, non-stacked dual), failover, and
reliability economics (expected job interruptions, lost GPU-hours and their cost).

>>> from hpnsim.faults import FailureRates, parse_fault
>>> FailureRates().link_per_month
0.00057
>>> parse_fault("link:gpu17.port0@30s+2min").end
150.0
"""

from hpnsim.faults.events import CABLE_KINDS, KINDS, Fault, parse_fault, resolve_links
from hpnsim.faults.failover import (
    DESIGNS,
    Change,
    FailoverPolicy,
    fault_changes,
    tor_design,
)
from hpnsim.faults.montecarlo import monte_carlo
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
)
from hpnsim.faults.reroute import Rerouter
from hpnsim.faults.runner import (
    JobPlan,
    JobTimeline,
    RecoveryPolicy,
    Restart,
    simulate_with_faults,
)

__all__ = [
    "CABLE_KINDS", "DESIGNS", "KINDS", "Change", "FailoverPolicy", "Fault", "JobPlan",
    "JobTimeline", "RecoveryPolicy", "Rerouter", "Restart", "fault_changes", "parse_fault",
    "resolve_links", "simulate_with_faults", "tor_design",
    "CheckpointPolicy", "Conditions", "FailureRates", "JobExposure", "ReliabilityResult", "compare_designs",
    "expected_reliability", "job_exposure", "load_rates", "monte_carlo",
]
