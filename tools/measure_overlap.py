#!/usr/bin/env python3
"""Measure what hpnsim's contention model assumes and cannot derive: a GEMM beside a kernel
that holds SMs, with and without TransformerEngine's SM margin, and a GEMM stream's sustained
clock.

Run on one NVIDIA GPU with PyTorch and CuPy (nothing else; hpnsim need not be importable):

    python tools/measure_overlap.py --out overlap.csv             # about 3 minutes
    python tools/measure_overlap.py --plan                        # the plan, no GPU

What it measures (rows of ``--out``, provenance on every row, ``<out>.meta.json`` beside):

- ``alone``: each GEMM of :data:`GEMMS` (the forward and weight-gradient shapes of the rows
  docs/fidelity.md finds too fast), BF16 (torch.mm) and FP8 (torch._scaled_mm), by itself;
- ``holder``: the same GEMM launched right after ``c`` blocks of a holder kernel on another
  stream, each block taking a whole SM (1,024 threads, 200 KB of shared memory, so no GEMM
  block fits beside it) and spinning for ``hold`` times the GEMM's time alone (2: the whole
  GEMM, 0.5: its first half). This is a userbuffer bulk overlap without the SM margin
  (``set_sm_margin`` false: the GEMM launched for every SM, the communication kernel holding
  ``num_sm``): whether the GEMM slows by ``c/n`` only while the holder runs, or waits with
  some of its tiles for the held SMs (a tail), is what hpnsim does not know;
- ``margin``: the GEMM launched for ``n - c`` SMs (PyTorch's
  ``torch._C._set_sm_carveout_experimental``, cuBLASLt's ``SM_COUNT_TARGET``), beside the
  holder and alone: TransformerEngine's ``set_sm_margin``, which hpnsim models as the GEMM's
  waves on ``n - c`` SMs;
- ``sustained``: the largest GEMM back to back for ``--sustain-s`` seconds, TFLOP/s per
  second with nvidia-smi's SM clock, power and temperature, to compare with the short bursts
  the kernel tables were measured in.

The holder's SM count ``c`` covers every ``num_sm`` the recipes set (1-24;
hpnsim.training.userbuffers). The holder spins for clock64 cycles, converted at the clock it
was timed at on a warm GPU, so beside a GEMM that lowers the clock it lasts a little longer
than asked. The carve-out reaches the GEMMs PyTorch runs through cuBLASLt (``_scaled_mm``;
``torch.mm`` where PyTorch picks cuBLASLt): a ``margin`` row equal to its ``alone`` row means
it did not reach that GEMM. Timing: CUDA events on the GEMM's stream, the median of
``--repeats`` launches after warm-up, each from an idle GPU; no clock locking. Each row is
written as soon as it is measured.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_kernels import provenance, smi_sample  # noqa: E402  (the sibling tool, stdlib only)

#: (label, M, N, K): forward and weight-gradient GEMMs of the rows furthest from their
#: published times (docs/fidelity.md): Llama 3.1 405B at TP 8, GPT-3 175B at TP 4 with
#: 2,048 tokens a micro-batch, Llama 3 70B at TP 4 with 8,192
GEMMS = (
    ("llama3-405b tp8 fc1 fwd", 8192, 13312, 16384),
    ("llama3-405b tp8 fc1 wgrad", 13312, 16384, 8192),
    ("gpt3-175b tp4 qkv fwd mbs1", 2048, 9216, 12288),
    ("gpt3-175b tp4 qkv fwd mbs2", 4096, 9216, 12288),
    ("llama3-70b tp4 fc1 fwd", 8192, 14336, 8192),
)
#: SMs the holder takes (the recipes' num_sm)
HOLDER_SMS = (1, 2, 4, 8, 16, 20, 24)
#: how long the holder spins, in units of the GEMM's time alone
HOLD = (2.0, 0.5)
CASES = ("alone", "holder", "margin", "margin+holder")
COLUMNS = ["gpu", "device_name", "driver", "torch", "cuda", "date", "case", "label", "shape",
           "dtype", "sms", "hold", "gemm_us", "alone_us", "slowdown", "sm_clock", "power"]
#: shared memory a holder block asks for: more than what an H100 SM has left beside it for
#: any GEMM block (228 KB per SM)
HOLDER_SMEM = 200 * 1024

HOLDER_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(1024, 1)
hold(long long cycles, float* sink) {
    extern __shared__ float pad[];
    long long start = clock64();
    float acc = threadIdx.x;
    while (clock64() - start < cycles) { acc = acc * 0.999f + 1.0f; }
    pad[threadIdx.x] = acc;
    __syncthreads();
    if (pad[(threadIdx.x + 1) % blockDim.x] == -1.0f) sink[0] = acc;
}
"""


