"""Read a PyTorch profiler (Kineto / Chrome trace) export: its GPU kernels and the ops that
launched them.

The file is JSON with ``traceEvents``; the events this reader uses:

- GPU activity: ``ph: "X"`` with ``cat`` ``"kernel"``, ``"gpu_memcpy"`` or ``"gpu_memset"``,
  ``ts``/``dur`` in microseconds, ``args.device``, ``args.stream``, ``args.correlation``
  (and ``args.grid``/``block``, kept);
- the CUDA runtime/driver call that launched it (``cat`` ``"cuda_runtime"`` or
  ``"cuda_driver"``, the same ``args.correlation``), on a CPU thread (``pid``, ``tid``);
- CPU ops (``cat: "cpu_op"``: ``aten::mm``, ``aten::addmm``...) on that thread, with
  ``args["Input Dims"]``, ``args["Input type"]`` and ``args["Concrete Inputs"]`` when the
  profiler ran with ``record_shapes=True``; ``args["External id"]``.

A kernel's launching op is the CPU op whose ``External id`` the kernel carries (recent
PyTorch), else the innermost CPU op on the launching thread whose interval contains the
runtime call (what older traces, e.g. deepseek-ai/profile-data's ``train.json``, allow).
``deviceProperties`` names the GPUs (``"NVIDIA H800"``).

>>> text = ('{"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ['
...         '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,'
...         ' "dur": 10, "args": {"Input Dims": [[8, 4], [4, 2]], "Input type": ["float", "float"]}},'
...         '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,'
...         ' "ts": 2, "dur": 3, "args": {"correlation": 7}},'
...         '{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 5,'
...         ' "args": {"device": 0, "stream": 7, "correlation": 7}}]}')
>>> trace = parse_trace(text, "t.json")
>>> k = trace.kernels[0]
>>> k.name, k.op.name, k.op.input_dims, trace.device_names
('gemm', 'aten::mm', ((8, 4), (4, 2)), {0: 'NVIDIA H100 80GB HBM3'})
"""

from __future__ import annotations

import bisect
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from hpnsim.errors import InputError

#: event categories of GPU work
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


@dataclass(frozen=True)
class CpuOp:
    """A CPU op of the trace (``aten::mm``...), with its recorded shapes where present.

    Attributes
    ----------
    name : str
    index : int
        Its position among the trace's CPU ops (kernels of one op instance share it).
    input_dims : tuple of tuple of int
        ``Input Dims`` (one tuple per input; empty for a non-tensor input).
    input_types : tuple of str
        ``Input type`` (``"c10::BFloat16"``...).
    concrete : tuple of str
        ``Concrete Inputs`` (scalars as text: ``"True"``, ``"0."``), empty when not recorded.
    """

    name: str
    index: int
    input_dims: tuple[tuple[int, ...], ...] = ()
    input_types: tuple[str, ...] = ()
    concrete: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuEvent:
    """One piece of GPU work: a kernel, copy or memset.

    Attributes
    ----------
    name, category : str
        Kernel name; ``"kernel"``, ``"gpu_memcpy"`` or ``"gpu_memset"``.
    device, stream : int
    start_us, dur_us : float
    op : CpuOp or None
        The op that launched it, where the trace links them.
    """

    name: str
    category: str
    device: int
    stream: int
    start_us: float
    dur_us: float
    op: CpuOp | None


@dataclass(frozen=True)
class ProfilerTrace:
    """A parsed trace: its GPU work in time order, the GPUs' names, and the profiler steps.

    Attributes
    ----------
    source : str
    kernels : tuple of GpuEvent
        ``category == "kernel"`` events.
    transfers : tuple of GpuEvent
        Copies and memsets.
    device_names : dict
        device id -> name from ``deviceProperties``.
    steps : int
        ``ProfilerStep#`` annotations (iterations profiled); 0 when none.
    """

    source: str
    kernels: tuple[GpuEvent, ...]
    transfers: tuple[GpuEvent, ...]
    device_names: dict
    steps: int


