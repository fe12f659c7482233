"""A profiled run's GPU kernels as a kernel table: classify, shape, time, and the idle gaps.

Each GPU kernel of a :class:`~hpnsim.training.compute.profiler_trace.ProfilerTrace` falls in
one :class:`KernelClass` by its name: communication (NCCL's ``nccl*``, DeepEP's dispatch and
combine), attention (FlashAttention, cuDNN/
xFormers fMHA), GEMM (cuBLAS, CUTLASS, ``*gemm*``), or memory-bound (everything else, copies
and memsets included). The kernels one op instance launched, of one class, are one
measurement (a flash backward's three kernels, a GEMM and its split-K reduction), and it
becomes a kernel-table row (:mod:`~hpnsim.training.compute.kernel_tables`) where the launching
op recorded the shapes it needs:

- GEMM: ``aten::mm`` ``[[M,K],[K,N]]``, ``aten::addmm`` ``[bias, [M,K], [K,N]]``,
  ``aten::_scaled_mm`` (FP8), ``aten::bmm``/``aten::baddbmm`` ``[[B,M,K],[B,K,N]]`` (recorded
  as ``(B*M) x N x K``: the same FLOPs and, for whole tiles, the same tiles): ``gemm``, TFLOP/s;
- attention: ``aten::_scaled_dot_product_flash_attention`` (``[B,H,S,D]`` and ``is_causal``)
  and its backward: ``attention_{fwd,bwd}_{causal,full}``, TFLOP/s as
  :func:`~hpnsim.training.compute.attention.attention_flops` counts them;
- memory-bound: LayerNorm, fused RMSNorm, residual add, GeLU, dropout and their backward ops:
  ``memory:<kernel>``, bytes as the :mod:`~hpnsim.training.compute.memory_ops` formulas count
  them, GB/s.

Repeated measurements of one (op, shape, dtype) become their median. Communication kernels
and kernels without recorded shapes are counted, not tabled; the time no kernel, copy or memset runs on
a device between its first and last activity is the idle-gap total.

>>> from hpnsim.training.compute.profiler_trace import CpuOp
>>> classify("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64"), classify("ncclDevKernel_AllReduce")
(<KernelClass.GEMM: 'gemm'>, <KernelClass.COMMUNICATION: 'communication'>)
>>> gemm_row(CpuOp("aten::addmm", 0, ((4096,), (2048, 1024), (1024, 4096)), ("c10::BFloat16",) * 3))
('gemm', (2048, 4096, 1024), 'bf16', 17179869184.0)
"""

from __future__ import annotations

import csv
import io
import math
import re
import statistics
from dataclasses import dataclass, field
from enum import Enum

from hpnsim.errors import InputError
from hpnsim.training.compute.attention import attention_flops
from hpnsim.training.compute.kernel_tables import COLUMNS
from hpnsim.training.compute.memory_ops import (
    dropout_bytes,
    gelu_bytes,
    norm_bytes,
    residual_bytes,
)
from hpnsim.training.compute.profiler_trace import CpuOp, GpuEvent, ProfilerTrace


class KernelClass(Enum):
    """What a GPU kernel does, by its name."""

    GEMM = "gemm"
    ATTENTION = "attention"
    MEMORY = "memory"
    COMMUNICATION = "communication"


#: NCCL's kernels, and DeepEP's dispatch/combine kernels (which wait on the network as NCCL's
#: do: their duration is communication, not memory traffic)
_COMMUNICATION = re.compile(r"^nccl|::ep::(internode|intranode)", re.I)
_ATTENTION = re.compile(r"flash|fmha|attn|attention", re.I)
_GEMM = re.compile(r"gemm|xmma|cublas|s16816|s1688|wgmma|matmul", re.I)
#: catalog GPUs by what device names contain (``NVIDIA H100 80GB HBM3``)
GPU_NAMES = ("h100", "h200", "h800", "a100", "b200")
_DTYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "c10::Float8_e4m3fn": "fp8",
           "c10::Float8_e5m2": "fp8", "float": "fp32"}
_GEMM_OPS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::_scaled_mm": (0, 1),
             "aten::bmm": (0, 1), "aten::baddbmm": (1, 2)}
#: SDPA flash ops: (direction, index of the query dims in Input Dims, index of is_causal in
#: Concrete Inputs), from their aten signatures
_ATTENTION_OPS = {"aten::_scaled_dot_product_flash_attention": ("forward", 0, 4),
                  "aten::_scaled_dot_product_flash_attention_backward": ("backward", 1, 11)}


def classify(name: str) -> KernelClass:
    """The class of a kernel by its name (see the module docstring)."""
    if _COMMUNICATION.search(name):
        return KernelClass.COMMUNICATION
    if _ATTENTION.search(name):
        return KernelClass.ATTENTION
    if _GEMM.search(name):
        return KernelClass.GEMM
    return KernelClass.MEMORY


