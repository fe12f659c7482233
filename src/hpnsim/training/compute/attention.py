"""Fused (FlashAttention) attention time: FLOPs by mask, at a measured fraction of peak.

FLOPs. Per head, the forward pass is two matmuls over the (query, key) pairs the mask keeps:
``S = Q K^T`` (``2 * d`` per pair) and ``O = P V`` (``2 * d_v``), so ``2 * (d + d_v)`` per kept
pair, ``4 * d`` when ``d_v = d``. A full mask keeps ``s_q * s_kv`` pairs; a causal mask, with
queries aligned to the end of the keys (FlashAttention >= 2.1), keeps
``s_q * (s_kv - s_q) + s_q * (s_q + 1) / 2``: about half the square. The backward pass runs five
matmuls over the same pairs (S recomputed, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q),
2.5x the forward FLOPs (Dao 2023, FlashAttention-2, section 3.1.2).

Efficiency. The fraction of the dense BF16 peak the kernel reaches, by sequence length, head
dimension, mask and direction, is read from published kernel benchmarks
(:data:`HOPPER_EFFICIENCY`) and interpolated in log2(sequence length).

>>> attention_flops(1, 1, 4, 8, causal=False)   # 16 pairs x 4 x 8
512.0
>>> attention_flops(1, 1, 4, 8, causal=True)    # 10 pairs
320.0
>>> attention_flops(1, 1, 4, 8, causal=True, direction="backward")
800.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.training.compute.memory_ops import HBM_EFFICIENCY
from hpnsim.training.compute.precision import (
    element_bytes,
    positive_int,
    positive_number,
    require_compute_fields,
)
from hpnsim.workloads.gpus import GPUSpec

_DIRECTIONS = ("forward", "backward")
#: backward FLOPs / forward FLOPs of FlashAttention (five matmuls against two)
BACKWARD_FLOP_RATIO = 2.5

#: Sequence lengths of the benchmark points below.
SEQ_POINTS = (512, 1024, 2048, 4096, 8192, 16384)
#: FlashAttention-3 on H100 80GB SXM5, BF16, TFLOP/s as labelled on the bars of Shah et al.
#: 2024 ("FlashAttention-3", arXiv 2407.08608, Figs. 5 and 6; batch x seqlen = 16k tokens,
#: hidden 2048), divided by the 989.4 TFLOPS dense peak. Keys: (direction, causal, head_dim).
_FA3_H100_TFLOPS = {
    ("forward", False, 128): (467, 565, 625, 638, 646, 648),
    ("forward", True, 128): (292, 423, 521, 579, 602, 616),
    ("forward", False, 64): (333, 392, 460, 476, 496, 497),
    ("backward", False, 128): (316, 424, 501, 542, 559, 561),
}
#: H100 SXM5's dense BF16 tensor peak, TFLOP/s (NVIDIA H100 datasheet), the figures' divisor
H100_DENSE_BF16_TFLOPS = 989.4


def _fractions_of_peak(tflops: dict) -> dict:
    """Measured TFLOP/s curves as fractions of H100's dense BF16 peak."""
    return {key: tuple(v / H100_DENSE_BF16_TFLOPS for v in values)
            for key, values in tflops.items()}


HOPPER_EFFICIENCY = _fractions_of_peak(_FA3_H100_TFLOPS)
#: cuDNN's fused attention on the same H100 and the same inputs, TFLOP/s as labelled on the
#: cuDNN bars of the same figures of Shah et al. 2024 (Figs. 5 and 6: cuDNN 9 beside
#: FlashAttention-2, Triton and FlashAttention-3); what TransformerEngine runs on Hopper
#: (:mod:`~hpnsim.training.compute.core_attention`, ``"cudnn"``).
_CUDNN_H100_TFLOPS = {
    ("forward", False, 128): (497, 574, 617, 609, 600, 595),
    ("forward", True, 128): (315, 410, 484, 518, 529, 539),
    ("forward", False, 64): (335, 373, 395, 408, 412, 413),
    ("backward", False, 128): (305, 408, 465, 499, 518, 516),
}
CUDNN_HOPPER_EFFICIENCY = _fractions_of_peak(_CUDNN_H100_TFLOPS)
#: FlashAttention-2 on the same H100 and inputs, TFLOP/s as labelled on the FlashAttention-2
#: bars of the same figures of Shah et al. 2024 (Figs. 5 and 6), read from the same text
#: transcriptions of those figures as the two curves above (their FA3 and cuDNN values match
#: these curves bar for bar, docs/compute.md); what TransformerEngine
#: before v1.11 (which added FlashAttention-3, 2024-10-08) runs on Hopper when cuDNN's fused
#: attention is switched off (``NVTE_FUSED_ATTN=0``, as NeMo-Framework-Launcher's 24.07
#: ``conf/config.yaml`` sets for every run); ``"flash2"``.
_FA2_H100_TFLOPS = {
    ("forward", False, 128): (309, 350, 362, 368, 370, 370),
    ("forward", True, 128): (191, 260, 298, 319, 333, 335),
    ("forward", False, 64): (282, 306, 318, 321, 322, 324),
    ("backward", False, 128): (214, 260, 291, 310, 318, 322),
}
FA2_HOPPER_EFFICIENCY = _fractions_of_peak(_FA2_H100_TFLOPS)
#: fused kernel -> its measured Hopper curves
_HOPPER_CURVES = {"flash": HOPPER_EFFICIENCY, "cudnn": CUDNN_HOPPER_EFFICIENCY,
                  "flash2": FA2_HOPPER_EFFICIENCY}
