"""Compile a collective into engine transfer groups on a fabric.

``compile_collective`` is the entry point workloads use for TP, PP and DP traffic inside
iteration graphs; its signature is part of the package contract (docs/design.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.collectives.algorithms import build_schedule
from hpnsim.collectives.cost import choose_algorithm, hop_latencies
from hpnsim.collectives.ops import (
    PROTOCOL_EFFICIENCY,
    normalize_algorithm,
    normalize_op,
    normalize_protocol,
)
from hpnsim.collectives.schedule import Schedule, check_group, host_groups, uniform_hosts
from hpnsim.errors import InputError


@dataclass
class CompiledCollective:
    """What :func:`compile_into` added: the schedule, the member paths of every stage, the
    engine task ids of every stage (one id for a coupled stage, one per member flow
    otherwise), and the final task ids."""

    schedule: Schedule
    algo: str
    protocol: str
    paths: list  # Paths per stage (QP-expanded members)
    stage_tasks: list[np.ndarray]
    final: list[int]


def _gpu_bandwidths(fabric, gpu: int) -> tuple[float, float]:
    """(NVLink bytes/s per direction, NIC bytes/s over all its ports) of one GPU."""
    from hpnsim.fabrics.fabric import LinkKind

    out = fabric.out_of(int(fabric.gpu_node[gpu]))
    nvlink = fabric.link_capacity[out][fabric.link_kind[out] == LinkKind.NVLINK]
    access = fabric.gpu_access_link[gpu]
    nic = float(fabric.link_capacity[access[access >= 0]].sum())
    return (float(nvlink.max()) if nvlink.size else np.inf), nic


def resolve_algorithm(fabric, op: str, gpus: np.ndarray, size: float, algo: str,
                      protocol: str) -> tuple[str, str]:
    """Concrete (algorithm, protocol) for ``auto`` choices, NCCL-style by size.

    The bus bandwidth NCCL's model needs is the per-GPU limit: NVLink inside one host,
    otherwise the smaller of NVLink and the host's NIC bandwidth (k GPUs' NICs feed k rings).
    """
    algo, protocol = normalize_algorithm(algo), normalize_protocol(protocol)
    if algo != "auto" and protocol != "auto":
        return algo, protocol
    gph = fabric.gpus_per_host
    groups = host_groups(gpus, gph)
    nvlink, nic = _gpu_bandwidths(fabric, int(gpus[0]))
    k = groups[0].size
    bus = nvlink if len(groups) == 1 else min(nvlink, k * nic)
    chosen_algo, chosen_proto = choose_algorithm(
        op, gpus.size, len(groups), size, bus, uniform_hosts=uniform_hosts(groups, gph))
    if algo != "auto":
        from hpnsim.collectives.cost import nccl_time

        n_hosts = len(groups)
        family = "ring" if algo in ("hier", "hd", "direct") else algo
        chosen_proto = min(PROTOCOL_EFFICIENCY, key=lambda p: nccl_time(
            op, family, p, gpus.size, n_hosts, size, bus))
        return algo, chosen_proto
    return chosen_algo, (chosen_proto if protocol == "auto" else protocol)


def _join(first, second):
    """Per flow, the links of ``first`` followed by those of ``second`` (relay + rail hop)."""
    from hpnsim.routing.paths import Paths

    la, lb = np.diff(first.ptr), np.diff(second.ptr)
    ptr = np.concatenate([[0], np.cumsum(la + lb)])
    links = np.empty(ptr[-1], dtype=np.int32)
    weight = np.empty(ptr[-1], dtype=np.float64)
    pos_a = np.repeat(ptr[:-1], la) + (np.arange(la.sum()) - np.repeat(first.ptr[:-1], la))
    pos_b = np.repeat(ptr[:-1] + la, lb) + (np.arange(lb.sum()) - np.repeat(second.ptr[:-1], lb))
    links[pos_a], weight[pos_a] = first.links, first.weight
    links[pos_b], weight[pos_b] = second.links, second.weight
    return Paths(ptr, links, weight, src=second.src, dst=second.dst, port=second.port,
                 sport=second.sport, policy=second.policy)


def _route(fabric, src, dst, routing, conn, seed, options):
    from hpnsim.routing.route import route

    return route(fabric, src, dst, routing, conn=conn, seed=seed, **options)


def route_members(fabric, src, dst, via, conn, routing: str, seed: int, options: dict):
    """Route member flows; a flow with ``via >= 0`` is the NVLink hop to ``via`` followed by
    the network route from ``via`` (PXN).

    Every flow goes to the router in one call, so ``precise`` sees them all and a NIC's
    connections are spread over its ports together (flows that stay inside a host take no
    turn in the port round-robin).
    """
    from hpnsim.routing.paths import Paths

    relayed = via >= 0
    start = np.where(relayed, via, src)
    main = _route(fabric, start, dst, routing, conn, seed, options)
    if not relayed.any():
        return main
    hop = _route(fabric, src[relayed], via[relayed], routing, conn[relayed], seed,
                 {k: v for k, v in options.items() if k == "pxn"})
    counts = np.zeros(src.size, dtype=np.int64)
    counts[relayed] = np.diff(hop.ptr)
    prefix = Paths(np.concatenate([[0], np.cumsum(counts)]), hop.links, hop.weight)
    return _join(prefix, main)


def compile_into(graph, fabric, op: str, gpus, size: float, *, algo: str = "auto",
                 protocol: str = "auto", routing: str = "ecmp", channels: int | None = None,
                 qps: int = 1, deps=(), seed: int = 0, priority: int = 0, weight: float = 1.0,
                 release: float = 0.0, root: int = 0, pxn: bool = True, name: str = "",
                 routing_options: dict | None = None) -> CompiledCollective:
    """:func:`compile_collective` returning everything it built (schedule, paths, task ids)."""
    from hpnsim.routing.route import POLICIES

    op = normalize_op(op)
    if routing not in POLICIES:
        raise InputError("routing", f"must be one of {', '.join(POLICIES)}, got {routing!r}")
    gpus = check_group(gpus, fabric.n_gpus)
    if not (isinstance(size, int | float | np.number) and np.isfinite(size) and size > 0):
        raise InputError("size", f"must be a finite number of bytes > 0, got {size!r}")
    if int(qps) != qps or qps < 1:
        raise InputError("qps", f"must be an integer >= 1, got {qps!r}")
    algo, protocol = resolve_algorithm(fabric, op, gpus, float(size), algo, protocol)
    base, nvlink_hop, net_hop = hop_latencies(algo, protocol)
    efficiency = PROTOCOL_EFFICIENCY[protocol]
    rng = np.random.default_rng(seed)
    options = dict(routing_options or {})
    options.setdefault("pxn", bool(pxn))
    pxn = bool(pxn) and bool(fabric.meta.get("rail_optimized", False))
    label = name or f"{op}/{algo}"
    sch = build_schedule(op, gpus, size, algo, gpus_per_host=fabric.gpus_per_host,
                         channels=channels, root=root, pxn=pxn,
                         nic_ports=int(fabric.ports_per_nic))
    deps = [int(d) for d in (deps if not isinstance(deps, int | np.integer) else [deps])]

    # route every member of every stage in one call (QP-expanded), then slice per stage
    counts = [s.n_members * qps for s in sch.stages]
    src = np.concatenate([np.repeat(s.src, qps) for s in sch.stages] or [np.zeros(0, np.int64)])
    dst = np.concatenate([np.repeat(s.dst, qps) for s in sch.stages] or [np.zeros(0, np.int64)])
    via = np.concatenate([np.repeat(s.via if s.via is not None else np.full(s.n_members, -1),
                                    qps) for s in sch.stages] or [np.zeros(0, np.int64)])
    conn = rng.integers(0, 1 << 16, size=src.size)
    if routing == "precise" and "sizes" not in options:
        options["sizes"] = np.concatenate(
            [np.full(c, s.size / qps) for c, s in zip(counts, sch.stages, strict=True)]
            or [np.zeros(0)])
    all_paths = route_members(fabric, src, dst, via, conn, routing, seed, options) \
        if src.size else None
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    stage_tasks: list[np.ndarray] = []
    paths_per_stage = []
    for i, stage in enumerate(sch.stages):
        paths = all_paths.subset(np.arange(bounds[i], bounds[i + 1]))
        paths_per_stage.append(paths)
        latency = stage.intra_steps * nvlink_hop + stage.inter_steps * net_hop
        if stage.deps:
            stage_deps = [int(t) for d in stage.deps for t in stage_tasks[d]]
        else:
            latency += base
            stage_deps = deps
        wire = stage.size / qps / efficiency
        opts = dict(priority=priority, weight=weight, latency=latency, release=release)
        if stage.coupled:
            task = graph.add_transfer_paths(paths, wire, deps=stage_deps,
                                            name=f"{label}/{stage.name}", **opts)
            stage_tasks.append(np.array([task], dtype=np.int64))
            continue
        tasks = graph.add_transfers(paths, wire, **opts)
        if len(stage_deps) > 1:  # one barrier instead of flows x deps edges
            stage_deps = [graph.add_delay(0.0, deps=stage_deps, name=f"{label}/sync{i}")]
        for t in tasks.tolist():
            for d in stage_deps:
                graph.add_dependency(t, d)
        stage_tasks.append(tasks)

    final = [int(t) for i in sch.final for t in stage_tasks[i]]
    if len(final) > 1:
        final = [graph.add_delay(0.0, deps=final, name=f"{label}/done")]
    elif not final:  # a single GPU: nothing to move
        final = [graph.add_delay(0.0, deps=deps, release=release, name=f"{label}/done")]
    return CompiledCollective(sch, algo, protocol, paths_per_stage, stage_tasks, final)


def compile_collective(graph, fabric, op: str, gpus, size: float, *, algo: str = "auto",
                       protocol: str = "auto", routing: str = "ecmp",
                       channels: int | None = None, qps: int = 1, deps=(), seed: int = 0,
                       priority: int = 0, weight: float = 1.0, release: float = 0.0,
                       root: int = 0, pxn: bool = True, name: str = "",
                       routing_options: dict | None = None) -> list[int]:
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
    routing : routing policy for :func:`hpnsim.routing.route` (ecmp, hpn_dual_plane,
        precise, spray); ``routing_options`` are passed through.
    channels : parallel rings/trees, each its own connections (default: one per NIC port
        and rail, see :func:`~hpnsim.collectives.algorithms.default_channels`).
    qps : connections per peer; each member flow is split evenly over them.
    deps, release : the collective starts after these tasks and not before ``release``.
    seed : seeds the connections' source ports (ECMP entropy) and the routing policy.
    priority, weight : engine priority class and max-min weight of every group.
    root : rank index of the broadcast/reduce root. pxn : relay cross-rail hops over NVLink.

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
                        name=name, routing_options=routing_options).final
