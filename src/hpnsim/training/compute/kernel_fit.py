"""Fit the compute model's calibration to measured kernels, and its error on held-out ones.

GEMM. For each measured ``[m,k] @ [k,n]`` the model's kernel plan
(:func:`~hpnsim.training.compute.gemm.kernel_plan`: tile, split-K, waves, K blocks) gives its
work per SM; the compute side is ``work / (peak_per_SM x eta[class]) + floor`` and the memory
side ``bytes / (bandwidth x e_mem) + floor_mem``, the longer one wins. Given which side a row is
on, both are linear in their unknowns (``1/eta`` per :class:`ShapeClass`, the floors,
``1/e_mem``), so each is a non-negative least-squares fit of *relative* error (rows weighted by
``1 / measured``); the sides are reassigned with the fitted constants and refitted until no
row changes side. The plan does not depend on the constants (every candidate tile of one shape
is in the same class), so the fit is deterministic and small.

A library measured only at a few large shapes (cuBLASLt FP8: every public timing is a
training-size GEMM) cannot fix a per-class efficiency or a floor. :func:`fit_gemm_scaled` then
fits one factor ``s`` on the measured rows and keeps a measured reference calibration's class
structure, floor and memory side: ``eta[c] = s x eta_ref[c]`` (cuBLASLt FP8 on cuBLAS's own
16-bit fit: the same library's tile and wave heuristics).

Memory-bound kernels: ``seconds = floor + bytes / (bandwidth x e)`` per kernel name (an
RMSNorm kernel and a residual add reach different fractions of HBM bandwidth for the bytes the
model counts), the same weighted fit.

Rows are split by the model they were measured for: the fit sees some models' rows, the error
is reported on the others' (:func:`error_summary`).

>>> from hpnsim.workloads.gpus import get_gpu
>>> rows = [MeasuredKernel("a", "memory:rmsnorm", (b,), 2e-6 + b / 2e12) for b in (1e6, 1e8)]
>>> fit = fit_memory(rows, get_gpu("h100"), held_out=())["kernels"]["rmsnorm"]
>>> round(fit["efficiency"] * 3.35e12 / 1e12, 6), round(fit["floor_us"], 6)
(2.0, 2.0)
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from hpnsim.errors import InputError
from hpnsim.training.compute.calibration import KERNEL_FAMILY, ShapeClass
from hpnsim.training.compute.gemm import kernel_plan
from hpnsim.training.compute.memory_ops import HBM_EFFICIENCY
from hpnsim.training.compute.precision import element_bytes
from hpnsim.workloads.gpus import GPUSpec

#: bounds of the M (token) classes the errors are reported by: decode-like, short, training-like
M_CLASSES = ((1, 128), (128, 1024), (1024, 1 << 40))
_ROUNDS = 50
#: kernels moving at least this many bytes are also reported apart (``errors_large``): the
#: sizes of a training step's norms and activations (16 MB: 1024 tokens x 8192 x BF16)
LARGE_BYTES = 16 * 2 ** 20


@dataclass(frozen=True)
class MeasuredKernel:
    """One measured kernel: the model it was timed for, its op, shape and seconds."""

    model: str
    op: str
    shape: tuple[int, ...]
    seconds: float


def read_measurements(text: str, source: str = "kernel data") -> list[MeasuredKernel]:
    """Rows of an imported kernel file (``#`` lines are its provenance header): each row's
    ``model``, ``op``, ``shape`` and measured ``time_ms``.

    >>> read_measurements("# src\\nop,shape,time_ms,model\\ngemm,2x3x4,0.5,x\\n")
    [MeasuredKernel(model='x', op='gemm', shape=(2, 3, 4), seconds=0.0005)]
    """
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    rows = []
    for i, row in enumerate(csv.DictReader(io.StringIO("\n".join(lines)))):
        try:
            shape = tuple(int(x) for x in row["shape"].split("x"))
            rows.append(MeasuredKernel(row["model"], row["op"], shape,
                                       float(row["time_ms"]) * 1e-3))
        except (KeyError, TypeError, ValueError):
            raise InputError(source, f"row {i + 1}: needs model, op, shape and time_ms") \
                from None
    return rows


def fit_gemm(rows: list[MeasuredKernel], gpu: GPUSpec, dtype: str,
             held_out: tuple[str, ...]) -> dict:
    """Fit the GEMM calibration of ``gpu`` / ``dtype`` on the rows of models not in
    ``held_out``; returns the calibration entry with its errors on both sets."""
    gemms = [r for r in rows if r.op == "gemm"]
    a_bytes = element_bytes(dtype)
    per_sm = gpu.tensor_peak(dtype) / gpu.sm_count
    classes = list(ShapeClass)
    compute_x = np.zeros((len(gemms), len(classes) + 1))
    memory_x = np.ones((len(gemms), 2))
    for i, r in enumerate(gemms):
        m, n, k = r.shape
        plan = kernel_plan(m, n, k, 1, gpu.architecture, gpu.sm_count, a_bytes)
        compute_x[i, classes.index(plan.shape_class)] = plan.work / per_sm
        compute_x[i, -1] = 1.0
        memory_x[i, 0] = ((m * k + k * n) * a_bytes + m * n * 2) / gpu.memory_bandwidth
    y = np.array([r.seconds for r in gemms])
    train = np.array([r.model not in held_out for r in gemms])
    compute_c = np.r_[np.full(len(classes), 1 / 0.8), 0.0]
    memory_c = np.array([1 / 0.9, 0.0])
    side = None
    for _ in range(_ROUNDS):
        new_side = compute_x @ compute_c >= memory_x @ memory_c
        if side is not None and np.array_equal(new_side, side):
            break
        side = new_side
        compute_c = _weighted_nnls(compute_x[side & train], y[side & train])
        memory_c = _weighted_nnls(memory_x[~side & train], y[~side & train])
    if np.any(compute_c[:-1] <= 0) or memory_c[0] <= 0:
        raise ValueError(f"{gpu.name} {dtype}: a shape class or side has no fitted rows")
    predicted = np.maximum(compute_x @ compute_c, memory_x @ memory_c)
    return {
        "eta": {c.value: float(1 / compute_c[i]) for i, c in enumerate(classes)},
        "floor_us": float(compute_c[-1] * 1e6),
        "memory_efficiency": float(1 / memory_c[0]),
        "memory_floor_us": float(memory_c[1] * 1e6),
        "fitted_on": sorted({r.model for r in gemms if r.model not in held_out}),
        "held_out": sorted(held_out),
        "errors": error_summary(gemms, predicted, train),
    }


def fit_gemm_scaled(rows: list[MeasuredKernel], gpu: GPUSpec, dtype: str,
                    held_out: tuple[str, ...], reference: dict, reference_name: str) -> dict:
    """Fit one factor on ``reference``'s issue efficiencies (a calibration entry of the same
    library) to the GEMM rows of groups not in ``held_out``; floor and memory side are the
    reference's. Returns a calibration entry like :func:`fit_gemm`'s, with ``scale`` and
    ``scaled_from``.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> ref = {"eta": {"sub_wave": 0.5, "few_waves": 0.5, "many_waves": 0.5}, "floor_us": 0.0,
    ...        "memory_efficiency": 0.9, "memory_floor_us": 0.0}
    >>> g = get_gpu("h100")     # a kernel whose block-steps run at exactly 0.4 of the peak
    >>> work = kernel_plan(8192, 8192, 8192, 1, "hopper", 132, 1).work
    >>> rows = [MeasuredKernel("a", "gemm", (8192,) * 3, work / (0.4 * g.tensor_peak("fp8") / 132))]
    >>> fit = fit_gemm_scaled(rows, g, "fp8", (), ref, "ref")
    >>> round(fit["eta"]["many_waves"], 9), fit["scaled_from"]
    (0.4, 'ref')
    """
    gemms = [r for r in rows if r.op == "gemm"]
    classes = list(ShapeClass)
    a_bytes = element_bytes(dtype)
    per_sm = gpu.tensor_peak(dtype) / gpu.sm_count
    floor = reference["floor_us"] * 1e-6
    base = np.zeros(len(gemms))     # compute seconds at s = 1, floor excluded
    memory = np.zeros(len(gemms))
    for i, r in enumerate(gemms):
        m, n, k = r.shape
        plan = kernel_plan(m, n, k, 1, gpu.architecture, gpu.sm_count, a_bytes)
        base[i] = plan.work / (per_sm * reference["eta"][plan.shape_class.value])
        memory[i] = (((m * k + k * n) * a_bytes + m * n * 2)
                     / (gpu.memory_bandwidth * reference["memory_efficiency"])
                     + reference["memory_floor_us"] * 1e-6)
    y = np.array([r.seconds for r in gemms])
    train = np.array([r.model not in held_out for r in gemms])
    if not train.any():
        raise ValueError(f"{gpu.name} {dtype}: no fitted rows")
    # relative least squares of base / s + floor = y over the fitted rows: closed form in 1/s
    w = 1.0 / y[train]
    inverse = float(np.sum(base[train] * (y[train] - floor) * w * w)
                    / np.sum((base[train] * w) ** 2))
    predicted = np.maximum(base * inverse + floor, memory)
    scale = 1.0 / inverse
    return {
        "eta": {c.value: float(scale * reference["eta"][c.value]) for c in classes},
        "floor_us": float(reference["floor_us"]),
        "memory_efficiency": float(reference["memory_efficiency"]),
        "memory_floor_us": float(reference["memory_floor_us"]),
        "scale": scale, "scaled_from": reference_name,
        "fitted_on": sorted({r.model for r in gemms if r.model not in held_out}),
        "held_out": sorted(held_out),
        "errors": error_summary(gemms, predicted, train),
    }


def fit_memory(rows: list[MeasuredKernel], gpu: GPUSpec, held_out: tuple[str, ...]) -> dict:
    """Fit ``floor + bytes / (bandwidth x efficiency)`` per kernel name to the memory-bound rows
    of models not in ``held_out``. A kernel measured only on held-out models is checked
    against the fit of its family (:data:`~hpnsim.training.compute.calibration.KERNEL_FAMILY`:
    LayerNorm against RMSNorm) or, without one, against the unfitted default (``"stream"``:
    :data:`~hpnsim.training.compute.memory_ops.HBM_EFFICIENCY`); each entry has its errors."""
    mem = [r for r in rows if r.op.startswith("memory:")]
    x = np.array([[r.shape[0] / gpu.memory_bandwidth, 1.0] for r in mem])
    y = np.array([r.seconds for r in mem])
    train = np.array([r.model not in held_out for r in mem])
    names = np.array([r.op.removeprefix("memory:") for r in mem])
    fits, kernels = {}, {}
    for name in sorted(set(names)):
        mask = (names == name) & train
        if mask.any():
            fits[name] = _weighted_nnls(x[mask], y[mask])
    for name in sorted(set(names)):
        mask = names == name
        family = name if name in fits else KERNEL_FAMILY.get(name, "stream")
        c = fits.get(family, np.array([1 / HBM_EFFICIENCY, 0.0]))
        entry = {"efficiency": float(1 / c[0]), "floor_us": float(c[1] * 1e6)}
        if family != name:
            entry = {"uses": family}
        entry["errors"] = _summary(x[mask] @ c, y[mask], train[mask])
        large = mask & (x[:, 0] * gpu.memory_bandwidth >= LARGE_BYTES)
        entry["errors_large"] = _summary(x[large] @ c, y[large], train[large])
        kernels[name] = entry
    return {"kernels": kernels,
            "fitted_on": sorted({r.model for r in mem if r.model not in held_out}),
            "held_out": sorted(held_out)}


def error_summary(rows: list[MeasuredKernel], predicted, train) -> dict:
    """Errors of ``predicted`` against ``rows`` by M class (``"M<128"``, ...), fitted and
    held-out rows apart; see :func:`_summary` for the figures."""
    y = np.array([r.seconds for r in rows])
    m = np.array([r.shape[0] for r in rows])
    out = {}
    for lo, hi in M_CLASSES:
        mask = (m >= lo) & (m < hi)
        name = f"M<{hi}" if lo == 1 else (f"M>={lo}" if hi > 1 << 30 else f"{lo}<=M<{hi}")
        out[name] = _summary(predicted[mask], y[mask], train[mask])
    return out


def _summary(predicted, measured, train) -> dict:
    # per set: rows, median and 90th percentile of |error|, max |error|, median signed error
    # (predicted / measured - 1: negative = the model is faster than the kernel)
    out = {}
    for name, mask in (("fitted", train), ("held_out", ~train)):
        err = predicted[mask] / measured[mask] - 1
        if len(err) == 0:
            continue
        out[name] = {"rows": int(len(err)),
                     "median_abs": round(float(np.median(np.abs(err))), 4),
                     "p90_abs": round(float(np.quantile(np.abs(err), 0.9)), 4),
                     "max_abs": round(float(np.max(np.abs(err))), 4),
                     "median": round(float(np.median(err)), 4)}
    return out


def _weighted_nnls(x, y):
    # relative-error least squares: each row scaled by 1 / measured
    w = 1.0 / y
    return nnls(x * w[:, None], y * w)[0]
