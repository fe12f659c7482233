#!/usr/bin/env python3
"""Measure the kernels hpnsim's compute model times, on this GPU, into a kernel-table CSV.

Run on one NVIDIA GPU (H100, H200, H800, A100, B200) with PyTorch; needs only torch and the
standard library (the shape plan is read from hpnsim's model catalog with a small parser, so
hpnsim itself need not be importable):

    python tools/measure_kernels.py --out h100_kernels.csv            # about 5 minutes
    python tools/measure_kernels.py --plan                            # list the plan, no GPU
    python tools/measure_kernels.py --dry-run --out /tmp/k.csv        # tiny shapes on the CPU

What it measures (format: hpnsim.training.compute.kernel_tables):

- GEMMs, BF16 (torch.mm) and FP8 E4M3 (torch._scaled_mm, BF16 out, where the GPU has FP8): for
  every catalog transformer under TP 1, 2, 4 and 8, the (N, K) of its QKV, O, FC1, FC2, router,
  expert and output-head layers, forward ``[M,K] @ [K,N]``, input gradient (N and K swapped)
  and weight gradient (M = output features, K = tokens), over token counts M in 1024..16384;
  B is a transposed row-major weight (Megatron's ``X @ W^T``);
- fused attention: torch SDPA (flash backend where available), BF16, causal and full masks,
  forward and backward, sequence lengths 1k..16k at 16k tokens per call, head dims 64 and 128,
  8 and 32 heads; TFLOP/s counted as hpnsim counts them (causal: s(s+1)/2 pairs);
- memory-bound kernels: RMSNorm and LayerNorm (forward and backward), SwiGLU (eager: silu(g)*u,
  forward and backward), residual add, FP8 cast-transpose, fused AdamW; effective GB/s = the
  bytes hpnsim counts for the kernel / measured time.

Timing: CUDA events around a loop after warm-up, the loop lengthened to ~10 ms per shape; no
clock locking (the model's calibration, MAMF, also ran at default clocks). Each section stops
when its share of ``--budget-s`` is spent, shapes ordered so that an early stop still covers
every layer at one token count. Provenance (device, driver, torch, CUDA, date) is on every row;
``<out>.meta.json`` adds SM clocks and power sampled after the GEMMs, and what was skipped.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

CATALOG = Path(__file__).resolve().parents[1] / "src/hpnsim/workloads/catalog/models.yaml"
COLUMNS = ["gpu", "device_name", "driver", "torch", "cuda", "date", "op", "shape", "dtype",
           "tflops", "gbps", "kernel"]
TPS = (1, 2, 4, 8)
TOKENS = (4096, 16384, 1024, 8192, 2048)   # measurement passes, most useful first
ATTN_SEQS = (1024, 2048, 4096, 8192, 16384)
ATTN_TOKENS = 16384
SHARES = {"gemm": 0.62, "attention": 0.25, "memory": 0.13}
#: where tensors live: "cuda", or "cpu" for --dry-run (tiny shapes, wall-clock timing)
DEVICE = "cuda"
#: (tokens, width) of the memory-bound measurements; >= 128 MB so L2 does not serve them
MEMORY_SIZES = ((8192, 8192), (16384, 8192), (32768, 8192))
ADAM_PARAMETERS = 256 * 2**20
DRY_GEMMS = [(64, 128, 64), (128, 64, 128), (64, 64, 256)]
DRY_ATTENTION = [(1, 2, 128, 64, True), (1, 2, 128, 64, False)]


# ----- plan (no torch) -------------------------------------------------------------------
def read_catalog(path: Path = CATALOG) -> dict[str, dict]:
    """The catalog's models as {name: {field: value}} (the YAML subset models.yaml uses)."""
    models: dict[str, dict] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith(" "):
            current = line.rstrip(":").strip()
            models[current] = {}
            continue
        key, _, value = line.strip().partition(":")
        models[current][key.strip()] = _scalar(value.strip())
    return models


def _scalar(text: str):
    if text in ("true", "false"):
        return text == "true"
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "e" not in text.lower() else number


