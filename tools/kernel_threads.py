"""Measured FP8 kernel timings published in GitHub threads, transcribed with their provenance.

Each figure is copied as the thread prints it (the thread is the source: its URL, author and
date are in :data:`THREADS`); :func:`scaled_mm_rows` and :func:`cast_transpose_rows` turn them
into kernel-table rows (``tools/import_kernels.py`` writes them as package data). Threads are
not code and carry no licence; the figures are facts of a measurement, quoted with their
source.

- cuBLASLt FP8 GEMMs through ``torch._scaled_mm`` (tensor-wise scales, BF16 out) on H100s:
  pytorch/pytorch#143465 (random E4M3 operands, ``triton.testing.do_bench``) and
  meta-pytorch/float8_experimental#38 and #100 (``benchmarks/bench_matmul.py``: all-zero E4M3
  operands, ``torch.utils.benchmark`` mean; zero operands draw less power than real data, so
  these kernels ran at least as fast as a training GEMM would).
- the BF16 reference matmuls float8_experimental #38 and #100 time beside their FP8 ones, on
  the same H100s in the same runs (random operands): a second measured BF16
  setup, shipped as its own table and not fitted (:func:`bf16_reference_rows`).
- TransformerEngine's FP8 cast-transpose kernel on an H100 SXM (FP16 in, FP8 out, both
  layouts): NVIDIA/TransformerEngine#101, the merged ("heuristic vector size") column.
"""

from __future__ import annotations

from decimal import Decimal

THREADS = {
    "pytorch/pytorch#143465": {
        "url": "https://github.com/pytorch/pytorch/issues/143465",
        "author": "OrenLeung", "date": "2024-12-18", "gpu": "h100",
        "device": "H100 (SKU not stated in the thread)",
        "timed": "torch._scaled_mm, tensor-wise scales, random operands, BF16 out; "
                 "triton.testing.do_bench (200 repeats, 30 warm-up)",
        "figure": "TFLOP/s = 2mnk / time, per (m, n, k) as the thread's code uses them",
    },
    "meta-pytorch/float8_experimental#38": {
        "url": "https://github.com/meta-pytorch/float8_experimental/pull/38",
        "author": "vkuzo", "date": "2023-08-18", "gpu": "h100", "device": "H100",
        "timed": "torch._scaled_mm, E4M3 x E4M3 all-zero operands, BF16 out (cuBLASLt's "
                 "default split accumulation: no fast-accumulation option until "
                 "pytorch/pytorch#111847, 2023-10-23); torch.utils.benchmark mean",
        "figure": "fp8_fw_time_s per (M, K, N), A [M, K] @ B [K, N]",
    },
    "meta-pytorch/float8_experimental#100": {
        "url": "https://github.com/meta-pytorch/float8_experimental/pull/100",
        "author": "vkuzo", "date": "2023-09-19", "gpu": "h100", "device": "H100",
        "timed": "as #38, re-run (\"just the cuBLASLt op\")",
        "figure": "fp8_time_s per (M, K, N), A [M, K] @ B [K, N]",
    },
    "NVIDIA/TransformerEngine#101": {
        "url": "https://github.com/NVIDIA/TransformerEngine/pull/101",
        "author": "timmoon10", "date": "2023-03-14", "gpu": "h100", "device": "H100 SXM",
        "timed": "TransformerEngine cast-transpose kernel, FP16 in, FP8 out (row- and "
                 "column-major copies), square matrices; the merged kernel's column",
        "figure": "run time in us per matrix dims",
    },
}

#: pytorch/pytorch#143465, H100 section: (m, n, k) -> TFLOP/s as printed
PT_143465 = {
    (16384, 8192, 1280): "1239.4133451945781",
    (16384, 1024, 8192): "1347.0844475792383",
    (16384, 8192, 7168): "1332.2623882545472",
    (16384, 3584, 8192): "1309.4453003269748",
    (8192, 8192, 8192): "1304.5406858844613",
}
#: float8_experimental #38 and #100: (M, K, N) -> FP8 seconds as printed
F8E_38 = {(16384, 8192, 1280): "2.43E-04", (16384, 1024, 8192): "2.51E-04",
          (16384, 8192, 7168): "1.39E-03", (16384, 3584, 8192): "7.45E-04"}
