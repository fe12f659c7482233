"""hpnsim.sched: cluster schedulers (Crux and its rivals) as policies over jobs.

A scheduler sees each job as a :class:`SchedJob` (GPUs, computation per iteration, bytes
per link) and decides, at every cluster event, a path per connection and a priority class
per job. :func:`simulate_periodic` runs periodic jobs on the engine to measure what an
order buys (Crux's pairwise simulations, the worked examples).
"""

from hpnsim.sched.compression import max_k_cut, sincronia_levels, varys_levels
from hpnsim.sched.jobs import SchedJob
from hpnsim.sched.paths import PathChoice, select_paths
from hpnsim.sched.periodic import (
    PeriodicResult,
    order_to_classes,
    simulate_periodic,
    worked_example,
)
from hpnsim.sched.policies import SCHEDULERS, Decision, schedule
from hpnsim.sched.priority import Priorities, assign_priorities

__all__ = ["SCHEDULERS", "Decision", "PathChoice", "PeriodicResult", "Priorities", "SchedJob",
           "assign_priorities", "max_k_cut", "order_to_classes", "schedule", "select_paths",
           "simulate_periodic", "sincronia_levels", "varys_levels", "worked_example"]
