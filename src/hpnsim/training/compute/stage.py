"""Whole pipeline stages: layers, the embedding and output head, the optimizer step.

:func:`stage_ops` is the entry point for a per-stage cost model: the timed operations of one
micro-batch through a pipeline stage's layers, with the embedding on the first stage and the
final norm, output head and loss on the last. :func:`step_ops` is the once-per-iteration work
after the last backward.

>>> from hpnsim.workloads.gpus import get_gpu
>>> from hpnsim.workloads.models import get
>>> ops = stage_ops(get("llama3-70b"), get_gpu("h100"), layers=range(0, 10), tp=8,
...                 seq_len=8192, first=True)
>>> ops.ops[0].name, ops.ops[1].name, len(ops.select(kind="attention"))
('embedding', 'layer0.input_norm', 20)
>>> round(ops.forward_seconds * 1e3, 1), round(ops.backward_seconds * 1e3, 1)
(28.5, 58.1)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import replace

from hpnsim.errors import InputError
from hpnsim.training.compute import memory_ops as mem
from hpnsim.training.compute.cross_entropy import cross_entropy_passes, loss_kernel
from hpnsim.training.compute.current_scaling import checked_recipe, quantize_kernels
from hpnsim.training.compute.layer import _ACT_BYTES, _Builder, _tokens, layer_ops
from hpnsim.training.compute.ops import Op, OpList
from hpnsim.training.compute.optimizer_step import (
    MULTI_TENSOR,
    multi_tensor_launches,
    step_kernel_bytes,
)
from hpnsim.training.compute.overhead import gaps_op
from hpnsim.training.compute.precision import positive_int
from hpnsim.workloads.gpus import GPUSpec
from hpnsim.workloads.models import ModelSpec


def stage_ops(model: ModelSpec, gpu: GPUSpec, *, layers, micro_batch: int = 1,
              seq_len: int | None = None, tp: int = 1, sequence_parallel: bool | None = None,
              cp: int = 1, ep: int = 1, dtype: str = "bf16", first: bool = False,
              last: bool = False, clock_hz: float | None = None, table=None,
              attention: str = "flash", fp8_gemm=None, dropout: bool = False,
              cross_entropy: str = "unfused", fp8_recipe: str | None = None) -> OpList:
    """The timed operations of one micro-batch through a pipeline stage on one GPU.

    Parameters
    ----------
    model, gpu :
        As for :func:`~hpnsim.training.compute.layer.layer_ops`.
    layers : iterable of int
        The transformer layers the stage holds (for interleaved schedules, one virtual
        stage's layers).
    first, last : bool
        The stage holds the embedding (first) or the final norm, output head and loss (last).
    micro_batch, seq_len, tp, sequence_parallel, cp, ep, dtype, clock_hz, table, attention, fp8_gemm, dropout, fp8_recipe :
        As for :func:`~hpnsim.training.compute.layer.layer_ops`; the output head runs in BF16.
    cross_entropy : str
        The loss's implementation, as for :func:`head_ops`.

    Returns
    -------
    OpList
        Forward ops in issue order (embedding, ``layer<i>.<op>``..., head), then the backward
        ops in reverse; op names carry their layer.

    Examples
    --------
    >>> from hpnsim.workloads.gpus import get_gpu
    >>> from hpnsim.workloads.models import get
    >>> stage_ops(get("llama3-8b"), get_gpu("h100"), layers=[40])
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: layer: must be in 0..31, got 40
    """
    kwargs = dict(micro_batch=micro_batch, seq_len=seq_len, tp=tp,
                  sequence_parallel=sequence_parallel, cp=cp, clock_hz=clock_hz, table=table)
    parts: list[tuple[str, OpList]] = []
    if first:
        parts.append(("", embedding_ops(model, gpu, **kwargs)))
    cached: dict[bool, OpList] = {}   # dense and MoE layers: one timing each
    for layer in layers:
        if not isinstance(layer, numbers.Integral) or not 0 <= layer < model.layers:
            raise InputError("layer", f"must be in 0..{model.layers - 1}, got {layer!r}")
        moe = model.is_moe_layer(layer)
        if moe not in cached:
            cached[moe] = layer_ops(model, gpu, layer=int(layer), ep=ep, dtype=dtype,
                                    attention=attention, fp8_gemm=fp8_gemm,
                                    dropout=dropout, fp8_recipe=fp8_recipe, **kwargs)
        parts.append((f"layer{layer}.", cached[moe]))
    if last:
        parts.append(("", head_ops(model, gpu, cross_entropy=cross_entropy, **kwargs)))
    forward = [replace(op, name=prefix + op.name) for prefix, ops in parts
               for op in ops.select(phase="forward")]
    backward = [replace(op, name=prefix + op.name) for prefix, ops in reversed(parts)
                for op in ops.select(phase="backward")]
    return OpList(tuple(forward + backward))


def embedding_ops(model: ModelSpec, gpu: GPUSpec, *, micro_batch: int = 1,
                  seq_len: int | None = None, tp: int = 1,
                  sequence_parallel: bool | None = None, cp: int = 1,
                  clock_hz: float | None = None, table=None) -> OpList:
    """The token-embedding lookup (vocab-parallel: each GPU gathers its rows for all ``T``
    tokens) and its backward, a scatter-add into FP32 gradients.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> from hpnsim.workloads.models import get
    >>> [op.bytes for op in embedding_ops(get("llama3-8b"), get_gpu("h100"), seq_len=1).ops]
    [16384.0, 40960.0]
    """
    model._need_transformer()
    _, _, tokens, _ = _tokens(model, micro_batch, seq_len, tp, sequence_parallel, cp)
    build = _Builder(gpu, "bf16", table, clock_hz)
    rows = float(tokens * model.hidden)
    build.raw_memory("embedding", rows * 2 * _ACT_BYTES, rows * (_ACT_BYTES + 8), "embedding")
    return build.result()


def head_ops(model: ModelSpec, gpu: GPUSpec, *, micro_batch: int = 1,
             seq_len: int | None = None, tp: int = 1, sequence_parallel: bool | None = None,
             cp: int = 1, dtype: str = "bf16", clock_hz: float | None = None,
             table=None, cross_entropy: str = "unfused") -> OpList:
    """Final norm, output-head GEMMs and the vocab-parallel cross-entropy loss.

    The vocabulary is split over TP (``ceil(vocab/tp)`` rows per GPU; Megatron's padding to a
    multiple of 128 is left out). The head GEMM runs in ``dtype`` (BF16 by default: FP8 recipes
    keep the output layer in BF16). The loss is ``cross_entropy``'s passes over the logits
    (:mod:`~hpnsim.training.compute.cross_entropy`: ``"unfused"``, ``"fused"`` or ``"te"``).

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> from hpnsim.workloads.models import get
    >>> m = get("llama3-8b")
    >>> ops = head_ops(m, get_gpu("h100"), seq_len=8192)
    >>> ops.flops(kind="gemm") == 3 * 2 * 8192 * m.vocab * m.hidden
    True
    """
    model._need_transformer()
    _, _, tokens, local = _tokens(model, micro_batch, seq_len, tp, sequence_parallel, cp)
    h, vocab = model.hidden, math.ceil(model.vocab / tp)
    build = _Builder(gpu, str(dtype).lower(), table, clock_hz)
    build.memory("final_norm", mem.norm_bytes, local, h, model.norm)
    build.gemm("output_head", tokens, vocab, h)
    logits = float(tokens * vocab)
    passes = cross_entropy_passes(cross_entropy)
    build.memory_passes(
        [(p.name, p.bytes_per_logit * logits, loss_kernel(cross_entropy))
         for p in passes if not p.backward],
        [(p.name, p.bytes_per_logit * logits, loss_kernel(cross_entropy, backward=True))
         for p in passes if p.backward])
    return build.result()


def step_ops(gpu: GPUSpec, *, parameters: int, micro_batches: int = 1,
             fused_grad_accumulation: bool = True, fp8_parameters: int = 0,
             local_parameters: int | None = None, table=None,
             fp8_recipe: str | None = None, fp8_shard: int = 0) -> OpList:
    """Per-iteration work of one GPU after the backward: the optimizer step's kernels over
    ``parameters`` (the GPU's optimizer shard; ``local_parameters``, default the shard, is
    what its gradient buffer holds) as :mod:`~hpnsim.training.compute.optimizer_step` lists
    them (gradient norm, Adam, master-to-model copy, zeroing the gradient buffer), the FP32
    gradient accumulation when not fused into the weight-gradient GEMMs (Megatron's
    ``gradient_accumulation_fusion``, on by default), the FP8 weight casts (once per
    iteration: Transformer Engine caches them across micro-batches; under
    ``fp8_recipe="current"`` each weight's amax pass first, 2 bytes a parameter:
    :mod:`~hpnsim.training.compute.current_scaling`), and the time between
    these kernels (a ``gaps`` op: after the gradient norm's host synchronization).

    ``fp8_shard`` > 0 (``fp8_param_gather``: the weights are FP8 already, ``fp8_shard`` of
    them in the optimizer shard): the master-to-model copy quantizes the shard straight to
    FP8 (Megatron-Core's ``quantize_param_shard`` -> TransformerEngine's
    ``cast_master_weights_to_fp8``, megatron/core/fp8_utils.py at ``d98e8a64dd``), writing 1
    byte instead of 2, after an amax pass over the FP32 master shard under current scaling;
    TransformerEngine does not cast the weights again, and the column-wise copy the backward
    GEMMs need is one FP8 transpose of the gathered weights (``post_all_gather_processing``,
    read 1, write 1 byte) in place of the cast-transpose.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> ops = step_ops(get_gpu("h100"), parameters=10**9, micro_batches=4,
    ...                fused_grad_accumulation=False)
    >>> [op.name for op in ops.ops]
    ['grad_norm', 'adam', 'param_copy', 'zero_grad', 'grad_accumulation', 'gaps']
    >>> ops.select(kind="gaps")[0].shape    # 3 multi-tensor kernels x 48 launches + 2
    (146,)
    """
    parameters = positive_int("parameters", parameters)
    micro_batches = positive_int("micro_batches", micro_batches)
    kernels = [(name, nbytes, name) for name, nbytes in
               step_kernel_bytes(parameters, local_parameters, fp8_shard).items()]
    launches = sum(multi_tensor_launches(parameters) if name in MULTI_TENSOR else 1
                   for name, _, _ in kernels)
    if not fused_grad_accumulation:
        kernels.append(("grad_accumulation",
                        micro_batches * mem.grad_accumulation_bytes(parameters),
                        "grad_accumulation"))
        launches += 1
    if fp8_parameters and fp8_shard:
        if checked_recipe(fp8_recipe) == "current":
            kernels.append(("fp8_master_amax", 4.0 * fp8_shard, "amax"))
            launches += 1
        kernels.append(("fp8_weight_transpose", mem.fp8_transpose_bytes(fp8_parameters),
                        "transpose"))
        launches += 1
    elif fp8_parameters:
        if checked_recipe(fp8_recipe) == "current":
            amax = next(k for k in quantize_kernels(fp8_parameters, both_layouts=True)
                        if k.name == "amax")
            kernels.append(("fp8_weight_amax", amax.bytes, "amax"))
            launches += 1
        kernels.append(("fp8_weight_cast", mem.cast_transpose_bytes(fp8_parameters),
                        "cast_transpose"))
        launches += 1
    out = []
    for name, nbytes, kernel in kernels:
        t = mem.memory_op_time(kernel, nbytes, gpu, table=table)
        out.append(Op(name, "memory", "optimizer", (int(nbytes),), "fp32", 0.0, nbytes,
                      t.seconds))
    out.append(gaps_op(launches, sum(op.seconds for op in out), "optimizer", after_sync=True))
    return OpList(tuple(out))
