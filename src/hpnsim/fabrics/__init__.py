"""Fabrics: array-backed topologies (HPN 7.0 and its rivals), analysis, bill of materials, export.

>>> import hpnsim.fabrics as fb
>>> fb.hpn7(segments=1).n_gpus
1024
"""

from hpnsim.fabrics.clos import dcn_plus, fat_tree, rail_only, rail_optimized
from hpnsim.fabrics.fabric import UNREACHABLE, Fabric, LinkKind, NodeKind
from hpnsim.fabrics.hpn import DUAL_TOR_MODES, hpn7

__all__ = [
    "DUAL_TOR_MODES", "UNREACHABLE", "Fabric", "LinkKind", "NodeKind", "dcn_plus", "fat_tree",
    "hpn7", "rail_only", "rail_optimized",
]
