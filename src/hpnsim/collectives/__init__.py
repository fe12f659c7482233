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
    COLLECTIVE_ALGORITHMS,
    OPS,
    PROTOCOL_EFFICIENCY,
    busbw_factor,
    normalize_algorithm,
    normalize_op,
)
from hpnsim.collectives.plan import RoutedSchedule, plan_cache, plan_collective
from hpnsim.collectives.run import CollectiveResult, run_collective
from hpnsim.collectives.schedule import Schedule, Stage

__all__ = [
    "COLLECTIVE_ALGORITHMS", "OPS", "PROTOCOL_EFFICIENCY", "CollectiveResult", "CompiledCollective",
    "GroupShape", "RoutedSchedule", "choose_protocol", "plan_cache", "plan_collective", "hd_time", "model_time", "ring_time", "tree_time",
    "Schedule", "Stage", "alpha_beta_time", "build_schedule", "busbw_factor",
    "choose_algorithm", "compile_collective", "compile_into", "default_channels",
    "hierarchical_time", "hop_latencies", "nccl_time", "normalize_algorithm", "normalize_op",
    "run_collective",
]

#: old names kept for one release (``ALGORITHMS`` also named the traffic
#: calculator's ring/naive choice)
_RENAMED = {"ALGORITHMS": "COLLECTIVE_ALGORITHMS"}


def __getattr__(name: str):
    if name in _RENAMED:
        import warnings

        warnings.warn(f"{__name__}.{name} is now {_RENAMED[name]}; the old name goes in "
                      "the next release", DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
