"""Build the TaskGraph of one training iteration on a fabric.

What is simulated, and which symmetries make it tractable at 15K GPUs:

- **Compute (and TP) per (stage, micro-batch) is one Delay shared by every GPU of the stage.**
  All DP replicas and all TP ranks of a stage run identical kernels on identical GPUs, so
  one task stands for all of them (exact).
- **TP all-reduces are timed once and folded into those Delays.** A TP group sits inside a
  host; its NVLink links carry no PP or DP traffic, because with rail-aligned placement a
  GPU reaches the network through its own NIC (PCIe), never through NVSwitch; and one
  stage runs its TP collectives one after another. So every TP all-reduce takes exactly the
  time of one representative group's all-reduce in isolation, which the engine measures
  once (``run_collective``). When a placement breaks those conditions (TP across hosts, DP
  peers inside a host), the result carries a note saying the TP figure is an isolated one.
- **PP messages of all replicas move as one transfer group per (boundary, micro-batch,
  direction).** The replicas run in lockstep (same schedule, same compute), and the
  iteration ends when the slowest replica does, so coupling their messages (one variable,
  as fast as the most loaded link any member crosses) gives the slowest replica's timing
  with one task instead of ``dp * tp``. Contention with DP traffic is simulated.
- **EP all-to-alls (MoE) are timed per stage and folded into the compute Delays**, like TP:
  they block the compute stream, and every EP group of a stage runs them at the same moment
  (replicas in lockstep), so each one is timed with *all* EP groups of the stage running it
  together on the fabric (collisions between groups count; ``compile_collective`` with
  ``op="alltoall"``). Their contention with PP and DP traffic is not simulated (a note says
  so when EP groups cross hosts).
- **DP collectives are all simulated**: every (stage, TP rank) DP group, every bucket, on
  the fabric with the chosen routing, overlapping the last micro-batch's backward pass
  (buckets launch as their gradients become ready, one after another per group, as NCCL
  runs them on one communicator). Routed-expert gradients (``ep > 1``) fill their own
  buckets and reduce over the expert-data-parallel groups.
- **ZeRO-3 / FSDP gathers and reduce-scatters are all simulated**, per unit and micro-batch,
  on every DP group (see :mod:`iteration_fsdp`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from hpnsim.engine import TaskGraph
from hpnsim.errors import InputError
from hpnsim.workloads.iteration_comm import compile_groups, time_groups
from hpnsim.workloads.iteration_fsdp import FsdpStream
from hpnsim.workloads.iteration_job import TrainJob
from hpnsim.workloads.iteration_schedule import pipeline_schedule
from hpnsim.workloads.placement import place


class StageOp(NamedTuple):
    """One compute operation of a stage: its first and last compute tasks, the compute, TP
    and EP seconds folded into them, the PP transfer it waited for (``recv``, -1 if none)
    and, with ZeRO-3, the all-gather its first unit waited for (``gather``)."""

    kind: str
    micro_batch: int
    chunk: int
    first: int
    last: int
    compute: float
    tp: float
    ep: float
    recv: int
    gather: int = -1
    fsdp: bool = False


@dataclass
class IterationGraph:
    """The iteration's TaskGraph and the handles needed to read its result.

    ``ops[s]`` lists stage ``s``'s :class:`StageOp` s in execution order. ``fsdp_comm[s]``
    lists its ZeRO-3 collective steps ``(kind, first_tasks, done, bytes)``. ``comm_bytes``
    holds the bytes all GPUs send per iteration, per dimension, as compiled.
    """

    job: TrainJob
    graph: TaskGraph
    tp_time: float
    ep_time: list[float] = field(default_factory=list)
    ops: list[list[StageOp]] = field(default_factory=list)
    dp_tasks: list[list[int]] = field(default_factory=list)
    optimizer: list[int] = field(default_factory=list)
    optimizer_time: list[float] = field(default_factory=list)
    gather_tasks: list[list[int]] = field(default_factory=list)
    fsdp_comm: list[list[tuple]] = field(default_factory=list)
    stage_end: list[int] = field(default_factory=list)
    pp_tasks: list[int] = field(default_factory=list)
    comm_bytes: dict = field(default_factory=lambda: dict.fromkeys(("tp", "pp", "dp", "ep"),
                                                                   0.0))
    notes: list[str] = field(default_factory=list)
    compiled: dict = field(default_factory=dict, repr=False)  # collectives to replay
    origin: int = -1      # the zero-length task the iteration starts after (-1: time 0)
    first_task: int = 0   # this iteration's tasks are ``first_task:end_task`` of ``graph``
    end_task: int = 0


def _path_latency(fabric, paths) -> float:
    """Largest member path latency (propagation along the links)."""
    per_link = np.asarray(fabric.link_latency)[np.asarray(paths.links, dtype=np.int64)]
    sums = np.add.reduceat(per_link, paths.ptr[:-1]) if per_link.size else np.zeros(0)
    empty = np.diff(paths.ptr) == 0
    if sums.size:
        sums[empty] = 0.0
    return float(sums.max(initial=0.0))


def _stage_groups(placement, job: TrainJob):
    """Per stage: DP groups ``(tp, dp)`` and EP / expert-DP groups ``(edp*tp, ep)``,
    ``(ep*tp, edp)`` (rows as :meth:`Placement.groups` orders them, re-cut per stage)."""
    p, tp, ep, edp = job.pp, job.tp, job.ep, job.edp
    ep_groups = placement.groups("ep").reshape(p, edp * tp, ep)
    edp_groups = placement.groups("edp").reshape(p, ep * tp, edp)
    return ep_groups, edp_groups


def build_iteration_graph(job: TrainJob, fabric, *, routing: str = "ecmp", tp_algo: str = "auto",
                          dp_algo: str = "auto", gpus=None, seed: int = 0,
                          graph: TaskGraph | None = None, release: float = 0.0,
                          after=()) -> IterationGraph:
    """Compile one iteration of ``job`` on ``fabric`` into a TaskGraph.

    Parameters
    ----------
    job : TrainJob
    fabric : Fabric
        Must hold at least ``job.gpus`` GPUs.
    routing : str
        Routing policy of PP, DP and EP traffic (see :func:`hpnsim.routing.route`).
    tp_algo, dp_algo : str
        Collective algorithms (``"auto"``: NCCL-style choice by size); ``dp_algo`` also
        drives the ZeRO-3 gathers and reduce-scatters.
    gpus : array of int, optional
        GPU indices the job runs on, in rank order (default ``0 .. job.gpus - 1``).
    seed : int
        Routing hash seed.
    graph : TaskGraph, optional
        Add the iteration to this graph (several jobs, or several iterations, in one
        simulation); default a new graph.
    release, after : float, sequence of int
        The iteration starts at ``release`` and after the tasks ``after`` (e.g. the previous
        iteration's end); its accounting measures time from that start.

    Returns
    -------
    IterationGraph

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    >>> job = TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=8)
    >>> it = build_iteration_graph(job, fab)
    >>> [len(stage_ops) for stage_ops in it.ops]     # F and B of 4 micro-batches per stage
    [8, 8]
    """
    from hpnsim.routing import route

    if gpus is None and job.gpus > fabric.n_gpus:
        raise InputError("fabric", f"has {fabric.n_gpus} GPUs; the job needs "
                                   f"tp*pp*dp = {job.gpus}")
    layout = job.layout
    placement = place(layout, fabric.gpus_per_host, gpus=gpus)
    # grid[s, d, t]: GPU of pipeline stage s, DP rank d, TP rank t (cp is 1)
    grid = placement.groups("pp").reshape(job.dp, job.tp, job.pp).transpose(2, 0, 1)
    ep_groups, edp_groups = _stage_groups(placement, job)
    graph = TaskGraph() if graph is None else graph
    first_task = len(graph)
    origin = -1
    if release > 0 or len(after):
        origin = graph.add_delay(0.0, deps=after, release=release, name="iteration start")
    notes: list[str] = []
    p, v, m = job.pp, job.virtual_stages, job.micro_batches
    chunks = job.chunks
    it = IterationGraph(job, graph, 0.0, ops=[[] for _ in range(p)], notes=notes,
                        origin=origin, first_task=first_task)

    if job.tp > 1:
        it.tp_time, sent = time_groups(fabric, "allreduce", grid[0, 0][None, :],
                                       job.activation_bytes, algo=tp_algo, routing=routing)
        dp_shares_host = job.dp > 1 and not placement.rail_aligned
        if not placement.tp_in_host or dp_shares_host:
            notes.append("TP all-reduce timed in isolation; this placement lets other traffic "
                         "share its links, which is not simulated")
        calls = m * sum(job.stage_cost(u).forward_tp_ops + job.stage_cost(u).backward_tp_ops
                        for u in range(chunks))  # summed over the stages' chunks
        it.comm_bytes["tp"] = calls * sent * job.dp
    _time_expert_parallel(it, job, fabric, placement, ep_groups, routing, seed)

    message = job.activation_bytes / (job.tp if job.sequence_parallel else 1)
    fwd_paths, bwd_paths = {}, {}
    for u in range(chunks - 1):
        a, b = grid[u % p].ravel(), grid[(u + 1) % p].ravel()
        fp = route(fabric, a, b, routing, seed=seed)
        bp = route(fabric, b, a, routing, seed=seed)
        fwd_paths[u] = (fp, _path_latency(fabric, fp))
        bwd_paths[u + 1] = (bp, _path_latency(fabric, bp))

    schedule = pipeline_schedule(job.schedule, p, m, v)
    fsdp = [_fsdp_stream(it, job, fabric, schedule[s], s, grid, edp_groups, routing, dp_algo,
                         seed) for s in range(p)] if job.zero == 3 else None
    fwd_sent: dict[tuple[int, int], int] = {}  # (virtual stage, mb) -> transfer into u + 1
    bwd_sent: dict[tuple[int, int], int] = {}  # (virtual stage, mb) -> transfer into u - 1
    last_block_tasks: dict[int, list[int]] = {}
    cursor = [0] * p
    prev = [origin] * p
    remaining = sum(len(ops) for ops in schedule)
    # Emit ops in a topological order: a stage's next op waits until its input exists.
    while remaining:
        progressed = False
        for s in range(p):
            while cursor[s] < len(schedule[s]):
                kind, j, k = schedule[s][cursor[s]]
                u = k * p + s
                if kind == "F":
                    recv = -1 if u == 0 else fwd_sent.get((u - 1, j))
                else:
                    recv = -1 if u == chunks - 1 else bwd_sent.get((u + 1, j))
                if recv is None:
                    break
                deps = [t for t in (prev[s], recv) if t >= 0]
                cost = job.stage_cost(u)
                ep_time = it.ep_time[s]
                if kind == "F":
                    compute, tp = cost.forward_compute, cost.forward_tp_ops * it.tp_time
                    ep = cost.forward_ep_ops * ep_time
                else:
                    compute, tp = cost.backward_compute, cost.backward_tp_ops * it.tp_time
                    ep = cost.backward_ep_ops * ep_time
                name = f"{kind}{j} s{s} c{k}"
                gather = -1
                if fsdp is not None:
                    first, last, gather = fsdp[s].run(cursor[s], [prev[s], recv], recv)
                elif kind == "B" and j == m - 1:  # last micro-batch: blocks, for DP buckets
                    blocks = []
                    for block in cost.blocks:
                        seconds = (block.backward_compute + block.backward_tp_ops * it.tp_time
                                   + block.backward_ep_ops * ep_time)
                        blocks.append(graph.add_delay(seconds, deps=deps, name=f"{name} blk"))
                        deps = [blocks[-1]]
                    first, last = blocks[0], blocks[-1]
                    last_block_tasks[u] = blocks
                else:
                    first = last = graph.add_delay(compute + tp + ep, deps=deps, name=name)
                if kind == "F" and u < chunks - 1:
                    paths, latency = fwd_paths[u]
                    fwd_sent[(u, j)] = graph.add_transfer_paths(
                        paths, message, latency=latency, deps=[last], name=f"pp-f{j} v{u}")
                    it.pp_tasks.append(fwd_sent[(u, j)])
                elif kind == "B" and u > 0:
                    paths, latency = bwd_paths[u]
                    bwd_sent[(u, j)] = graph.add_transfer_paths(
                        paths, message, latency=latency, deps=[last], name=f"pp-b{j} v{u}")
                    it.pp_tasks.append(bwd_sent[(u, j)])
                it.ops[s].append(StageOp(kind, j, k, first, last, compute, tp, ep, recv,
                                         gather, fsdp is not None))
                prev[s] = last
                cursor[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # cannot happen for the schedules we generate
            raise RuntimeError("pipeline schedule deadlocks")

    it.comm_bytes["pp"] = 2.0 * m * (chunks - 1) * message * job.dp * job.tp
    if fsdp is not None:
        _finish_fsdp(it, job, fsdp, prev)
    else:
        _add_data_parallel(it, job, fabric, grid, edp_groups, last_block_tasks, prev, routing,
                           dp_algo, seed)
    it.end_task = len(graph)
    return it


def _time_expert_parallel(it: IterationGraph, job: TrainJob, fabric, placement, ep_groups,
                          routing: str, seed: int) -> None:
    """One all-to-all per stage, all its EP groups at once; bytes for every call."""
    it.ep_time = [0.0] * job.pp
    if job.ep == 1:
        return
    for s in range(job.pp):
        calls_s = job.micro_batches * sum(
            job.stage_cost(k * job.pp + s).forward_ep_ops
            + job.stage_cost(k * job.pp + s).backward_ep_ops for k in range(job.virtual_stages))
        if calls_s == 0:
            continue
        it.ep_time[s], sent = time_groups(fabric, "alltoall", ep_groups[s], job.ep_buffer_bytes,
                                          routing=routing, seed=seed)
        it.comm_bytes["ep"] += calls_s * sent
    hosts = placement.host_of(ep_groups.reshape(-1, job.ep))
    if (hosts != hosts[:, :1]).any():
        it.notes.append("EP all-to-alls timed with all EP groups of a stage together; their "
                        "contention with PP and DP traffic is not simulated")


def _fsdp_stream(it: IterationGraph, job: TrainJob, fabric, stage_schedule, s: int, grid,
                 edp_groups, routing: str, algo: str, seed: int) -> FsdpStream:
    units = []
    for kind, _, k in stage_schedule:
        blocks = job.fsdp_units(k * job.pp + s)
        units.append((kind, blocks if kind == "F" else blocks[::-1]))
    shards = [(grid[s].T, False)]  # DP groups of the stage: one per TP rank
    if job.ep > 1:
        shards.append((edp_groups[s], True))
    ep_time = it.ep_time[s]

    def unit_seconds(block, kind: str) -> float:
        if kind == "F":
            return (block.forward_compute + block.forward_tp_ops * it.tp_time
                    + block.forward_ep_ops * ep_time)
        return (block.backward_compute + block.backward_tp_ops * it.tp_time
                + block.backward_ep_ops * ep_time)

    return FsdpStream(it.graph, fabric, job, units, shards, unit_seconds,
                      prefetch=job.fsdp_prefetch, routing=routing, algo=algo, seed=seed,
                      cache=it.compiled)


def _finish_fsdp(it: IterationGraph, job: TrainJob, streams, last_op) -> None:
    """Sharded optimizer after the stage's last compute and last reduce-scatter."""
    graph = it.graph
    for s, stream in enumerate(streams):
        wait = [t for t in (last_op[s], stream.tail) if t >= 0]
        opt_time = job.optimizer_time(s)
        optimizer = graph.add_delay(opt_time, deps=wait, name=f"optimizer s{s}")
        it.comm_bytes["dp"] += stream.sent
        it.fsdp_comm.append(stream.comm)
        it.dp_tasks.append([])
        it.gather_tasks.append([])
        it.optimizer.append(optimizer)
        it.optimizer_time.append(opt_time)
        it.stage_end.append(graph.add_delay(0.0, deps=[optimizer], name=f"end s{s}"))