def plan() -> list[dict]:
    """Every (case, GEMM, dtype, SMs, hold) the run measures, in order.

    >>> p = plan()
    >>> len(p), p[0]["case"], sorted({r["case"] for r in p}) == sorted(CASES)
    (290, 'alone', True)
    """
    rows = []
    for label, m, n, k in GEMMS:
        for dtype in ("bf16", "fp8"):
            base = {"label": label, "shape": (m, n, k), "dtype": dtype}
            rows.append({**base, "case": "alone", "sms": 0, "hold": 0.0})
            for sms in HOLDER_SMS:
                rows += [{**base, "case": "holder", "sms": sms, "hold": h} for h in HOLD]
                rows.append({**base, "case": "margin", "sms": sms, "hold": 0.0})
                rows.append({**base, "case": "margin+holder", "sms": sms, "hold": HOLD[0]})
    return rows


class Gpu:
    """The GEMMs, the holder kernel and the timing on one CUDA device."""

    def __init__(self, torch, cupy):
        self.torch, self.cupy = torch, cupy
        props = torch.cuda.get_device_properties(0)
        self.name, self.sms = props.name, props.multi_processor_count
        self.main, self.side = torch.cuda.Stream(), torch.cuda.Stream()
        self.kernel = cupy.RawKernel(HOLDER_SOURCE, "hold")
        self.kernel.max_dynamic_shared_size_bytes = HOLDER_SMEM
        self.sink = cupy.zeros(1, dtype=cupy.float32)
        self.carveout = getattr(torch._C, "_set_sm_carveout_experimental", None)
        self.hz = 1.98e9
        self.hz = self._clock_hz()

    def _clock_hz(self) -> float:
        """The holder's clock64 ticks per second, timed with events on a warm GPU (the SM
        clock the holder will spin at; nvidia-smi's idle reading would be far lower)."""
        torch = self.torch
        cycles = 2e8
        for _ in range(3):                      # warm up the clock
            self.hold(self.sms, cycles / self.hz)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.side):
            start.record()
        self.hold(1, cycles / self.hz)
        with torch.cuda.stream(self.side):
            end.record()
        torch.cuda.synchronize()
        return cycles / (start.elapsed_time(end) / 1e3)

    def gemm(self, shape, dtype):
        torch = self.torch
        m, n, k = shape
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        if dtype == "bf16":
            return lambda: torch.mm(a, w.t())
        a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        return lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16)

    def hold(self, sms: int, seconds: float) -> None:
        """``sms`` holder blocks spinning ``seconds`` on the side stream."""
        with self.cupy.cuda.ExternalStream(self.side.cuda_stream):
            self.kernel((sms,), (1024,), (self.cupy.int64(seconds * self.hz), self.sink),
                        shared_mem=HOLDER_SMEM)

    def time(self, fn, sms: int = 0, hold_s: float = 0.0, carveout: int = 0,
             repeats: int = 20) -> float:
        """Median seconds of ``fn`` on the main stream, after ``sms`` holder blocks of
        ``hold_s`` on the side stream (both start from an idle GPU), with ``carveout`` SMs
        kept from the GEMM."""
        torch = self.torch
        if carveout and self.carveout is None:
            raise RuntimeError("this PyTorch has no _set_sm_carveout_experimental")
        if self.carveout is not None:
            self.carveout(carveout or None)
        try:
            with torch.cuda.stream(self.main):
                fn()
            torch.cuda.synchronize()
            times = []
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                if sms:
                    self.hold(sms, hold_s)
                with torch.cuda.stream(self.main):
                    start.record()
                    fn()
                    end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            return statistics.median(times)
        finally:
            if self.carveout is not None:
                self.carveout(None)


def _case_seconds(gpu: Gpu, fn, item: dict, alone: float, repeats: int) -> float:
    """The GEMM's seconds in the planned case ``item`` (``alone``: its time by itself)."""
    case, sms, hold_s = item["case"], item["sms"], item["hold"] * alone
    if case == "alone":
        return alone
    if case == "holder":
        return gpu.time(fn, sms, hold_s, repeats=repeats)
    if case == "margin":
        return gpu.time(fn, carveout=sms, repeats=repeats)
    return gpu.time(fn, sms, hold_s, carveout=sms, repeats=repeats)      # margin+holder


