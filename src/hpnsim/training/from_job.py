"""The program of a :class:`~hpnsim.training.job.TrainJob` (Megatron-LM semantics).

Per stage, the pipeline schedule's passes in order; per block (transformer layer, output
head, embedding) and pass, the block's compute and its TP and EP collectives
(:mod:`.block_ops`, which lists them op by op). Full recomputation replays the layer's
forward (TP and EP included) first. A pass receives the pipeline message from the previous
(forward) or next (backward) virtual stage and sends its own on. Gradient buckets reduce (all-reduce, or reduce-scatter with ZeRO-1/2) over the DP
groups (dense) and the expert-DP groups (routed experts) once their block's backward of the
last micro-batch is done, one after another per group; then the optimizer steps; ZeRO-1/2
all-gathers the updated weights bucket by bucket. ZeRO-3 (FSDP) gathers every unit before
its forward and backward and reduce-scatters it after its backward, every micro-batch, on
one communication stream per stage (see :func:`program_from_job`).

Options that reshape this (docs/pipelines.md): ``zb-h1`` splits each backward into a ``B``
pass (input gradients and their collectives) and a ``W`` pass (weight gradients);
``tp_comm_overlap``, ``cp`` and ``selective_recompute`` reshape a layer's ops
(:mod:`.block_ops`); ``overlap_grad_reduce=False`` reduces one bucket per chunk after the
schedule; ``overlap_param_gather`` moves the ZeRO-1/2 gathers into the first forward
(:mod:`.param_gather`), dispatched ahead with the interleaved schedule as Megatron-Core's
``align_param_gather`` does (:meth:`_StageBuilder.early_gathers`).
"""

from __future__ import annotations

from dataclasses import replace

from hpnsim.training.block_ops import block_ops
from hpnsim.training.compute.contention import NCCL_RING_SMS, Launch
from hpnsim.training.context import Ring, expand_ring
from hpnsim.training.cost import Block
from hpnsim.training.fp8_params import bucket_gather_bytes, unit_gather_bytes
from hpnsim.training.job import TrainJob
from hpnsim.training.param_gather import forward_buckets
from hpnsim.training.program import Collective, Compute, Pass, Program, Recv, Send
from hpnsim.training.schedule import pipeline_schedule
from hpnsim.training.straggler import straggler_fraction
from hpnsim.training.tp_overlap import Bulk, Pipelined, expand, gemm_shares


def program_from_job(job: TrainJob) -> Program:
    """The training program of one iteration of ``job``.

    ZeRO-3: a unit's all-gather is issued when the unit is called (after the previous
    compute and the pipeline message), or with ``job.fsdp_prefetch`` one unit ahead, when
    the current unit starts; every gather and reduce-scatter waits for the previous one
    (one NCCL stream); the optimizer waits for the last reduce-scatter.

    Parameters
    ----------
    job : TrainJob

    Returns
    -------
    Program
        Per pipeline stage its ops (passes, compute, TP/EP/DP collectives, sends and
        receives) in the order of ``job.schedule``.

    Examples
    --------
    >>> job = TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=4)
    >>> prog = program_from_job(job)
    >>> [op.kind for op in prog.stages[1] if isinstance(op, Pass)][:4]
    ['F', 'B', 'F', 'B']
    >>> ar = [op for op in prog.ops(Collective) if op.group == "tp"]
    >>> len(ar) == 2 * 32 * (2 + 2)     # micro-batches x layers (both stages) x (fwd + bwd)
    True
    """
    schedule = pipeline_schedule(job.schedule, job.pp, job.micro_batches, job.virtual_stages)
    stages = [_StageBuilder(job, s).build(schedule[s]) for s in range(job.pp)]
    return Program(layout=job.layout, stages=stages, job=job.to_dict(),
                   model_flops=job.model_flops, tokens=job.tokens_per_iteration,
                   peak_flops=job.gpu.peak_flops,
                   tp_allreduce_bytes=(job.activation_bytes if job.tp > 1
                                       and not job.sequence_parallel else 0.0))