def _add_data_parallel(it: IterationGraph, job: TrainJob, fabric, grid, edp_groups,
                       last_block_tasks, last_op, routing: str, dp_algo: str,
                       seed: int) -> None:
    """Gradient buckets (all-reduce, or reduce-scatter with ZeRO), optimizer, param all-gather.

    Dense buckets reduce over the stage's DP groups (one per TP rank), routed-expert buckets
    over its expert-DP groups; each group runs its buckets one after another.
    """
    graph, p = it.graph, job.pp
    reduce_op = "allreduce" if job.zero == 0 else "reducescatter"
    for s in range(p):
        kinds = [(grid[s].T, False)]
        if job.ep > 1:
            kinds.append((edp_groups[s], True))
        tails: list[list[int]] = []
        dp_tasks: list[int] = []
        done_buckets: list[tuple[float, int]] = []  # (params, kind index)
        for index, (groups, expert) in enumerate(kinds):
            finals = [[] for _ in range(len(groups))]  # per group: its bucket chain's tail
            if groups.shape[1] > 1:
                for k in reversed(range(job.virtual_stages)):  # chunks finish last-first
                    u = k * p + s
                    blocks = last_block_tasks[u]
                    for params, block in job.buckets(u, expert=expert):
                        done_buckets.append((params, index))
                        for g, group in enumerate(groups):
                            done, first, sent = compile_groups(
                                graph, fabric, reduce_op, group[None, :],
                                params * job.grad_bytes, deps=[blocks[block], *finals[g]],
                                algo=dp_algo, routing=routing, cache=it.compiled)
                            finals[g] = [done]
                            dp_tasks.extend(first + [done])
                            it.comm_bytes["dp"] += sent
            tails.append(finals)
        wait = [last_op[s]] + [t for finals in tails for tail in finals for t in tail]
        opt_time = job.optimizer_time(s)
        optimizer = graph.add_delay(opt_time, deps=wait, name=f"optimizer s{s}")
        gathers: list[int] = []
        end = [optimizer]
        if job.zero:  # distributed optimizer: gather the updated 16-bit weights
            chains = [[[optimizer] for _ in groups] for groups, _ in kinds]
            for params, index in done_buckets:
                groups = kinds[index][0]
                for g, group in enumerate(groups):
                    done, first, sent = compile_groups(
                        graph, fabric, "allgather", group[None, :],
                        params * job.model.dtype_bytes, deps=chains[index][g], algo=dp_algo,
                        routing=routing, cache=it.compiled)
                    chains[index][g] = [done]
                    gathers.extend(first + [done])
                    it.comm_bytes["dp"] += sent
            end = [t for chain in chains for tail in chain for t in tail]
        it.dp_tasks.append(dp_tasks)
        it.optimizer.append(optimizer)
        it.optimizer_time.append(opt_time)
        it.gather_tasks.append(gathers)
        it.fsdp_comm.append([])
        it.stage_end.append(graph.add_delay(0.0, deps=end, name=f"end s{s}"))
