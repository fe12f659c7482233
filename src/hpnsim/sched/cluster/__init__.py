"""hpnsim.sched.cluster: a shared cluster over time (jobs arrive, wait, train together, leave).

Modules: ``driver`` (:func:`simulate_cluster` and :class:`ClusterDriver`, the event loop),
``jobs`` (a job, its compiled iteration templates, a placed job), ``decide`` (the
scheduler's paths, classes and offsets at an event), ``modes`` (the two ways of advancing
between events, exact and steady, as strategies), ``exact`` (the shared engine run of exact
mode), ``steady`` and ``phase`` (steady-state probes, task- and phase-level), ``result``
(:class:`ClusterResult`). Names load on first use;
any name of ``driver`` is reachable here.
"""

import importlib

__all__ = ["ClusterDriver", "ClusterJob", "ClusterResult", "JobOutcome", "simulate_cluster"]

_HOMES = {"ClusterJob": "jobs", "ClusterResult": "result", "JobOutcome": "result"}


def __getattr__(name: str):
    module = importlib.import_module(f"hpnsim.sched.cluster.{_HOMES.get(name, 'driver')}")
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'hpnsim.sched.cluster' has no attribute {name!r}") from None
    globals()[name] = value
    return value
