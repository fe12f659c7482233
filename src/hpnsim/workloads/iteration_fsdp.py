"""ZeRO-3 / FSDP on one pipeline stage: per-unit parameter all-gathers and gradient
reduce-scatters around the compute, on the fabric.

Model (PyTorch FSDP, DeepSpeed ZeRO-3):

- The stage runs its FSDP units (see :meth:`TrainJob.fsdp_units`) one after another on its
  compute stream: forward in layer order, backward in reverse, every micro-batch.
- Before a unit computes, its parameters are all-gathered over the data-parallel group
  (routed-expert parameters over the expert-data-parallel group); after its backward, its
  gradients are reduce-scattered over the same groups.
- All of a stage's gathers and reduce-scatters go through one communication stream, in
  issue order (one NCCL communicator serializes them).
- Prefetch (on by default): the next unit's all-gather is issued when the current unit
  starts computing — one unit ahead, as FSDP's forward/backward prefetch under its rate
  limiter — so it overlaps that compute. Without prefetch a unit's all-gather is issued
  only when the unit is about to run (its input has arrived), and the compute waits for it.

Every GPU of a stage runs the same timeline, so one compute task per unit stands for all of
them; the collectives of every DP group of the stage are compiled on the fabric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpnsim.workloads.iteration_comm import compile_groups


@dataclass
class FsdpStream:
    """Builds one stage's FSDP units into ``graph``.

    ``units`` is the stage's whole execution order: one ``(kind, blocks)`` per operation of
    its pipeline schedule, ``blocks`` the :class:`Block` s it runs in order. ``shards`` lists
    ``(groups, expert)``: the DP groups (dense parameters) and, with expert parallelism, the
    expert-data-parallel groups (routed-expert parameters) of the stage.

    After building, ``comm`` holds ``(kind, first_tasks, done, bytes)`` per collective step
    (``kind`` ``"allgather"`` or ``"reducescatter"``) and ``tail`` the last one's ``done``.
    """

    graph: object
    fabric: object
    job: object
    units: list
    shards: list
    unit_seconds: object  # Block, kind -> seconds of compute (TP and EP folded in)
    prefetch: bool = True
    routing: str = "ecmp"
    algo: str = "auto"
    seed: int = 0
    cache: dict | None = None
    tail: int = -1
    comm: list = field(default_factory=list)
    sent: float = 0.0
    _gathered: dict = field(default_factory=dict)
    _flat: list = field(default_factory=list)

    def __post_init__(self):
        self._flat = [(op, i) for op, (_, blocks) in enumerate(self.units)
                      for i in range(len(blocks))]
        self._position = {key: p for p, key in enumerate(self._flat)}

    def _step(self, op_name: str, block, deps, label: str) -> int:
        """One gather or reduce-scatter of ``block`` on every shard group, after ``deps`` and
        after the previous step (serial stream); returns its done task (or -1)."""
        deps = [t for t in (*deps, self.tail) if t >= 0]
        element = self.job.model.dtype_bytes if op_name == "allgather" else self.job.grad_bytes
        finals, first, sent = [], [], 0.0
        for groups, expert in self.shards:
            params = block.expert_params if expert else block.dense_params
            if params <= 0:
                continue
            done, starts, moved = compile_groups(self.graph, self.fabric, op_name, groups,
                                                 params * element, deps=deps, algo=self.algo,
                                                 routing=self.routing, seed=self.seed,
                                                 name=label, cache=self.cache)
            if done >= 0:
                finals.append(done)
                first += starts
                sent += moved
        if not finals:
            return -1
        done = finals[0] if len(finals) == 1 else self.graph.add_delay(0.0, deps=finals,
                                                                        name=f"{label} done")
        self.tail = done
        self.comm.append((op_name, first, done, sent))
        self.sent += sent
        return done

    def _gather(self, position: int, deps) -> int:
        if position not in self._gathered:
            op, i = self._flat[position]
            kind, blocks = self.units[op]
            self._gathered[position] = self._step("allgather", blocks[i], deps,
                                                  f"fsdp-ag {kind}{op} u{i}")
        return self._gathered[position]

    def run(self, op: int, entry, recv: int = -1) -> tuple[int, int, int]:
        """Build operation ``op`` of the stage; its first unit starts after ``entry`` tasks
        (the previous compute and the pipeline message ``recv``).

        Returns ``(first compute task, last compute task, gather the first unit waited on)``.
        """
        kind, blocks = self.units[op]
        entry = [t for t in entry if t >= 0]
        previous = [t for t in entry if t != recv]  # the compute before this operation
        first = last = gather_first = -1
        for i, block in enumerate(blocks):
            p = self._position[(op, i)]
            # without prefetch the gather is issued when the unit is called: input ready
            gather = self._gather(p, entry if i == 0 else [last])
            if i == 0:
                gather_first = gather
            if self.prefetch and p + 1 < len(self._flat):
                self._gather(p + 1, previous if i == 0 else [last])
            deps = (entry if i == 0 else [last]) + ([gather] if gather >= 0 else [])
            task = self.graph.add_delay(self.unit_seconds(block, kind), deps=deps,
                                        name=f"{kind}{op} u{i}")
            first = task if i == 0 else first
            last = task
            if kind == "B":
                self._step("reducescatter", block, [task], f"fsdp-rs {kind}{op} u{i}")
        return first, last, gather_first
