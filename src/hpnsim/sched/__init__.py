"""hpnsim.sched: cluster schedulers (Crux and its rivals) as policies over jobs.

A scheduler sees each job as a :class:`SchedJob` (GPUs, computation per iteration, bytes
per link) and decides, at every cluster event, a path per connection and a priority class
per job. :func:`simulate_periodic` runs periodic jobs on the engine to measure what an
order buys (Crux's pairwise simulations, the worked examples).
"""

import importlib

#: public name -> the module that defines it; loaded on first use, so reading the data-only
#: modules (``sched.names``, ``sched.defaults``) loads no scheduler code
_HOMES = {
    "max_k_cut": "compression", "sincronia_levels": "compression", "varys_levels": "compression",
    "SchedJob": "jobs", "PathChoice": "paths", "select_paths": "paths",
    "PeriodicResult": "periodic", "order_to_classes": "periodic",
    "simulate_periodic": "periodic", "worked_example": "periodic",
    "SCHEDULERS": "names", "Decision": "policies", "schedule": "policies",
    "Priorities": "priority", "assign_priorities": "priority",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'hpnsim.sched' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"hpnsim.sched.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOMES))
