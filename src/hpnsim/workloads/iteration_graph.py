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
- **DP collectives are all simulated**: every (stage, TP rank) DP group, every bucket, on
  the fabric with the chosen routing, overlapping the last micro-batch's backward pass
  (buckets launch as their gradients become ready, one after another per group, as NCCL
  runs them on one communicator).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.collectives import compile_collective, run_collective
from hpnsim.engine import TaskGraph
from hpnsim.errors import InputError
from hpnsim.workloads.iteration_job import TrainJob
from hpnsim.workloads.iteration_schedule import pipeline_schedule
from hpnsim.workloads.placement import place


@dataclass
class IterationGraph:
    """The iteration's TaskGraph and the handles needed to read its result.

    ``ops[s]`` lists stage ``s``'s compute operations in execution order as tuples
    ``(kind, micro_batch, chunk, first_task, last_task, compute_seconds, tp_seconds,
    recv_task)`` (``recv_task`` is the PP transfer it waited for, or -1).
    """

    job: TrainJob
    graph: TaskGraph
    tp_time: float
    ops: list[list[tuple]] = field(default_factory=list)
    dp_tasks: list[list[int]] = field(default_factory=list)
    optimizer: list[int] = field(default_factory=list)
    optimizer_time: list[float] = field(default_factory=list)
    gather_tasks: list[list[int]] = field(default_factory=list)
    stage_end: list[int] = field(default_factory=list)
    pp_tasks: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _path_latency(fabric, paths) -> float:
    """Largest member path latency (propagation along the links)."""
    per_link = np.asarray(fabric.link_latency)[np.asarray(paths.links, dtype=np.int64)]
    sums = np.add.reduceat(per_link, paths.ptr[:-1]) if per_link.size else np.zeros(0)
    empty = np.diff(paths.ptr) == 0
    if sums.size:
        sums[empty] = 0.0
    return float(sums.max(initial=0.0))


