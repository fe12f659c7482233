"""Compile a collective into engine transfer groups on a fabric.

``compile_collective`` is the entry point workloads use for TP, PP and DP traffic inside
iteration graphs; its signature is part of the package contract (docs/design.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.collectives.closed_form.cost import schedule_latencies
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.collectives.planning.options import CollectiveOptions
from hpnsim.collectives.planning.plan import RoutedSchedule, plan_collective
from hpnsim.collectives.schedules.schedule import Schedule


@dataclass
class CompiledCollective:
    """What :func:`compile_into` added to a task graph.

    Attributes
    ----------
    schedule : Schedule
        The stages of the collective (:func:`~hpnsim.collectives.schedules.algorithms.build_schedule`).
    algo, protocol : str
        The concrete algorithm and protocol (``auto`` resolved).
    paths : list of Paths
        Member paths of every stage (QP-expanded; None for a stage without flows).
    stage_tasks : list of numpy.ndarray
        Engine task ids of every stage: one for a coupled stage, one per member flow
        otherwise.
    final : list of int
        The tasks that finish last; later work depends on them.
    nccl : NcclParams
        The NCCL parameters it was compiled with.
    wire_paths : list of Paths
        ``paths`` with links weighted by wire bytes per payload byte (what the engine ran).
    qps : int
        Queue pairs per connection.
    fill : float
        The plan's pipeline fill (:attr:`~hpnsim.collectives.planning.plan.RoutedSchedule.fill`).

    Examples
    --------
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import hpn7
    >>> c = compile_into(TaskGraph(), hpn7(segments=1, hosts_per_segment=2, backup_hosts=0),
    ...                  "allreduce", [0, 8], 2**20, algo="ring", protocol="simple")
    >>> c.algo, c.protocol, c.qps, len(c.final)
    ('ring', 'simple', 1, 1)
    """

    schedule: Schedule
    algo: str
    protocol: str
    paths: list  # Paths per stage (QP-expanded members)
    stage_tasks: list[np.ndarray]
    final: list[int]
    nccl: NcclParams = NcclParams()
    wire_paths: list = None  # type: ignore[assignment]
    qps: int = 1
    fill: float = 0.0


def compile_into(graph, fabric, op: str, gpus, size: float,
                 options: CollectiveOptions | None = None, *, deps=(), priority: int = 0,
                 weight: float = 1.0, release: float = 0.0, name: str = "", state=None,
                 **keywords) -> CompiledCollective:
    """:func:`compile_collective` returning everything it built (schedule, paths, task ids).

    The schedule and paths come from :func:`~hpnsim.collectives.planning.plan.plan_collective`
    (cached: compiling the same collective again only adds tasks).

    Parameters
    ----------
    graph, fabric, op, gpus, size, options, deps, priority, weight, release, name, state
        As :func:`compile_collective`.
    **keywords
        Fields of :class:`~hpnsim.collectives.planning.options.CollectiveOptions` replacing those of
        ``options``.

    Returns
    -------
    CompiledCollective

    Examples
    --------
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import hpn7
    >>> fabric = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> c = compile_into(TaskGraph(), fabric, "allgather", [0, 8], 2e6, algo="ring")
    >>> c.algo, c.protocol, len(c.stage_tasks) == len(c.schedule.stages)
    ('ring', 'll128', True)
    """
    plan = plan_collective(fabric, op, gpus, size, options, state=state, **keywords)
    return add_plan(graph, plan, deps=deps, priority=priority, weight=weight,
                    release=release, name=name)


def add_plan(graph, plan: RoutedSchedule, *, deps=(), priority: int = 0, weight: float = 1.0,
             release: float = 0.0, name: str = "") -> CompiledCollective:
    """Add the transfer groups of a planned collective to ``graph`` after ``deps``.

    A coupled stage is one engine group; an uncoupled one a group per member flow, all
    waiting for the stage's dependencies (through one zero-length barrier when there are
    several). Each stage's latency is NCCL's per-hop figure for its NVLink and network
    steps (plus the base latency and the plan's pipeline fill on the stages that start the
    collective); its wire bytes are payload / (QPs x protocol efficiency). A coupled
    stage's task carries the stage's connection id
    (:attr:`~hpnsim.collectives.schedules.schedule.Stage.channel`); an uncoupled stage's
    member flows carry none (-1).

    Parameters
    ----------
    graph : hpnsim.engine.TaskGraph
    plan : RoutedSchedule
        From :func:`~hpnsim.collectives.planning.plan.plan_collective`.
    deps, release : sequence of int, float
        The collective starts after these tasks and not before ``release``.
    priority, weight : int, float
        Engine priority class and max-min weight of every group.
    name : str
        Label of the tasks (default ``op/algo``).

    Returns
    -------
    CompiledCollective

    Examples
    --------
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> plan = plan_collective(f, "alltoall", [0, 8, 1, 9], 2**20)
    >>> g = TaskGraph()
    >>> c = add_plan(g, plan, release=1e-3)
    >>> len(c.final), len(g) > len(c.stage_tasks)     # one barrier after the member flows
    (1, True)
    """
    from hpnsim.collectives.planning.paths import payload_paths

    sch = plan.schedule
    payload = payload_paths(sch, plan.paths, plan.nccl)
    base, nvlink_hop, net_hop = schedule_latencies(sch, plan.algo, plan.protocol, plan.nccl)
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
            latency += base + plan.fill
            stage_deps = deps
        wire = stage.size / plan.qps / efficiency
        opts = dict(priority=priority, weight=weight, latency=latency, release=release)
        if stage.coupled:
            task = graph.add_transfer_paths(paths, wire, deps=stage_deps, members=payload[i],
                                            name=f"{label}/{stage.name}",
                                            channel=stage.channel, **opts)
            stage_tasks.append(np.array([task], dtype=np.int64))
            continue
        if len(stage_deps) > 1:  # one barrier instead of flows x deps edges
            stage_deps = [graph.add_delay(0.0, deps=stage_deps, name=f"{label}/sync{i}")]
        stage_tasks.append(graph.add_transfers(paths, wire, deps=stage_deps,
                                               members=payload[i], **opts))

    final = [int(t) for i in sch.final for t in stage_tasks[i]]
    if len(final) > 1:
        final = [graph.add_delay(0.0, deps=final, name=f"{label}/done")]
    elif not final:  # a single GPU: nothing to move
        final = [graph.add_delay(0.0, deps=deps, release=release, name=f"{label}/done")]
    return CompiledCollective(sch, plan.algo, plan.protocol, list(plan.paths), stage_tasks,
                              final, plan.nccl, list(plan.wire_paths), plan.qps, plan.fill)


def compile_collective(graph, fabric, op: str, gpus, size: float,
                       options: CollectiveOptions | None = None, *, deps=(), priority: int = 0,
                       weight: float = 1.0, release: float = 0.0, name: str = "", state=None,
                       **keywords) -> list[int]:
    """Add a collective's transfer groups to ``graph``; return the ids of its final tasks.

    Parameters
    ----------
    graph : hpnsim.engine.TaskGraph
    fabric : hpnsim.fabrics.Fabric
    op : allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, send.
    gpus : GPU indices of the group, in rank order.
    size : bytes, nccl-tests convention (the all-reduce buffer; the gathered all-gather
        output; each rank's all-to-all send buffer; the send/recv message).
    options : :class:`~hpnsim.collectives.planning.options.CollectiveOptions`, optional
        How it runs: algorithm, protocol, routing, channels, QPs, seed, root, PXN, routing
        options, NCCL parameters (default: every default).
    deps, release : the collective starts after these tasks and not before ``release``.
    priority, weight : engine priority class and max-min weight of every group.
    name : label of its tasks (default ``op/algo``).
    state : a :class:`~hpnsim.fabrics.state.FabricState` of ``fabric``: routing avoids its
        down links where it has a choice (run the graph on ``state.capacity``).
    **keywords : fields of ``CollectiveOptions`` replacing those of ``options``
        (``algo="ring"``, ``routing="hpn_dual_plane"``, ...).

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
    return compile_into(graph, fabric, op, gpus, size, options, deps=deps, priority=priority,
                        weight=weight, release=release, name=name, state=state,
                        **keywords).final
