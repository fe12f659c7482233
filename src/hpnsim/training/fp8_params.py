"""The bytes a parameter all-gather moves when the linear weights are kept in FP8
(Megatron-Core's ``--fp8-param-gather``; TrainJob ``fp8_param_gather``).

With ``--fp8-param-gather`` Megatron builds each transformer layer under TransformerEngine's
``fp8_model_init`` (``get_fp8_context(config, layer_no, is_init=True)`` in
megatron/core/fp8_utils.py, entered per layer by ``TransformerBlock`` in
megatron/core/transformer/transformer_block.py, read at ``d98e8a64dd``), so the weights of
the layer's TE linear modules (QKV, output projection, the MLP's or experts' FC1/FC2) are
``Float8Tensor``s; their norm weights, biases, the MoE router, the embedding and the output
layer are built outside it and stay BF16. The distributed optimizer and Megatron-FSDP put an
FP8 parameter's data in a ``torch.uint8`` buffer (``group_params_for_buffers`` in
megatron/core/distributed/param_and_grad_buffer.py; FSDP: ``param_dtype = torch.uint8`` in
megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py, both at
``d98e8a64dd``; first in 033d8b0de5, "Add native-fp8", core_v0.9.0), so its all-gather moves
1 byte per parameter, the rest 2. Tensor-wise FP8 (delayed or current scaling) gathers the
row-wise data only; the transpose is made locally after the gather.

Megatron keeps the FP8 weights in a buffer of their own, bucketed apart from the BF16 ones,
and merges every BF16 bucket into the last FP8 bucket group (``partition_buckets``, same
file). hpnsim keeps one bucket sequence per chunk (:meth:`~hpnsim.training.job_costs.
StageCosts.buckets`) and weighs each bucket by the FP8 parameters it spans, a block's spread
evenly over its share: every bucket's bytes are approximate, their sum is exact.
"""

from __future__ import annotations

FP8_BYTES = 1   # torch.uint8, the storage of a Float8Tensor


def layer_fp8_weights(spec, layer: int, tp: int = 1, ep: int = 1) -> tuple[float, float]:
    """One GPU's FP8 weights of transformer layer ``layer`` under ``fp8_param_gather``:
    ``(dense, routed expert)``, the experts apart only when ``ep > 1`` (as
    :class:`~hpnsim.training.cost.Block` counts them). Weight matrices only: biases, norms
    and the router stay BF16.

    >>> from hpnsim.workloads.models import get
    >>> spec = get("llama3-8b")                     # 4096 hidden, 8 of 32 heads for K/V
    >>> attention = 4096 * 4096 * 2 + 2 * 4096 * 1024
    >>> layer_fp8_weights(spec, 0) == (attention + 3 * 4096 * 14336, 0.0)
    True
    """
    attention = spec.attention_weights()
    if not spec.is_moe_layer(layer):
        return (attention + spec.mlp_weights()) / tp, 0.0
    expert = spec.mlp_weights(spec.expert_ffn)
    routed = spec.experts * expert
    shared = spec.shared_experts * expert
    if ep > 1:
        return (attention + shared) / tp, routed / tp / ep
    return (attention + shared + routed) / tp, 0.0


def block_fp8(job, name: str, expert: bool = False) -> float:
    """FP8 parameters of one GPU's block (``layer<i>``, ``embedding``, ``head``, or FSDP
    units joined by ``+``); 0 unless ``job.fp8_param_gather``.

    >>> from hpnsim.training.job import TrainJob
    >>> job = TrainJob("llama3-8b", dtype="fp8", dp=2, zero=3, fp8_param_gather=True)
    >>> block_fp8(job, "embedding+layer0") == block_fp8(job, "layer0") > 0
    True
    """
    if not job.fp8_param_gather:
        return 0.0
    total = 0.0
    for part in name.split("+"):
        if part.startswith("layer"):
            weights = layer_fp8_weights(job.model, int(part.removeprefix("layer")),
                                        job.tp, job.ep)
            total += weights[1] if expert else weights[0]
    return total


def gathered_bytes(job, params: float, fp8: float) -> float:
    """Bytes gathered of ``params`` parameters of which ``fp8`` are FP8 (1 byte each, the
    rest ``job.model.dtype_bytes``).

    >>> from hpnsim.training.job import TrainJob
    >>> gathered_bytes(TrainJob("llama3-8b"), 100.0, 60.0)
    140.0
    """
    return params * job.model.dtype_bytes - fp8 * (job.model.dtype_bytes - FP8_BYTES)


def unit_gather_bytes(job, unit, expert: bool = False) -> float:
    """Bytes of one GPU's all-gather of FSDP unit (or block) ``unit``.

    >>> from hpnsim.training.job import TrainJob
    >>> job = TrainJob("llama3-8b", dp=2, zero=3)
    >>> unit = job.fsdp_units(0)[1]
    >>> unit_gather_bytes(job, unit) == 2 * unit.dense_params
    True
    """
    params = unit.expert_params if expert else unit.dense_params
    return gathered_bytes(job, params, block_fp8(job, unit.name, expert))


def bucket_gather_bytes(job, chunk: int, expert: bool = False) -> list[float]:
    """Bytes of each of virtual stage ``chunk``'s bucket all-gathers, in
    :meth:`~hpnsim.training.job_costs.StageCosts.buckets` order: each bucket's FP8 share is
    that of the blocks it spans (a block's FP8 parameters spread evenly over it).

    >>> from hpnsim.training.job import TrainJob
    >>> job = TrainJob("llama3-8b", dp=2, zero=1)
    >>> sum(bucket_gather_bytes(job, 0)) == 2 * job.stage_params(0)
    True
    """
    blocks = job.stage_cost(chunk).blocks
    spans = []                      # (start, end, FP8 fraction) of each block, backward order
    start = 0.0
    for block in blocks:
        params = block.expert_params if expert else block.dense_params
        if params > 0:
            spans.append((start, start + params, block_fp8(job, block.name, expert) / params))
        start += params
    out, low = [], 0.0
    for size, _ in job.buckets(chunk, expert=expert):
        high = low + size
        fp8 = sum(max(0.0, min(high, b) - max(low, a)) * share for a, b, share in spans)
        out.append(gathered_bytes(job, size, fp8))
        low = high
    return out