def measure(gpu: Gpu, rows: list, meta: dict, repeats: int, deadline: float,
            write=None) -> list:
    """Every planned measurement until ``deadline`` (the rest listed as skipped), each row
    handed to ``write`` as soon as it is measured."""
    skipped, alone, fns = [], {}, {}
    for item in plan():
        key = (item["label"], item["dtype"])
        if time.monotonic() > deadline:
            skipped.append(f"{item['case']} {item['label']} {item['dtype']} c={item['sms']}")
            continue
        if key not in fns:
            fns.clear()
            gpu.torch.cuda.empty_cache()
            fns[key] = gpu.gemm(item["shape"], item["dtype"])
        fn = fns[key]
        if item["case"] == "alone":
            alone[key] = gpu.time(fn, repeats=repeats)
        base = alone[key]
        try:
            seconds = _case_seconds(gpu, fn, item, base, repeats)
        except RuntimeError as why:           # e.g. no carve-out in this PyTorch
            skipped.append(f"{item['case']} {item['label']} {item['dtype']}: {why}")
            continue
        sample = smi_sample()
        rows.append({**meta, "case": item["case"], "label": item["label"],
                     "shape": "x".join(map(str, item["shape"])), "dtype": item["dtype"],
                     "sms": item["sms"], "hold": item["hold"],
                     "gemm_us": f"{seconds * 1e6:.2f}", "alone_us": f"{base * 1e6:.2f}",
                     "slowdown": f"{seconds / base:.4f}",
                     "sm_clock": sample.get("clocks.sm", ""),
                     "power": sample.get("power.draw", "")})
        if write is not None:
            write(rows[-1])
    return skipped


def sustained(gpu: Gpu, seconds: float) -> list[dict]:
    """The first GEMM of :data:`GEMMS` in BF16 back to back for ``seconds``: per second its
    TFLOP/s and nvidia-smi's sample."""
    torch = gpu.torch
    label, m, n, k = GEMMS[0]
    fn, flops, out = gpu.gemm((m, n, k), "bf16"), 2.0 * m * n * k, []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
            enable_timing=True)
        count, t0 = 0, time.monotonic()
        with torch.cuda.stream(gpu.main):
            start_ev.record()
            while time.monotonic() - t0 < 1.0:
                for _ in range(20):
                    fn()
                count += 20
                end_ev.record()
                end_ev.synchronize()
        elapsed = start_ev.elapsed_time(end_ev) / 1e3
        out.append({"t_s": round(seconds - (end - time.monotonic()), 1),
                    "tflops": round(count * flops / elapsed / 1e12, 2), **smi_sample()})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="overlap.csv", help="CSV to write (refused if it "
                                                             "exists, unless --force)")
    parser.add_argument("--force", action="store_true", help="overwrite --out")
    parser.add_argument("--budget-s", type=float, default=120.0,
                        help="seconds for the holder and margin cases (default 120)")
    parser.add_argument("--sustain-s", type=float, default=60.0,
                        help="seconds of the sustained stream (default 60; 0: skip)")
    parser.add_argument("--repeats", type=int, default=20, help="launches per measurement")
    parser.add_argument("--plan", action="store_true", help="print the plan and exit")
    args = parser.parse_args(argv)
    if args.plan:
        for item in plan():
            print(item["case"], item["label"], "x".join(map(str, item["shape"])),
                  item["dtype"], f"sms={item['sms']}", f"hold={item['hold']}")
        return 0
    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"error: --out: {out} exists (give --force to overwrite)", file=sys.stderr)
        return 2
    if args.budget_s <= 0 or args.sustain_s < 0 or args.repeats < 1:
        print("error: --budget-s must be > 0, --sustain-s >= 0, --repeats >= 1",
              file=sys.stderr)
        return 2
    try:
        import cupy
        import torch
    except ImportError as missing:
        print(f"error: needs PyTorch and CuPy ({missing})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA device", file=sys.stderr)
        return 2
    started = time.monotonic()
    gpu = Gpu(torch, cupy)
    meta = provenance(torch)
    rows: list = []
    with out.open("w", newline="") as f:          # each row as it is measured
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()

        def write(row):
            writer.writerow(row)
            f.flush()

        skipped = measure(gpu, rows, meta, args.repeats, started + args.budget_s, write)
    stream = sustained(gpu, args.sustain_s) if args.sustain_s else []
    out.with_suffix(out.suffix + ".meta.json").write_text(json.dumps(
        {**meta, "sm_count": gpu.sms, "holder_clock_hz": gpu.hz,
         "carveout": gpu.carveout is not None, "skipped": skipped, "sustained": stream,
         "wall_s": round(time.monotonic() - started, 1)}, indent=1))
    print(f"{len(rows)} rows -> {out} ({len(skipped)} skipped), {len(stream)} s sustained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