#: FlashAttention-2 on A100 reaches at most 73% of peak in the forward pass (Dao 2023,
#: abstract: "50-73% of the theoretical maximum FLOPs/s on A100"); the A100 curves are the
#: Hopper curves scaled so the forward, full-mask, head-dim-128 plateau is 0.73.
AMPERE_FORWARD_PLATEAU = 0.73


@dataclass(frozen=True)
class AttentionTiming:
    """Modelled time of one fused attention call (all heads of one micro-batch on one GPU).

    Attributes
    ----------
    flops, bytes : float
        Matmul FLOPs over the kept pairs; HBM bytes of Q, K, V, O (and gradients).
    efficiency : float
        Fraction of the dense tensor peak assumed.
    seconds : float
        The larger of the compute and memory times.
    """

    flops: float
    bytes: float
    efficiency: float
    seconds: float


def kept_pairs(seq_q: int, seq_kv: int, causal: bool) -> float:
    """(query, key) pairs a mask keeps; causal aligns the queries to the end of the keys.

    >>> kept_pairs(4, 4, True), kept_pairs(2, 4, True), kept_pairs(4, 4, False)
    (10.0, 7.0, 16.0)
    """
    if not causal:
        return float(seq_q) * seq_kv
    if seq_q > seq_kv:
        raise InputError("seq_q", f"a causal query block longer than its keys ({seq_q} > {seq_kv})")
    return float(seq_q) * (seq_kv - seq_q) + seq_q * (seq_q + 1) / 2.0


def attention_flops(batch: int, heads: int, seq_q: int, head_dim: int, *,
                    seq_kv: int | None = None, causal: bool = True, direction: str = "forward",
                    head_dim_v: int | None = None) -> float:
    """Matmul FLOPs of fused attention over ``batch x heads`` (query) heads.

    Parameters
    ----------
    batch, heads : int
        Sequences and query heads (grouped-query attention shares K/V but not the FLOPs).
    seq_q, head_dim : int
        Query length and Q/K head dimension.
    seq_kv : int, optional
        Key length (defaults to ``seq_q``).
    causal : bool
        Causal mask (bottom-right aligned) or full.
    direction : str
        ``"forward"`` or ``"backward"`` (2.5x forward).
    head_dim_v : int, optional
        V head dimension (defaults to ``head_dim``).

    Examples
    --------
    >>> attention_flops(2, 32, 8192, 128, causal=False) == 4 * 2 * 32 * 8192**2 * 128
    True
    """
    batch, heads = positive_int("batch", batch), positive_int("heads", heads)
    seq_q, head_dim = positive_int("seq_q", seq_q), positive_int("head_dim", head_dim)
    seq_kv = seq_q if seq_kv is None else positive_int("seq_kv", seq_kv)
    head_dim_v = head_dim if head_dim_v is None else positive_int("head_dim_v", head_dim_v)
    forward = 2.0 * (head_dim + head_dim_v) * kept_pairs(seq_q, seq_kv, causal) * batch * heads
    return forward * (BACKWARD_FLOP_RATIO if _direction(direction) == "backward" else 1.0)