F8E_100 = {(16384, 8192, 1280): "0.000244", (16384, 1024, 8192): "0.000257",
           (16384, 8192, 7168): "0.001470", (16384, 3584, 8192): "0.000700"}
#: the same runs' BF16 reference matmuls (random operands): the thread's bf16_time_s (#38) and
#: its torch.bfloat16 ref_time_s (#100), (M, K, N) -> seconds as printed; not fitted, shipped
#: as their own table (:func:`bf16_reference_rows`) for the docs' comparison
F8E_BF16 = {"meta-pytorch/float8_experimental#38": {
    (16384, 8192, 1280): "6.04E-04", (16384, 1024, 8192): "5.00E-04",
    (16384, 8192, 7168): "3.57E-03", (16384, 3584, 8192): "1.59E-03"},
    "meta-pytorch/float8_experimental#100": {
    (16384, 8192, 1280): "0.000622", (16384, 1024, 8192): "0.000499",
    (16384, 8192, 7168): "0.003445", (16384, 3584, 8192): "0.001628"}}
#: the threads of :data:`F8E_BF16` as their BF16 reference rows were timed (what and which
#: column), in the shape of :data:`THREADS`
_BF16_REFERENCE = ("the BF16 reference matmul the FP8 benchmark times beside torch._scaled_mm "
                   "on the same GPU in the same run (benchmarks/bench_matmul.py; in its later "
                   "form an nn.Linear without bias, randomly initialised, on a torch.randn "
                   "input: random operands); torch.utils.benchmark blocked_autorange mean")
BF16_REFERENCE_THREADS = {
    thread: {**THREADS[thread], "timed": _BF16_REFERENCE, "figure": figure}
    for thread, figure in (("meta-pytorch/float8_experimental#38", "bf16_time_s per (M, K, N)"),
                           ("meta-pytorch/float8_experimental#100",
                            "ref_time_s of the torch.bfloat16 rows per (M, K, N)"))}
#: NVIDIA/TransformerEngine#101: square dims -> us (heuristic vector size, merged)
TE_101 = {512: "3.80", 768: "3.79", 1024: "3.94", 1536: "5.13", 2048: "6.93", 3072: "24.51",
          4096: "51.95"}
#: pytorch/pytorch#143465 shapes the cuBLASLt FP8 fit does not see
PT_HELD_OUT = ("pytorch/pytorch#143465 16384x1024x8192", "pytorch/pytorch#143465 16384x3584x8192")
#: the groups the FP8 fit uses: random operands only (the zero-operand runs are reported apart)
SCALED_MM_FIT_SOURCE = "pytorch/pytorch#143465"


def scaled_mm_rows() -> list[dict]:
    """Kernel-table rows (shape ``MxNxK`` of ``[M,K] @ [K,N]``) of the cuBLASLt FP8 GEMMs; a
    row's ``model`` is its thread and shape (the fit's groups).

    >>> rows = scaled_mm_rows()
    >>> rows[0]["shape"], rows[0]["tflops"], rows[-1]["time_ms"]
    ('16384x8192x1280', '1239.4133451945781', '0.700')
    """
    out = []
    for (m, n, k), tflops in PT_143465.items():
        seconds = Decimal(2 * m * n * k) / (Decimal(tflops) * 10 ** 12)
        out.append(_gemm("pytorch/pytorch#143465", (m, n, k), str(seconds * 1000), tflops))
    for thread, table in (("meta-pytorch/float8_experimental#38", F8E_38),
                          ("meta-pytorch/float8_experimental#100", F8E_100)):
        for (m, k, n), seconds in table.items():
            out.append(_gemm(thread, (m, n, k), _ms(seconds), None))
    return out


