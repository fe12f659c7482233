"""hpnsim.workloads: model catalog, parallel layout and placement, traffic, workload files.

>>> from hpnsim.workloads import models
>>> models.get("llama3-8b").layers
32
"""

from hpnsim.workloads import aicb, article, layout, models, placement, traffic
from hpnsim.workloads.aicb import Workload, load_aicb, parse_aicb
from hpnsim.workloads.layout import Layout, check_layout, make_layout
from hpnsim.workloads.models import ModelSpec
from hpnsim.workloads.placement import Placement, place
from hpnsim.workloads.traffic import TrafficReport, iteration_traffic

__all__ = ["Layout", "ModelSpec", "Placement", "TrafficReport", "Workload", "aicb", "article",
           "check_layout", "iteration_traffic", "layout", "load_aicb", "make_layout", "models",
           "parse_aicb", "place", "placement", "traffic"]


#: moved to :mod:`hpnsim.training` (training concepts); reachable here for one release
_MOVED = {"TrainJob": "hpnsim.training.job", "IterationResult": "hpnsim.training.iteration"}


def __getattr__(name: str):
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(f"hpnsim.workloads.{name} moved to hpnsim.training.{name}; the old name "
                      "goes in the next release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'hpnsim.workloads' has no attribute {name!r}")
