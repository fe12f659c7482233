"""Attention dropout inside a fused attention kernel: how much longer the kernel runs.

A fused kernel draws its dropout mask in registers (Philox, regenerated in the backward from
the seed), so dropout adds no HBM traffic, only the random numbers and the masking beside the
matrix products. Its cost is measured, forward and backward together, at the same shapes with
and without dropout (p = 0.1):

- cuDNN's fused attention on Hopper (TransformerEngine's ``FusedAttention``, the kernel it runs
  on sm90): NVIDIA/TransformerEngine#3312 (bzantium, 2026-08-04; the same row in PR #3313),
  H200, TransformerEngine 2.15.0 with the cuDNN backend forced, BF16, ``sbhd`` layout (the one
  Megatron-Core passes), 4 sequences of 4,096 tokens, 16 heads of 128, median of 50 runs:
  0.594 ms without dropout, 0.614 ms with it. (The packed ``thd`` layout pays 1.26x there:
  cuDNN routes it to an older engine; Megatron's padded batches do not use it.)
- FlashAttention on Ampere: Dao et al., FlashAttention (NeurIPS 2022), appendix E.6, tables
  15-20: A100 40 GB, FP16, batch 16, 8 heads of 64, forward plus backward, ms without / with
  dropout 0.1: 2.29 / 2.52 at 1,024 tokens, 30.09 / 36.70 at 4,096, 470.51 / 583.45 at
  16,384. These are FlashAttention-1's kernels; no measurement of FlashAttention-2 with and
  without dropout was found in text, so FlashAttention-2 (and ``"cudnn"``, which times as it
  on Ampere, and ``"flash2"`` on Hopper) takes FlashAttention-1's ratio, interpolated in log
  sequence length and held at the ends.
- FlashAttention-3 (``"flash"`` on Hopper and later) has no dropout (Dao-AILab/flash-attention#1251);
  such a job is refused: TransformerEngine would run cuDNN's kernel (``attention="cudnn"``).
  Blackwell has no measurement at Megatron's layout in text (FlashAttention-4's "20-40%" on
  GB200, Dao-AILab/flash-attention#2597, is a range without shapes): refused there too.

>>> from hpnsim.workloads.gpus import get_gpu
>>> round(fused_dropout_factor(get_gpu("h100"), "cudnn", 4096), 4)
1.0337
>>> round(fused_dropout_factor(get_gpu("a100"), "flash", 4096), 4)
1.2197
"""

from __future__ import annotations

import math

from hpnsim.errors import InputError
from hpnsim.training.compute.precision import require_compute_fields
from hpnsim.workloads.gpus import GPUSpec

#: cuDNN fused attention on Hopper, forward + backward ms without and with dropout 0.1
#: (TransformerEngine#3312, module docstring).
CUDNN_HOPPER_MS = (0.594, 0.614)
#: FlashAttention on A100, forward + backward ms without and with dropout 0.1, by sequence
#: length (Dao et al. 2022, appendix E.6, module docstring).
FLASH_AMPERE_MS = {1024: (2.29, 2.52), 4096: (30.09, 36.70), 16384: (470.51, 583.45)}


def fused_dropout_factor(gpu: GPUSpec, kernel: str, seq_kv: int) -> float:
    """Time with attention dropout over time without, of fused kernel ``kernel``
    (``"flash"`` or ``"cudnn"``) on ``gpu`` at ``seq_kv`` keys per query.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> fused_dropout_factor(get_gpu("h100"), "flash", 4096)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dropout: FlashAttention-3 (attention flash on h100) has no dropout (Dao-AILab/flash-attention#1251); give attention cudnn, TransformerEngine's kernel on Hopper
    """
    architecture = require_compute_fields(gpu).architecture
    if architecture not in ("ampere", "hopper"):
        raise InputError("dropout", f"attention dropout is measured on Ampere and Hopper "
                                    f"only, not on {gpu.name} ({architecture})")
    if architecture == "hopper" and kernel != "flash2":
        if kernel != "cudnn":
            raise InputError("dropout", f"FlashAttention-3 (attention {kernel} on {gpu.name}) "
                                        "has no dropout (Dao-AILab/flash-attention#1251); "
                                        "give attention cudnn, TransformerEngine's kernel on "
                                        "Hopper")
        without, with_ = CUDNN_HOPPER_MS
        return with_ / without
    points = sorted(FLASH_AMPERE_MS)
    x = math.log2(min(max(seq_kv, points[0]), points[-1]))
    for lo, hi in zip(points, points[1:], strict=False):
        if math.log2(hi) >= x:
            r_lo = FLASH_AMPERE_MS[lo][1] / FLASH_AMPERE_MS[lo][0]
            r_hi = FLASH_AMPERE_MS[hi][1] / FLASH_AMPERE_MS[hi][0]
            w = (x - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
            return r_lo + w * (r_hi - r_lo)
    raise AssertionError("unreachable: x is clamped to the points")