def bf16_reference_rows() -> list[dict]:
    """Kernel-table rows of the BF16 matmuls float8_experimental #38 and #100 timed beside their
    FP8 ones, on the same H100s in the same runs (:data:`F8E_BF16`).

    >>> r = bf16_reference_rows()[2]
    >>> r["shape"], r["time_ms"], r["model"]
    ('16384x7168x8192', '3.57', 'meta-pytorch/float8_experimental#38 16384x7168x8192')
    """
    out = []
    for thread, table in F8E_BF16.items():
        for (m, k, n), seconds in table.items():
            row = _gemm(thread, (m, n, k), _ms(seconds), None)
            out.append({**row, "timed": "bf16 reference matmul of the FP8 benchmark"})
    return out


def cast_transpose_rows() -> list[dict]:
    """Kernel-table rows (``memory:cast_transpose``, shape = bytes moved: 2 in + 1 + 1 out per
    element) of TransformerEngine's cast-transpose.

    >>> r = cast_transpose_rows()[-1]
    >>> r["shape"], r["time_ms"], r["model"]
    ('67108864', '0.05195', 'NVIDIA/TransformerEngine#101 4096x4096')
    """
    out = []
    for dim, us in TE_101.items():
        nbytes = 4 * dim * dim
        ms = str(Decimal(us) / 1000)
        out.append({"op": "memory:cast_transpose", "shape": str(nbytes), "time_ms": ms,
                    "model": f"NVIDIA/TransformerEngine#101 {dim}x{dim}", "tp": 1,
                    "tokens": dim, "timed": "cast_transpose fp16->fp8", "tflops": "",
                    "gbps": repr(nbytes / (float(ms) * 1e-3) / 1e9), "date": "2023-03-14",
                    "device_name": THREADS["NVIDIA/TransformerEngine#101"]["device"]})
    return out


def fit_cast_transpose(rows, gpu) -> dict:
    """The cast-transpose calibration from TransformerEngine#101's rows: the floor is the
    shortest measured kernel, the bandwidth the relative least-squares fit of the rows that
    move more than the part's L2 holds (``gpu.l2_bytes``: repeated runs of a smaller problem find
    their data in L2, where a training step's casts, 67-360 MB in Llama 2 7B, do not); errors on every row, the L2-resident
    ones apart (``held_out``: not the regime the fit is for).
    """
    import numpy as np

    from hpnsim.training.compute.kernel_fit import _summary

    x = np.array([r.shape[0] for r in rows], dtype=float)
    y = np.array([r.seconds for r in rows])
    floor = float(y.min())
    dram = x > gpu.l2_bytes
    w = 1.0 / y[dram]
    inverse = float(np.sum(x[dram] * (y[dram] - floor) * w * w) / np.sum((x[dram] * w) ** 2))
    predicted = floor + x * inverse
    return {"efficiency": 1.0 / (inverse * gpu.memory_bandwidth), "floor_us": floor * 1e6,
            "fitted_on": sorted(r.model for r, d in zip(rows, dram, strict=True) if d),
            "errors": _summary(predicted, y, dram)}


def _ms(seconds: str) -> str:
    # exact: the printed seconds with the decimal point moved three places
    return format(Decimal(seconds).scaleb(3), "f")


def _gemm(thread: str, shape: tuple[int, int, int], ms: str, tflops: str | None) -> dict:
    m, n, k = shape
    flops = 2 * m * n * k
    return {"op": "gemm", "shape": f"{m}x{n}x{k}", "time_ms": ms,
            "model": f"{thread} {m}x{n}x{k}", "tp": 1, "tokens": m,
            "timed": "torch._scaled_mm fp8", "date": THREADS[thread]["date"],
            "device_name": THREADS[thread]["device"],
            "tflops": tflops if tflops is not None else repr(flops / (float(ms) * 1e-3) / 1e12),
            "gbps": ""}
