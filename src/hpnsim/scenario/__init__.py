"""hpnsim.scenario: one YAML file describes a whole run; ``run(scenario)`` carries it out.

Modules: ``spec`` (the pydantic :class:`Scenario`: routing, seed and its sections),
``jobs``, ``fabric``, ``collectives``, ``faults``, ``cluster`` (each a section of the file
and its checks), ``yaml`` (loading with line numbers), ``prepare`` (``prepare(scenario) ->
PreparedScenario``: the scenario checked against its built fabric, with what it read) and
``runner`` (``run``, and :class:`~hpnsim.scenario.runner.JobsTogether`, the jobs-together
driver).
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
    "run": "runner", "run_collectives": "collective_runs", "JobsTogether": "runner",
    "prepare": "prepare", "PreparedScenario": "prepare", "as_scenario": "prepare",
    "allocate": "prepare", "build_scenario_fabric": "prepare",
    "run_cluster": "cluster",
}

__all__ = ["JobsTogether", "PreparedScenario", "Scenario", "load_scenario", "parse_scenario",
           "prepare", "read_scenario", "run", "run_collectives", "run_cluster"]


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
