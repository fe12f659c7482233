"""Which FP8 GEMM library a job's linear layers run, and so which measured kernels time them.

Hopper FP8 GEMMs come from different libraries whose kernels differ by more than the model's
shape classes can express, so each has its own fitted calibration
(:mod:`~hpnsim.training.compute.calibration`):

- :attr:`GemmLibrary.CUBLAS`: cuBLASLt, what every framework hpnsim models runs. Megatron-LM
  and NeMo call TransformerEngine, whose FP8 GEMMs are ``cublasLtMatmul`` with per-tensor
  scales (``transformer_engine/common/gemm/cublaslt_gemm.cu``); ``torch._scaled_mm`` with
  tensor-wise scales calls the same cuBLASLt kernels, which is how the public measurements
  were taken. The default.
- :attr:`GemmLibrary.DEEPGEMM`: DeepSeek's DeepGEMM (hand-written SM90 kernels, 1x128 and
  128x128 block scales), as DeepSeek-V3-style stacks run it; measured by alibaba/InferSim on an
  H800.

The 16-bit GEMMs are cuBLAS whatever the option says: both measured libraries differ only in
their FP8 kernels here.

>>> gemm_library("deepgemm") is GemmLibrary.DEEPGEMM
True
>>> gemm_library(None) is GemmLibrary.CUBLAS
True
>>> gemm_library("cutlass")
Traceback (most recent call last):
...
hpnsim.errors.InputError: fp8_gemm: one of cublas, deepgemm, got 'cutlass'
"""

from __future__ import annotations

from enum import Enum

from hpnsim.errors import InputError


class GemmLibrary(Enum):
    """An FP8 GEMM library with its own measured calibration (see the module docstring)."""

    CUBLAS = "cublas"
    DEEPGEMM = "deepgemm"


#: what a job runs unless it says otherwise: TransformerEngine's cuBLASLt GEMMs (Megatron-LM,
#: NeMo; training/frameworks.py)
DEFAULT_LIBRARY = GemmLibrary.CUBLAS


def gemm_library(value) -> GemmLibrary:
    """The library named by ``value`` (a :class:`GemmLibrary`, its name, or None for the
    default); :class:`~hpnsim.errors.InputError` naming ``fp8_gemm`` otherwise."""
    if value is None:
        return DEFAULT_LIBRARY
    if isinstance(value, GemmLibrary):
        return value
    text = str(value).strip().lower()
    for library in GemmLibrary:
        if library.value == text:
            return library
    raise InputError("fp8_gemm", f"one of {', '.join(x.value for x in GemmLibrary)}, "
                                 f"got {value!r}")
