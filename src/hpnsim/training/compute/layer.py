"""The operations of one transformer layer on one GPU, each timed from its shape.

:func:`layer_ops` lists, for a :class:`~hpnsim.workloads.models.ModelSpec` layer, one
micro-batch and a sharding, what a Megatron-LM / Transformer Engine layer runs on one GPU:

- tokens: a micro-batch of ``b`` sequences of length ``s`` is ``T = b*s/cp`` tokens per GPU
  under context parallelism (CP); GEMMs see all ``T`` (sequence parallelism all-gathers before
  them), the norms, residual adds and dropout see ``T/tp`` with sequence parallelism (SP) and
  ``T`` without;
- GEMMs (``Y = X W^T``, column-parallel QKV and FC1, row-parallel O and FC2 under tensor
  parallelism, TP): forward ``[T, in] @ [in, out/tp]``; input gradient
  ``[T, out/tp] @ [out/tp, in]``; weight gradient ``[out/tp, T] @ [T, in]``;
- attention: fused (FlashAttention), causal, over the local heads; each CP rank does ``1/cp``
  of the pairs (load-balanced causal CP), and with ``cp > 1`` the copies and softmax
  corrections TransformerEngine's ring attention runs around its steps
  (:mod:`~hpnsim.training.compute.cp_attention_kernels`); or, with ``attention="unfused"``,
  Megatron's core attention before FlashAttention: batched score and context GEMMs, fused
  scale-mask-softmax and dropout with the scores in HBM
  (:mod:`~hpnsim.training.compute.core_attention`);
- MoE layers: router GEMM (unsharded) and its softmax/top-k, token permute and unpermute, the
  local experts (``experts/ep`` of them, each receiving ``T*top_k*ep/experts`` tokens, their
  width sharded by TP) as one grouped GEMM, and the shared experts as a dense MLP;
- memory-bound ops: norms, rotary, SwiGLU or GeLU, residual adds, optional dropout; biases
  are fused into GEMM epilogues (cuBLASLt/Transformer Engine) and cost nothing extra;
- FP8 (``dtype="fp8"``): the four linear layers run FP8 GEMMs of the job's FP8 library
  (:mod:`~hpnsim.training.compute.gemm_library`: cuBLASLt, as TransformerEngine calls it, by
  default); the casts are memory ops, as TransformerEngine 1.x's delayed-scaling modules run
  them (amaxes are computed inside the cast kernels): the QKV and FC1 inputs are cast inside
  the norm kernels (LayerNormLinear) and that FP8 output is transposed in the backward for the
  weight gradient (``fp8_transpose``); the O and FC2 inputs (Linear), the inputs of MoE expert
  and shared-expert FC1s (no fused norm) and every output gradient get a cast-transpose;
  attention and the output head stay BF16; weight casts happen once per iteration
  (``is_first_microbatch``: :func:`~hpnsim.training.compute.stage.step_ops`). With
  ``fp8_recipe="current"``, TransformerEngine 2.x's current scaling instead: each cast's
  amax pass, scale kernel and, under sequence parallelism, the amax all-reduce over TP
  (:mod:`~hpnsim.training.compute.current_scaling`).

The embedding, the output head, the optimizer step and whole pipeline stages are in
:mod:`~hpnsim.training.compute.stage`.

>>> from hpnsim.workloads.gpus import get_gpu
>>> from hpnsim.workloads.models import get
>>> ops = layer_ops(get("llama3-8b"), get_gpu("h100"), seq_len=8192)
>>> [op.name for op in ops.select(phase="forward")][:5]
['input_norm', 'qkv', 'rotary', 'attention', 'o_proj']
>>> round(ops.forward_seconds * 1e3, 2), round(ops.backward_seconds * 1e3, 2)
(6.51, 13.45)
"""

from __future__ import annotations

import math

from hpnsim.errors import InputError
from hpnsim.training.compute import memory_ops as mem
from hpnsim.training.compute.amax_reduction import reduction_latency
from hpnsim.training.compute.attention import attention_time
from hpnsim.training.compute.attention_dropout import fused_dropout_factor
from hpnsim.training.compute.core_attention import attention_kernel, unfused_attention_ops
from hpnsim.training.compute.cp_attention_kernels import cp_attention_passes
from hpnsim.training.compute.current_scaling import (
    NORM_AMAX_FUSED,
    fp8_recipe_for,
    quantize_kernels,
)
from hpnsim.training.compute.gemm import gemm_time
from hpnsim.training.compute.gemm_library import gemm_library
from hpnsim.training.compute.ops import Op, OpList
from hpnsim.training.compute.precision import positive_int
from hpnsim.workloads.gpus import GPUSpec
from hpnsim.workloads.models import ModelSpec

