"""Fabrics: array-backed topologies (HPN 7.0 and its rivals), analysis, bill of materials, export.

>>> import hpnsim.fabrics as fb
>>> fb.hpn7(segments=1).n_gpus
1024
"""

from hpnsim.fabrics.clos import dcn_plus, fat_tree, rail_only, rail_optimized
from hpnsim.fabrics.fabric import UNREACHABLE, Fabric, LinkKind, NodeKind
from hpnsim.fabrics.hpn import DUAL_TOR_MODES, hpn7
from hpnsim.fabrics.lingjun import from_lingjun
from hpnsim.fabrics.registry import TEMPLATES, build_fabric, size_options, typed_options

__all__ = [
    "DUAL_TOR_MODES", "TEMPLATES", "UNREACHABLE", "Fabric", "LinkKind", "NodeKind",
    "build_fabric", "dcn_plus", "fat_tree", "from_lingjun", "hpn7", "rail_only",
    "rail_optimized", "size_options", "typed_options",
]
