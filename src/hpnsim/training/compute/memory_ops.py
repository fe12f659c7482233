"""Memory-bound operations: time = bytes moved / achievable HBM bandwidth.

Elementwise and reduction kernels (norms, activations, rotary, residual adds, dropout, casts,
the optimizer step, gradient accumulation, an unfused softmax) do a few FLOPs per byte, far
below any GPU's ridge point, so their time is their HBM traffic at the bandwidth a streaming
kernel reaches, plus the shortest duration of such a kernel: both fitted, on A100 and Hopper,
to vidur's measured norm, rotary, activation and residual-add kernels
(:func:`~hpnsim.training.compute.calibration.memory_calibration`), and on Hopper
TransformerEngine's FP8 cast-transpose (and transpose) to its measured kernel, and the
unfused and fused cross-entropy's passes, forward and backward apart, to Megatron-Core's
measured loss (linkedin/Liger-Kernel's benchmark rows); other kernels
and parts use :data:`HBM_EFFICIENCY` of the datasheet figure and no floor. Each ``*_bytes`` function
counts the bytes one such kernel reads and writes, for one direction; the formulas assume the
usual fused kernels (Apex/Transformer Engine norms, fused SwiGLU, fused rotary, fused Adam)
and no cache reuse between kernels.

>>> from hpnsim.workloads.gpus import get_gpu
>>> t = memory_op_time("rmsnorm", norm_bytes(8192, 4096, 2), get_gpu("h100"))
>>> t.bytes, round(t.seconds * 1e6, 1)
(134217728.0, 80.6)
"""

from __future__ import annotations

from dataclasses import dataclass

from hpnsim.errors import InputError
from hpnsim.training.compute.calibration import memory_calibration
from hpnsim.training.compute.precision import positive_int, positive_number
from hpnsim.workloads.gpus import GPUSpec

#: Fraction of datasheet HBM bandwidth a large streaming kernel sustains. Source: a STREAM
#: triad and device-to-device copy on an H100 SXM (80 GB HBM3, torch 2.11) measured 3.09 and
#: 3.02 TB/s of 3.35 (92% and 90%; public benchmark log, see docs/compute.md); we take 0.90 for
#: every part without a fitted calibration (:func:`hbm_efficiency`).
HBM_EFFICIENCY = 0.90
#: catalog part -> the measured part whose elementwise-kernel fit it uses (H800 and H200: the
#: Hopper memory system of H100; each keeps its own datasheet bandwidth)
_MEASURED_PART = {"a100": "a100", "h100": "h100", "h800": "h100", "h200": "h100"}

_DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True)
class MemoryOpTiming:
    """One memory-bound kernel: its name, HBM bytes and time.

    Attributes
    ----------
    name : str
        Operation name (``"rmsnorm"``, ``"swiglu"``...).
    bytes : float
        HBM bytes read plus written.
    seconds : float
        Modelled (or table-measured) time.
    """

    name: str
    bytes: float
    seconds: float


def memory_op_time(name: str, nbytes: float, gpu: GPUSpec, *, table=None) -> MemoryOpTiming:
    """Time of a memory-bound kernel moving ``nbytes`` on ``gpu``.

    A :class:`~hpnsim.training.compute.kernel_tables.KernelTable` with ``memory:<name>`` rows
    for this GPU replaces the bandwidth by its measured GB/s, interpolated in log-bytes.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> e, floor = hbm_efficiency(get_gpu("b200"))    # no measurement: 0.9 of 8 TB/s
    >>> memory_op_time("adam", 30e9, get_gpu("b200")).seconds == 30e9 / (e * 8e12) + floor
    True
    >>> memory_op_time("adam", 0, get_gpu("h100"))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: bytes: must be a positive number, got 0
    """
    nbytes = positive_number("bytes", nbytes)
    efficiency, floor_s = hbm_efficiency(gpu, name)
    if table is not None:
        measured = table.memory_bandwidth(gpu, name, nbytes)
        if measured is not None:
            return MemoryOpTiming(name, nbytes, nbytes / measured)
    return MemoryOpTiming(name, nbytes, floor_s + nbytes / (gpu.memory_bandwidth * efficiency))


