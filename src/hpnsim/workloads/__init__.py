"""hpnsim.workloads: model catalog, parallel layout and placement, traffic, workload files.

>>> from hpnsim.workloads import models
>>> models.get("llama3-8b").layers
32
"""

from hpnsim.workloads import aicb, article, layout, models, placement, traffic
from hpnsim.workloads.aicb import Workload, load_aicb, parse_aicb
from hpnsim.workloads.iteration import IterationResult
from hpnsim.workloads.iteration_job import TrainJob
from hpnsim.workloads.layout import Layout, check_layout, make_layout
from hpnsim.workloads.models import ModelSpec
from hpnsim.workloads.placement import Placement, place
from hpnsim.workloads.traffic import TrafficReport, iteration_traffic

__all__ = ["IterationResult", "Layout", "ModelSpec", "Placement", "TrafficReport", "Workload", "aicb", "article",
           "check_layout", "iteration_traffic", "layout", "load_aicb", "make_layout", "models",
           "parse_aicb", "place", "placement", "TrainJob", "traffic"]
