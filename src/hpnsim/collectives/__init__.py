"""Collectives: NCCL-style algorithms compiled into engine transfer groups, and closed forms.

``ops`` names the operations, algorithms and protocols every part speaks; ``docfill`` writes
the docstring entries a family of functions shares (the stage builders, the closed forms).
The rooms:

- ``schedules``: the algorithms' schedules (``schedule``, ``ring``, ``tree``, ``nvls``,
  ``p2p``; ``algorithms`` builds them);
- ``nccl``: NCCL's parameters (``params``, the per-step pipeline in ``steps``, NCCL's own
  latency model by release in ``tuner``) and their
  calibration to logs (``measurement``, ``identifiability``, ``calibrate``, ``calibration``);
- ``closed_form``: each algorithm in closed form on a group of hosts (``shape``, ``cost``
  with alpha-beta and NCCL's own model, ``forms``, ``nvlstree``, ``model`` with the ``auto``
  choice);
- ``planning``: how a collective runs (``options``), choose, schedule and route it
  (``plan``, ``paths``; cached), compile it into a TaskGraph (``compile``), run it alone
  measured like nccl-tests (``run``) or several at once (``concurrent``) on the flow engine;
- ``packet``: the same plans run through the packet engine.

Names load on first use, so importing a vocabulary (``hpnsim.collectives.ops``) stays cheap.

>>> import hpnsim.collectives as hc
>>> hc.busbw_factor("allreduce", 8)
1.75
>>> round(hc.alpha_beta_time("allreduce", "ring", 8, 1e9, 0.0, 50e9) * 1e3, 3)
35.0
"""

import importlib

#: public name -> submodule that defines it
_HOMES = {
    "build_schedule": "schedules.algorithms", "default_channels": "schedules.algorithms",
    "Schedule": "schedules.schedule", "Stage": "schedules.schedule",
    "PROTOCOL_EFFICIENCY": "nccl.params", "NcclParams": "nccl.params",
    "tuner_latency": "nccl.tuner",
    "alpha_beta_time": "closed_form.cost", "hierarchical_time": "closed_form.cost",
    "hop_latencies": "closed_form.cost", "nccl_time": "closed_form.cost",
    "GroupShape": "closed_form.shape",
    "hd_time": "closed_form.forms", "ring_time": "closed_form.forms",
    "tree_time": "closed_form.forms",
    "choose_algorithm": "closed_form.model", "choose_protocol": "closed_form.model",
    "model_time": "closed_form.model",
    "COLLECTIVE_ALGORITHMS": "ops", "OPS": "ops", "PROTOCOLS": "ops", "busbw_factor": "ops",
    "normalize_algorithm": "ops", "normalize_op": "ops", "normalize_protocol": "ops",
    "CollectiveOptions": "planning.options",
    "RoutedSchedule": "planning.plan", "plan_cache": "planning.plan",
    "plan_collective": "planning.plan",
    "CompiledCollective": "planning.compile", "compile_collective": "planning.compile",
    "compile_into": "planning.compile",
    "CollectiveResult": "planning.run", "run_collective": "planning.run",
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
