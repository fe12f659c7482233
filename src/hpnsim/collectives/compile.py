"""Compile a collective into engine transfer groups on a fabric.

``compile_collective`` is the entry point workloads use for TP, PP and DP traffic inside
iteration graphs; its signature is part of the package contract (docs/design.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.collectives.cost import latency_family
from hpnsim.collectives.nccl import NcclParams
from hpnsim.collectives.plan import RoutedSchedule, plan_collective
from hpnsim.collectives.schedule import Schedule


@dataclass
class CompiledCollective:
    """What :func:`compile_into` added: the schedule, the member paths of every stage, the
    engine task ids of every stage (one id for a coupled stage, one per member flow
    otherwise), the final task ids, the NCCL parameters, the paths the engine ran (links
    weighted by wire bytes per payload byte) and the QPs per connection."""

    schedule: Schedule
    algo: str
    protocol: str
    paths: list  # Paths per stage (QP-expanded members)
    stage_tasks: list[np.ndarray]
    final: list[int]
    nccl: NcclParams = NcclParams()
    wire_paths: list = None  # type: ignore[assignment]
    qps: int = 1


def compile_into(graph, fabric, op: str, gpus, size: float, *, algo: str = "auto",
                 protocol: str = "auto", routing: str = "ecmp", channels: int | None = None,
                 qps: int | None = None, deps=(), seed: int = 0, priority: int = 0, weight: float = 1.0,
                 release: float = 0.0, root: int = 0, pxn: bool = True, name: str = "",
                 routing_options: dict | None = None, state=None,
                 nccl: NcclParams | dict | None = None) -> CompiledCollective:
    """:func:`compile_collective` returning everything it built (schedule, paths, task ids).

    The schedule and paths come from :func:`~hpnsim.collectives.plan.plan_collective`
    (cached: compiling the same collective again only adds tasks).
    """
    plan = plan_collective(fabric, op, gpus, size, algo=algo, protocol=protocol,
                           routing=routing, channels=channels, qps=qps, seed=seed, root=root,
                           pxn=pxn, routing_options=routing_options, state=state, nccl=nccl)
    return add_plan(graph, plan, deps=deps, priority=priority, weight=weight,
                    release=release, name=name)


def add_plan(graph, plan: RoutedSchedule, *, deps=(), priority: int = 0, weight: float = 1.0,
             release: float = 0.0, name: str = "") -> CompiledCollective:
    """Add the transfer groups of a planned collective to ``graph`` after ``deps``.

    A coupled stage is one engine group; an uncoupled one a group per member flow, all
    waiting for the stage's dependencies (through one zero-length barrier when there are
    several).
    """
    sch = plan.schedule
    base, nvlink_hop, net_hop = plan.nccl.latencies(latency_family(plan.algo), plan.protocol)
    efficiency = plan.nccl.protocol_efficiency(plan.protocol)
    label = name or f"{sch.op}/{plan.algo}"
    deps = [int(d) for d in (deps if not isinstance(deps, int | np.integer) else [deps])]
    stage_tasks: list[np.ndarray] = []
    for i, stage in enumerate(sch.stages):
        paths = plan.wire_paths[i]
        latency = stage.intra_steps * nvlink_hop + stage.inter_steps * net_hop
        if stage.deps:
            stage_deps = [int(t) for d in stage.deps for t in stage_tasks[d]]
        else:
            latency += base
            stage_deps = deps
        wire = stage.size / plan.qps / efficiency
        opts = dict(priority=priority, weight=weight, latency=latency, release=release)
        if stage.coupled:
            task = graph.add_transfer_paths(paths, wire, deps=stage_deps,
                                            name=f"{label}/{stage.name}", **opts)
            stage_tasks.append(np.array([task], dtype=np.int64))
            continue
        if len(stage_deps) > 1:  # one barrier instead of flows x deps edges
            stage_deps = [graph.add_delay(0.0, deps=stage_deps, name=f"{label}/sync{i}")]
        stage_tasks.append(graph.add_transfers(paths, wire, deps=stage_deps, **opts))

    final = [int(t) for i in sch.final for t in stage_tasks[i]]
    if len(final) > 1:
        final = [graph.add_delay(0.0, deps=final, name=f"{label}/done")]
    elif not final:  # a single GPU: nothing to move
        final = [graph.add_delay(0.0, deps=deps, release=release, name=f"{label}/done")]
    return CompiledCollective(sch, plan.algo, plan.protocol, list(plan.paths), stage_tasks,
                              final, plan.nccl, list(plan.wire_paths), plan.qps)


def compile_collective(graph, fabric, op: str, gpus, size: float, *, algo: str = "auto",
                       protocol: str = "auto", routing: str = "ecmp",
                       channels: int | None = None, qps: int | None = None, deps=(),
                       seed: int = 0,
                       priority: int = 0, weight: float = 1.0, release: float = 0.0,
                       root: int = 0, pxn: bool = True, name: str = "",
                       routing_options: dict | None = None, state=None,
                       nccl: NcclParams | dict | None = None) -> list[int]:
    """Add a collective's transfer groups to ``graph``; return the ids of its final tasks.

    Parameters
    ----------
    graph : hpnsim.engine.TaskGraph
    fabric : hpnsim.fabrics.Fabric
    op : allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, send.
    gpus : GPU indices of the group, in rank order.
    size : bytes, nccl-tests convention (the all-reduce buffer; the gathered all-gather
        output; each rank's all-to-all send buffer; the send/recv message).
    algo : ring, tree, hd, hier, direct or auto (NCCL-style choice by size).
    protocol : ll, ll128, simple or auto; its efficiency scales wire bytes and picks the
        latency table.
    nccl : :class:`~hpnsim.collectives.nccl.NcclParams` (or a dict of its fields): protocol
        and link efficiencies, latencies, channels per NIC, QPs per connection; None: NCCL's
        defaults. Links carry payload / (protocol efficiency · link efficiency).
    routing : routing policy for :func:`hpnsim.routing.route` (ecmp, hpn_dual_plane,
        precise, spray); ``routing_options`` are passed through.
    channels : parallel rings/trees, each its own connections (default: one per NIC port
        and rail, see :func:`~hpnsim.collectives.algorithms.default_channels`).
    qps : queue pairs per connection, each its own hashed flow carrying 1/qps of the bytes
        (default ``nccl.qps_per_connection``, NCCL_IB_QPS_PER_CONNECTION).
    deps, release : the collective starts after these tasks and not before ``release``.
    seed : seeds the connections' source ports (ECMP entropy) and the routing policy.
    priority, weight : engine priority class and max-min weight of every group.
    root : rank index of the broadcast/reduce root. pxn : relay cross-rail hops over NVLink.
    state : a :class:`~hpnsim.fabrics.state.FabricState` of ``fabric``: routing avoids its
        down links where it has a choice (run the graph on ``state.capacity``).

    Returns
    -------
    list of int
        Task ids that finish last (one zero-length barrier when the collective ends in
        several tasks); make later work depend on them.

    Examples
    --------
    >>> from hpnsim.engine import TaskGraph, simulate
    >>> from hpnsim.fabrics import hpn7
    >>> fabric = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...               aggs_per_plane=2)
    >>> g = TaskGraph()
    >>> done = compile_collective(g, fabric, "allreduce", range(16), 2**20, algo="hier")
    >>> bool(simulate(g, fabric.link_capacity).finish[done[0]] > 0)
    True
    """
    return compile_into(graph, fabric, op, gpus, size, algo=algo, protocol=protocol,
                        routing=routing, channels=channels, qps=qps, deps=deps, seed=seed,
                        priority=priority, weight=weight, release=release, root=root, pxn=pxn,
                        name=name, routing_options=routing_options, state=state,
                        nccl=nccl).final
