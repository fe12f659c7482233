"""The compute model's calibration, fitted to measured kernels and shipped as package data.

``hpnsim/data/kernels_calibration.json`` holds, per measured part and dtype class, the
constants :mod:`~hpnsim.training.compute.gemm` and :mod:`~hpnsim.training.compute.memory_ops`
use: the GEMM issue efficiency by shape class, the shortest GEMM kernel, the GEMM's own
streaming efficiency, and the effective HBM bandwidth and shortest duration of elementwise
kernels. ``tools/import_kernels.py`` rebuilds it from the public per-kernel measurements (their
repository, path, commit and licence are in the file's ``sources``) with
:mod:`~hpnsim.training.compute.kernel_fit`; the held-out errors it reports are in the file and
in docs/compute.md. Parts without a measurement fall back to the MAMF-ceiling calibration.

>>> gemm_calibration("h100", "16bit").fitted_on[:1]
('Qwen/Qwen-72B',)
>>> gemm_calibration("h100", "fp8-cublas").fitted_on[0]
'pytorch/pytorch#143465 16384x8192x1280'
>>> memory_calibration("b200", "rmsnorm") is None
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources

DATA_FILE = "kernels_calibration.json"


class ShapeClass(Enum):
    """How a GEMM's output tiles meet the SMs; each class has its own fitted efficiency.

    ``SUB_WAVE``: the grid of the largest tiles does not fill the SMs once (small M or N:
    smaller tiles, split-K); ``FEW_WAVES``: 1 to :data:`FEW_WAVES_MAX` waves of the largest
    tiles; ``MANY_WAVES``: more (long-running kernels, the sustained clock).
    """

    SUB_WAVE = "sub_wave"
    FEW_WAVES = "few_waves"
    MANY_WAVES = "many_waves"


#: an elementwise kernel never fitted on its own uses the fit of the measured kernel that
#: reads and writes alike: LayerNorm RMSNorm's row reduction (checked on held-out Phi-2 rows,
#: docs/compute.md); TransformerEngine's FP8 transpose its cast-transpose (the same tiled
#: kernel, TransformerEngine#138: "similar perf optimizations"). GeLU is not mapped to SwiGLU:
#: on Phi-2 that fit is 45-51% too slow.
KERNEL_FAMILY = {"layernorm": "rmsnorm", "transpose": "cast_transpose"}

#: waves of the largest tiles up to which a GEMM is in ``FEW_WAVES``
FEW_WAVES_MAX = 4


@dataclass(frozen=True)
class GemmCalibration:
    """Fitted GEMM constants of one part and dtype class.

    Attributes
    ----------
    eta : dict
        ShapeClass -> issue efficiency (fraction of the SM's tensor peak per block-step).
    floor_s : float
        Time added to every compute-bound GEMM kernel (its shortest duration: launch of the
        grid, the epilogue's drain).
    memory_efficiency, memory_floor_s : float
        The memory-bound side: HBM bytes at ``memory_efficiency`` x datasheet bandwidth, plus
        ``memory_floor_s``.
    fitted_on, held_out : tuple of str
        The measured models whose rows the fit used, and those it was checked on.
    """

    eta: dict
    floor_s: float
    memory_efficiency: float
    memory_floor_s: float
    fitted_on: tuple[str, ...] = ()
    held_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemoryCalibration:
    """Fitted elementwise-kernel constants of one part: ``seconds = floor_s + bytes /
    (efficiency x datasheet bandwidth)``."""

    efficiency: float
    floor_s: float
    fitted_on: tuple[str, ...] = ()
    held_out: tuple[str, ...] = ()


@cache
def calibration_data() -> dict:
    """The parsed calibration file (read once)."""
    text = resources.files("hpnsim").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def gemm_calibration(part: str, dtype_class: str) -> GemmCalibration | None:
    """The fitted GEMM calibration of a measured part (``"h100"``, ``"a100"``, ``"h800"``) and
    dtype class (``"16bit"``; FP8 per library: ``"fp8-cublas"`` on H100, ``"fp8-deepgemm"``
    on H800), or None where nothing was measured."""
    entry = calibration_data()["gemm"].get(f"{part}/{dtype_class}")
    if entry is None:
        return None
    return GemmCalibration({c: entry["eta"][c.value] for c in ShapeClass},
                           entry["floor_us"] * 1e-6, entry["memory_efficiency"],
                           entry["memory_floor_us"] * 1e-6, tuple(entry["fitted_on"]),
                           tuple(entry["held_out"]))


@cache
def memory_calibration(part: str, kernel: str) -> MemoryCalibration | None:
    """The fitted calibration of elementwise kernel ``kernel`` on a measured part: its own fit
    where it was measured (``"rmsnorm"``, ``"rotary"``, ``"swiglu"``, ``"residual"``; on H100
    also TransformerEngine's ``"cast_transpose"``), its
    family's (:data:`KERNEL_FAMILY`) otherwise, None for a kernel or part never measured.

    >>> memory_calibration("h100", "layernorm") == memory_calibration("h100", "rmsnorm")
    True
    >>> memory_calibration("h100", "adam") is None
    True
    """
    entry = calibration_data()["memory"].get(part)
    if entry is None:
        return None
    kernels = entry["kernels"]
    name = kernel if kernel in kernels and "uses" not in kernels[kernel] \
        else KERNEL_FAMILY.get(kernel)
    if name not in kernels:
        return None
    fit = kernels[name]
    return MemoryCalibration(fit["efficiency"], fit["floor_us"] * 1e-6,
                             tuple(entry["fitted_on"]), tuple(entry["held_out"]))