def _dtype(op: CpuOp, index: int) -> str | None:
    return _DTYPES.get(op.input_types[index]) if index < len(op.input_types) else None


def gemm_row(op: CpuOp) -> tuple[str, tuple[int, ...], str, float] | None:
    """``("gemm", (M, N, K), dtype, FLOPs)`` of a GEMM op with recorded shapes, else None."""
    if op.name not in _GEMM_OPS or len(op.input_dims) <= max(_GEMM_OPS[op.name]):
        return None
    a, b = (op.input_dims[i] for i in _GEMM_OPS[op.name])
    if len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        m, k, n = a[0], a[1], b[1]
    elif len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]:
        m, k, n = a[0] * a[1], a[2], b[2]
    else:
        return None
    dtype = _dtype(op, _GEMM_OPS[op.name][0])
    if dtype not in ("bf16", "fp16", "fp8") or min(m, n, k) <= 0:
        return None
    return "gemm", (m, n, k), dtype, 2.0 * m * n * k


def attention_row(op: CpuOp) -> tuple[str, tuple[int, ...], str, float] | None:
    """``("attention_<dir>_<mask>", (B, H, S, D), dtype, FLOPs)`` of an SDPA flash op with
    recorded shapes and mask, else None."""
    if op.name not in _ATTENTION_OPS:
        return None
    direction, q, causal_at = _ATTENTION_OPS[op.name]
    if len(op.input_dims) <= q or len(op.input_dims[q]) != 4 or len(op.concrete) <= causal_at:
        return None
    causal = op.concrete[causal_at].strip()
    if causal not in ("True", "False"):
        return None
    b, h, s, d = op.input_dims[q]
    dtype = _dtype(op, q)
    if dtype not in ("bf16", "fp16") or min(b, h, s, d) <= 0:
        return None
    flops = attention_flops(b, h, s, d, causal=causal == "True", direction=direction)
    name = f"attention_{'fwd' if direction == 'forward' else 'bwd'}_" \
           f"{'causal' if causal == 'True' else 'full'}"
    return name, (b, h, s, d), dtype, flops


def memory_row(op: CpuOp) -> tuple[str, tuple[int, ...], str, float] | None:
    """``("memory:<kernel>", (bytes,), dtype, bytes)`` of a named memory-bound op, else None."""
    if not op.input_dims or not op.input_dims[0]:
        return None
    dtype = _dtype(op, 0)
    width = {"bf16": 2, "fp16": 2, "fp32": 4}.get(dtype)
    if width is None:
        return None
    x = op.input_dims[0]
    tokens, hidden = math.prod(x[:-1]) or 1, x[-1]
    rule = {
        "aten::native_layer_norm": ("layernorm", lambda: norm_bytes(tokens, hidden, width)),
        "aten::native_layer_norm_backward": (
            "layernorm_bwd", lambda: norm_bytes(tokens, hidden, width, "backward")),
        "aten::_fused_rms_norm": ("rmsnorm", lambda: norm_bytes(tokens, hidden, width)),
        "aten::gelu": ("gelu", lambda: gelu_bytes(tokens, hidden, width)),
        "aten::gelu_backward": ("gelu_bwd", lambda: gelu_bytes(tokens, hidden, width,
                                                               "backward")),
        "aten::native_dropout": ("dropout", lambda: dropout_bytes(tokens, hidden, width)),
    }.get(op.name)
    if rule is None and op.name in ("aten::add", "aten::add_") and len(op.input_dims) >= 2 \
            and op.input_dims[1] == x:
        rule = ("residual", lambda: residual_bytes(tokens, hidden, width))
    if rule is None:
        return None
    nbytes = rule[1]()
    return f"memory:{rule[0]}", (int(nbytes),), dtype, nbytes


_ROW_OF = {KernelClass.GEMM: gemm_row, KernelClass.ATTENTION: attention_row,
           KernelClass.MEMORY: memory_row}


