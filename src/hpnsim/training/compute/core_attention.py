"""Attention as the framework ran it: fused (FlashAttention or cuDNN), or Megatron's unfused
core attention.

Three kernels compute a layer's core attention (the score and value products between the QKV and
output projections), chosen by :data:`ATTENTION_KERNELS`:

- ``"flash"``: one fused kernel per direction (:func:`~hpnsim.training.compute.attention.attention_time`):
  FlashAttention-3's measured efficiencies on Hopper and Blackwell, FlashAttention-2's on Ampere;
  the scores never reach HBM and a causal mask skips the masked half.
- ``"cudnn"``: TransformerEngine's ``FusedAttention`` (cuDNN's fused attention), the same fused
  algorithm at cuDNN's measured efficiencies on Hopper. TransformerEngine's backend selection
  (``get_attention_backend``, ``transformer_engine/pytorch/attention``) disables FlashAttention
  "to give FusedAttention preference on Hopper+ for performance reasons" wherever cuDNN's
  arbitrary-sequence-length BF16 kernel supports the shape, so this is what Megatron-Core and
  NeMo run on H100/H800. On Ampere that preference does not apply and TransformerEngine runs
  FlashAttention-2: ``"cudnn"`` there times as ``"flash"``.
- ``"flash2"``: FlashAttention-2 on every GPU, at its own measured Hopper curves (the
  FlashAttention-2 bars of the same figures): what TransformerEngine before v1.11 (the first
  with FlashAttention-3, 2024-10-08; v1.9 accepts flash-attn 2.0.6 to 2.5.8) runs on Hopper
  when ``NVTE_FUSED_ATTN=0`` switches cuDNN's kernel off. On Ampere it is ``"flash"``.
- ``"unfused"``: Megatron-LM's ``CoreAttention`` before FlashAttention (``megatron/model/transformer.py``
  of v2.x; Megatron-Core's local ``DotProductAttention``): the scores are materialized in HBM.
  Per micro-batch, with ``B = batch x heads`` score matrices of ``s_q x s_kv``:

  =========================  ==========================================  =====================
  kernel                     forward                                     backward
  =========================  ==========================================  =====================
  ``scores`` (baddbmm)       ``Q K^T``: ``B x [s_q, d] @ [d, s_kv]``     ``dQ = dS K``, ``dK = dS^T Q``
  ``softmax`` (fused scale,  read scores, write probabilities            read probabilities and
  mask, softmax)                                                         their gradient, write dS
  ``dropout``                read, write, one-byte mask                  read dP and mask, write
  ``context`` (bmm)          ``P V``: ``B x [s_q, s_kv] @ [s_kv, d]``    ``dP = dO V^T``, ``dV = P^T dO``
  =========================  ==========================================  =====================

  The GEMMs are timed by the GEMM model as batched GEMMs (its HBM traffic: both operands and the
  output once per matrix); the causal mask is applied by the softmax, so the full square is
  computed (twice a causal flash kernel's FLOPs). Grouped-query K and V are expanded to every
  query head first (a copy; its backward sums the heads' gradients), as Megatron does.

>>> from hpnsim.workloads.gpus import get_gpu
>>> fwd, bwd = unfused_attention_ops(get_gpu("a100"), 1, 2, 2, 4, 8)
>>> [op.name for op in fwd]
['attention_scores', 'attention_softmax', 'attention_dropout', 'attention_context']
>>> [op.name for op in bwd]   # two GEMMs per product: the gradient of each operand
['attention_context', 'attention_context', 'attention_dropout', 'attention_softmax', 'attention_scores', 'attention_scores']
"""

from __future__ import annotations

from hpnsim.errors import InputError
from hpnsim.training.compute import memory_ops as mem
from hpnsim.training.compute.gemm import gemm_time
from hpnsim.training.compute.ops import Op
from hpnsim.training.compute.precision import positive_int
from hpnsim.workloads.gpus import GPUSpec

#: Core-attention kernels a job may run (TrainJob ``attention``).
ATTENTION_KERNELS = ("flash", "cudnn", "flash2", "unfused")
#: The unfused kernels that are batched GEMMs (shape ``(M, N, K, matrices)``).
UNFUSED_GEMMS = ("attention_scores", "attention_context")
_ACT = 2   # BF16/FP16 scores, probabilities and activations


