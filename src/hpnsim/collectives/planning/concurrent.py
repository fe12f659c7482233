"""Several collectives in one simulation: they share every link max-min fairly.

The HPN paper's Multi-AllReduce is eight rail-parallel all-reduces: the GPUs with the same
local index on every host (one *rail*) all-reduce together, all rails at once, so all data
crosses the inter-host network and none NVLink (:func:`rail_groups`). :func:`run_together`
compiles every collective into one :class:`~hpnsim.engine.TaskGraph` and runs the engine
once; each collective is then measured as :func:`~hpnsim.collectives.run_collective`
measures one alone (its own finish time, algbw, busbw), and the slowest one is what a
synchronous job waits for.

A worked case: 2 hosts of 8 GPUs on one HPN segment, rails 0..7 each all-reducing over its
2 GPUs. Rail r's ring uses only NIC r of each host and ToR pair r (same-rail traffic is one
hop), so no two rails share a link and every rail runs exactly as fast as it does alone.

Seeds: the collective at position 0 routes with ``seed`` (so one collective alone gives
:func:`run_collective`'s result), collective j > 0 with a seed derived from ``(seed, j)``
(:func:`group_seed`), so their connections draw different source ports, as separate NCCL
communicators do.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from hpnsim.collectives.ops import busbw_factor
from hpnsim.collectives.planning.compile import compile_into
from hpnsim.collectives.planning.options import CollectiveOptions
from hpnsim.collectives.planning.run import CollectiveResult, concurrent_link_flows
from hpnsim.errors import MAX_SEED, InputError


def rail_groups(gpus, gpus_per_host: int) -> list[np.ndarray]:
    """One group per rail of ``gpus``: the GPUs with the same local index
    (``gpu % gpus_per_host``), in the order given; rails in order of local index.

    >>> [g.tolist() for g in rail_groups([0, 1, 8, 9, 16, 17], 8)]
    [[0, 8, 16], [1, 9, 17]]
    """
    gpus = np.asarray(list(gpus), dtype=np.int64)
    if gpus.ndim != 1 or gpus.size == 0:
        raise InputError("gpus", "per-rail collectives need a list of GPUs")
    local = gpus % int(gpus_per_host)
    groups = [gpus[local == r] for r in np.unique(local)]
    small = [int(r) for r, g in zip(np.unique(local), groups, strict=True) if g.size < 2]
    if small:
        raise InputError("gpus", f"rail {small[0]} has one GPU of the selection; a per-rail "
                                 f"collective needs two hosts or more on every rail")
    return groups


def group_seed(seed: int, j: int) -> int:
    """Routing seed of the j-th collective run together: ``seed`` for j = 0, else one drawn
    from ``(seed, j)``.

    >>> group_seed(7, 0), group_seed(7, 1) == group_seed(7, 1) != group_seed(7, 2)
    (7, True)
    """
    if j == 0:
        return int(seed)
    state = np.random.SeedSequence([int(seed), int(j)]).generate_state(2, np.uint64)
    return int(state[0]) % (MAX_SEED + 1)


@dataclass
class Together:
    """One collective of a :func:`run_together` call: ``op`` on ``gpus`` moving ``size``
    bytes; ``options`` are the fields of
    :class:`~hpnsim.collectives.planning.options.CollectiveOptions` in which it differs from the
    run's shared options (algo, protocol, channels, qps, root, pxn)."""

    op: str
    gpus: list
    size: float
    options: dict = field(default_factory=dict)


def run_together(fabric, collectives: list[Together], options: CollectiveOptions | None = None,
                 *, state=None, **keywords) -> list[CollectiveResult]:
    """Simulate ``collectives`` at once on ``fabric`` and measure each (one
    :class:`CollectiveResult` per collective, in order).

    Each result's time is its own finish (all start at 0); ``link_bytes``, ``top_links``,
    ``bottleneck`` and ``port_imbalance`` are those of the whole run (every collective's
    bytes); ``max_link_flows`` and ``hash_collisions`` count the collective's own flows.

    Parameters
    ----------
    fabric : Fabric
    collectives : list of Together
    options : CollectiveOptions, optional
        What the collectives share (routing, NCCL parameters, ...); collective ``j`` hashes
        with seed :func:`group_seed` ``(options.seed, j)``.
    state : FabricState, optional
        Links down and capacities (default: the fabric as built).
    **keywords
        Fields of :class:`~hpnsim.collectives.planning.options.CollectiveOptions` replacing those of
        ``options`` (``routing="hpn_dual_plane"``, ``seed=1``).

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> rails = [Together("allreduce", g.tolist(), 2**26) for g in rail_groups(range(16), 8)]
    >>> both = run_together(f, rails, routing="hpn_dual_plane")
    >>> from hpnsim.collectives import run_collective
    >>> alone = run_collective(f, "allreduce", [0, 8], 2**26, routing="hpn_dual_plane")
    >>> len(both), both[0].time == alone.time, max(r.time for r in both) == alone.time
    (8, True, True)
    """
    from hpnsim.engine import TaskGraph, simulate
    from hpnsim.routing.diagnostics import port_imbalance

    if not collectives:
        raise InputError("collectives", "run_together needs at least one collective")
    graph = TaskGraph()
    base = CollectiveOptions.build(options, **keywords)
    routing = base.routing
    compiled = [compile_into(graph, fabric, c.op, c.gpus, c.size,
                             replace(base, seed=group_seed(base.seed, j)), state=state,
                             name=f"together{j}", **c.options)
                for j, c in enumerate(collectives)]
    capacity = fabric.link_capacity if state is None else state.capacity
    sim = simulate(graph, capacity)
    link_bytes = np.asarray(sim.link_bytes, dtype=np.float64)
    ratio = np.divide(link_bytes, capacity, out=np.zeros_like(link_bytes), where=capacity > 0)
    worst = int(np.argmax(ratio)) if ratio.size else -1
    top = np.argsort(-ratio, kind="stable")[:10]
    top_links = [(fabric.link_name(int(k)), float(link_bytes[k])) for k in top
                 if link_bytes[k] > 0]
    imbalance = port_imbalance(fabric, link_bytes, state=state)
    bottleneck = fabric.link_name(worst) if worst >= 0 and link_bytes[worst] > 0 else "-"
    out = []
    for c, comp in zip(collectives, compiled, strict=True):
        time = float(sim.finish[comp.final].max())
        n = comp.schedule.gpus.size
        algbw = c.size / time if time > 0 else np.inf
        max_flows, collisions = concurrent_link_flows(comp, fabric, state)
        out.append(CollectiveResult(
            op=comp.schedule.op, algo=comp.algo, protocol=comp.protocol, routing=routing,
            n_gpus=n, size=float(c.size), time=time, algbw=algbw,
            busbw=algbw * busbw_factor(comp.schedule.op, n), bottleneck=bottleneck,
            bottleneck_utilization=float(ratio[worst] / time) if worst >= 0 and time > 0
            else 0.0, max_link_flows=max_flows, hash_collisions=collisions,
            n_groups=len(graph), link_bytes=link_bytes, top_links=top_links,
            port_imbalance=imbalance))
    return out


def slowest(results: list[CollectiveResult]) -> CollectiveResult:
    """The result that finished last (ties: the first), what a synchronous job waits for.

    >>> from types import SimpleNamespace as S
    >>> slowest([S(time=1.0), S(time=3.0), S(time=2.0)]).time
    3.0
    """
    return max(results, key=lambda r: r.time)
