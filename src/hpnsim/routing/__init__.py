"""Routing: where every flow goes (ECMP hashing, HPN dual plane, precise paths, spraying).

>>> import hpnsim.fabrics as fb
>>> from hpnsim.routing import route
>>> f = fb.hpn7(segments=2, hosts_per_segment=2, backup_hosts=0, tor_uplinks=4,
...             aggs_per_plane=4)
>>> paths = route(f, [0, 8], [16, 24], policy="ecmp", seed=1)
>>> paths.n_flows, paths.hop_counts().tolist()
(2, [6, 6])
"""

from hpnsim.routing.ballsbins import (
    expected_distinct_paths,
    expected_excess_flows,
    expected_max_load,
    max_load_distribution,
    no_collision_probability,
)
from hpnsim.routing.diagnostics import RoutingDiagnostics, diagnose
from hpnsim.routing.ecmp import switch_seeds
from hpnsim.routing.flows import FlowBatch
from hpnsim.routing.hashing import (
    HASH_FUNCTIONS,
    five_tuple_keys,
    hash_five_tuples,
    hash_keys,
)
from hpnsim.routing.names import ROUTING_POLICIES
from hpnsim.routing.paths import Paths
from hpnsim.routing.route import native_policy, route

__all__ = [
    "HASH_FUNCTIONS", "ROUTING_POLICIES", "FlowBatch", "Paths", "RoutingDiagnostics", "diagnose",
    "expected_distinct_paths", "expected_excess_flows",
    "expected_max_load", "five_tuple_keys", "hash_five_tuples", "hash_keys",
    "max_load_distribution", "native_policy", "no_collision_probability", "route",
    "switch_seeds",
]

#: old names kept for one release (each said several things: routing policies, allocators
#: and AICB parallel policies were all ``POLICIES``)
_RENAMED = {"POLICIES": "ROUTING_POLICIES"}


def __getattr__(name: str):
    if name in _RENAMED:
        import warnings

        warnings.warn(f"{__name__}.{name} is now {_RENAMED[name]}; the old name goes in "
                      "the next release", DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