def read_trace(path: str | Path, field: str = "trace") -> ProfilerTrace:
    """Read a trace file (``.json`` or ``.json.gz``); unreadable content raises
    :class:`InputError` naming ``field``."""
    path = Path(path)
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        text = data.decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise InputError(field, f"cannot read {path}: {getattr(error, 'strerror', None) or error}"
                         ) from None
    except UnicodeDecodeError:
        raise InputError(field, f"{path} is not UTF-8 JSON text") from None
    return parse_trace(text, str(path), field)


def parse_trace(text: str, source: str = "trace", field: str = "trace") -> ProfilerTrace:
    """Parse trace JSON text (see the module docstring for the events used)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(field, f"{source} is not JSON (line {error.lineno}: {error.msg})") \
            from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise InputError(field, f"{source} has no traceEvents list; export the profile with "
                                f"prof.export_chrome_trace()")
    events = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    ops, by_external, threads = _cpu_ops(events)
    launches = {}
    for e in events:
        if e.get("cat") in _LAUNCH_CATEGORIES and "correlation" in _args(e):
            launches[_args(e)["correlation"]] = e
    gpu = []
    for e in events:
        if e.get("cat") not in GPU_CATEGORIES:
            continue
        a = _args(e)
        op = by_external.get(a.get("External id"))
        if op is None and a.get("correlation") in launches:
            op = _enclosing(threads, launches[a["correlation"]], ops)
        gpu.append(GpuEvent(str(e.get("name", "")), e["cat"], _int(a.get("device", 0)),
                            _int(a.get("stream", 0)), float(e.get("ts", 0)),
                            float(e.get("dur", 0)), op))
    gpu.sort(key=lambda g: (g.device, g.start_us, g.stream))
    names = {}
    for d in (data.get("deviceProperties") or []) if isinstance(data, dict) else []:
        if isinstance(d, dict) and "id" in d:
            names[_int(d["id"])] = str(d.get("name", ""))
    steps = sum(1 for e in events if e.get("cat") == "user_annotation"
                and str(e.get("name", "")).startswith("ProfilerStep#"))
    return ProfilerTrace(source, tuple(g for g in gpu if g.category == "kernel"),
                         tuple(g for g in gpu if g.category != "kernel"), names, steps)


def _cpu_ops(events):
    ops, by_external, threads = [], {}, {}
    for e in sorted((e for e in events if e.get("cat") == "cpu_op"),
                    key=lambda e: (e.get("ts", 0), -e.get("dur", 0))):
        a = _args(e)
        op = CpuOp(str(e.get("name", "")), len(ops), _dims(a.get("Input Dims")),
                   tuple(str(t) for t in a.get("Input type") or ()),
                   tuple(str(c) for c in a.get("Concrete Inputs") or ()))
        ops.append((e, op))
        if "External id" in a:
            by_external.setdefault(a["External id"], op)
        threads.setdefault((e.get("pid"), e.get("tid")), []).append(len(ops) - 1)
    # per thread: (start times, op indices), both in start order, for bisection
    threads = {key: ([float(ops[i][0].get("ts", 0)) for i in idx], idx)
               for key, idx in threads.items()}
    return ops, by_external, threads


def _enclosing(threads, launch, ops) -> CpuOp | None:
    # the innermost CPU op on the launching thread whose interval holds the launch call:
    # of the ops that start at or before it, the latest-starting one that has not ended
    starts, indices = threads.get((launch.get("pid"), launch.get("tid")), ((), ()))
    t = float(launch.get("ts", 0))
    for j in range(bisect.bisect_right(starts, t) - 1, -1, -1):
        e, op = ops[indices[j]]
        if float(e.get("ts", 0)) + float(e.get("dur", 0)) >= t:
            return op
    return None


def _args(e) -> dict:
    a = e.get("args")
    return a if isinstance(a, dict) else {}


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _dims(value) -> tuple[tuple[int, ...], ...]:
    out = []
    for d in value or ():
        try:
            out.append(tuple(int(x) for x in d) if isinstance(d, list) else ())
        except (TypeError, ValueError):
            out.append(())
    return tuple(out)
