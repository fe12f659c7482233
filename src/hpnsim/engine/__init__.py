"""hpnsim.engine: exact max-min bandwidth sharing and the event loop over task graphs.

Knows only arrays: link capacities, link-id paths, sizes, priorities, dependencies.
"""

from hpnsim.engine.maxmin import maxmin_rates
from hpnsim.engine.simulate import SimResult, run_flows, simulate
from hpnsim.engine.taskgraph import TaskGraph

__all__ = ["maxmin_rates", "TaskGraph", "simulate", "SimResult", "run_flows"]