def hbm_efficiency(gpu: GPUSpec, kernel: str = "") -> tuple[float, float]:
    """(fraction of datasheet HBM bandwidth, shortest kernel seconds) of elementwise kernel
    ``kernel`` on ``gpu``: fitted to measured kernels on A100 and Hopper (its own fit or its
    family's; a backward kernel, ``<name>_bwd``, its own where it was measured, else its
    forward's), else (:data:`HBM_EFFICIENCY`, 0): kernels never measured (Adam, dropout)
    stream at the STREAM-measured fraction.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> hbm_efficiency(get_gpu("h800"), "rmsnorm") == hbm_efficiency(get_gpu("h100"), "rmsnorm")
    True
    >>> hbm_efficiency(get_gpu("b200"), "rmsnorm"), hbm_efficiency(get_gpu("h100"), "adam")
    ((0.9, 0.0), (0.9, 0.0))
    >>> h100 = get_gpu("h100")   # the loss's backward was measured, RMSNorm's was not
    >>> hbm_efficiency(h100, "cross_entropy_unfused_bwd") != hbm_efficiency(h100, "cross_entropy_unfused")
    True
    >>> hbm_efficiency(h100, "rmsnorm_bwd") == hbm_efficiency(h100, "rmsnorm")
    True
    """
    part = _MEASURED_PART.get(gpu.name)
    fitted = None
    if part:
        fitted = memory_calibration(part, kernel) or memory_calibration(
            part, kernel.removesuffix("_bwd"))
    if fitted is None:
        return HBM_EFFICIENCY, 0.0
    return fitted.efficiency, fitted.floor_s


def _direction(direction: str) -> str:
    if direction not in _DIRECTIONS:
        raise InputError("direction", f"one of {', '.join(_DIRECTIONS)}, got {direction!r}")
    return direction


def _elements(tokens: int, width: int) -> float:
    return float(positive_int("tokens", tokens) * positive_int("width", width))


def norm_bytes(tokens: int, hidden: int, act_bytes: int, direction: str = "forward") -> float:
    """RMSNorm or LayerNorm over ``tokens x hidden``: forward reads x, writes y; backward reads
    x and dy, writes dx (the weight-gradient partial sums are per-CTA, negligible).

    >>> norm_bytes(10, 100, 2), norm_bytes(10, 100, 2, "backward")
    (4000.0, 6000.0)
    """
    n = _elements(tokens, hidden) * act_bytes
    return 2 * n if _direction(direction) == "forward" else 3 * n


def swiglu_bytes(tokens: int, ffn: int, act_bytes: int, direction: str = "forward") -> float:
    """SwiGLU ``silu(gate) * up`` on ``tokens x ffn``: forward reads gate and up, writes the
    product; backward reads gate, up and dy, writes dgate and dup.

    >>> swiglu_bytes(10, 100, 2), swiglu_bytes(10, 100, 2, "backward")
    (6000.0, 10000.0)
    """
    n = _elements(tokens, ffn) * act_bytes
    return 3 * n if _direction(direction) == "forward" else 5 * n


def gelu_bytes(tokens: int, ffn: int, act_bytes: int, direction: str = "forward") -> float:
    """GeLU (with its bias fused) on ``tokens x ffn``: forward reads x, writes y; backward reads
    x and dy, writes dx.

    >>> gelu_bytes(10, 100, 2, "backward")
    6000.0
    """
    n = _elements(tokens, ffn) * act_bytes
    return 2 * n if _direction(direction) == "forward" else 3 * n


def rotary_bytes(tokens: int, qk_width: int, act_bytes: int, direction: str = "forward") -> float:
    """Fused rotary embedding of q and k (``qk_width`` = q and k columns): read, write; the
    backward is the same rotation of the gradients.

    >>> rotary_bytes(10, 100, 2)
    4000.0
    """
    _direction(direction)
    return 2 * _elements(tokens, qk_width) * act_bytes