def attention_efficiency(gpu: GPUSpec, seq_kv: int, head_dim: int, *, causal: bool = True,
                         direction: str = "forward", kernel: str = "flash") -> float:
    """Fraction of the dense BF16 peak fused attention reaches.

    Hopper: the measured curves of ``kernel`` (``"flash"``: FlashAttention-3, ``"cudnn"``:
    cuDNN's fused attention, what TransformerEngine runs there, ``"flash2"``:
    FlashAttention-2, what TransformerEngine before v1.11 runs with cuDNN's switched off); Blackwell uses the Hopper
    fractions (no per-shape figures were at hand); Ampere scales FlashAttention-3's to
    FlashAttention-2's 73% plateau whichever kernel is named (TransformerEngine runs
    FlashAttention-2 on Ampere). Missing
    measurements are derived, each by one stated rule: a causal backward is the full-mask
    backward times the forward's causal/full ratio at that length; head dim 64's backward is
    head dim 128's times the forward's 64/128 ratio; head dims between 64 and 128 interpolate
    in log2, outside they clamp; lengths outside 512..16k clamp.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> round(attention_efficiency(get_gpu("h100"), 16384, 128, causal=False), 3)
    0.655
    >>> round(attention_efficiency(get_gpu("h100"), 8192, 128, causal=True, direction="backward"), 3)
    0.527
    >>> round(attention_efficiency(get_gpu("h100"), 8192, 128, kernel="cudnn"), 3)   # 529 / 989.4
    0.535
    >>> round(attention_efficiency(get_gpu("h100"), 8192, 128, kernel="flash2"), 3)  # 333 / 989.4
    0.337
    """
    seq_kv, head_dim = positive_int("seq_kv", seq_kv), positive_int("head_dim", head_dim)
    direction = _direction(direction)
    architecture = require_compute_fields(gpu).architecture
    if kernel not in _HOPPER_CURVES:
        raise InputError("kernel", f"one of {', '.join(_HOPPER_CURVES)}, got {kernel!r}")
    measured = HOPPER_EFFICIENCY if architecture == "ampere" else _HOPPER_CURVES[kernel]
    x = np.log2(np.clip(seq_kv, SEQ_POINTS[0], SEQ_POINTS[-1]))
    points = np.log2(SEQ_POINTS)

    def curve(d: str, c: bool, hd: int) -> float:
        if (d, c, hd) in measured:
            return float(np.interp(x, points, measured[(d, c, hd)]))
        if d == "backward" and c:
            return curve(d, False, hd) * curve("forward", True, hd) / curve("forward", False, hd)
        if d == "backward" and hd == 64:
            return curve(d, c, 128) * curve("forward", c, 64) / curve("forward", c, 128)
        if d == "forward" and c and hd == 64:
            return curve(d, False, 64) * curve(d, True, 128) / curve(d, False, 128)
        raise AssertionError((d, c, hd))

    w = float(np.clip(np.log2(head_dim) - 6.0, 0.0, 1.0))   # 0 at 64, 1 at 128
    eff = (1 - w) * curve(direction, causal, 64) + w * curve(direction, causal, 128)
    if architecture == "ampere":
        eff *= AMPERE_FORWARD_PLATEAU / HOPPER_EFFICIENCY[("forward", False, 128)][-1]
    return eff


def attention_time(gpu: GPUSpec, batch: int, heads: int, seq_q: int, head_dim: int, *,
                   kv_heads: int | None = None, seq_kv: int | None = None, causal: bool = True,
                   direction: str = "forward", dtype: str = "bf16",
                   clock_hz: float | None = None, table=None,
                   kernel: str = "flash") -> AttentionTiming:
    """Time of one fused attention call on ``gpu`` (``kernel``: ``"flash"`` or ``"cudnn"``,
    :func:`attention_efficiency`).

    Memory side: Q, O (and dO, dQ) of the query heads, K, V (and dK, dV) of the ``kv_heads``
    once each. ``clock_hz`` (default ``gpu.sustained_clock_hz``, the conditions of the
    measurements) scales the compute side. FP8 attention is refused: Transformer Engine's FP8
    recipe keeps attention in BF16 unless asked, and no FP8 attention curve for head dim <= 128
    is modelled.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> t = attention_time(get_gpu("h100"), 1, 64, 8192, 128, kv_heads=8)
    >>> round(t.flops / 1e12, 3), round(t.seconds * 1e3, 3)
    (1.1, 1.827)
    >>> attention_time(get_gpu("h100"), 1, 64, 8192, 128, dtype="fp8")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dtype: fp8 attention is not modelled; choose bf16 or fp16
    """
    if str(dtype).lower() not in ("bf16", "fp16"):
        raise InputError("dtype", f"{dtype} attention is not modelled; choose bf16 or fp16")
    kv_heads = heads if kv_heads is None else positive_int("kv_heads", kv_heads)
    seq_kv_ = seq_q if seq_kv is None else seq_kv
    flops = attention_flops(batch, heads, seq_q, head_dim, seq_kv=seq_kv_, causal=causal,
                            direction=direction)
    eff = attention_efficiency(gpu, seq_kv_, head_dim, causal=causal, direction=direction,
                               kernel=kernel)
    if table is not None:
        measured = table.attention_efficiency(gpu, direction, causal, dtype,
                                              (batch, heads, seq_kv_, head_dim))
        if measured is not None:
            eff = measured
    per_token_q, per_token_kv = heads * head_dim, kv_heads * head_dim
    tensors = 2.0 * (seq_q * per_token_q + seq_kv_ * per_token_kv)   # Q, O; K, V
    traffic = batch * tensors * element_bytes(dtype) * (2.0 if direction == "backward" else 1.0)
    clock = gpu.sustained_clock_hz if clock_hz is None else positive_number("clock_hz", clock_hz)
    compute_s = flops / (gpu.tensor_peak(dtype) * eff * clock / gpu.sustained_clock_hz)
    memory_s = traffic / (gpu.memory_bandwidth * HBM_EFFICIENCY)
    return AttentionTiming(flops, traffic, eff, max(compute_s, memory_s))


def _direction(direction: str) -> str:
    if direction not in _DIRECTIONS:
        raise InputError("direction", f"one of {', '.join(_DIRECTIONS)}, got {direction!r}")
    return direction
