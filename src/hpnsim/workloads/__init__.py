"""hpnsim.workloads: model catalog, parallel layout and placement, traffic, workload files.

>>> from hpnsim.workloads import models
>>> models.get("llama3-8b").layers
32
"""

from hpnsim.workloads import aicb, article, layout, models, placement, traffic
from hpnsim.workloads.aicb import Workload, load_aicb, parse_aicb
from hpnsim.workloads.iteration import IterationResult, TrainJob, simulate_iteration  # noqa: F401
from hpnsim.workloads.layout import Layout, check_layout, make_layout
from hpnsim.workloads.models import ModelSpec
from hpnsim.workloads.placement import Placement, place
from hpnsim.workloads.traffic import TrafficReport, iteration_traffic

__all__ = ["Layout", "ModelSpec", "Placement", "TrafficReport", "Workload", "aicb", "article",
           "check_layout", "iteration_traffic", "layout", "load_aicb", "make_layout", "models",
           "parse_aicb", "place", "placement", "traffic"]