def layer_groups(m: dict, tp: int) -> set[tuple[int, int]]:
    """(N, K) of each linear layer on one GPU under TP ``tp`` (forward ``Y = X W^T``)."""
    if m.get("kind", "transformer") != "transformer" or m["heads"] % tp or m["ffn"] % tp:
        return set()
    h, heads = m["hidden"], m["heads"]
    kv = m.get("kv_heads") or heads
    d = m.get("head_dim") or h // heads
    kv_local = kv // tp if kv % tp == 0 else 1
    gated = m.get("gated_mlp", True)
    q = heads // tp * d
    groups = {((heads // tp + 2 * kv_local) * d, h), (h, q),
              ((2 if gated else 1) * m["ffn"] // tp, h), (h, m["ffn"] // tp),
              (math.ceil(m["vocab"] / tp), h)}
    if m.get("experts"):
        ef = m.get("expert_ffn") or m["ffn"]
        widths = [ef] + ([m["shared_experts"] * ef] if m.get("shared_experts") else [])
        for width in (w for w in widths if w % tp == 0):
            groups |= {((2 if gated else 1) * width // tp, h), (h, width // tp)}
        groups.add((m["experts"], h))
    return groups


def gemm_plan(models: dict[str, dict]) -> list[tuple[int, int, int]]:
    """GEMM shapes (M, N, K), deduplicated, ordered pass by pass over :data:`TOKENS`."""
    groups = sorted({g for m in models.values() for tp in TPS for g in layer_groups(m, tp)})
    seen, plan = set(), []
    for tokens in TOKENS:
        for n, k in groups:
            for shape in ((tokens, n, k), (tokens, k, n), (n, k, tokens)):
                if shape not in seen:
                    seen.add(shape)
                    plan.append(shape)
    return plan


def attention_plan() -> list[tuple[int, int, int, int, bool]]:
    """(batch, heads, seq, head_dim, causal) of the attention measurements."""
    return [(max(1, ATTN_TOKENS // s), heads, s, d, causal)
            for d in (128, 64) for heads in (32, 8) for causal in (True, False)
            for s in ATTN_SEQS]


def causal_pairs(s: int, causal: bool) -> float:
    return s * (s + 1) / 2 if causal else float(s) * s


# ----- measurement (torch) ---------------------------------------------------------------
def catalog_gpu(device_name: str) -> str:
    name = device_name.upper()
    for key in ("H200", "H800", "H100", "A100", "B200"):
        if key in name:
            return key.lower()
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")


def provenance(torch) -> dict:
    device = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu (dry run)"
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                 "--format=csv,noheader", "-i", "0"], capture_output=True,
                                text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        driver = ""
    return {"gpu": catalog_gpu(device), "device_name": device, "driver": driver,
            "torch": torch.__version__, "cuda": torch.version.cuda or "",
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def smi_sample() -> dict:
    query = "clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader",
                              "-i", "0"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(zip(query.split(","), (v.strip() for v in out.split(",")), strict=False))


class Timer:
    """Seconds per call of ``fn``: warm-up, one probe, then a loop of ~``target_s``."""

    def __init__(self, torch, target_s: float = 0.010):
        self.torch, self.target_s = torch, target_s

    def __call__(self, fn) -> float:
        fn()
        self._sync()
        probe = self._loop(fn, 1)
        n = max(3, min(200, math.ceil(self.target_s / max(probe, 1e-7))))
        return self._loop(fn, n)

    def _sync(self):
        if DEVICE == "cuda":
            self.torch.cuda.synchronize()

    def _loop(self, fn, n: int) -> float:
        torch = self.torch
        if DEVICE != "cuda":
            start = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - start) / n
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / n


def _pad16(x: int) -> int:
    return -(-x // 16) * 16


def measure_gemms(torch, timer, plan, fp8: bool, deadline: float, rows: list, skipped: list):
    most = max(max(m * k, n * k, m * n) for m, n, k in plan)
    pool = torch.randn(most, device=DEVICE, dtype=torch.bfloat16)
    pool8 = pool.to(torch.float8_e4m3fn) if fp8 else None
    one = torch.ones((), device=DEVICE, dtype=torch.float32)
    for m, n, k in plan:
        for dtype in (("bf16", "fp8") if fp8 else ("bf16",)):
            if time.monotonic() > deadline:
                skipped.append(f"gemm {m}x{n}x{k} {dtype}")
                continue
            if dtype == "bf16":
                a, w = pool[:m * k].view(m, k), pool[:n * k].view(n, k)
                seconds = timer(lambda a=a, w=w: torch.mm(a, w.t()))
                shape = (m, n, k)
            else:   # _scaled_mm wants dimensions divisible by 16 and a column-major B
                m8, n8, k8 = _pad16(m), _pad16(n), _pad16(k)
                if max(m8 * k8, n8 * k8) > pool8.numel():
                    skipped.append(f"gemm {m}x{n}x{k} fp8 (pool)")
                    continue
                a, w = pool8[:m8 * k8].view(m8, k8), pool8[:n8 * k8].view(n8, k8)
                seconds = timer(lambda a=a, w=w: torch._scaled_mm(
                    a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                shape = (m8, n8, k8)
            flops = 2.0 * shape[0] * shape[1] * shape[2]
            rows.append({"op": "gemm", "shape": "x".join(map(str, shape)), "dtype": dtype,
                         "tflops": f"{flops / seconds / 1e12:.6g}", "gbps": "",
                         "kernel": "torch._scaled_mm" if dtype == "fp8" else "torch.mm"})
    del pool, pool8


def measure_attention(torch, timer, plan, deadline: float, rows: list, skipped: list):
    import torch.nn.functional as F
    backend, kernel = _sdpa_backend() if DEVICE == "cuda" else (_null_context, "sdpa(cpu)")
    for batch, heads, seq, d, causal in plan:
        if time.monotonic() > deadline:
            skipped.append(f"attention {batch}x{heads}x{seq}x{d} causal={causal}")
            continue
        q, k, v = (torch.randn(batch, heads, seq, d, device=DEVICE, dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        with backend():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            grad = torch.randn_like(out)
            fwd = timer(lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(
                q, k, v, is_causal=c))
            bwd = timer(lambda o=out, q=q, k=k, v=v, g=grad: torch.autograd.grad(
                o, (q, k, v), g, retain_graph=True))
        flops = 4.0 * batch * heads * d * causal_pairs(seq, causal)
        mask = "causal" if causal else "full"
        for direction, seconds, factor in (("fwd", fwd, 1.0), ("bwd", bwd, 2.5)):
            rows.append({"op": f"attention_{direction}_{mask}",
                         "shape": f"{batch}x{heads}x{seq}x{d}", "dtype": "bf16",
                         "tflops": f"{factor * flops / seconds / 1e12:.6g}", "gbps": "",
                         "kernel": kernel})
        del q, k, v, out, grad


def _null_context():
    import contextlib
    return contextlib.nullcontext()


def _sdpa_backend():
    """A factory of the context that restricts SDPA to fused kernels, and its label."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return _null_context, "sdpa(default)"
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
             SDPBackend.EFFICIENT_ATTENTION]
    return (lambda: sdpa_kernel(fused)), "sdpa(flash|cudnn|efficient)"


def measure_memory(torch, timer, fp8: bool, deadline: float, rows: list, skipped: list):
    import torch.nn.functional as F
    cases = []
    for tokens, width in MEMORY_SIZES:
        x = torch.randn(tokens, width, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
        w = torch.ones(width, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
        n = float(tokens * width)
        rms = getattr(F, "rms_norm", None)
        if rms is not None:
            y = rms(x, (width,), w)
            dy = torch.randn_like(y)
            cases += [("rmsnorm", 4 * n, lambda x=x, w=w, f=rms, s=(width,): f(x, s, w),
                       "F.rms_norm"),
                      ("rmsnorm_bwd", 6 * n, lambda y=y, dy=dy, x=x: torch.autograd.grad(
                          y, (x,), dy, retain_graph=True), "F.rms_norm autograd")]
        ln = F.layer_norm(x, (width,), w)
        dln = torch.randn_like(ln)
        cases += [("layernorm", 4 * n, lambda x=x, w=w, s=(width,): F.layer_norm(x, s, w),
                   "F.layer_norm"),
                  ("layernorm_bwd", 6 * n, lambda y=ln, dy=dln, x=x: torch.autograd.grad(
                      y, (x,), dy, retain_graph=True), "F.layer_norm autograd"),
                  ("residual", 6 * n, lambda x=x: x.detach() + x.detach(), "add")]
        g, u = (torch.randn(tokens, width, device=DEVICE, dtype=torch.bfloat16,
                            requires_grad=True) for _ in range(2))
        s = F.silu(g) * u
        ds = torch.randn_like(s)
        cases += [("swiglu", 6 * n, lambda g=g, u=u: F.silu(g) * u, "eager silu*mul"),
                  ("swiglu_bwd", 10 * n, lambda s=s, ds=ds, g=g, u=u: torch.autograd.grad(
                      s, (g, u), ds, retain_graph=True), "eager autograd")]
        if fp8:
            xd = x.detach()
            cases.append(("cast_transpose", 4 * n, lambda xd=xd: (
                xd.to(torch.float8_e4m3fn), xd.t().contiguous().to(torch.float8_e4m3fn)),
                "eager cast + transpose-cast"))
    params = ADAM_PARAMETERS
    p = torch.randn(params, device=DEVICE, dtype=torch.float32, requires_grad=True)
    p.grad = torch.randn_like(p)
    try:
        opt, label = torch.optim.AdamW([p], lr=1e-4, fused=True), "AdamW(fused=True)"
    except (RuntimeError, TypeError):
        opt, label = torch.optim.AdamW([p], lr=1e-4, foreach=True), "AdamW(foreach=True)"
    cases.append(("adam", 30.0 * params, opt.step, f"{label}, FP32 params"))
    for name, nbytes, fn, kernel in cases:
        if time.monotonic() > deadline:
            skipped.append(f"memory {name} {int(nbytes)}")
            continue
        seconds = timer(fn)
        rows.append({"op": f"memory:{name}", "shape": str(int(nbytes)), "dtype": "bf16",
                     "tflops": "", "gbps": f"{nbytes / seconds / 1e9:.6g}", "kernel": kernel})


def _has_fp8(torch) -> bool:
    """FP8 GEMMs run here: Ada/Hopper or later on CUDA; on the CPU, if _scaled_mm accepts them."""
    if not hasattr(torch, "float8_e4m3fn"):
        return False
    if DEVICE == "cuda":
        return torch.cuda.get_device_capability(0) >= (8, 9)
    try:
        a = torch.zeros(16, 16, dtype=torch.float8_e4m3fn)
        one = torch.ones((), dtype=torch.float32)
        torch._scaled_mm(a, a.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="kernels.csv", help="CSV to write")
    parser.add_argument("--budget-s", type=float, default=300.0,
                        help="wall-clock budget for the measurements (default 300 s)")
    parser.add_argument("--plan", action="store_true", help="print the plan and exit")
    parser.add_argument("--dry-run", action="store_true",
                        help="exercise every measurement on the CPU with tiny shapes")
    args = parser.parse_args(argv)
    plan, attention = gemm_plan(read_catalog()), attention_plan()
    if args.plan:
        flops = sum(2.0 * m * n * k for m, n, k in plan)
        print(f"{len(plan)} GEMM shapes ({flops / 1e15:.1f} PFLOP per dtype), "
              f"{len(attention_plan())} attention configurations")
        for shape in plan:
            print("x".join(map(str, shape)))
        return 0
    import torch
    if args.dry_run:
        global DEVICE, MEMORY_SIZES, ADAM_PARAMETERS
        DEVICE, MEMORY_SIZES, ADAM_PARAMETERS = "cpu", ((256, 256),), 4096
        plan, attention = DRY_GEMMS, DRY_ATTENTION
    elif not torch.cuda.is_available():
        print("error: no CUDA device (use --dry-run to exercise the script on the CPU)",
              file=sys.stderr)
        return 2
    start = time.monotonic()
    meta = provenance(torch)
    fp8 = _has_fp8(torch)
    timer, rows, skipped, samples = Timer(torch), [], [], {}
    budget = {k: v * args.budget_s for k, v in SHARES.items()}
    measure_gemms(torch, timer, plan, fp8, start + budget["gemm"], rows, skipped)
    if DEVICE == "cuda":
        samples["after_gemms"] = smi_sample()
        torch.cuda.empty_cache()
    measure_attention(torch, timer, attention, start + budget["gemm"] + budget["attention"],
                      rows, skipped)
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    measure_memory(torch, timer, fp8, start + args.budget_s, rows, skipped)
    out = Path(args.out)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**{k: meta[k] for k in COLUMNS[:6]}, **row})
    out.with_suffix(out.suffix + ".meta.json").write_text(json.dumps(
        {**meta, "fp8": fp8, "nvidia_smi": samples, "skipped": skipped,
         "wall_s": round(time.monotonic() - start, 1), "rows": len(rows)}, indent=1))
    print(f"{len(rows)} rows -> {out} ({len(skipped)} skipped, "
          f"{time.monotonic() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
