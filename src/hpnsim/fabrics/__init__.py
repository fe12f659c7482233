"""Fabrics: array-backed topologies (HPN 7.0 and its rivals), analysis, bill of materials, export.

>>> import hpnsim.fabrics as fb
>>> fb.hpn7(segments=1).n_gpus
1024
"""

from hpnsim.fabrics.clos import dcn_plus, fat_tree, rail_only, rail_optimized
from hpnsim.fabrics.fabric import BACKEND, FRONTEND, UNREACHABLE, Fabric, LinkKind, NodeKind
from hpnsim.fabrics.frontend import checkpoint_time_bound, default_storage_hosts
from hpnsim.fabrics.frontend_paths import storage_path, storage_paths
from hpnsim.fabrics.hpn import DUAL_TOR_MODES, hpn7
from hpnsim.fabrics.lingjun import from_lingjun
from hpnsim.fabrics.registry import TEMPLATES, build_fabric, size_options, typed_options
from hpnsim.fabrics.state import FabricState

__all__ = [
    "BACKEND", "DUAL_TOR_MODES", "FRONTEND", "TEMPLATES", "UNREACHABLE", "Fabric",
    "FabricState", "LinkKind",
    "NodeKind", "build_fabric", "checkpoint_time_bound", "dcn_plus", "default_storage_hosts",
    "fat_tree", "from_lingjun", "hpn7", "rail_only", "rail_optimized", "size_options",
    "storage_path", "storage_paths", "typed_options",
]
