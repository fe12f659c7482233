"""hpnsim.engine: exact max-min bandwidth sharing and the event loop over task graphs.

Knows only arrays: link capacities, link-id paths, sizes, priorities, dependencies.
A :class:`Simulation` runs a :class:`TaskGraph` in pieces, with changes in between;
:func:`simulate` and :func:`run_flows` are one-shot runs.
"""

from hpnsim.engine.maxmin import maxmin_rates
from hpnsim.engine.simresult import SimResult
from hpnsim.engine.simulate import run_flows, simulate
from hpnsim.engine.simulation import Simulation
from hpnsim.engine.taskgraph import TaskGraph

__all__ = ["maxmin_rates", "TaskGraph", "Simulation", "simulate", "SimResult", "run_flows"]
