"""The ops of one block (transformer layer, output head or embedding) of a
:class:`~hpnsim.training.job.TrainJob` in one pass, Megatron-LM semantics.

Per transformer layer and pass:

- forward: attention compute, TP all-reduce; [MoE: dispatch all-to-all], MLP (experts)
  compute, [MoE: combine all-to-all], TP all-reduce; with sequence parallelism each
  all-reduce becomes a reduce-scatter where it was and an all-gather before the next GEMM
  (attention, MLP), the same ring bytes in two launches;
- backward (MLP first): [combine all-to-all], MLP input-gradient compute, [dispatch
  all-to-all], TP all-reduce, MLP weight-gradient compute; then the same for attention
  without all-to-alls.

TP all-reduces exist with ``tp > 1``, all-to-alls in MoE layers with ``ep > 1`` (group
``ep``, the routed-token buffer :attr:`TrainJob.ep_buffer_bytes`). ``tp_comm_overlap``
pipelines SP's collectives with their GEMMs (:mod:`.tp_overlap`); ``cp`` runs attention as
ring attention over the CP group (:mod:`.context`); ``selective_recompute`` re-runs core
attention before its backward. :mod:`hpnsim.training.from_job` places these ops in the
passes of a stage.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from hpnsim.training.compute.contention import NCCL_P2P_SMS, NCCL_RING_SMS, Launch
from hpnsim.training.context import Ring
from hpnsim.training.cost import Block
from hpnsim.training.job import TrainJob
from hpnsim.training.program import Collective, Compute
from hpnsim.training.tp_overlap import Bulk, Pipelined
from hpnsim.training.userbuffers import Method

__all__ = ["BlockOps", "block_ops"]


class BlockOps(NamedTuple):
    """One block's ops: ``forward``; ``backward`` (whole); its zero-bubble split into
    ``input_grad`` (what the previous stage waits for) and ``weight_grad``."""

    forward: list
    backward: list
    input_grad: list
    weight_grad: list


def block_ops(job: TrainJob, block: Block, shares) -> BlockOps:
    """The ops of ``block`` of ``job`` in each kind of pass (``shares``: the GEMMs' FLOP
    shares of a layer, :func:`~hpnsim.training.tp_overlap.gemm_shares`).

    Examples
    --------
    >>> from hpnsim.training.tp_overlap import gemm_shares
    >>> job = TrainJob("llama3-8b", tp=8)
    >>> layer = job.stage_cost(0).blocks[1]
    >>> ops = block_ops(job, layer, gemm_shares(job.model, job.seq_len))
    >>> [getattr(op, "label", None) or op.op for op in ops.forward]
    ['attention', 'allreduce', 'mlp', 'allreduce']
    """
    # TP collectives entering and leaving each of attention and MLP (forward; backward
    # the same pair: an all-gather's gradient is a reduce-scatter and back). Without
    # sequence parallelism one all-reduce leaves; with it (Megatron) the sequence-sharded
    # input is all-gathered before the column-parallel GEMM and the row-parallel output
    # reduce-scattered, the same ring bytes as the all-reduce in two launches.
    enter: tuple = ()
    tp: tuple = ()
    regather = job.tp > 1 and job.sequence_parallel
    if regather:
        enter = (Collective("allgather", "tp", job.activation_bytes),)
        tp = (Collective("reducescatter", "tp", job.activation_bytes),)
    elif job.tp > 1:
        tp = (Collective("allreduce", "tp", job.activation_bytes),)
    ep = ((Collective("alltoall", "ep", job.ep_buffer_bytes),)
          if block.forward_ep_ops > 0 else ())
    if block.name == "head":
        h = block.forward_compute
        fwd = [Compute(h, "head")]
        ig, wg = [Compute(block.mlp_ig, "head ig")], [Compute(block.mlp_wg, "head wg")]
        bwd = ig + wg
    elif block.name == "embedding":  # lookup and its gradient (none: no task)
        fwd = [Compute(block.forward_compute, "embedding")] if block.forward_compute else []
        ig, wg = [], ([Compute(block.backward_compute, "embedding wg")]
                      if block.backward_compute else [])
        bwd = ig + wg
    else:
        attn = block.forward_attention
        mlp = block.forward_compute - attn
        fwd = [*enter, Compute(attn, "attention"), *tp, *ep, *enter, Compute(mlp, "mlp"),
               *ep, *tp]
        # (an MoE MLP's experts take their tokens from the dispatch, not a gathered norm)
        mlp_ig = _regathered(job, block, "mlp ig", block.mlp_ig, "mlp", regather and not ep)
        attention_ig = _regathered(job, block, "attention ig", block.attention_ig,
                                   "attention", regather)
        bwd = [*ep, *enter, mlp_ig, *ep, *tp, Compute(block.mlp_wg, "mlp wg"), *enter,
               attention_ig, *tp, Compute(block.attention_wg, "attention wg")]
        # zero-bubble split: B keeps what the previous stage waits for (input gradients
        # and their TP/EP collectives), W the weight-gradient GEMMs
        ig = [*ep, *enter, mlp_ig, *ep, *tp, *enter, attention_ig, *tp]
        wg = [Compute(block.mlp_wg, "mlp wg"), Compute(block.attention_wg, "attention wg")]
        if job.tp_comm_overlap:
            fwd, bwd, ig = _overlapped(job, block, ep, shares)
        if job.selective_recompute:
            bwd, ig = (_recompute_core(ops, attn, shares) for ops in (bwd, ig))
        if job.cp > 1:
            fwd, bwd, ig = (_ring(job, ops, block, shares) for ops in (fwd, bwd, ig))
    return BlockOps(fwd, bwd, ig, wg)


def _regathered(job: TrainJob, block: Block, label: str, seconds: float, part: str,
                regather: bool):
    """A part's input-gradient kernels; with sequence parallelism beside the all-gather of the
    part's sharded input, which its weight gradient needs whole again: Megatron-Core keeps
    the norm's output sequence-sharded for the backward and gathers it asynchronously before
    the input-gradient GEMM (TransformerEngine's ``LayerNormLinear`` and ``LayerNormMLP``
    backward: ``gather_along_first_dim(ln_out, tp_group, async_op=True)``, waited for before
    the weight-gradient GEMM; Megatron's own ``LinearWithGradAccumulationAndAsyncCommunication``
    likewise), an NCCL ring kernel beside them, taken at :data:`NCCL_RING_SMS` (the count of
    NCCL's cross-host ring; its channel count inside one NVLink host is not derived here)."""
    if not regather:
        return Compute(seconds, label)
    slowdown = job.overlap_slowdown(block.name, NCCL_RING_SMS, ("input_grad",), part=part,
                                    launch=Launch.FULL)
    return Bulk(job.activation_bytes, seconds, label, slowdown, op="allgather",
                launch=Launch.FULL)


def _recompute_core(ops: list, attn: float, shares) -> list:
    """``ops`` (a backward) with the core attention's forward re-run before the attention
    input gradients (Megatron's selective recomputation of ``core_attn``)."""
    qkv, proj, _, _ = shares
    core = attn * (1 - qkv - proj)
    out: list = []
    for op in ops:
        if isinstance(op, Compute | Pipelined | Bulk) and op.label in (
                "attention ig", "attention proj ig"):
            out.append(Compute(core, "attention core recompute"))
        out.append(op)
    return out


def _ring(job: TrainJob, ops: list, block: Block, shares) -> list:
    """``ops`` with the score/value part of attention run as ring attention over the CP
    group (:mod:`hpnsim.training.context`): keys and values forward, keys, values and
    their gradients backward. The block's attention forward and input-gradient times are
    split between the QKV and output projections and the core by their FLOP shares."""
    qkv, proj, _, _ = shares
    attn, attn_ig = block.forward_attention, block.attention_ig
    core, core_ig = attn * (1 - qkv - proj), attn_ig * (1 - qkv - proj)
    kv, steps = job.kv_bytes, job.cp
    # attention steps with an exchange in flight run beside NCCL's send/recv kernels
    fwd_slow = job.overlap_slowdown(block.name, NCCL_P2P_SMS, ("forward",), names=("attention",),
                                    launch=Launch.FULL)
    bwd_slow = job.overlap_slowdown(block.name, NCCL_P2P_SMS, ("input_grad",),
                                    names=("attention",), launch=Launch.FULL)
    forward = Ring(kv, core, "attention core", steps, fwd_slow)
    backward = Ring(2 * kv, core_ig, "attention core ig", steps, bwd_slow)
    replace_by = {
        "attention": [Compute(attn * qkv, "attention qkv"), forward,
                      Compute(attn * proj, "attention proj")],
        "attention core": [forward],
        "attention core recompute": [Ring(kv, core, "attention core recompute", steps,
                                          fwd_slow)],
        "attention ig": [Compute(attn_ig * proj, "attention proj ig"), backward,
                         Compute(attn_ig * qkv, "attention qkv ig")],
        "attention core ig": [backward],
    }
    out = []
    for op in ops:
        if isinstance(op, Bulk) and op.label == "attention ig":   # SP: the re-gather
            # stays beside the QKV input-gradient GEMM, the part it overlaps in the code
            qkv_ig = replace(op, seconds=attn_ig * qkv, label="attention qkv ig")
            out += [Compute(attn_ig * proj, "attention proj ig"), backward, qkv_ig]
        else:
            out += replace_by.get(op.label, [op]) if isinstance(op, Compute) else [op]
    return out


def _overlapped(job: TrainJob, block: Block, ep: tuple, shares) -> tuple[list, list, list]:
    """Forward, backward and input-gradient ops of a layer with TP communication
    overlapped with its GEMMs (:mod:`hpnsim.training.tp_overlap`); the block's forward,
    input- and weight-gradient times are split between its GEMMs by their FLOP shares."""
    size, k = job.activation_bytes, job.tp
    qkv, proj, fc1, fc2 = shares
    attn = block.forward_attention
    mlp = block.forward_compute - attn
    attn_ig, mlp_ig = block.attention_ig, block.mlp_ig
    ag = Collective("allgather", "tp", size)
    rs = Collective("reducescatter", "tp", size)
    core = attn * (1 - qkv - proj)

    ub = job.userbuffers

    def beside(gemm: str, phases, **which) -> float:   # slower beside its userbuffer kernel
        sms = ub.sms(gemm)
        return (job.overlap_slowdown(block.name, sms, phases, launch=ub.overlap(gemm).launch,
                                     **which) if sms else 1.0)

    def bulk(gemm: str, op: str, seconds: float, label: str, phases, **which) -> Bulk:
        """A GEMM beside the bulk collective ``op`` configured for it."""
        return Bulk(size, seconds, label, beside(gemm, phases, **which), op=op,
                    launch=ub.overlap(gemm).launch)

    def reduce_scatter(gemm: str, seconds: float, label: str, name: str) -> Pipelined:
        """A forward row-parallel GEMM and its reduce-scatter, by the configured method."""
        slowdown = beside(gemm, ("forward",), names=(name,))
        overlap = ub.overlap(gemm)
        if overlap.method is Method.RING_EXCHANGE:
            return Pipelined("sendrecv", size, seconds, label, k, False, slowdown, own_last=True)
        return Pipelined("reducescatter", size, seconds, label, overlap.num_splits, False,
                         slowdown)

    fwd = [Pipelined("allgather", size, attn * qkv, "attention qkv", k, True),
           Compute(core, "attention core"),
           reduce_scatter("proj_fprop", attn * proj, "attention proj", "o_proj")]
    # the norm's output gathered again for QKV's and FC1's weight gradients (TE's
    # ub_bulk_dgrad), beside their input-gradient GEMMs
    ig_attn = [Pipelined("allgather", size, attn_ig * proj, "attention proj ig", k, True),
               Compute(attn_ig * (1 - proj - qkv), "attention core ig"),
               bulk("qkv_dgrad", "allgather", attn_ig * qkv, "attention qkv ig",
                    ("input_grad",), names=("qkv",))]
    if ep:   # MoE: the expert dispatch sits between the GEMMs and the TP collectives
        fwd += [*ep, ag, Compute(mlp, "mlp"), *ep, rs]
        ig_mlp = [*ep, ag, Compute(mlp_ig, "mlp ig"), *ep, rs]
        bwd = [*ig_mlp, Compute(block.mlp_wg, "mlp wg")]
    else:
        fwd += [Pipelined("allgather", size, mlp * fc1, "mlp fc1", k, True),
                reduce_scatter("fc2_fprop", mlp * fc2, "mlp fc2", "fc2")]
        ig_mlp = [Pipelined("allgather", size, mlp_ig * fc2, "mlp fc2 ig", k, True),
                  bulk("fc1_dgrad", "allgather", mlp_ig * fc1, "mlp fc1 ig", ("input_grad",),
                       names=("fc1",)),
                  rs]
        bwd = [*ig_mlp[:2], bulk("fc1_wgrad", "reducescatter", block.mlp_wg, "mlp wg",
                                 ("weight_grad",), part="mlp")]
    bwd += [*ig_attn, bulk("qkv_wgrad", "reducescatter", block.attention_wg, "attention wg",
                           ("weight_grad",), part="attention")]
    return fwd, bwd, [*ig_mlp, *ig_attn, rs]
