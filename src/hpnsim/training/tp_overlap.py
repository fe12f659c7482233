"""TP communication overlapped with the GEMMs it feeds (Megatron-Core ``--tp-comm-overlap``
over TransformerEngine userbuffers).

With sequence parallelism each attention and MLP block all-gathers its sequence-sharded input
before its column-parallel GEMM (QKV, FC1) and reduce-scatters the output of its row-parallel
GEMM (projection, FC2). Megatron-Core 0.20's ``tp_comm_overlap`` (default off; it needs
``sequence_parallel``) hands these to TransformerEngine 2.x userbuffers, whose defaults
(``transformer_engine/pytorch/module/base.py``, ``initialize_ub``) are modelled as:

- forward all-gather + QKV/FC1 GEMM (``ring_exchange``, ``num_splits = tp``): the GEMM in
  ``tp`` slices, one per shard. Slice 0 is the GPU's own shard and starts at once, while its
  shard goes to the next rank and the previous rank's arrives; each later slice starts when
  its shard has arrived, while the next one moves: ``tp - 1`` ring shifts of one shard
  (``CommOverlapP2PBase::split_overlap_ag``, ``common/comm_gemm_overlap``: step ``i`` computes
  chunk ``(tp_id - i) mod tp`` and sends and receives the next; :class:`Pipelined`,
  communication first);
- forward projection/FC2 GEMM + reduce-scatter (``pipeline``, ``num_splits = 4``): the GEMM in
  4 slices, each slice's reduce-scatter leaving when the slice is done (:class:`Pipelined`,
  GEMM first);
- backward all-gather of the output gradient + projection/FC2 input-gradient GEMM
  (``ring_exchange``): as the forward gather;
- backward all-gather of the QKV/FC1 input (``bulk``, Megatron's ``tp_comm_bulk_dgrad``):
  sequence parallelism keeps the norm's output sharded for the weight gradient, so the
  backward gathers it again, beside the QKV/FC1 input-gradient GEMM (:class:`Bulk`);
- backward reduce-scatter of the QKV/FC1 input gradient (``bulk``, ``tp_comm_bulk_wgrad``):
  the whole reduce-scatter runs beside the block's weight-gradient GEMM (:class:`Bulk`).

With ``k`` chunks of ``g`` seconds of GEMM, a ring-exchange pair with ``c`` seconds per shift
takes ``g + (k - 1) max(c, g)``, exposing ``(k - 1) max(0, c - g)`` of its ``(k - 1) c`` of
communication; a pipelined reduce-scatter with ``c`` per chunk takes ``g + (k - 1) max(c, g)
+ c``, hiding ``min(c, g)`` per chunk but the last. A bulk pair hides ``min(comm, gemm)``.

Which method each GEMM uses and how many SMs its communication kernel takes is the job's
userbuffer configuration (:mod:`hpnsim.training.userbuffers`: TransformerEngine's defaults
above, or the per-GEMM figures a recipe names; a recipe may reduce-scatter a forward
row-parallel GEMM by ring exchange too, the GEMM in ``tp`` slices passing ``tp - 1`` partial
sums of one shard on, its own shard's last). A GEMM beside a kernel holding SMs is slower by
the factor :mod:`hpnsim.training.compute.contention` derives (``slowdown``); a ring exchange
copies with the copy engines and leaves its GEMM every SM.

What is simplified: each ring shift is timed as a ``sendrecv`` of one shard over the TP group
(rank ``i`` to ``i + 1``), as NCCL would run it, where userbuffers copy with the copy engines
(no SMs, no NCCL launch). The GEMMs' share of a block's compute is
their share of its FLOPs. MoE layers keep their MLP's TP collectives blocking (the expert
dispatch sits between the expert GEMMs and the reduce-scatter), and a zero-bubble schedule
keeps the backward reduce-scatter blocking (its bulk partner, the weight gradient, runs in the
later ``W`` pass).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpnsim.training.compute.contention import Launch
from hpnsim.training.program import Collective, Compute


@dataclass(frozen=True)
class Pipelined:
    """A TP collective of ``size`` bytes and a GEMM of ``seconds``, both cut in ``splits``;
    ``comm_first``: all-gather chunk ``i`` feeds GEMM slice ``i``; else GEMM slice ``i``
    feeds reduce-scatter chunk ``i``. ``slowdown``: the GEMM's time beside the
    communication kernel over its time alone. ``own_last``: the last slice is the GPU's own
    shard and sends nothing (a ring-exchange reduce-scatter passes ``splits - 1`` partial
    sums on)."""

    op: str
    size: float
    seconds: float
    label: str
    splits: int
    comm_first: bool
    slowdown: float = 1.0
    own_last: bool = False


@dataclass(frozen=True)
class Bulk:
    """A TP collective ``op`` (a reduce-scatter by default) of ``size`` bytes beside an
    independent compute of ``seconds`` (``slowdown`` times longer beside it); what follows
    waits for both. ``launch``: how the compute's GEMMs were launched beside the
    collective's kernel (:class:`~hpnsim.training.compute.contention.Launch`): with a margin
    they are slower throughout, for every SM only while the collective holds its SMs."""

    size: float
    seconds: float
    label: str
    slowdown: float = 1.0
    op: str = "reducescatter"
    launch: Launch = Launch.MARGIN


def gemm_shares(spec, seq_len: int) -> tuple[float, float, float, float]:
    """FLOP shares of ``(QKV, projection)`` in a layer's attention and ``(FC1, FC2)`` in its
    MLP (the rest of attention is the score and value products).

    >>> from hpnsim.workloads import models
    >>> qkv, proj, fc1, fc2 = gemm_shares(models.get("llama3-8b"), 8192)
    >>> round(qkv + proj, 4), round(fc1, 4), round(fc2, 4)   # SwiGLU: up+gate, down
    (0.3846, 0.6667, 0.3333)
    """
    q = spec.heads * spec.head_dim
    kv = spec.kv_heads * spec.head_dim
    qkv = 2 * spec.hidden * (q + 2 * kv)
    proj = 2 * spec.hidden * q
    attention = qkv + proj + 4 * seq_len * q
    matrices = 3 if spec.gated_mlp else 2
    return qkv / attention, proj / attention, (matrices - 1) / matrices, 1 / matrices


def expand(builder, item, after: tuple[int, ...]) -> None:
    """Append the ops of a :class:`Pipelined` or :class:`Bulk` item to ``builder`` (a stage
    builder with ``add``, ``last`` and ``recv_op``), the first waiting for ``after`` too."""
    entry = tuple(t for t in (builder.last, builder.recv_op, *after) if t >= 0)
    if isinstance(item, Bulk):
        rs = builder.add(Collective(item.op, "tp", item.size, blocking=False,
                                    after=entry))
        extra = item.seconds * (item.slowdown - 1.0)
        if item.launch is Launch.FULL:
            builder.add(Compute(item.seconds, item.label, after=after, held=extra, held_by=rs))
        else:
            builder.add(Compute(item.seconds, item.label, after=after, contention=extra))
        builder.add(Compute(0.0, "tp wait", after=(rs,)))
        return
    k = item.splits
    extra = item.seconds / k * (item.slowdown - 1.0)     # per slice, beside the SMs taken
    previous = -1
    if item.comm_first:   # ring exchange: the own shard first, then k - 1 shifts of one shard
        builder.add(Compute(item.seconds / k, item.label, after=after, contention=extra))
        for i in range(1, k):
            waits = entry if i == 1 else (previous,)
            previous = builder.add(Collective("sendrecv", "tp", item.size / k, blocking=False,
                                              after=waits))
            builder.add(Compute(item.seconds / k, item.label, after=(previous,),
                                contention=extra))
        return
    # pipelined reduce-scatter: each GEMM slice's chunk after it (but the own shard's, last)
    shipped = k - 1 if item.own_last else k
    for i in range(k):
        gemm = builder.add(Compute(item.seconds / k, item.label, after=after if i == 0 else (),
                                   contention=extra))
        if i >= shipped:
            break
        waits = (gemm,) if previous < 0 else (gemm, previous)
        previous = builder.add(Collective(item.op, "tp", item.size / k, blocking=False,
                                          after=waits))
    builder.add(Compute(0.0, "tp wait", after=(previous,)))   # what follows needs it all
