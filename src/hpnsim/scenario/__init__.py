"""hpnsim.scenario: one YAML file describes a whole run; ``run(scenario)`` carries it out.

Modules: ``spec`` (the pydantic :class:`Scenario` and its job, routing and engine fields),
``fabric``, ``collectives``, ``faults``, ``cluster`` (each a section of the file and its
checks), ``yaml`` (loading with line numbers) and ``runner`` (the jobs-together driver).
Names load on first use, so ``import hpnsim.scenario`` stays cheap; any name of
:mod:`hpnsim.scenario.spec` is also reachable here, as it was when the scenario was one module.

>>> from hpnsim.scenario import Scenario, run
>>> r = run(Scenario(fabric={"template": "fat_tree", "k": 4}))
>>> r.fabric["gpus"]
16
"""

import importlib

#: public name -> submodule that defines it (names not listed are looked up in ``spec``)
_HOMES = {
    "run": "runner", "run_collectives": "runner", "as_scenario": "runner", "allocate": "runner",
    "build_scenario_fabric": "runner",
    "run_cluster": "cluster",
}

__all__ = ["Scenario", "load_scenario", "parse_scenario", "run", "run_collectives", "run_cluster"]


def __getattr__(name: str):
    module = importlib.import_module(f"hpnsim.scenario.{_HOMES.get(name, 'spec')}")
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'hpnsim.scenario' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
