"""The training program: what every pipeline stage does in one iteration, as ordered ops.

A :class:`Program` holds one op list per pipeline stage. Every GPU of a stage runs the same
list (DP replicas and TP ranks are in lockstep), so a stage is the unit of the program:

- :class:`Pass` opens a forward (``F``) or backward (``B``) pass of a micro-batch on a model
  chunk (``W``: its weight-gradient part, where a zero-bubble schedule splits it off), or the
  optimizer step; the ops up to the next ``Pass`` belong to it (accounting and
  Gantt rows are per pass).
- :class:`Compute` is kernel time on the stage's compute stream (seconds).
- :class:`Collective` runs ``op`` on every group of kind ``group`` (``tp``, ``cp``, ``dp``,
  ``ep``, ``edp``; ``dp`` is DP x CP when ``cp > 1``) of the stage, each GPU contributing
  ``size`` bytes. A *blocking* one sits on the compute stream (Megatron's TP all-reduces, MoE dispatch/combine all-to-alls); an async one
  (gradient buckets, ZeRO gathers) starts when the ops listed in ``after`` are done and, with
  ``follows``, queues group by group behind an earlier collective (one communicator per group).
- :class:`Send` / :class:`Recv` move a pipeline message to / from a neighbouring stage;
  ``tag`` pairs them. A ``Send`` leaves after the compute stream's latest op; the stream op
  after a ``Recv`` waits for the message.

Stream ops (``Compute``, blocking ``Collective``) run one after another; ``after`` adds waits
(op indices of the same stage, always earlier ones). The compiler
(:func:`hpnsim.training.compile_program`) turns a program into tasks of a TaskGraph.

Examples
--------
>>> p = Program(layout=Layout(tp=2), stages=[[Pass("F", 0, 0), Compute(1e-3),
...     Collective("allreduce", "tp", 2**20), Pass("optimizer"), Compute(1e-4)]])
>>> [type(op).__name__ for op in p.stages[0]]
['Pass', 'Compute', 'Collective', 'Pass', 'Compute']
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpnsim.errors import InputError
from hpnsim.workloads.layout import Layout

GROUP_KINDS = ("tp", "cp", "dp", "ep", "edp")
COLLECTIVE_OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")
PASS_KINDS = ("F", "B", "W", "optimizer")


@dataclass(frozen=True)
class Pass:
    """Start of a pass: ``kind`` F, B or optimizer, its micro-batch and model chunk."""

    kind: str
    micro_batch: int = -1
    chunk: int = -1


@dataclass(frozen=True)
class Compute:
    """``seconds`` of kernels on the compute stream, after the ops in ``after`` too;
    ``contention``: the further seconds they take beside an overlapped communication kernel
    (:mod:`hpnsim.training.compute.contention`); ``straggler``: the further seconds the stream
    waits for the job's slowest GPU (:mod:`hpnsim.training.straggler`); both accounted apart.
    ``beside``: the further seconds they would take if the NCCL kernels of the DP or ZeRO
    collectives dispatched before them were resident throughout; the compiler charges the
    share of it that falls within those kernels' time (:mod:`hpnsim.training.compile`).
    ``held``: the further seconds they would take if the kernels of collective ``held_by``
    (an earlier op of the stage, dispatched with them) held their SMs throughout; the
    compiler charges the share of it that falls within that collective's time alone."""

    seconds: float
    label: str = ""
    after: tuple[int, ...] = ()
    straggler: float = 0.0
    contention: float = 0.0
    beside: float = 0.0
    held: float = 0.0
    held_by: int = -1


@dataclass(frozen=True)
class Collective:
    """``op`` on every ``group`` of the stage, ``size`` bytes per GPU.

    ``blocking``: on the compute stream. ``after``: earlier ops to wait for. ``follows``:
    an earlier async collective on the same group kind to queue behind, group by group
    (-1: none). ``row``: Gantt row kind (``dp``, ``allgather``, ``fsdp-ag``, ``fsdp-rs``);
    collectives with the same ``step`` (>= 0) share one row.
    """

    op: str
    group: str
    size: float
    blocking: bool = True
    after: tuple[int, ...] = ()
    follows: int = -1
    row: str = ""
    step: int = -1
    label: str = ""


@dataclass(frozen=True)
class Send:
    """A pipeline message of ``size`` bytes per GPU to stage ``to``, matched by ``tag``."""

    to: int
    size: float
    tag: tuple


@dataclass(frozen=True)
class Recv:
    """The pipeline message ``tag`` from stage ``source``; the next stream op waits for it."""

    source: int
    tag: tuple


Op = Pass | Compute | Collective | Send | Recv


@dataclass
class Program:
    """A training iteration as per-stage op lists (see the module docstring).

    ``job`` describes the job for results; ``model_flops``, ``tokens`` and ``peak_flops``
    (per GPU) give MFU and throughput (NaN when unknown, as for AICB files);
    ``tp_allreduce_bytes`` names the TP all-reduce reported as ``tp_allreduce_time``.
    """

    layout: Layout
    stages: list[list[Op]]
    job: dict = field(default_factory=dict)
    model_flops: float = float("nan")
    tokens: float = float("nan")
    peak_flops: float = float("nan")
    tp_allreduce_bytes: float | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        if len(self.stages) != self.layout.pp:
            raise InputError("program", f"has {len(self.stages)} stages; the layout has "
                                        f"pp={self.layout.pp}")
        for s, ops in enumerate(self.stages):
            for i, op in enumerate(ops):
                _check_op(s, i, op, self.layout.pp)

    def ops(self, kind: type) -> list:
        """Every op of type ``kind``, all stages.

        >>> p = Program(Layout(), [[Pass("F", 0, 0), Compute(1.0), Compute(2.0)]])
        >>> [op.seconds for op in p.ops(Compute)]
        [1.0, 2.0]
        """
        return [op for ops in self.stages for op in ops if isinstance(op, kind)]


def _check_op(stage: int, index: int, op, stages: int) -> None:
    where = f"program.stage{stage}[{index}]"
    if isinstance(op, Pass):
        if op.kind not in PASS_KINDS:
            raise InputError(where, f"pass kind one of {', '.join(PASS_KINDS)}, got {op.kind!r}")
        return
    refs: tuple[int, ...] = ()
    if isinstance(op, Compute):
        if not op.seconds >= 0:
            raise InputError(where, f"compute seconds must be >= 0, got {op.seconds!r}")
        refs = op.after
    elif isinstance(op, Collective):
        if op.op not in COLLECTIVE_OPS:
            raise InputError(where, f"op one of {', '.join(COLLECTIVE_OPS)}, got {op.op!r}")
        if op.group not in GROUP_KINDS:
            raise InputError(where, f"group one of {', '.join(GROUP_KINDS)}, got {op.group!r}")
        if not op.size >= 0:
            raise InputError(where, f"size must be >= 0 bytes, got {op.size!r}")
        refs = (*op.after, op.follows) if op.follows >= 0 else op.after
    elif isinstance(op, Send | Recv):
        peer = op.to if isinstance(op, Send) else op.source
        if not 0 <= peer < stages or peer == stage:
            raise InputError(where, f"peer stage must be another of 0..{stages - 1}, got {peer}")
    else:
        raise InputError(where, f"not a program op: {op!r}")
    for ref in refs:
        if not 0 <= ref < index:
            raise InputError(where, f"waits for op {ref}, which is not an earlier op")
