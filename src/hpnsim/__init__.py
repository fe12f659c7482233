"""hpnsim: design, simulate and schedule the networks that train large language models.

Subpackages load on first use, so ``import hpnsim`` stays cheap:

>>> import hpnsim as hs
>>> hs.units.parse_bandwidth("400Gbps")
50000000000.0
>>> hs.fabrics.hpn7(segments=1).n_gpus
1024
"""

import importlib

from hpnsim import errors, units
from hpnsim.errors import HpnsimError, InputError

__version__ = "0.1.0"

_SUBPACKAGES = ("fabrics", "engine", "routing", "collectives", "workloads", "training", "report",
               "demo")
#: top-level shortcuts: name -> (module, attribute)
_SHORTCUTS = {
    "simulate": ("hpnsim.engine", "simulate"),
    "TaskGraph": ("hpnsim.engine", "TaskGraph"),
    "route": ("hpnsim.routing", "route"),
    "run_collective": ("hpnsim.collectives", "run_collective"),
    "simulate_iteration": ("hpnsim.training", "simulate_iteration"),
    "TrainJob": ("hpnsim.training", "TrainJob"),
    "build_fabric": ("hpnsim.fabrics", "build_fabric"),
    "run": ("hpnsim.run", "run"),
    "Scenario": ("hpnsim.scenario", "Scenario"),
    "load_scenario": ("hpnsim.scenario", "load_scenario"),
}

__all__ = ["HpnsimError", "InputError", "errors", "units", "__version__",
           *_SUBPACKAGES, *_SHORTCUTS]


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"hpnsim.{name}")
    if name in _SHORTCUTS:
        module, attribute = _SHORTCUTS[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'hpnsim' has no attribute {name!r}")