class _StageBuilder:
    """Appends one stage's ops; ``last`` is the index of its latest stream op (-1: none)."""

    def __init__(self, job: TrainJob, stage: int):
        self.job, self.s = job, stage
        self.ops: list = []
        self.last = -1
        self.message = job.activation_bytes / (job.tp if job.sequence_parallel else 1)
        self.anchors: dict[int, list[int]] = {}   # virtual stage -> last op of each block
        self.fsdp_tail: tuple[int, ...] = ()
        self.fsdp_steps = 0
        self.split = job.schedule == "zb-h1"   # backward as B (input grads) + W (weights)
        self.recv_op = -1          # the pass's Recv, until a stream op consumes it
        self.shares = gemm_shares(job.model, job.seq_len)
        self.straggler = straggler_fraction(job.gpus, job.gpu_variation)
        self.beside = 0.0          # extra fraction of the compute added now: NCCL kernels beside it
        self.early: dict[tuple[int, str], tuple[int, ...]] = {}   # pre-dispatched gathers
        self.gather_chain: dict[str, int] = {}                    # last of them per group

    def add(self, op) -> int:
        if isinstance(op, Compute) and op.label != "optimizer":
            if self.beside:
                op = replace(op, beside=op.beside + op.seconds * self.beside)
            if self.straggler:
                op = replace(op, straggler=op.seconds * self.straggler)
        self.ops.append(op)
        if isinstance(op, Compute) or (isinstance(op, Collective) and op.blocking):
            self.last = len(self.ops) - 1
            self.recv_op = -1      # the stream op consumed the pass's message
        return len(self.ops) - 1

    # ----- one block (layer, head or embedding) of one pass ------------------------------
    def block(self, block: Block, kind: str, after: tuple[int, ...] = (),
              beside: bool = False) -> None:
        """Append ``block``'s ops of a ``kind`` pass; ``beside``: they run beside a DP or
        ZeRO collective's NCCL kernels (:data:`~hpnsim.training.compute.contention.NCCL_RING_SMS`
        SMs), so their compute is slower."""
        job = self.job
        phases = {"F": ("forward",), "W": ("weight_grad",)}.get(
            kind, ("input_grad",) if self.split else ("input_grad", "weight_grad"))
        self.beside = (job.overlap_slowdown(block.name, NCCL_RING_SMS, phases,
                                            launch=Launch.FULL) - 1.0
                       if beside else 0.0)
        self._block_ops(block, kind, after)
        self.beside = 0.0

    def _block_ops(self, block: Block, kind: str, after: tuple[int, ...]) -> None:
        job = self.job
        fwd, bwd, ig, wg = block_ops(job, block, self.shares)
        if self.split:
            bwd = ig
        if kind == "W":
            ops = wg
        else:
            ops = fwd if kind == "F" else (fwd + bwd if job.recompute else bwd)
        for i, op in enumerate(ops):
            if isinstance(op, Pipelined | Bulk):
                expand(self, op, after if i == 0 else ())
                continue
            if isinstance(op, Ring):
                expand_ring(self, op, after if i == 0 else ())
                continue
            if i == 0 and after:
                op = replace(op, after=after)
            self.add(op)

    def forward_blocks(self, u: int) -> list[Block]:
        return list(reversed(self.job.stage_cost(u).blocks))

    # ----- passes --------------------------------------------------------------------------
    def build(self, schedule) -> list:
        job = self.job
        p, m, chunks = job.pp, job.micro_batches, job.chunks
        units = self.fsdp_plan(schedule) if job.zero == 3 else None
        aligned = job.overlap_param_gather and job.virtual_stages > 1 and units is None
        if aligned:
            for k in range(min(2, job.virtual_stages)):
                self.early_gathers(k * p + self.s, after=())
        forwards = 0
        for n, (kind, j, k) in enumerate(schedule):
            u = k * p + self.s
            if aligned and kind == "F":
                # Megatron's aligned dispatch: the next chunk's gathers when the forward
                # index plus the stage's rank reaches the first micro-batch of a chunk
                ahead = forwards + self.s
                if ahead % p == 0 and 2 <= ahead // p + 1 < job.virtual_stages:
                    self.early_gathers((ahead // p + 1) * p + self.s,
                                       after=(self.last,) if self.last >= 0 else ())
                forwards += 1
            self.add(Pass(kind, j, k))
            recv = -1
            if kind == "F" and u > 0:
                recv = self.add(Recv((u - 1) % p, ("F", j, u)))
            elif kind == "B" and u < chunks - 1:
                recv = self.add(Recv((u + 1) % p, ("B", j, u)))
            self.recv_op = recv
            before = len(self.ops)
            if units is not None:
                self.fsdp_pass(units, n, kind, recv)
            elif kind == "F" and j == 0 and job.overlap_param_gather:
                self.gathered_forward(u)
            elif kind == "F":
                for block in self.forward_blocks(u):
                    self.block(block, "F")
            else:
                ends = []
                last_pass = j == m - 1 and kind == ("W" if self.split else "B")
                first_ready = self.first_bucket(u) if last_pass else None
                for index, block in enumerate(job.stage_cost(u).blocks):
                    # the gradient buckets already reducing run beside what follows
                    self.block(block, kind, beside=first_ready is not None
                               and index > first_ready)
                    ends.append(self.last)
                if j == m - 1 and kind == ("W" if self.split else "B"):
                    self.anchors[u] = ends
            if len(self.ops) == before and kind != "W":
                # a virtual stage without kernels (only the embedding): the pass still waits
                # for its message, so the wait is accounted as the pipeline's, not the DP's
                self.add(Compute(0.0, "embedding"))
                if j == m - 1 and units is None and kind == ("W" if self.split else "B"):
                    self.anchors[u] = [self.last] * len(job.stage_cost(u).blocks)
            if kind == "F" and u < chunks - 1:
                self.add(Send((u + 1) % p, self.message, ("F", j, u + 1)))
            elif kind == "B" and u > 0:
                self.add(Send((u - 1) % p, self.message, ("B", j, u - 1)))
        if units is not None:
            self.add(Pass("optimizer"))
            self.add(Compute(job.optimizer_time(self.s), "optimizer", after=self.fsdp_tail))
        else:
            self.data_parallel()
        return self.ops

    def first_bucket(self, u: int) -> int | None:
        """Backward block index after which chunk ``u``'s first gradient bucket reduces
        during the last micro-batch's backward (None: no bucket overlaps it)."""
        job = self.job
        if not job.overlap_grad_reduce:
            return None
        ready = [block for _, expert in self.shards() for _, block in job.buckets(u, expert)]
        return min(ready, default=None)

    def shards(self) -> list[tuple[str, bool]]:
        """Group kinds gradients synchronise over: DP (dense), expert-DP (routed experts)."""
        job = self.job
        out = [("dp", False)] if job.dp > 1 else []
        if job.ep > 1 and job.edp > 1:
            out.append(("edp", True))
        return out

    def data_parallel(self) -> None:
        job, p = self.job, self.job.pp
        reduce_op = "allreduce" if job.zero == 0 else "reducescatter"
        tails, done = [], []
        for kind, expert in self.shards():
            prev = -1
            for k in reversed(range(job.virtual_stages)):  # chunks finish last-first
                u = k * p + self.s
                gathered = bucket_gather_bytes(job, u, expert) if job.zero else []
                buckets = [(params, (self.anchors[u][block],))
                           for params, block in job.buckets(u, expert=expert)]
                if not job.overlap_grad_reduce and buckets:
                    # Megatron without overlap_grad_reduce: one bucket per chunk's buffer,
                    # reduced once the whole schedule is done (finalize_model_grads)
                    buckets = [(sum(params for params, _ in buckets), (self.last,))]
                    gathered = [sum(gathered)]
                for b, (params, after) in enumerate(buckets):
                    prev = self.add(Collective(reduce_op, kind, params * job.grad_bytes,
                                               blocking=False, after=after,
                                               follows=prev, row="dp"))
                    done.append((gathered[b] if gathered else 0.0, kind))
            if prev >= 0:
                tails.append(prev)
        self.add(Pass("optimizer"))
        optimizer = self.add(Compute(job.optimizer_time(self.s), "optimizer",
                                     after=tuple(tails)))
        if job.zero and not job.overlap_param_gather:
            # distributed optimizer: gather the updated weights (16-bit, or FP8 with
            # fp8_param_gather: hpnsim.training.fp8_params)
            chains: dict[str, int] = {}
            for nbytes, kind in done:
                chains[kind] = self.add(Collective(
                    "allgather", kind, nbytes, blocking=False,
                    after=(optimizer,), follows=chains.get(kind, -1), row="allgather"))

    def early_gathers(self, u: int, after: tuple[int, ...]) -> None:
        """Dispatch every bucket's all-gather of chunk ``u`` now (``overlap_param_gather``
        with the interleaved schedule: Megatron-Core's ``align_param_gather``, on by default
        there, calls ``start_param_sync`` of chunks 0 and 1 when the schedule starts and of
        chunk ``c + 1`` at the forward whose index plus the stage's rank is the first
        micro-batch of chunk ``c``: ``forward_backward_pipelining_with_interleaving`` in
        megatron/core/pipeline_parallel/schedules.py, read at ``d98e8a64dd``)."""
        job = self.job
        for kind, expert in self.shards():
            ids = []
            for nbytes in bucket_gather_bytes(job, u, expert)[::-1]:     # forward order
                self.gather_chain[kind] = self.add(Collective(
                    "allgather", kind, nbytes, blocking=False,
                    after=after, follows=self.gather_chain.get(kind, -1), row="allgather"))
                ids.append(self.gather_chain[kind])
            self.early[(u, kind)] = tuple(ids)

    def gathered_forward(self, u: int) -> None:
        """The first forward of chunk ``u`` with ``overlap_param_gather``: each block waits
        for the buckets holding its parameters; the first block that needs a bucket
        dispatches its all-gather and the next one's (:mod:`hpnsim.training.param_gather`)."""
        job = self.job
        blocks = job.stage_cost(u).blocks
        plans = []
        for kind, expert in self.shards():
            buckets = job.buckets(u, expert=expert)
            params = [b.expert_params if expert else b.dense_params for b in blocks]
            sizes = bucket_gather_bytes(job, u, expert)[::-1]      # bytes, forward order
            issued = dict(enumerate(self.early.get((u, kind), ())))
            plans.append((kind, sizes, forward_buckets(params, buckets), issued))
        waiting: tuple[int, ...] = ()
        needed: set[tuple[str, int]] = set()
        for q, block in enumerate(self.forward_blocks(u)):
            entry = tuple(t for t in (self.last, self.recv_op) if t >= 0)
            for kind, sizes, needs, issued in plans:
                needed.update((kind, b) for b in needs[q])
                for b in needs[q]:
                    for want in (b, b + 1):           # the bucket and the next, prefetched
                        if want < len(sizes) and want not in issued:
                            issued[want] = self.add(Collective(
                                "allgather", kind, sizes[want],
                                blocking=False, after=entry, follows=issued.get(want - 1, -1),
                                row="allgather"))
                    waiting += (issued[b],)
            before = len(self.ops)
            # a prefetched gather this block does not wait for runs beside it
            ahead = any((kind, b) not in needed for kind, _, _, issued in plans for b in issued)
            self.block(block, "F", after=waiting, beside=ahead)
            if len(self.ops) > before:    # the embedding has no kernels: the next block waits
                waiting = ()

    # ----- ZeRO-3 / FSDP ---------------------------------------------------------------------
    def fsdp_plan(self, schedule) -> list:
        """Per pass: its FSDP units in execution order, ``(unit, blocks)`` each."""
        plan = []
        for kind, _, k in schedule:
            u = k * self.job.pp + self.s
            blocks = iter(self.forward_blocks(u))
            units = [(unit, [next(blocks) for _ in unit.name.split("+")])
                     for unit in self.job.fsdp_units(u)]
            plan.append(units if kind == "F" else [(a, b[::-1]) for a, b in units[::-1]])
        self.flat = [(n, i) for n, units in enumerate(plan) for i in range(len(units))]
        self.position = {key: q for q, key in enumerate(self.flat)}
        self.gathered: dict[int, tuple[int, ...]] = {}
        return plan

    def fsdp_step(self, op: str, unit: Block, after: tuple[int, ...]) -> tuple[int, ...]:
        """One gather or reduce-scatter of ``unit`` on every shard group, after ``after``
        and the previous step; returns its ops (empty when it moves nothing)."""
        job = self.job
        row = "fsdp-ag" if op == "allgather" else "fsdp-rs"
        waits = tuple(dict.fromkeys(t for t in (*after, *self.fsdp_tail) if t >= 0))
        made = []
        for kind, expert in self.shards():
            params = unit.expert_params if expert else unit.dense_params
            nbytes = (unit_gather_bytes(job, unit, expert) if op == "allgather"
                      else params * job.grad_bytes)
            if params > 0:
                made.append(self.add(Collective(op, kind, nbytes, blocking=False,
                                                after=waits, row=row, step=self.fsdp_steps)))
        if made:
            self.fsdp_tail = tuple(made)
            self.fsdp_steps += 1
        return tuple(made)

    def fsdp_gather(self, units, q: int, after: tuple[int, ...]) -> tuple[int, ...]:
        if q not in self.gathered:
            n, i = self.flat[q]
            self.gathered[q] = self.fsdp_step("allgather", units[n][i][0], after)
        return self.gathered[q]

    def fsdp_pass(self, units, n: int, kind: str, recv: int) -> None:
        entry = tuple(t for t in (self.last, recv) if t >= 0)
        previous = tuple(t for t in (self.last,) if t >= 0)
        last = -1
        for i, (unit, blocks) in enumerate(units[n]):
            q = self.position[(n, i)]
            # without prefetch the gather is issued when the unit is called: input ready
            gather = self.fsdp_gather(units, q, entry if i == 0 else (last,))
            if self.job.fsdp_prefetch and q + 1 < len(self.flat):
                self.fsdp_gather(units, q + 1, previous if i == 0 else (last,))
            first = True
            for block in blocks:
                before = len(self.ops)
                # the next unit's gather (and, backward, this one's reduce-scatter) beside it
                self.block(block, kind, after=gather if first else (),
                           beside=bool(self.shards()))
                first = first and len(self.ops) == before
            last = self.last
            if kind == "B":
                self.fsdp_step("reducescatter", unit, (last,))
