"""Collectives: NCCL-style algorithms compiled into engine transfer groups, and closed forms.

Modules: ``ops`` (the names of operations, algorithms and protocols), ``options`` (how a
collective runs: :class:`CollectiveOptions`), ``schedule`` and the algorithm modules
(``ring``, ``tree``, ``nvls``, ``p2p``, built by ``algorithms``), ``plan`` (choose, schedule,
route; cached; ``paths`` routes the members), ``compile`` (into a TaskGraph), ``run`` (one
collective alone, measured like nccl-tests), ``cost`` (alpha-beta and NCCL's own model),
``shape``, ``forms`` and ``model`` (each algorithm in closed form on a group of hosts, and
the ``auto`` choice), ``nccl`` and ``calibrate`` (NCCL's parameters and their fit to
logs). Names load on first use, so importing a vocabulary (``hpnsim.collectives.ops``)
stays cheap.

>>> import hpnsim.collectives as hc
>>> hc.busbw_factor("allreduce", 8)
1.75
>>> round(hc.alpha_beta_time("allreduce", "ring", 8, 1e9, 0.0, 50e9) * 1e3, 3)
35.0
"""

import importlib

#: public name -> submodule that defines it
_HOMES = {
    "build_schedule": "algorithms", "default_channels": "algorithms",
    "CompiledCollective": "compile", "compile_collective": "compile", "compile_into": "compile",
    "alpha_beta_time": "cost", "hierarchical_time": "cost", "hop_latencies": "cost",
    "nccl_time": "cost",
    "GroupShape": "shape", "choose_algorithm": "model", "choose_protocol": "model",
    "hd_time": "forms", "model_time": "model", "ring_time": "forms", "tree_time": "forms",
    "PROTOCOL_EFFICIENCY": "nccl", "NcclParams": "nccl",
    "COLLECTIVE_ALGORITHMS": "ops", "OPS": "ops", "PROTOCOLS": "ops", "busbw_factor": "ops",
    "normalize_algorithm": "ops", "normalize_op": "ops", "normalize_protocol": "ops",
    "CollectiveOptions": "options",
    "RoutedSchedule": "plan", "plan_cache": "plan", "plan_collective": "plan",
    "CollectiveResult": "run", "run_collective": "run",
    "Schedule": "schedule", "Stage": "schedule",
}

__all__ = sorted(_HOMES)


#: old names kept for one release (``ALGORITHMS`` also named the traffic calculator's
#: ring/naive choice)
_RENAMED = {"ALGORITHMS": "COLLECTIVE_ALGORITHMS"}


def __getattr__(name: str):
    if name in _RENAMED:
        import warnings

        warnings.warn(f"hpnsim.collectives.{name} is now {_RENAMED[name]}; the old name goes in "
                      "the next release", DeprecationWarning, stacklevel=2)
        return __getattr__(_RENAMED[name])
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hpnsim.collectives' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"hpnsim.collectives.{home}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
