"""Collectives: NCCL-style algorithms compiled into engine transfer groups, and closed forms.

>>> import hpnsim.collectives as hc
>>> hc.busbw_factor("allreduce", 8)
1.75
>>> round(hc.alpha_beta_time("allreduce", "ring", 8, 1e9, 0.0, 50e9) * 1e3, 3)
35.0
"""

from hpnsim.collectives.algorithms import build_schedule, default_channels
from hpnsim.collectives.compile import CompiledCollective, compile_collective, compile_into
from hpnsim.collectives.cost import alpha_beta_time, hierarchical_time, hop_latencies, nccl_time
from hpnsim.collectives.model import (
    GroupShape,
    choose_algorithm,
    choose_protocol,
    hd_time,
    model_time,
    ring_time,
    tree_time,
)
from hpnsim.collectives.ops import (
    ALGORITHMS,
    OPS,
    PROTOCOL_EFFICIENCY,
    busbw_factor,
    normalize_algorithm,
    normalize_op,
)
from hpnsim.collectives.options import CollectiveOptions
from hpnsim.collectives.plan import RoutedSchedule, plan_cache, plan_collective
from hpnsim.collectives.run import CollectiveResult, run_collective
from hpnsim.collectives.schedule import Schedule, Stage

__all__ = [
    "ALGORITHMS", "OPS", "PROTOCOL_EFFICIENCY", "CollectiveOptions", "CollectiveResult",
    "CompiledCollective",
    "GroupShape", "RoutedSchedule", "choose_protocol", "plan_cache", "plan_collective", "hd_time", "model_time", "ring_time", "tree_time",
    "Schedule", "Stage", "alpha_beta_time", "build_schedule", "busbw_factor",
    "choose_algorithm", "compile_collective", "compile_into", "default_channels",
    "hierarchical_time", "hop_latencies", "nccl_time", "normalize_algorithm", "normalize_op",
    "run_collective",
]