_ACT_BYTES = 2      # activations are BF16 in both recipes (FP8 only inside the GEMMs)
_DTYPES = ("bf16", "fp16", "fp8")


class _Builder:
    """Accumulates forward and backward ops (backward in reverse order of the forward)."""

    def __init__(self, gpu: GPUSpec, dtype: str, table, clock_hz=None, library=None,
                 recipe: str = "delayed", sp_tp: int = 1):
        self.gpu, self.dtype, self.table, self.clock_hz = gpu, dtype, table, clock_hz
        self.library = gemm_library(library)
        # the FP8 recipe, and the TP size when sequence parallelism splits the tokens (else 1)
        self.recipe, self.sp_tp = recipe, sp_tp
        self.forward: list[Op] = []
        self.backward: list[list[Op]] = []   # per forward op, prepended at the end

    def gemm(self, name, m, n, k, *, groups=1, dtype=None, fp8_input_cast=False,
             parallel=None):
        # ``parallel``: "column" or "row" (Megatron's TP linear layers), None (grouped experts)
        dtype = dtype or self.dtype
        if dtype == "fp8" and self.recipe == "current":
            self._current_gemm(name, m, n, k, groups, parallel, norm_input=not fp8_input_cast)
            return
        back: list[Op] = []
        wgrad_prep = []
        if dtype == "fp8":
            # the output gradient is cast (and transposed) once for both backward GEMMs
            back.append(self._memory_op(f"{name}_grad_cast", mem.cast_transpose_bytes(
                groups * m * n), "input_grad", "cast_transpose_bwd"))
            if fp8_input_cast:
                self.forward.append(self._memory_op(f"{name}_input_cast",
                                                    mem.cast_transpose_bytes(groups * m * k),
                                                    "forward", "cast_transpose"))
            else:   # the fused norm wrote one FP8 layout; wgrad needs the other
                wgrad_prep.append(self._memory_op(f"{name}_input_transpose",
                                                  mem.fp8_transpose_bytes(groups * m * k),
                                                  "weight_grad", "transpose_bwd"))
        self.forward.append(self._gemm_op(name, "forward", m, n, k, groups, dtype))
        back.append(self._gemm_op(name, "input_grad", m, k, n, groups, dtype))
        back += wgrad_prep
        back.append(self._gemm_op(name, "weight_grad", n, k, m, groups, dtype))
        self.backward.append(back)

    def _current_gemm(self, name, m, n, k, groups, parallel, norm_input):
        # TE v2.9 under SP: a column-parallel input and a row-parallel output gradient are
        # quantized row-wise on the local tokens, amax all-reduced over TP, gathered in FP8 and
        # transposed; everything else is one cast-transpose (current_scaling's docstring)
        sp = self.sp_tp > 1
        gather_input, gather_grad = sp and parallel == "column", sp and parallel == "row"
        rows = m // self.sp_tp if gather_input else m
        self.forward += self._quantize(f"{name}_input", groups * rows * k, "forward",
                                       gathered=gather_input,
                                       amax_pass=not (norm_input and NORM_AMAX_FUSED))
        self.forward.append(self._gemm_op(name, "forward", m, n, k, groups, "fp8"))
        rows = m // self.sp_tp if gather_grad else m
        back = self._quantize(f"{name}_grad", groups * rows * n, "input_grad",
                              gathered=gather_grad, amax_pass=True)
        if gather_grad:
            back.append(self._memory_op(f"{name}_grad_transpose",
                                        mem.fp8_transpose_bytes(groups * m * n), "input_grad",
                                        "transpose_bwd"))
        back.append(self._gemm_op(name, "input_grad", m, k, n, groups, "fp8"))
        if gather_input:
            back.append(self._memory_op(f"{name}_input_transpose",
                                        mem.fp8_transpose_bytes(groups * m * k), "weight_grad",
                                        "transpose_bwd"))
        back.append(self._gemm_op(name, "weight_grad", n, k, m, groups, "fp8"))
        self.backward.append(back)

    def _quantize(self, name, elements, phase, *, gathered, amax_pass):
        suffix = "" if phase == "forward" else "_bwd"
        ops = []
        for kernel in quantize_kernels(elements, both_layouts=not gathered,
                                       amax_pass=amax_pass):
            if kernel.name == "scale" and gathered:   # the all-reduce sits before the scale
                ops.append(Op(f"{name}_amax_allreduce", "gaps", phase, (1,), "fp32", 0.0,
                              4.0, reduction_latency(self.sp_tp)))
            ops.append(self._memory_op(f"{name}_{kernel.name}", kernel.bytes, phase,
                                       kernel.name + suffix))
        return ops

    def memory(self, name, fn, tokens, width, kernel):
        self.raw_memory(name, fn(tokens, width, _ACT_BYTES, "forward"),
                        fn(tokens, width, _ACT_BYTES, "backward"), kernel)

    def raw_memory(self, name, forward_bytes, backward_bytes, kernel):
        # ``kernel`` is the kernel's name in a kernel table, ``kernel_bwd`` its backward
        self.forward.append(self._memory_op(name, forward_bytes, "forward", kernel))
        self.backward.append([self._memory_op(name, backward_bytes, "input_grad",
                                              f"{kernel}_bwd")])

    def memory_passes(self, forward, backward):
        # kernels that run one after another, given as (name, bytes, kernel) per direction;
        # the backward ones in their own order, after the later ops' backward
        self.forward += [self._memory_op(n, b, "forward", k) for n, b, k in forward]
        self.backward.append([self._memory_op(n, b, "input_grad", k) for n, b, k in backward])

    def attention(self, batch, heads, kv_heads, seq, head_dim, cp, kernel="flash",
                  dropout=False):
        if kernel == "unfused":
            forward, backward = unfused_attention_ops(self.gpu, batch, heads, kv_heads, seq,
                                                      head_dim, dropout=dropout,
                                                      clock_hz=self.clock_hz, table=self.table)
            self.forward += forward
            self.backward.append(backward)
            return
        slower = fused_dropout_factor(self.gpu, kernel, seq) if dropout else 1.0
        for phase, direction in (("forward", "forward"), ("input_grad", "backward")):
            t = attention_time(self.gpu, batch, heads, seq, head_dim, kv_heads=kv_heads,
                               causal=True, direction=direction, clock_hz=self.clock_hz,
                               table=self.table, kernel=kernel)
            op = Op("attention", "attention", phase, (batch, heads, seq, head_dim), "bf16",
                    t.flops / cp, t.bytes / cp, t.seconds / cp * slower)
            if phase == "forward":
                self.forward.append(op)
            else:
                self.backward.append([op])

    def result(self) -> OpList:
        return OpList(tuple(self.forward) + tuple(op for ops in reversed(self.backward)
                                                  for op in ops))

    def _gemm_op(self, name, phase, m, n, k, groups, dtype):
        t = gemm_time(m, n, k, dtype, self.gpu, batch=groups, clock_hz=self.clock_hz,
                      table=self.table, library=self.library)
        shape = (m, n, k) if groups == 1 else (m, n, k, groups)
        return Op(name, "gemm", phase, shape, dtype, t.flops, t.bytes, t.seconds)

    def _memory_op(self, name, nbytes, phase, kernel):
        t = mem.memory_op_time(kernel, nbytes, self.gpu, table=self.table)
        return Op(name, "memory", phase, (int(nbytes),), "bf16", 0.0, t.bytes, t.seconds)