def residual_bytes(tokens: int, hidden: int, act_bytes: int, direction: str = "forward") -> float:
    """Residual add (or the backward sum of the two branches' gradients): read two, write one.

    >>> residual_bytes(10, 100, 2)
    6000.0
    """
    _direction(direction)
    return 3 * _elements(tokens, hidden) * act_bytes


def dropout_bytes(tokens: int, hidden: int, act_bytes: int, direction: str = "forward") -> float:
    """Dropout: forward reads x, writes y and a one-byte mask; backward reads dy and the mask,
    writes dx.

    >>> dropout_bytes(10, 100, 2), dropout_bytes(10, 100, 2, "backward")
    (5000.0, 5000.0)
    """
    _direction(direction)
    n = _elements(tokens, hidden)
    return n * (2 * act_bytes + 1)


def dropout_mask_bytes(tokens: int, hidden: int) -> float:
    """The one-byte-per-element mask a fused dropout writes in the forward (PyTorch's boolean
    mask, saved for the backward).

    >>> dropout_mask_bytes(10, 100)
    1000.0
    """
    return _elements(tokens, hidden)


def bias_bytes(tokens: int, width: int, act_bytes: int, direction: str = "forward") -> float:
    """An unfused bias add: forward reads x, writes y; backward reduces dy over tokens (reads
    it once). Transformer Engine and cuBLASLt fuse the bias into the GEMM epilogue; the layer
    model counts it only when asked for unfused biases.

    >>> bias_bytes(10, 100, 2), bias_bytes(10, 100, 2, "backward")
    (4000.0, 2000.0)
    """
    n = _elements(tokens, width) * act_bytes
    return 2 * n if _direction(direction) == "forward" else n


def softmax_bytes(rows: int, columns: int, act_bytes: int, direction: str = "forward") -> float:
    """An unfused (non-flash) attention softmax over ``rows x columns`` scores: forward reads
    scores, writes probabilities; backward reads probabilities and their gradient, writes the
    scores' gradient.

    >>> softmax_bytes(10, 100, 2, "backward")
    6000.0
    """
    n = _elements(rows, columns) * act_bytes
    return 2 * n if _direction(direction) == "forward" else 3 * n


def cast_transpose_bytes(elements: int) -> float:
    """A BF16 tensor cast to FP8 in both layouts (Transformer Engine's fused cast-transpose:
    Hopper FP8 GEMMs need K-major operands, so the forward and the backward GEMMs each want one
    layout): read 2 bytes, write 1 + 1 per element.

    >>> cast_transpose_bytes(1000)
    4000.0
    """
    return 4.0 * positive_int("elements", elements)


def fp8_transpose_bytes(elements: int) -> float:
    """An FP8 tensor transposed (Transformer Engine's ``fp8_transpose``: the FP8 output of a
    fused norm, transposed for the weight-gradient GEMM in the backward of LayerNormLinear):
    read 1, write 1 byte per element.

    >>> fp8_transpose_bytes(1000)
    2000.0
    """
    return 2.0 * positive_int("elements", elements)


def adam_step_bytes(parameters: int) -> float:
    """One fused Adam step per parameter with FP32 master weights, FP32 main gradients and BF16
    model weights (Megatron-LM's distributed optimizer): read gradient, master, m, v (16 B);
    write master, m, v (12 B) and the BF16 weight (2 B): 30 bytes.

    >>> adam_step_bytes(1)
    30.0
    """
    return 30.0 * positive_int("parameters", parameters)


def grad_accumulation_bytes(parameters: int) -> float:
    """Adding a micro-batch's BF16 weight gradient into the FP32 main gradient when the add is
    not fused into the weight-gradient GEMM: read 4 + 2, write 4 bytes per parameter.

    >>> grad_accumulation_bytes(1)
    10.0
    """
    return 10.0 * positive_int("parameters", parameters)
