"""hpnsim.workloads: model catalog, parallel layout and placement, traffic, workload files.

>>> from hpnsim.workloads import models
>>> models.get("llama3-8b").layers
32
"""

import importlib

#: public name -> the module that defines it (None: the name is a submodule); loaded on
#: first use, so the data-only modules (``allocator_names``) load nothing else
_HOMES = {
    "aicb": None, "article": None, "layout": None, "model_spec": None, "models": None,
    "placement": None, "traffic": None,
    "Workload": "aicb", "load_aicb": "aicb", "parse_aicb": "aicb",
    "Layout": "layout", "check_layout": "layout", "make_layout": "layout",
    "ModelSpec": "model_spec", "Placement": "placement", "place": "placement",
    "TrafficReport": "traffic", "iteration_traffic": "traffic",
}

__all__ = sorted(_HOMES)


#: moved to :mod:`hpnsim.training` (training concepts); reachable here for one release
_MOVED = {"TrainJob": "hpnsim.training.job", "IterationResult": "hpnsim.training.iteration"}


def __getattr__(name: str):
    if name in _HOMES:
        home = _HOMES[name]
        if home is None:
            return importlib.import_module(f"hpnsim.workloads.{name}")
        value = getattr(importlib.import_module(f"hpnsim.workloads.{home}"), name)
        globals()[name] = value
        return value
    if name in _MOVED:
        import warnings

        warnings.warn(f"hpnsim.workloads.{name} moved to hpnsim.training.{name}; the old name "
                      "goes in the next release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'hpnsim.workloads' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_HOMES))