@dataclass
class TraceKernels:
    """What a trace's kernels became.

    Attributes
    ----------
    gpu : str
        Catalog GPU the rows are for.
    device_name : str
        The trace's device name.
    seconds : dict
        KernelClass value -> total kernel seconds (copies and memsets under memory).
    counts, tabled : dict
        KernelClass value -> measurements (op instances, or lone kernels), and how many of
        them became table rows.
    idle_gap_s : float
        Device time with no GPU activity between its first and last event.
    steps : int
        Profiler steps in the trace.
    rows : list of dict
        Kernel-table rows (the :data:`~hpnsim.training.compute.kernel_tables.COLUMNS`, plus
        ``samples``: measurements the median is of).
    """

    gpu: str
    device_name: str
    seconds: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    tabled: dict = field(default_factory=dict)
    idle_gap_s: float = 0.0
    steps: int = 0
    rows: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready summary (the rows as their count)."""
        return {"gpu": self.gpu, "device_name": self.device_name, "steps": self.steps,
                "seconds": self.seconds, "measurements": self.counts, "tabled": self.tabled,
                "idle_gap_s": self.idle_gap_s, "rows": len(self.rows)}


def trace_kernels(trace: ProfilerTrace, gpu: str | None = None) -> TraceKernels:
    """Classify, shape and time ``trace``'s kernels for catalog GPU ``gpu`` (default: the one
    its ``deviceProperties`` name); a trace without kernels, or on GPUs hpnsim cannot name,
    raises :class:`InputError` (field ``trace`` or ``gpu``)."""
    if not trace.kernels:
        raise InputError("trace", f"{trace.source} has no GPU kernels (no events of cat "
                                  f"\"kernel\"); profile with ProfilerActivity.CUDA")
    device_name = _device_name(trace)
    gpu = _catalog_gpu(device_name) if gpu is None else gpu.strip().lower()
    if gpu not in GPU_NAMES:
        raise InputError("gpu", f"{gpu!r} is not a catalog GPU; choose from "
                                f"{', '.join(GPU_NAMES)}")
    out = TraceKernels(gpu, device_name, steps=trace.steps)
    groups: dict = {}
    for k in trace.kernels:
        klass = classify(k.name)
        key = (klass, k.op.index if k.op is not None else ("kernel", k.device, k.start_us))
        groups.setdefault(key, []).append(k)
    samples: dict = {}
    for (klass, _), kernels in groups.items():
        seconds = sum(k.dur_us for k in kernels) * 1e-6
        name = klass.value
        out.seconds[name] = out.seconds.get(name, 0.0) + seconds
        out.counts[name] = out.counts.get(name, 0) + 1
        op = kernels[0].op
        row = _ROW_OF[klass](op) if klass in _ROW_OF and op is not None else None
        if row is None or seconds <= 0:
            continue
        out.tabled[name] = out.tabled.get(name, 0) + 1
        samples.setdefault(row[:3], []).append(row[3] / seconds)
    for t in trace.transfers:
        out.seconds["memory"] = out.seconds.get("memory", 0.0) + t.dur_us * 1e-6
    out.idle_gap_s = idle_gap_seconds((*trace.kernels, *trace.transfers))
    for (op, shape, dtype), rates in sorted(samples.items()):
        rate = statistics.median(rates)
        memory = op.startswith("memory:")
        out.rows.append({"gpu": gpu, "device_name": device_name, "driver": "", "torch": "",
                         "cuda": "", "date": "", "op": op, "shape": "x".join(map(str, shape)),
                         "dtype": dtype, "tflops": "" if memory else repr(rate / 1e12),
                         "gbps": repr(rate / 1e9) if memory else "", "samples": len(rates)})
    return out


def idle_gap_seconds(events: tuple[GpuEvent, ...]) -> float:
    """Per device, the time between its first and last GPU activity covered by none; summed.

    >>> from hpnsim.training.compute.profiler_trace import GpuEvent
    >>> e = [GpuEvent("a", "kernel", 0, 7, 0.0, 10.0, None),
    ...      GpuEvent("b", "kernel", 0, 8, 5.0, 10.0, None),      # overlaps a (another stream)
    ...      GpuEvent("c", "kernel", 0, 7, 25.0, 5.0, None)]      # 10 us after b ends
    >>> idle_gap_seconds(tuple(e)) * 1e6
    10.0
    """
    gap = 0.0
    for device in sorted({e.device for e in events}):
        spans = sorted((e.start_us, e.start_us + e.dur_us) for e in events if e.device == device)
        end = spans[0][1]
        for start, stop in spans[1:]:
            if start > end:
                gap += start - end
            end = max(end, stop)
    return gap * 1e-6


def table_text(result: TraceKernels) -> str:
    """The kernel-table CSV of ``result``'s rows (``samples`` as an extra column)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, (*COLUMNS, "samples"), lineterminator="\n")
    writer.writeheader()
    writer.writerows(result.rows)
    return buf.getvalue()


def _device_name(trace: ProfilerTrace) -> str:
    devices = sorted({k.device for k in trace.kernels})
    names = {trace.device_names.get(d, "") for d in devices}
    if len(names) > 1:
        raise InputError("trace", f"{trace.source} has kernels on different GPUs "
                                  f"({', '.join(sorted(names))}); give one GPU type's trace")
    return names.pop()


def _catalog_gpu(device_name: str) -> str:
    flat = device_name.lower().replace(" ", "")
    for name in GPU_NAMES:
        if name in flat:
            return name
    raise InputError("gpu", f"the trace's device {device_name or '(unnamed)'!r} is not a "
                            f"catalog GPU; pass --gpu ({', '.join(GPU_NAMES)})")
