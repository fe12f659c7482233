"""Each numba kernel compiles once per argument-type combination that really differs
(issue 21, cold start): call sites pass consistent dtypes and no literal constants, so a
fresh install compiles (and caches) one specialisation where it compiled two to four.

The kernels' ``signatures`` accumulate over a process, so the count is taken in a fresh
interpreter that routes one all-reduce with every routing policy (ECMP, dual-plane,
precise, spray: the routing kernels the demo's first steps compile) and simulates it (the
event loop and the max-min solver), then routes dual-plane on a fabric with a link down
(the degraded walks the demo's failure step compiles).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

SCRIPT = """
import json, sys
from numba.core.registry import CPUDispatcher
from hpnsim.cli.main import run
for routing in ("ecmp", "hpn_dual_plane", "precise", "spray"):
    try:
        run(["collective", "--fabric", "hpn7", "--gpus", "32", "--routing", routing,
             "--sizes", "1M", "--json"])
    except SystemExit as stop:
        assert stop.code == 0, (routing, stop.code)
# a degraded fabric: dual-plane's fixed core mapping with a core uplink down walks with the
# all-up base (tests/test_routing_state.py derives the routes)
import numpy as np
from hpnsim.fabrics import FabricState, hpn7
from hpnsim.routing import route
f = hpn7(pods=2, segments=1, hosts_per_segment=2, agg_core_uplinks=2, backup_hosts=0,
         tor_uplinks=2, aggs_per_plane=2)
g = np.arange(16)
src, dst = np.repeat(g, 16), np.tile(g + 16, 16)
before = route(f, src, dst, "hpn_dual_plane")
agg_core = [k for k in before.path(0) if f.node_tier[f.link_dst[k]] == 3][0]
route(f, src, dst, "hpn_dual_plane", state=FabricState(f).set_down([agg_core]))
counts = {}
for name, mod in list(sys.modules.items()):
    if name.startswith("hpnsim."):
        for key, value in vars(mod).items():
            if isinstance(value, CPUDispatcher) and value.__module__ == name:
                counts[f"{name}.{key}"] = len(value.signatures)
print("COUNTS" + json.dumps(counts))
"""

# the one kernel with two genuinely different argument types: _rotl32 on murmur's 32-bit
# key words and on its 64-bit running hash (walk_one and ecmp_walk take the all-up base
# fabric and a degraded flag in one signature, degraded or not)
TWO = {"hpnsim.routing.hashing._rotl32"}


def test_each_kernel_compiles_once_per_real_type_combination(tmp_path):
    # an empty cache (kernels loaded from a cache record no signatures of the kernels they
    # call); optimisation off, since only the typing decides the count, to keep it quick
    env = dict(os.environ, PYTHONPATH=str(SRC), NUMBA_CACHE_DIR=str(tmp_path),
               NUMBA_OPT="0")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=600, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("COUNTS"))
    counts = json.loads(line[len("COUNTS"):])
    # the routing and engine kernels all ran: the check covers them
    for kernel in ("hpnsim.routing.kernels.cached_candidates", "hpnsim.routing.spray._spray_flow",
                   "hpnsim.engine.loop.advance", "hpnsim.engine.heap.heap_push",
                   "hpnsim.engine.heapfill._sift_down", "hpnsim.routing.hashing.hash_row",
                   "hpnsim.routing.kernels._fixed_pick"):
        assert counts.get(kernel, 0) >= 1, kernel
    extra = {k: n for k, n in counts.items() if n > (2 if k in TWO else 1)}
    assert extra == {}
