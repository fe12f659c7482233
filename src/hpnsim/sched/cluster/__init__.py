"""hpnsim.sched.cluster: a shared cluster over time (jobs arrive, wait, train together, leave).

Modules: ``driver`` (:func:`simulate_cluster`, the event loop), ``jobs`` (a job's compiled
iteration templates), ``exact`` and ``steady`` (the two ways of advancing between events),
``phase`` (phase-level probes), ``result`` (:class:`ClusterResult`). Names load on first use;
any name of ``driver`` is reachable here.
"""

import importlib

__all__ = ["ClusterJob", "ClusterResult", "JobOutcome", "simulate_cluster"]

_HOMES = {"ClusterJob": "jobs", "ClusterResult": "result", "JobOutcome": "result"}


def __getattr__(name: str):
    module = importlib.import_module(f"hpnsim.sched.cluster.{_HOMES.get(name, 'driver')}")
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'hpnsim.sched.cluster' has no attribute {name!r}") from None
    globals()[name] = value
    return value
