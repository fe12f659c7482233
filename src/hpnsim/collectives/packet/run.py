"""A planned collective through the packet engine: the same NCCL schedule, paths and QPs as
:func:`~hpnsim.collectives.planning.run.run_collective`, run as packets (:mod:`hpnsim.packet`).

:func:`plan_collective` gives the schedule (one ring stage per NCCL channel) and its routed,
QP-expanded member paths (same routing policy, ECMP hash and seed as the flow engine). Each
(channel, QP) becomes one ring of :func:`hpnsim.packet.ring.simulate_ring`: rank r's path to
rank r+1 is its member path cut to the NIC-to-NIC leg
(:func:`hpnsim.packet.adapter.network_legs`); the piece of a step is the stage's bytes over
its steps, split over the QPs, in chunks of NCCL's slot (``nccl.chunk_bytes`` per channel,
divided over the QPs). What the flow engine charges as efficiencies the packet engine
either simulates or is given the same way:

* network links: the flow engine divides by ``network_efficiency`` (RoCE headers); the
  packet engine sends each packet's header (``PacketParams.header_bytes``) instead;
* NVLink: the flow engine divides by ``nvlink_efficiency``; here an NVLink runs at
  ``capacity x nvlink_efficiency`` (plus the header the packet engine adds to every packet);
* the protocol (LL, LL128): every chunk carries ``1 / protocol_efficiency`` wire bytes.

NCCL's software latencies (the flow engine's base and per-hop terms, which the packet engine
does not simulate) are added to the packet engine's network time (serialization,
propagation, queues), as the flow engine adds them to its bandwidth time: the engines then
differ by what the network does.

Ring all-reduce, all-gather and reduce-scatter run this way (:data:`PACKET_OPS`, also
when ``algo: auto`` picks ring); tree and NVLS-tree all-reduce (Simple) run as NCCL's
chunked tree pipeline (:func:`hpnsim.collectives.packet.tree.run_tree_packet`); every other
collective (NVLS, hierarchical, all-to-all, LL/LL128 trees, ...) runs as the flow engine's
compiled task graph, moved as packets
(:func:`hpnsim.collectives.packet.graph.run_collective_graph_packet`). Collectives run
together (:func:`run_together_packet`) are rings. The work is bounded before the run:
:func:`estimate_packets` counts the packet hops of the steps the run would simulate and
:func:`run_collective_packet` refuses a run beyond ``max_packets`` naming the option that
raises it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from hpnsim.collectives.packet.ports import PACKET_OPS
from hpnsim.collectives.packet.ports import packet_capacity as _packet_capacity
from hpnsim.collectives.packet.result import (
    PACKET_ROW_FIELDS,
    PacketCollectiveResult,
    packet_collective_result,
)
from hpnsim.collectives.planning.concurrent import group_seed
from hpnsim.collectives.planning.options import CollectiveOptions
from hpnsim.collectives.planning.run import concurrent_link_flows
from hpnsim.errors import InputError

__all__ = ["PACKET_OPS", "PACKET_ROW_FIELDS", "DEFAULT_MAX_PACKETS", "PacketCollectiveResult",
           "PacketRun", "check_collective_packet", "estimate_packets", "packet_rings",
           "run_collective_packet", "run_together_packet"]

#: packet hops one run may simulate by default: ~4 events each, ~10 M events/s on one core
#: (docs/packet.md, measured): about 20-40 s
DEFAULT_MAX_PACKETS = 5e7


@dataclass(frozen=True)
class PacketRun:
    """How a collective runs through the packet engine (the ``engine:`` settings).

    params : :class:`~hpnsim.packet.PacketParams` (None: the defaults).
    window : windowed steady state (simulate ring steps until the per-step time is stable,
        extrapolate the rest); False simulates every step.
    max_packets : refuse a run whose estimated packet hops exceed this
        (``--max-packets``); in the windowed mode it also caps how many steps the window
        builds and simulates when the per-step time does not settle (the result then says
        ``stable`` False).
    watch : link ids whose queue is sampled over time (empty: the busiest switch ports of
        the collective's paths, up to ``max_watch``).
    samples : queue samples per watched port over the run.
    slots : ring chunks in flight per connection (NCCL_STEPS, 8 in NCCL 2.18.3
        ``src/include/devcomm.h``: a sender waits for the receiver to free a slot of its
        4 MiB buffer); None: unbounded, each chunk waits for its data only.
    share_rails : a chunked tree or NVLS-tree whose rails run alike simulates one rail for
        all (:mod:`~hpnsim.collectives.packet.rails`); False simulates every rail.
    """

    params: object = None
    window: bool = True
    max_packets: float = DEFAULT_MAX_PACKETS
    watch: tuple = ()
    max_watch: int = 64
    samples: int = 2000
    slots: int | None = 8
    share_rails: bool = True


def _ring_stages(plan, op: str) -> list:
    sch = plan.schedule
    for stage in sch.stages:
        closed = np.array_equal(stage.dst, np.roll(stage.src, -1))
        if stage.switch is not None or not stage.coupled or stage.deps or not closed:
            raise InputError("algo", f"the packet engine runs rings only; {op} planned "
                                     f"{plan.algo} stages: use --algo ring")
    return list(sch.stages)


def packet_rings(fabric, plan) -> tuple[list, float, int, float]:
    """``(rings, piece, steps, chunk)`` of a planned ring collective: one ring per (channel,
    QP), ``rings[g][r]`` the link ids of rank r's NIC-to-NIC leg (or NVLink path) to rank
    r+1; ``piece`` the payload bytes per rank and step on each ring; ``chunk`` NCCL's slot
    per QP.

    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> plan = plan_collective(f, "allreduce", range(16), 2**24, algo="ring", qps=2)
    >>> rings, piece, steps, chunk = packet_rings(f, plan)
    >>> len(rings), len(rings[0]), steps, piece == 2**24 / 16 / 16 / 2, chunk == 2**18
    (32, 16, 30, True, True)
    """
    stages = _ring_stages(plan, plan.schedule.op)
    qps = plan.qps
    rings = []
    for stage, paths in zip(stages, plan.paths, strict=True):
        legs = relayed_legs(fabric, paths)
        n = stage.n_members
        rings.extend([legs[r * qps + q] for r in range(n)] for q in range(qps))
    stage = stages[0]
    steps = stage.intra_steps + stage.inter_steps
    piece = stage.size / steps / qps
    return rings, piece, steps, plan.nccl.chunk_bytes / qps


def relayed_legs(fabric, paths) -> list:
    """Per flow, its packet path (:func:`~hpnsim.packet.adapter.network_legs`), or, for a
    PXN-relayed flow (NVLink hops before its NIC), the pair ``(NVLink hops, network leg)``:
    NCCL's proxy first copies the chunk over NVLink to the GPU beside the right NIC, which
    then sends it, so the relay loads NVLink as the flow engine's path does.

    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> plan = plan_collective(f, "allreduce", range(16), 2**20, algo="ring", channels=2)
    >>> legs = relayed_legs(f, plan.paths[1])            # channel 1: GPU 0 relays via GPU 1
    >>> [len(x) for x in legs[7]], len(legs[0])
    ([2, 2], 2)
    """
    from hpnsim.fabrics.fabric import LinkKind
    from hpnsim.packet.adapter import network_legs

    kind = np.asarray(fabric.link_kind)
    out = []
    for i, leg in enumerate(network_legs(fabric, paths)):
        whole = np.asarray(paths.links[paths.ptr[i]:paths.ptr[i + 1]], dtype=np.int64)
        head = whole[:int(np.flatnonzero(whole == leg[0])[0])]
        relay = head[kind[head] == LinkKind.NVLINK]
        out.append((relay, leg) if relay.size and kind[leg[0]] != LinkKind.NVLINK else leg)
    return out


def estimate_packets(rings, piece: float, steps: int, chunk: float, params,
                     window: bool, first_window: int = 4) -> float:
    """Packet hops the run simulates: packets per step (chunks of at most an MTU) times
    links crossed, over every step, or over the first window (``first_window`` steps; the
    window goes on only while the per-step time moves).

    >>> from hpnsim.packet import PacketParams
    >>> estimate_packets([[[0, 1], [2]]], 8192.0, 2, 8192.0, PacketParams(), window=False)
    12.0
    """
    mtu = params.mtu_bytes
    chunks = max(1, int(np.ceil(piece / chunk)))
    per_chunk = np.ceil(piece / chunks / mtu)
    hops = sum(len(leg) for ring in rings for p in ring
               for leg in (p if isinstance(p, tuple) else (p,)))
    simulated = steps if not window else min(steps, first_window)
    return float(per_chunk * chunks * hops * simulated)


def _window_cap(estimate: float, steps: int, run: PacketRun) -> int:
    """Most steps the window may build and simulate (one packet run that stops once every
    ring has settled, :func:`~hpnsim.packet.ring.simulate_ring`): the steps whose packet
    hops fit within ``max_packets``."""
    per_step = estimate / min(steps, 4)
    return max(4, int(run.max_packets / per_step))


def _watch(fabric, rings, switch_of, run: PacketRun) -> np.ndarray:
    if run.watch:
        return np.asarray(run.watch, dtype=np.int64)
    links = np.concatenate([np.asarray(leg, dtype=np.int64) for ring in rings for p in ring
                            for leg in (p if isinstance(p, tuple) else (p,))])
    load = np.bincount(links, minlength=fabric.n_links).astype(float)
    load[switch_of < 0] = 0.0
    busy = np.flatnonzero(load > 0)
    order = busy[np.argsort(-load[busy], kind="stable")]
    return np.sort(order[:run.max_watch])


def _checked(fabric, op, gpus, size, options, run: PacketRun, state=None):
    from dataclasses import replace

    from hpnsim.collectives.ops import normalize_algorithm, normalize_op
    from hpnsim.collectives.planning.plan import plan_collective
    from hpnsim.packet import PacketParams

    op = normalize_op(op)
    if op not in PACKET_OPS:
        raise InputError("op", f"collectives run together as packets are rings of "
                               f"{', '.join(PACKET_OPS)}; got {op}: use --engine flow")
    algo = normalize_algorithm(options.algo)
    if algo not in ("auto", "ring"):
        raise InputError("algo", f"collectives run together as packets are rings; got "
                                 f"{algo}: use --algo ring or --engine flow")
    options = replace(options, algo="ring")
    params = (run.params or PacketParams()).validate()
    plan = plan_collective(fabric, op, gpus, size, options, state=state)
    rings, piece, steps, chunk = packet_rings(fabric, plan)
    if state is not None:
        used = np.concatenate([np.asarray(leg, dtype=np.int64) for ring in rings for p in ring
                               for leg in (p if isinstance(p, tuple) else (p,))])
        dead = used[~np.asarray(state.up)[used]]
        if dead.size:
            raise InputError("state", f"no path around the down link {fabric.link_name(int(dead[0]))} "
                                      f"(a ring member has no other route): the collective "
                                      f"cannot run")
    efficiency = plan.nccl.protocol_efficiency(plan.protocol)
    estimate = estimate_packets(rings, piece / efficiency, steps, chunk, params, run.window)
    if estimate > run.max_packets:
        hint = "" if run.window else ", or use the windowed mode (drop --no-window)"
        raise InputError("max_packets", f"the run would simulate ~{estimate:.3g} packet hops, "
                                        f"over the limit {run.max_packets:.3g}: raise "
                                        f"--max-packets{hint}")
    return op, options, plan, rings, piece, steps, chunk, estimate


def check_collective_packet(fabric, op: str, gpus, size: float,
                            options: CollectiveOptions | None = None,
                            run: PacketRun = PacketRun(), *, together: bool = False) -> float:
    """Refuse what :func:`run_collective_packet` cannot run (a run beyond
    ``run.max_packets``) before running it: an :class:`~hpnsim.errors.InputError` named
    ``max_packets``; else the estimated packet hops (of the ring's simulated steps, or of the
    whole task graph of another algorithm). ``together``: checked as one of several
    collectives run together (:func:`run_together_packet`: rings only, ``auto`` a ring).

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> check_collective_packet(f, "alltoall", range(16), 2**20)         # its whole graph
    22528.0
    >>> ring = CollectiveOptions(algo="ring")
    >>> check_collective_packet(f, "allreduce", range(16), 2**30, ring, PacketRun(max_packets=1e5))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: max_packets: the run would simulate ~2.36e+06 packet hops, over the limit 1e+05: raise --max-packets
    """
    from hpnsim.collectives.packet.graph import check_graph_packet, graph_plan
    from hpnsim.collectives.packet.tree import check_tree_packet, tree_pipelined

    options = CollectiveOptions.build(options)
    plan = None if together else graph_plan(fabric, op, gpus, size, options)
    if plan is not None:
        if tree_pipelined(plan):
            return check_tree_packet(fabric, plan, run)
        return check_graph_packet(fabric, plan, run)
    return _checked(fabric, op, gpus, size, options, run)[-1]


def run_collective_packet(fabric, op: str, gpus, size: float,
                          options: CollectiveOptions | None = None, run: PacketRun = PacketRun(),
                          *, state=None, **keywords) -> PacketCollectiveResult:
    """Run a collective as packets on ``fabric`` (see the module docstring).

    Parameters
    ----------
    fabric, op, gpus, size, options, keywords
        As :func:`~hpnsim.collectives.planning.run.run_collective`; what is not a ring (``algo``
        given, or what ``auto`` picks) runs as its task graph
        (:func:`~hpnsim.collectives.packet.graph.run_collective_graph_packet`).
    run : PacketRun
        Packet parameters, windowed mode, the work limit and the watched ports.
    state : hpnsim.fabrics.FabricState, optional
        Links down (routing goes around them, as in the flow engine) and capacities; a ring
        left without a route is an :class:`~hpnsim.errors.InputError` named ``state``.

    Returns
    -------
    PacketCollectiveResult

    Examples
    --------
    Two hosts of one HPN segment, 16 channels (8 rails x 2 ports): each channel crosses the
    network from its own 200G port (1 MiB per step at 25 GB/s: 42 us), but every GPU's
    NVLink (200 GB/s at NCCL's 0.824) carries one piece per channel per step (its ring hop
    or a PXN relay): 16 MiB per step, 102 us, the bottleneck; no marks, no pauses.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> r = run_collective_packet(f, "allreduce", range(16), 2**28, algo="ring")
    >>> r.algo, r.steps, r.ecn_marks, r.pfc_pauses, r.drops
    ('ring', 30, 0, 0, 0)
    >>> step = 16 * 2**28 / 16 / 16 / (200e9 * 0.824)
    >>> bool(abs(r.network_time / (30 * step) - 1) < 0.02)
    True
    """
    from hpnsim.collectives.packet.graph import graph_plan, run_collective_graph_packet
    from hpnsim.collectives.packet.tree import run_tree_packet, tree_pipelined

    options = CollectiveOptions.build(options, **keywords)
    graph = graph_plan(fabric, op, gpus, size, options, state)
    if graph is not None and tree_pipelined(graph):
        return run_tree_packet(fabric, graph, size, options.routing, run, state)
    if graph is not None:
        return run_collective_graph_packet(fabric, graph, size, options.routing, run, state)
    op, options, plan, rings, piece, steps, chunk, estimate = _checked(
        fabric, op, gpus, size, options, run, state)
    return _simulate(fabric, op, size, options, [plan], rings, piece, steps, chunk, estimate,
                     run, state)


def run_together_packet(fabric, op: str, groups, size: float,
                        options: CollectiveOptions | None = None, run: PacketRun = PacketRun(),
                        *, state=None, **keywords) -> PacketCollectiveResult:
    """Several collectives of the same operation, size and group size run together as
    packets (the HPN paper's Multi-AllReduce: one ring collective per rail, all at once);
    their rings share one packet run, so they meet in the same queues. Returns the run as
    one result: ``time`` is the slowest collective's, ``n_gpus`` one group's; counters and
    ports cover them all. Group ``j`` routes with
    :func:`~hpnsim.collectives.planning.concurrent.group_seed` ``(options.seed, j)``, as
    :func:`~hpnsim.collectives.planning.concurrent.run_together` does, so both engines route it on
    the same paths.

    >>> from hpnsim.collectives.planning.concurrent import rail_groups
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    >>> groups = [g.tolist() for g in rail_groups(range(32), 8)]
    >>> r = run_together_packet(f, "allreduce", groups, 2**26, algo="ring",
    ...                         routing="hpn_dual_plane")
    >>> r.n_gpus, r.n_groups, r.hash_collisions, r.pfc_pauses     # 8 rails x 2 channels
    (4, 16, 0, 0)
    """
    options = CollectiveOptions.build(options, **keywords)
    # group j routes with the seed the flow engine gives it (run_together), so both
    # engines put each group's connections on the same paths
    checked = [_checked(fabric, op, g, size, replace(options, seed=group_seed(options.seed, j)),
                        run, state) for j, g in enumerate(groups)]
    shapes = {(c[5], len(c[3][0]), c[4], c[6]) for c in checked}
    if len(shapes) > 1:
        raise InputError("gpus", "collectives run together as packets need groups of one "
                                 "size (their ring steps must line up)")
    op, options, _, _, piece, steps, chunk, _ = checked[0]
    rings = [ring for c in checked for ring in c[3]]
    estimate = sum(c[7] for c in checked)
    if estimate > run.max_packets:
        raise InputError("max_packets", f"the run would simulate ~{estimate:.3g} packet hops, "
                                        f"over the limit {run.max_packets:.3g}: raise "
                                        f"--max-packets")
    return _simulate(fabric, op, size, options, [c[2] for c in checked], rings, piece, steps,
                     chunk, estimate, run, state)


def _simulate(fabric, op, size, options, plans, rings, piece, steps, chunk, estimate,
              run: PacketRun, state) -> PacketCollectiveResult:
    from types import SimpleNamespace

    from hpnsim.packet import PacketParams
    from hpnsim.packet.adapter import fabric_links
    from hpnsim.packet.ring import simulate_ring

    plan = plans[0]
    params = (run.params or PacketParams()).validate()
    efficiency = plan.nccl.protocol_efficiency(plan.protocol)
    links = fabric_links(fabric)
    switch_of = links["switch_of"]
    capacity = _packet_capacity(fabric, plan.nccl, params, state)
    watch = _watch(fabric, rings, switch_of, run)
    n = len(rings[0])
    # the time of one step at the slowest ring link sets the sampling interval
    t_est = steps * piece / efficiency / min(
        float(capacity[np.asarray(leg, dtype=np.int64)].min()) for ring in rings for p in ring
        for leg in (p if isinstance(p, tuple) else (p,)))
    interval = max(t_est / run.samples, 1e-8)
    ring_run = simulate_ring(capacity, fabric.link_latency, rings, piece / efficiency * n
                             * len(rings), chunk_bytes=chunk / efficiency, params=params,
                             switch_of=switch_of, reverse=links["reverse"],
                             framed=links["framed"], window=run.window, steps=steps,
                             max_window=_window_cap(estimate, steps, run),
                             slots=run.slots, watch=watch, sample_interval=interval,
                             max_samples=2 * run.samples + 16, pct=(99.0,))
    res = ring_run.result
    from hpnsim.collectives.closed_form.cost import schedule_latencies

    base, nvlink_hop, net_hop = schedule_latencies(plan.schedule, plan.algo, plan.protocol,
                                                   plan.nccl)
    first = plan.schedule.stages[0]
    nccl_latency = base + first.intra_steps * nvlink_hop + first.inter_steps * net_hop
    time = ring_run.time + nccl_latency
    n_gpus = plan.schedule.gpus.size
    simulated = max(1.0 - ring_run.extrapolated, 1e-12)        # of the rings' steps
    link_bytes = np.asarray(res.tx_bytes, dtype=np.float64) / simulated
    together = SimpleNamespace(schedule=SimpleNamespace(
        stages=[st for p in plans for st in p.schedule.stages]),
        paths=[x for p in plans for x in p.paths])       # one wave: every stage starts at once
    max_flows, collisions = concurrent_link_flows(together, fabric, state)
    # busy time per link at the rate the packets ran it (NVLink at NCCL's efficiency), so
    # the bottleneck is named as the flow engine names it from its wire-weighted bytes
    result = packet_collective_result(
        fabric, res, op=op, size=size, time=time, busy_time=time, link_bytes=link_bytes,
        capacity=capacity, switch_of=switch_of, watch=watch, watch_chosen=bool(run.watch),
        state=state, algo=plan.algo, protocol=plan.protocol, routing=options.routing,
        n_gpus=n_gpus, max_link_flows=max_flows, hash_collisions=collisions,
        n_groups=len(rings), network_time=ring_run.time, nccl_latency=nccl_latency,
        steps=steps, steps_simulated=ring_run.steps_simulated,
        extrapolated=ring_run.extrapolated, stable=ring_run.stable,
        packets_estimated=estimate)
    result.ring_step_end = ring_run.ring_step_end
    result.ring_time = ring_run.ring_time
    return result