def _shard(field: str, total: int, parts: int) -> int:
    if total % parts:
        raise InputError(field, f"{total} is not divisible by {parts}")
    return total // parts


def _tokens(model, micro_batch, seq_len, tp, sequence_parallel, cp):
    micro_batch = positive_int("micro_batch", micro_batch)
    seq = model.seq_len if seq_len is None else positive_int("seq_len", seq_len)
    tp, cp = positive_int("tp", tp), positive_int("cp", cp)
    tokens = micro_batch * _shard("seq_len", seq, cp)
    sp = tp > 1 if sequence_parallel is None else bool(sequence_parallel)
    if sp and tokens % tp:
        raise InputError("sequence_parallel", f"{tokens} tokens per GPU are not divisible by "
                                              f"tp={tp}")
    local = tokens // tp if sp else tokens
    return micro_batch, seq, tokens, local


def layer_ops(model: ModelSpec, gpu: GPUSpec, *, layer: int = 0, micro_batch: int = 1,
              seq_len: int | None = None, tp: int = 1, sequence_parallel: bool | None = None,
              cp: int = 1, ep: int = 1, dtype: str = "bf16", dropout: bool = False,
              clock_hz: float | None = None, table=None, attention: str = "flash",
              fp8_gemm=None, fp8_recipe: str | None = None) -> OpList:
    """The timed operations of transformer layer ``layer`` for one micro-batch on one GPU.

    Parameters
    ----------
    model : ModelSpec
        A transformer from the model catalog.
    gpu : GPUSpec
        The GPU (catalog entry, or a spec with the compute fields).
    layer : int
        Which layer (MoE layers differ from dense ones).
    micro_batch : int
        Sequences per micro-batch.
    seq_len : int, optional
        Sequence length (defaults to the model's).
    tp, cp, ep : int
        Tensor-, context- and expert-parallel sizes.
    sequence_parallel : bool, optional
        Megatron sequence parallelism (defaults to ``tp > 1``).
    dtype : str
        GEMM dtype of the linear layers: ``"bf16"``, ``"fp16"`` or ``"fp8"``.
    dropout : bool
        Megatron's ``--hidden-dropout`` and ``--attention-dropout`` (0.1 by default in
        Megatron-LM and GPT-3 recipes; 0 in Llama-style ones): the two hidden-state dropouts,
        fused into the residual adds as Megatron runs them, and the attention dropout, inside
        a fused attention kernel (:mod:`~hpnsim.training.compute.attention_dropout`) or as
        the unfused path's own kernel.
    clock_hz : float, optional
        SM clock under load for the GEMMs and attention (a power cap, a measured clock);
        defaults to the GPU's ``sustained_clock_hz``.
    table : KernelTable, optional
        Measured kernels overriding the model's efficiencies on this GPU.
    attention : str
        Core attention kernel: ``"flash"`` (fused FlashAttention), ``"cudnn"`` (fused, cuDNN's:
        TransformerEngine's choice on Hopper) or ``"unfused"`` (Megatron's core attention
        before FlashAttention; not with ``cp > 1``, which runs only through fused attention).
    fp8_gemm : GemmLibrary or str, optional
        The FP8 GEMM library (:mod:`~hpnsim.training.compute.gemm_library`): ``"cublas"``
        (TransformerEngine's cuBLASLt GEMMs, the default) or ``"deepgemm"``.
    fp8_recipe : str, optional
        How the FP8 casts scale: ``"delayed"`` (TransformerEngine 1.x's delayed scaling, the
        default) or ``"current"`` (TransformerEngine 2.x's ``Float8CurrentScaling``,
        :mod:`~hpnsim.training.compute.current_scaling`); ``"current"`` needs ``dtype="fp8"``.

    Examples
    --------
    >>> from hpnsim.workloads.gpus import get_gpu
    >>> from hpnsim.workloads.models import get
    >>> m = get("llama3-70b")
    >>> ops = layer_ops(m, get_gpu("h100"), tp=8, seq_len=8192)
    >>> ops.flops(kind="gemm") == 6 * 8192 * (m.attention_parameters() + m.mlp_parameters()) / 8
    True
    >>> layer_ops(m, get_gpu("a100"), dtype="fp8")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dtype: a100 has no fp8 tensor cores; choose from tf32, bf16, fp16
    """
    model._need_transformer()
    kernel = attention_kernel(attention)
    if kernel == "unfused" and cp != 1:
        raise InputError("attention", "unfused attention with context parallelism: "
                                      "Megatron's CP runs through fused attention only")
    dtype = str(dtype).strip().lower()
    if dtype not in _DTYPES:
        raise InputError("dtype", f"one of {', '.join(_DTYPES)}, got {dtype!r}")
    gpu.tensor_peak(dtype)
    recipe = fp8_recipe_for(dtype, fp8_recipe)
    if not 0 <= layer < model.layers:
        raise InputError("layer", f"must be in 0..{model.layers - 1}, got {layer!r}")
    tp = positive_int("tp", tp)
    heads = _shard("heads", model.heads, tp)
    kv = _kv_heads_per_gpu(model.kv_heads, tp)
    b, seq, tokens, local = _tokens(model, micro_batch, seq_len, tp, sequence_parallel, cp)
    ep = positive_int("ep", ep)
    h, d = model.hidden, model.head_dim
    build = _Builder(gpu, dtype, table, clock_hz, fp8_gemm, recipe, tokens // local)
    norm = mem.norm_bytes  # RMSNorm and LayerNorm move the same bytes

    build.memory("input_norm", norm, local, h, model.norm)
    build.gemm("qkv", tokens, (heads + 2 * kv) * d, h, parallel="column")
    if not model.learned_positions:
        build.memory("rotary", mem.rotary_bytes, tokens, (heads + kv) * d, "rotary")
    build.attention(b, heads, kv, seq, d, cp, kernel, dropout)
    if cp > 1:
        build.memory_passes(*cp_attention_passes(b, seq, heads, kv, d, cp))
    build.gemm("o_proj", tokens, h, heads * d, fp8_input_cast=True, parallel="row")
    _residual(build, "attention", local, h, dropout)
    build.memory("mlp_norm", norm, local, h, model.norm)
    if model.is_moe_layer(layer):
        _moe(build, model, tokens, local, tp, ep)
    else:
        _mlp(build, model, "", tokens, _shard("ffn", model.ffn, tp))
    _residual(build, "mlp", local, h, dropout)
    return build.result()


def _residual(build: _Builder, part: str, local: int, hidden: int, dropout: bool) -> None:
    """The residual add closing sub-layer ``part``; with hidden dropout, Megatron's fused
    bias-dropout-add (``bias_dropout_fusion``, on by default in Megatron-LM v2 and Megatron-Core;
    NeMo's ``bias_dropout_add_fusion``): the forward kernel also writes the one-byte mask, and
    the backward applies it to the branch's gradient (dropout's backward kernel) beside the
    residual's gradient sum."""
    name = f"{part}_residual"
    if not dropout:
        build.memory(name, mem.residual_bytes, local, hidden, "residual")
        return
    add = mem.residual_bytes(local, hidden, _ACT_BYTES, "forward")
    build.memory_passes(
        [(name, add + mem.dropout_mask_bytes(local, hidden), "residual")],
        [(f"{part}_dropout", mem.dropout_bytes(local, hidden, _ACT_BYTES, "backward"),
          "dropout_bwd"),
         (name, mem.residual_bytes(local, hidden, _ACT_BYTES, "backward"), "residual_bwd")])


def _kv_heads_per_gpu(kv_heads: int, tp: int) -> int:
    if kv_heads % tp == 0:
        return kv_heads // tp
    if tp % kv_heads == 0:
        return 1   # fewer KV heads than TP ranks: each rank holds (and computes) a copy of one
    raise InputError("tp", f"must divide kv_heads={kv_heads} or be a multiple of it, got {tp}")


def _mlp(build: _Builder, model: ModelSpec, prefix: str, tokens: int, width: int,
         groups: int = 1) -> None:
    gated = model.gated_mlp
    # a dense FC1 reads the fused norm's output; expert and shared-expert FC1s a BF16 tensor
    parallel = (None, None) if prefix == "expert_" else ("column", "row")
    build.gemm(f"{prefix}fc1", tokens, (2 if gated else 1) * width, model.hidden, groups=groups,
               fp8_input_cast=bool(prefix), parallel=parallel[0])
    # a non-gated MLP's activation is one elementwise kernel of GeLU's bytes: GeLU with its
    # bias fused, or Nemotron's squared ReLU, ``torch.pow(relu(x), 2)`` under NeMo's
    # ``jit_fuser`` (torch.compile; nemo/collections/nlp/modules/common/megatron/utils.py at
    # r2.0.0rc1) and Megatron-Core's (``megatron/core/activations.py``)
    act = "swiglu" if gated else "gelu"
    build.memory(f"{prefix}{act}", mem.swiglu_bytes if gated else mem.gelu_bytes,
                 tokens * groups, width, act)
    build.gemm(f"{prefix}fc2", tokens, model.hidden, width, groups=groups, fp8_input_cast=True,
               parallel=parallel[1])


def _moe(build: _Builder, model: ModelSpec, tokens: int, local: int, tp: int, ep: int) -> None:
    h, experts, k = model.hidden, model.experts, model.top_k
    local_experts = _shard("experts", experts, ep)
    build.gemm("router", local, experts, h, dtype="bf16")
    scores = float(local * experts * 4)   # FP32 logits in, probabilities out
    build.raw_memory("router_softmax_topk", 2 * scores, 2 * scores, "softmax_topk")
    routed = tokens * k   # token copies this GPU's experts process (balanced routing)
    copies = float(routed * h * _ACT_BYTES)
    build.raw_memory("permute", 2 * copies, 2 * copies, "permute")
    per_expert = math.ceil(routed * ep / experts)
    _mlp(build, model, "expert_", per_expert, _shard("expert_ffn", model.expert_ffn, tp),
         groups=local_experts)
    build.raw_memory("unpermute", 2 * copies, 2 * copies, "permute")
    if model.shared_experts:
        _mlp(build, model, "shared_", tokens,
             _shard("expert_ffn", model.shared_experts * model.expert_ffn, tp))