def attention_kernel(name) -> str:
    """The checked kernel name.

    >>> attention_kernel("sdpa")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: attention: one of flash, cudnn, flash2, unfused, got 'sdpa'
    """
    key = str(name).strip().lower()
    if key not in ATTENTION_KERNELS:
        raise InputError("attention", f"one of {', '.join(ATTENTION_KERNELS)}, got {name!r}")
    return key


def unfused_attention_ops(gpu: GPUSpec, batch: int, heads: int, kv_heads: int, seq: int,
                          head_dim: int, *, dropout: bool = True, dtype: str = "bf16",
                          clock_hz: float | None = None, table=None) -> tuple[list[Op], list[Op]]:
    """Forward and backward kernels of Megatron's unfused core attention (module docstring).

    Parameters
    ----------
    gpu : GPUSpec
    batch, heads, kv_heads : int
        Sequences; query heads and key/value heads on this GPU.
    seq, head_dim : int
        Sequence length (queries and keys) and head dimension.
    dropout : bool
        Attention dropout (Megatron's default ``--attention-dropout 0.1``).
    dtype : str
        ``"bf16"`` or ``"fp16"``.
    clock_hz, table :
        As for :func:`~hpnsim.training.compute.gemm.gemm_time`.

    Returns
    -------
    (list of Op, list of Op)
        The forward kernels in issue order and the backward ones (phase ``input_grad``) in
        theirs; every op has kind ``attention``.

    Examples
    --------
    HBM bytes of the softmax: scores read and probabilities written, ``2 x B x s^2 x 2``:

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> fwd, _ = unfused_attention_ops(get_gpu("a100"), 2, 16, 16, 1024, 64)
    >>> fwd[1].bytes == 2 * (2 * 16) * 1024**2 * 2
    True
    >>> unfused_attention_ops(get_gpu("a100"), 1, 2, 2, 4, 8, dtype="fp8")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dtype: unfused attention runs in bf16 or fp16, got 'fp8'
    """
    if str(dtype).lower() not in ("bf16", "fp16"):
        raise InputError("dtype", f"unfused attention runs in bf16 or fp16, got {dtype!r}")
    batch, heads = positive_int("batch", batch), positive_int("heads", heads)
    kv_heads, seq = positive_int("kv_heads", kv_heads), positive_int("seq", seq)
    d = positive_int("head_dim", head_dim)
    mats = batch * heads

    def gemm(name, phase, m, n, k):
        t = gemm_time(m, n, k, dtype, gpu, batch=mats, clock_hz=clock_hz, table=table)
        return Op(name, "attention", phase, (m, n, k, mats), dtype, t.flops, t.bytes, t.seconds)

    def memory(name, phase, nbytes, kernel):
        t = mem.memory_op_time(kernel, nbytes, gpu, table=table)
        return Op(name, "attention", phase, (int(nbytes),), dtype, 0.0, t.bytes, t.seconds)

    forward, backward = [], []
    if kv_heads < heads:
        # K and V copied to every query head: read the KV heads, write the expanded copies
        expand = 2.0 * batch * seq * d * (kv_heads + heads) * _ACT
        forward.append(memory("attention_kv_expand", "forward", expand, "kv_expand"))
    forward += [
        gemm("attention_scores", "forward", seq, seq, d),
        memory("attention_softmax", "forward", mem.softmax_bytes(mats * seq, seq, _ACT),
               "scaled_masked_softmax"),
    ]
    if dropout:
        forward.append(memory("attention_dropout", "forward",
                              mem.dropout_bytes(mats * seq, seq, _ACT), "dropout"))
    forward.append(gemm("attention_context", "forward", seq, d, seq))
    # backward, in reverse: dP = dO V^T and dV = P^T dO; dropout; softmax; dQ and dK
    backward += [gemm("attention_context", "input_grad", seq, seq, d),
                 gemm("attention_context", "input_grad", seq, d, seq)]
    if dropout:
        backward.append(memory("attention_dropout", "input_grad",
                               mem.dropout_bytes(mats * seq, seq, _ACT, "backward"),
                               "dropout_bwd"))
    backward += [memory("attention_softmax", "input_grad",
                        mem.softmax_bytes(mats * seq, seq, _ACT, "backward"),
                        "scaled_masked_softmax_bwd"),
                 gemm("attention_scores", "input_grad", seq, d, seq),
                 gemm("attention_scores", "input_grad", seq, d, seq)]
    if kv_heads < heads:
        reduce = 2.0 * batch * seq * d * (kv_heads + heads) * _ACT
        backward.append(memory("attention_kv_expand", "input_grad", reduce, "kv_expand_bwd"))
    return forward, backward
