"""Dtypes, their sizes, and the checks every compute-model entry point shares.

A dtype names both the storage of a tensor and the tensor-core rate of a GEMM that reads it:
``"fp8"`` is E4M3/E5M2 (one byte; Hopper and later), ``"bf16"``/``"fp16"`` two bytes, ``"tf32"``
a GEMM on fp32 storage (four bytes) at the TF32 tensor rate, ``"fp32"`` plain storage (optimizer
state, main gradients; never a tensor-core rate here).

>>> element_bytes("bf16"), element_bytes("fp8")
(2, 1)
"""

from __future__ import annotations

import numbers

from hpnsim.errors import InputError
from hpnsim.workloads.gpus import GPUSpec

#: bytes per element of each dtype
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def element_bytes(dtype: str, field: str = "dtype") -> int:
    """Bytes per element of ``dtype``.

    >>> element_bytes("int4")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dtype: unknown dtype 'int4'; choose from fp32, tf32, bf16, fp16, fp8
    """
    key = str(dtype).strip().lower()
    if key not in DTYPE_BYTES:
        raise InputError(field, f"unknown dtype {dtype!r}; choose from {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[key]


def true_or_false(field: str, value) -> bool:
    """``value`` if it is a bool, else :class:`InputError` naming ``field``.

    >>> true_or_false("dropout", "yes")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dropout: true or false, got 'yes'
    """
    if not isinstance(value, bool):
        raise InputError(field, f"true or false, got {value!r}")
    return value


def positive_int(field: str, value) -> int:
    """``value`` as an int if it is a positive integer, else :class:`InputError` naming ``field``.

    >>> positive_int("m", 4096)
    4096
    >>> positive_int("k", 0)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: k: must be a positive integer, got 0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise InputError(field, f"must be a positive integer, got {value!r}")
    return int(value)


def positive_number(field: str, value) -> float:
    """``value`` as a float if it is a positive finite number, else :class:`InputError`.

    >>> positive_number("bytes", 1e6)
    1000000.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < float("inf"):
        raise InputError(field, f"must be a positive number, got {value!r}")
    return float(value)


def require_compute_fields(gpu: GPUSpec) -> GPUSpec:
    """Refuse a GPU spec that lacks the fields the compute model needs.

    >>> from hpnsim.workloads.gpus import GPUSpec
    >>> require_compute_fields(GPUSpec("mine", 1e15, 8e10, 3e12, 9e11, 0.5))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: gpu: mine lacks architecture, sm_count, sustained_clock_hz, tensor_peaks (needed by the per-operation compute model)
    """
    missing = [name for name in ("architecture", "sm_count", "sustained_clock_hz", "tensor_peaks")
               if not getattr(gpu, name)]
    if missing:
        raise InputError("gpu", f"{gpu.name} lacks {', '.join(missing)} "
                                "(needed by the per-operation compute model)")
    return gpu
