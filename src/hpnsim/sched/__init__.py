"""hpnsim.sched: cluster schedulers (Crux and its rivals) as policies over jobs.

A scheduler sees each job as a :class:`SchedJob` (GPUs, computation per iteration, bytes
per link) and decides, at every cluster event, a path per connection and a priority class
per job. :func:`simulate_periodic` runs periodic jobs on the engine to measure what an
order buys (Crux's pairwise simulations, the worked examples).
"""

from hpnsim.sched.jobs import SchedJob
from hpnsim.sched.periodic import (
    PeriodicResult,
    order_to_classes,
    simulate_periodic,
    worked_example,
)

__all__ = ["PeriodicResult", "SchedJob", "order_to_classes", "simulate_periodic",
           "worked_example"]
