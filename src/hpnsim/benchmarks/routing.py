"""Routing benchmark: route one flow per GPU of an HPN 7.0 pod under every policy.

``run(quick)`` follows the ``hpnsim.benchmarks`` suite protocol (``-> list[Measurement]``).
Numba kernels are compiled (or loaded from cache) by a small warm-up call first, so figures
are steady-state times.
"""

from __future__ import annotations

import numpy as np

from hpnsim.benchmarks import Measurement, timed


def run(quick: bool = False) -> list[Measurement]:
    """Time ``route`` and ``diagnose`` on a full pod (15,360 GPUs) or 2 segments if quick.

    >>> ms = run(quick=True)
    >>> sorted({m.details["flows"] for m in ms if "flows" in m.details})
    [2048]
    """
    import hpnsim.fabrics as fb
    from hpnsim.routing import route
    from hpnsim.routing.diagnostics import diagnose
    from hpnsim.routing.tables import routing_tables

    fabric = fb.hpn7(segments=2 if quick else 15)
    n = fabric.n_gpus
    per_segment = fabric.meta["hosts_per_segment"] * fabric.gpus_per_host
    src = np.arange(n)
    ring = (src + per_segment) % n                 # same rail, next segment: crosses the Aggs
    shuffled = np.random.default_rng(0).permutation(n)
    out = []
    m, _ = timed("routing tables (first use per fabric)", lambda: routing_tables(fabric))
    out.append(m)
    route(fabric, src[:8], ring[:8])                                  # warm up the kernels
    for policy in ("ecmp", "hpn_dual_plane", "precise", "spray"):
        route(fabric, src[:8], ring[:8], policy)
        m, paths = timed(f"route {policy}: 1 flow per GPU to the next segment",
                         lambda p=policy: route(fabric, src, ring, p),
                         target_seconds=1.0 if policy in ("ecmp", "hpn_dual_plane") else None,
                         flows=n, gpus=n, entries=0)
        m.details["entries"] = int(paths.links.size)
        out.append(m)
    m, _ = timed("route ecmp: random permutation, PXN",
                 lambda: route(fabric, src, shuffled, "ecmp", pxn=True), target_seconds=1.0,
                 flows=n, gpus=n)
    out.append(m)
    paths = route(fabric, src, ring, "ecmp")
    diagnose(fabric, paths.subset(np.arange(8)))
    m, report = timed("diagnose ecmp paths", lambda: diagnose(fabric, paths), flows=n, gpus=n)
    m.details["collisions"] = report.collisions
    out.append(m)
    return out
