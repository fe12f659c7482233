"""hpnsim.workloads: model catalog, parallel layout and placement, traffic, workload files.

>>> from hpnsim.workloads import models
>>> models.get("llama3-8b").layers
32
"""

from hpnsim.workloads import layout, models, placement
from hpnsim.workloads.layout import Layout, check_layout, make_layout
from hpnsim.workloads.models import ModelSpec
from hpnsim.workloads.placement import Placement, place

__all__ = ["Layout", "ModelSpec", "Placement", "check_layout", "layout", "make_layout",
           "models", "place", "placement"]
