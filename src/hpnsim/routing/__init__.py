"""Routing: where every flow goes (ECMP hashing, HPN dual plane, precise paths, spraying).

>>> import hpnsim.fabrics as fb
>>> from hpnsim.routing import route
>>> f = fb.hpn7(segments=2, hosts_per_segment=2, backup_hosts=0, tor_uplinks=4,
...             aggs_per_plane=4)
>>> paths = route(f, [0, 8], [16, 24], policy="ecmp", seed=1)
>>> paths.n_flows, paths.hop_counts().tolist()
(2, [6, 6])
"""

import importlib

#: public name -> the module that defines it; loaded on first use, so reading the policy
#: names (``routing.names``) loads no routing code. ``route`` lives in ``dispatch`` (a
#: submodule called ``route`` would shadow the function once imported).
_HOMES = {
    "expected_distinct_paths": "ballsbins", "expected_excess_flows": "ballsbins",
    "expected_max_load": "ballsbins", "max_load_distribution": "ballsbins",
    "no_collision_probability": "ballsbins",
    "RoutingDiagnostics": "diagnostics", "diagnose": "diagnostics",
    "switch_seeds": "ecmp", "FlowBatch": "flows",
    "HASH_FUNCTIONS": "hashing", "five_tuple_keys": "hashing", "hash_five_tuples": "hashing",
    "hash_keys": "hashing",
    "ROUTING_POLICIES": "names", "Paths": "paths",
    "native_policy": "dispatch", "route": "dispatch",
}

__all__ = sorted(_HOMES)

#: old names kept for one release (each said several things: routing policies, allocators
#: and AICB parallel policies were all ``POLICIES``)
_RENAMED = {"POLICIES": "ROUTING_POLICIES"}


def __getattr__(name: str):
    if name in _RENAMED:
        import warnings

        warnings.warn(f"{__name__}.{name} is now {_RENAMED[name]}; the old name goes in "
                      "the next release", DeprecationWarning, stacklevel=2)
        return __getattr__(_RENAMED[name])
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"hpnsim.routing.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOMES))
