"""Measured kernel tables: read a CSV of kernel measurements, interpolate it in log-shape.

A table overrides the model's efficiency on the GPU it was measured on. The CSV has one row per
measured kernel and these columns (``tools/measure_kernels.py`` writes them)::

    gpu,device_name,driver,torch,cuda,date,op,shape,dtype,tflops,gbps

- ``gpu``: catalog name (``h100``); ``device_name``, ``driver``, ``torch``, ``cuda``, ``date``:
  provenance, kept but not interpreted;
- ``op``: ``gemm`` (shape ``MxNxK``, ``[M,K] @ [K,N]``); ``attention_fwd_causal``,
  ``attention_fwd_full``, ``attention_bwd_causal``, ``attention_bwd_full`` (shape
  ``BxHxSxD``: batch, query heads, sequence length, head dim; TFLOP/s counted as
  :func:`~hpnsim.training.compute.attention.attention_flops` counts them); ``memory:<kernel>``
  (shape: bytes moved, as the ``*_bytes`` functions of
  :mod:`~hpnsim.training.compute.memory_ops` count them, so the GB/s is *effective*: an unfused
  kernel that moves more bytes shows a lower figure). Kernel names the layer model looks up:
  ``rmsnorm``, ``layernorm``, ``rotary``, ``dropout``, ``residual``, ``swiglu``, ``gelu``,
  ``softmax_topk``, ``permute``, ``embedding``, ``cross_entropy_unfused`` (``_fused``,
  ``_te``: every pass of that loss, :mod:`~hpnsim.training.compute.cross_entropy`),
  ``cast_transpose``, each with a ``_bwd`` variant for its backward, and ``adam``,
  ``grad_accumulation``;
- ``tflops`` for GEMM and attention rows, ``gbps`` (10^9 bytes/s) for memory rows.

Further columns (the measuring script adds ``kernel``, the backend it timed; the imported
tables ``time_ms``, ``model``, ``tp``, ``tokens``, ``timed``) are kept out of the model and
ignored, and lines starting with ``#`` are a provenance header. The imported public
measurements ship as ``hpnsim/data/kernels_*.csv`` (:func:`packaged_table`).

Interpolation. Each op has a *sweep* axis (GEMM: M; attention: S; memory: bytes). A query uses
the rows whose other axes are nearest to its own in log2 distance (exact when measured), and
interpolates linearly in log2 of the sweep axis between the two nearest points (clamping
outside the measured range). GEMM rows override by ratio: the measured/modelled rate at each
point is interpolated and multiplies the model's rate at the query, so the model's wave and
tile effects between measured points survive.

>>> table = KernelTable.from_text('''gpu,device_name,driver,torch,cuda,date,op,shape,dtype,tflops,gbps
... h100,NVIDIA H100 80GB HBM3,550.54,2.5.1,12.4,2025-01-01,memory:rmsnorm,1000000,bf16,,2000
... h100,NVIDIA H100 80GB HBM3,550.54,2.5.1,12.4,2025-01-01,memory:rmsnorm,4000000,bf16,,3000
... ''')
>>> from hpnsim.workloads.gpus import get_gpu
>>> table.memory_bandwidth(get_gpu("h100"), "rmsnorm", 2000000) / 1e9   # halfway in log2
2500.0
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpnsim.errors import InputError, read_user_text
from hpnsim.workloads.gpus import GPUSpec

COLUMNS = ("gpu", "device_name", "driver", "torch", "cuda", "date", "op", "shape", "dtype",
           "tflops", "gbps")
_ATTENTION_OPS = ("attention_fwd_causal", "attention_fwd_full", "attention_bwd_causal",
                  "attention_bwd_full")
#: the sweep axis and the number of dimensions of each op's shape
_SWEEP = {"gemm": (0, 3), **{op: (2, 4) for op in _ATTENTION_OPS}, "memory": (0, 1)}


@dataclass(frozen=True)
class KernelRow:
    """One measured kernel.

    Attributes
    ----------
    gpu, op, dtype : str
        Catalog GPU, operation, dtype.
    shape : tuple of int
        Its shape (see the module docstring for each op's axes).
    value : float
        TFLOP/s for GEMM and attention rows, GB/s for memory rows.
    provenance : tuple of str
        device_name, driver, torch, cuda, date.
    """

    gpu: str
    op: str
    shape: tuple[int, ...]
    dtype: str
    value: float
    provenance: tuple[str, ...]


@dataclass(frozen=True)
class KernelTable:
    """Measured kernels, possibly of several GPUs; see the module docstring.

    Attributes
    ----------
    rows : tuple of KernelRow
    source : str
        Where the table was read from.
    """

    rows: tuple[KernelRow, ...]
    source: str = ""
    # memo of derived arrays per (gpu, op, dtype); not part of the value
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @classmethod
    def read_csv(cls, path: str | Path) -> KernelTable:
        """Read a kernel-table CSV file (bad content raises :class:`InputError`)."""
        return cls.from_text(read_user_text(path, "kernel-table", "CSV file"), str(path))

    @classmethod
    def load(cls, where: str | Path) -> KernelTable:
        """A CSV file, or where no such file exists a table shipped with hpnsim by its name
        (:func:`packaged_table`).

        >>> KernelTable.load("f8e_bf16_h100").source
        'hpnsim/data/kernels_f8e_bf16_h100.csv'
        >>> KernelTable.load("no_such_table")
        Traceback (most recent call last):
        ...
        hpnsim.errors.InputError: kernel-table: cannot read no_such_table: No such file or directory (nor is it a table shipped with hpnsim: f8e_bf16_h100, infersim_h800, liger_h100, scaled_mm_h100, te_h100, vidur_a100, vidur_h100)
        """
        if Path(where).exists():
            return cls.read_csv(where)
        names = packaged_names()
        if str(where) in names:
            return packaged_table(str(where))
        try:
            return cls.read_csv(where)   # raises, saying why the file cannot be read
        except InputError as error:
            raise InputError(error.field, f"{error.message} (nor is it a table shipped with "
                                          f"hpnsim: {', '.join(names)})") from None

    @classmethod
    def from_text(cls, text: str, source: str = "kernel-table") -> KernelTable:
        """Parse kernel-table CSV text.

        >>> KernelTable.from_text("gpu,op\\nh100,gemm\\n")
        Traceback (most recent call last):
        ...
        hpnsim.errors.InputError: kernel-table: missing columns device_name, driver, torch, cuda, date, shape, dtype, tflops, gbps
        """
        # lines starting with '#' are a provenance header (tools/import_kernels.py writes
        # one); blanked, not dropped, so errors name the file's own line numbers
        lines = text.splitlines()
        header = next((i for i, line in enumerate(lines) if not line.startswith("#")),
                      len(lines))
        body = "\n".join("" if line.startswith("#") else line for line in lines[header:])
        reader = csv.DictReader(io.StringIO(body))
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise InputError(source, f"missing columns {', '.join(missing)}")
        rows = tuple(_parse_row(row, f"{source} line {header + reader.line_num}") for row in reader)
        return cls(rows, source)

    def select(self, gpu: str, op: str, dtype: str | None) -> tuple[KernelRow, ...]:
        """Rows of one GPU, op and dtype (``dtype=None``: any dtype)."""
        key = ("rows", gpu, op, dtype)
        if key not in self._memo:
            self._memo[key] = tuple(r for r in self.rows if r.gpu == gpu and r.op == op
                                    and (dtype is None or r.dtype == dtype))
        return self._memo[key]

    # ----- what the models ask --------------------------------------------------------
    def gemm_ratio(self, gpu: GPUSpec, dtype: str, shape: tuple[int, int, int],
                   model_rate) -> float | None:
        """Measured/modelled GEMM rate at ``shape``, or None without GEMM rows for it.

        ``model_rate(shape)`` is the model's FLOP/s at a shape.
        """
        rows = self.select(gpu.name, "gemm", dtype)
        if not rows:
            return None
        key = ("ratios", gpu, dtype)
        if key not in self._memo:
            self._memo[key] = [r.value * 1e12 / model_rate(r.shape) for r in rows]
        return interpolate([r.shape for r in rows], self._memo[key], shape, sweep_axis=0)

    def attention_efficiency(self, gpu: GPUSpec, direction: str, causal: bool, dtype: str,
                             shape: tuple[int, int, int, int]) -> float | None:
        """Measured fraction of the dtype's peak for fused attention, or None."""
        op = f"attention_{'fwd' if direction == 'forward' else 'bwd'}_" \
             f"{'causal' if causal else 'full'}"
        rows = self.select(gpu.name, op, dtype)
        if not rows:
            return None
        peak = gpu.tensor_peak(dtype)
        return interpolate([r.shape for r in rows], [r.value * 1e12 / peak for r in rows],
                           shape, sweep_axis=2)

    def memory_bandwidth(self, gpu: GPUSpec, name: str, nbytes: float) -> float | None:
        """Measured bandwidth (bytes/s) of memory op ``name`` moving ``nbytes``, or None."""
        rows = self.select(gpu.name, f"memory:{name}", None)
        if not rows:
            return None
        return interpolate([r.shape for r in rows], [r.value * 1e9 for r in rows],
                           (nbytes,), sweep_axis=0)


def packaged_names() -> tuple[str, ...]:
    """Names of the kernel tables shipped with hpnsim (``hpnsim/data/kernels_<name>.csv``).

    >>> "vidur_h100" in packaged_names()
    True
    """
    from importlib import resources

    files = resources.files("hpnsim").joinpath("data").iterdir()
    return tuple(sorted(f.name[len("kernels_"):-len(".csv")] for f in files
                        if f.name.startswith("kernels_") and f.name.endswith(".csv")))


def packaged_table(name: str) -> KernelTable:
    """A kernel table shipped with hpnsim: ``"vidur_h100"``, ``"vidur_a100"`` (microsoft/vidur,
    FP16 layer kernels), ``"infersim_h800"`` (alibaba/InferSim, DeepGEMM FP8), ``"liger_h100"``
    (Megatron-Core's cross-entropy and SwiGLU forward, as linkedin/Liger-Kernel timed them),
    ``"scaled_mm_h100"`` (cuBLASLt FP8 GEMMs through ``torch._scaled_mm``), ``"te_h100"``
    (TransformerEngine's FP8 cast-transpose) or ``"f8e_bf16_h100"`` (the BF16 matmuls
    meta-pytorch/float8_experimental timed beside its FP8 ones, on Meta's H100s in 2023), the
    last three quoted from GitHub threads; provenance in each file's header.

    >>> t = packaged_table("vidur_h100")
    >>> round(t.select("h100", "gemm", "fp16")[0].value, 1) > 0
    True
    """
    from importlib import resources

    path = resources.files("hpnsim").joinpath("data", f"kernels_{name}.csv")
    return KernelTable.from_text(path.read_text(encoding="utf-8"), f"hpnsim/data/{path.name}")


def interpolate(shapes, values, query, *, sweep_axis: int) -> float:
    """Interpolate ``values`` measured at ``shapes`` to ``query``, in log2 of the shape.

    Points whose non-sweep axes are nearest ``query``'s (log2 distance) are used; along the
    sweep axis the value is linear in log2, clamped outside the measured range.

    >>> shapes = [(1024, 4096, 4096), (4096, 4096, 4096), (1024, 8192, 8192)]
    >>> interpolate(shapes, [400.0, 600.0, 700.0], (2048, 4096, 4096), sweep_axis=0)
    500.0
    >>> interpolate(shapes, [400.0, 600.0, 700.0], (64, 4096, 4096), sweep_axis=0)   # clamped
    400.0
    """
    logs = np.log2(np.asarray(shapes, dtype=float))
    q = np.log2(np.asarray(query, dtype=float))
    others = [i for i in range(logs.shape[1]) if i != sweep_axis]
    distance = np.sqrt(((logs[:, others] - q[others]) ** 2).sum(axis=1))
    group = np.isclose(distance, distance.min())
    # several groups at the same distance: keep the first one's exact axes
    first = logs[np.argmax(group)][others]
    group &= np.all(np.isclose(logs[:, others], first), axis=1)
    x, y = logs[group, sweep_axis], np.asarray(values, dtype=float)[group]
    order = np.argsort(x)
    return float(np.interp(q[sweep_axis], x[order], y[order]))


def _parse_row(row: dict, where: str) -> KernelRow:
    op = (row["op"] or "").strip()
    kind = "memory" if op.startswith("memory:") and len(op) > 7 else op
    if kind not in _SWEEP:
        raise InputError(where, f"op must be gemm, one of {', '.join(_ATTENTION_OPS)} or "
                                f"memory:<name>, got {op!r}")
    try:
        shape = tuple(int(x) for x in (row["shape"] or "").lower().split("x"))
    except ValueError:
        raise InputError(where, f"shape must be integers joined by 'x', got {row['shape']!r}") \
            from None
    if len(shape) != _SWEEP[kind][1] or min(shape) <= 0:
        raise InputError(where, f"{op} needs a shape of {_SWEEP[kind][1]} positive integers, "
                                f"got {row['shape']!r}")
    column = "gbps" if kind == "memory" else "tflops"
    try:
        value = float(row[column])
    except (TypeError, ValueError):
        raise InputError(where, f"{column} must be a number, got {row[column]!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise InputError(where, f"{column} must be positive, got {value}")
    provenance = tuple((row[c] or "").strip() for c in ("device_name", "driver", "torch",
                                                         "cuda", "date"))
    return KernelRow((row["gpu"] or "").strip().lower(), op, shape,
                     (row["dtype"] or "").strip().lower(), value, provenance)