def build_iteration_graph(job: TrainJob, fabric, *, routing: str = "ecmp", tp_algo: str = "auto",
                          dp_algo: str = "auto", gpus=None, seed: int = 0) -> IterationGraph:
    """Compile one iteration of ``job`` on ``fabric`` into a TaskGraph.

    Parameters
    ----------
    job : TrainJob
    fabric : Fabric
        Must hold at least ``job.gpus`` GPUs.
    routing : str
        Routing policy of PP and DP traffic (see :func:`hpnsim.routing.route`).
    tp_algo, dp_algo : str
        Collective algorithms (``"auto"``: NCCL-style choice by size).
    gpus : array of int, optional
        GPU indices the job runs on, in rank order (default ``0 .. job.gpus - 1``).
    seed : int
        Routing hash seed.

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
    graph = TaskGraph()
    notes: list[str] = []

    tp_time = 0.0
    if job.tp > 1:
        tp_time = run_collective(fabric, "allreduce", grid[0, 0], job.activation_bytes,
                                 algo=tp_algo, routing=routing).time
        dp_shares_host = job.dp > 1 and not placement.rail_aligned
        if not placement.tp_in_host or dp_shares_host:
            notes.append("TP all-reduce timed in isolation; this placement lets other traffic "
                         "share its links, which is not simulated")

    p, v, m = job.pp, job.virtual_stages, job.micro_batches
    chunks = job.chunks
    message = job.activation_bytes / (job.tp if job.sequence_parallel else 1)
    fwd_paths, bwd_paths = {}, {}
    for u in range(chunks - 1):
        a, b = grid[u % p].ravel(), grid[(u + 1) % p].ravel()
        fp = route(fabric, a, b, routing, seed=seed)
        bp = route(fabric, b, a, routing, seed=seed)
        fwd_paths[u] = (fp, _path_latency(fabric, fp))
        bwd_paths[u + 1] = (bp, _path_latency(fabric, bp))

    schedule = pipeline_schedule(job.schedule, p, m, v)
    it = IterationGraph(job, graph, tp_time, ops=[[] for _ in range(p)], notes=notes)
    fwd_sent: dict[tuple[int, int], int] = {}  # (virtual stage, mb) -> transfer into u + 1
    bwd_sent: dict[tuple[int, int], int] = {}  # (virtual stage, mb) -> transfer into u - 1
    last_block_tasks: dict[int, list[int]] = {}
    forward_done: dict[tuple[int, int], int] = {}
    cursor = [0] * p
    prev = [-1] * p
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
                name = f"{kind}{j} s{s} c{k}"
                if kind == "F":
                    compute, tp = cost.forward_compute, cost.forward_tp_ops * tp_time
                    first = last = graph.add_delay(compute + tp, deps=deps, name=name)
                    forward_done[(u, j)] = last
                    if u < chunks - 1:
                        paths, latency = fwd_paths[u]
                        fwd_sent[(u, j)] = graph.add_transfer_paths(
                            paths, message, latency=latency, deps=[last], name=f"pp-f{j} v{u}")
                        it.pp_tasks.append(fwd_sent[(u, j)])
                else:
                    compute, tp = cost.backward_compute, cost.backward_tp_ops * tp_time
                    if j == m - 1:  # last micro-batch: block by block, for the DP buckets
                        blocks = []
                        for b_compute, b_tp in zip(cost.blocks_compute, cost.blocks_tp_ops,
                                                   strict=True):
                            blocks.append(graph.add_delay(b_compute + b_tp * tp_time,
                                                          deps=deps, name=f"{name} blk"))
                            deps = [blocks[-1]]
                        first, last = blocks[0], blocks[-1]
                        last_block_tasks[u] = blocks
                    else:
                        first = last = graph.add_delay(compute + tp, deps=deps, name=name)
                    if u > 0:
                        paths, latency = bwd_paths[u]
                        bwd_sent[(u, j)] = graph.add_transfer_paths(
                            paths, message, latency=latency, deps=[last], name=f"pp-b{j} v{u}")
                        it.pp_tasks.append(bwd_sent[(u, j)])
                it.ops[s].append((kind, j, k, first, last, compute, tp, recv))
                prev[s] = last
                cursor[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # cannot happen for the schedules we generate
            raise RuntimeError("pipeline schedule deadlocks")

    _add_data_parallel(it, job, fabric, grid, last_block_tasks, prev, routing, dp_algo)
    return it


def _add_data_parallel(it: IterationGraph, job: TrainJob, fabric, grid, last_block_tasks,
                       last_op, routing: str, dp_algo: str) -> None:
    """Gradient buckets (all-reduce, or reduce-scatter with ZeRO), optimizer, param all-gather."""
    graph, p = it.graph, job.pp
    reduce_op = "allreduce" if job.zero == 0 else "reducescatter"
    for s in range(p):
        finals = [[] for _ in range(job.tp)]  # per DP group: the tail of its bucket chain
        dp_tasks: list[int] = []
        buckets_done: list[float] = []
        if job.dp > 1:
            for k in reversed(range(job.virtual_stages)):  # chunks finish backward last-first
                u = k * p + s
                blocks = last_block_tasks[u]
                for params, block in job.buckets(u):
                    buckets_done.append(params)
                    for t in range(job.tp):
                        deps = [blocks[block], *finals[t]]
                        finals[t] = list(compile_collective(
                            graph, fabric, reduce_op, grid[s, :, t], params * job.grad_bytes,
                            algo=dp_algo, routing=routing, deps=deps))
                        dp_tasks.extend(finals[t])
        wait = [last_op[s]] + [task for group in finals for task in group]
        opt_time = job.optimizer_time(s)
        optimizer = graph.add_delay(opt_time, deps=wait, name=f"optimizer s{s}")
        gathers: list[int] = []
        end = [optimizer]
        if job.zero and job.dp > 1:  # distributed optimizer: gather the updated BF16 weights
            tails = [[optimizer] for _ in range(job.tp)]
            for params in buckets_done:
                for t in range(job.tp):
                    tails[t] = list(compile_collective(
                        graph, fabric, "allgather", grid[s, :, t], params * job.model.dtype_bytes,
                        algo=dp_algo, routing=routing, deps=tails[t]))
                    gathers.extend(tails[t])
            end = [task for tail in tails for task in tail]
        it.dp_tasks.append(dp_tasks)
        it.optimizer.append(optimizer)
        it.optimizer_time.append(opt_time)
        it.gather_tasks.append(gathers)
        it.stage_end.append(graph.add_delay(0.0, deps=end, name=f"end s{s}"))
