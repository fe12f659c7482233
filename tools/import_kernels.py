#!/usr/bin/env python3
"""Rebuild hpnsim's measured-kernel package data from public per-kernel measurements.

Sources (read from local git clones, at a recorded commit):

- microsoft/vidur (MIT): ``data/profiling/compute/{a100,h100}/<org>/<model>/mlp.csv``: one
  transformer layer's operations (QKV, O, MLP up and down projections; RMSNorm/LayerNorm,
  rotary, SiLU-and-mul/GeLU, residual add) in FP16 under ``torch.inference_mode``, by token
  count and TP degree; each figure is the median over 20 runs of the CUDA-kernel time that
  torch.profiler recorded under the operation's ``record_function`` (vidur
  ``profiling/mlp/mlp_wrapper.py``, ``profiling/utils/record_function_tracer.py``). Its
  attention tables (``attention.csv``) are inference (paged prefill/decode) kernels and are not
  imported.
- alibaba/InferSim (Apache-2.0): ``bench_data/gemm/h800/data.csv``: DeepGEMM FP8 GEMMs
  (1D2D block scaling, BF16 out) on an H800, timed with DeepGEMM's ``bench_kineto``
  (``kernel_benchmark/deepgemm_gemm.py``).

- linkedin/Liger-Kernel (BSD-2-Clause): ``benchmark/data/all_benchmark_data.csv``, the rows
  where Liger times Megatron-Core's own kernels on an H100 80GB HBM3 (``triton.testing.do_bench``
  median, ``benchmark/scripts/benchmark_megatron_cross_entropy.py`` and
  ``benchmark_megatron_swiglu.py``): the vocabulary-parallel cross-entropy unfused
  (``vocab_parallel_cross_entropy``) and fused (``fused_vocab_parallel_cross_entropy``) over
  BF16 logits ``[2048, 4, V]``, forward and forward + backward (the backward is their
  difference), and ``bias_swiglu_impl``'s forward over ``[2048, 4, 2 f]``. Its backward rows are
  not imported: the benchmark's gradient is ``sum()``'s broadcast scalar, not a training
  step's tensor, and Megatron's fused backward comes out slower than eager PyTorch's there.

- figures published in GitHub threads (``tools/kernel_threads.py``, each with its URL, author
  and date): cuBLASLt FP8 GEMMs through ``torch._scaled_mm`` on H100s, and TransformerEngine's
  FP8 cast-transpose kernel on an H100 SXM.

Writes into ``--out`` (default ``src/hpnsim/data``): ``kernels_vidur_a100.csv``,
``kernels_vidur_h100.csv``, ``kernels_infersim_h800.csv``, ``kernels_scaled_mm_h100.csv``,
``kernels_te_h100.csv``, ``kernels_liger_h100.csv`` (kernel tables ``--kernel-table`` reads,
with a ``#`` provenance header and the source's time in ``time_ms``), and
``kernels_calibration.json`` (the fit of :mod:`hpnsim.training.compute.kernel_fit` on those
files, with its held-out errors). Existing files are kept unless ``--force``; ``--refit``
keeps the clone-built tables and rewrites the rest.

    git clone https://github.com/microsoft/vidur; git clone https://github.com/alibaba/InferSim
    git clone https://github.com/linkedin/Liger-Kernel
    python tools/import_kernels.py --vidur vidur/.git --infersim InferSim/.git \
        --liger Liger-Kernel/.git --force
    python tools/import_kernels.py --refit     # no clones: thread tables and the fit
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np

from hpnsim.training.compute.cross_entropy import cross_entropy_passes, loss_kernel
from hpnsim.training.compute.kernel_fit import (
    _summary,
    fit_gemm,
    fit_gemm_scaled,
    fit_memory,
    read_measurements,
)
from hpnsim.training.compute.memory_ops import (
    gelu_bytes,
    norm_bytes,
    residual_bytes,
    rotary_bytes,
    swiglu_bytes,
)
from hpnsim.workloads.gpus import get_gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))   # kernel_threads.py sits beside it
import kernel_threads as kt  # noqa: E402

VIDUR = "microsoft/vidur"
INFERSIM = "alibaba/InferSim"
LIGER = "linkedin/Liger-Kernel"
LICENCES = {VIDUR: "MIT", INFERSIM: "Apache-2.0", LIGER: "BSD-2-Clause"}
LIGER_PATH = "benchmark/data/all_benchmark_data.csv"
#: Liger's providers that run Megatron-Core's cross-entropy -> hpnsim's implementation name
LIGER_CROSS_ENTROPY = {"megatron-unfused": "unfused", "megatron-fused": "fused"}
#: the GPU the imported Liger rows name (``gpu_name``): an H100 SXM (HBM3)
LIGER_GPU = "NVIDIA H100 80GB HBM3"
#: vocabularies whose loss rows the fit does not see (every other one of Liger's six, so the
#: fit spans 4k to 128k, the training sizes, and is checked inside that range)
LIGER_HELD_OUT = (8192, 65536)
#: token counts kept (vidur measures 1..4096 every 8 to 32, Llama 3 to 32768): powers of two
#: and 3 x 2^k, enough to see tile and wave steps at every scale, small enough to ship
TOKENS = sorted({2 ** i for i in range(16)} | {3 * 2 ** i for i in range(3, 14)})
#: models whose rows the fit does not see (the error is reported on them)
HELD_OUT = {
    "a100": ("meta-llama/Llama-2-70b-hf", "meta-llama/Meta-Llama-3-8B", "microsoft/phi-2"),
    "h100": ("meta-llama/Llama-2-70b-hf", "microsoft/phi-2"),
}
#: vidur's Phi-2 config (vidur/config/model_config.py, Phi2ModelConfig): LayerNorm, attention
#: and MLP in parallel (no post-attention norm: its "add" times two adds, not imported)
LAYERNORM_MODELS = {"microsoft/phi-2"}
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
COLUMNS = ("gpu", "device_name", "driver", "torch", "cuda", "date", "op", "shape", "dtype",
           "tflops", "gbps", "time_ms", "model", "tp", "tokens", "timed")
STAT = "median"


def git_show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def git_ls(git_dir: str, commit: str, under: str) -> list[str]:
    out = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", commit,
                          under], check=True, capture_output=True, text=True).stdout
    return out.split()


def resolve(git_dir: str, commit: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit], check=True,
                          capture_output=True, text=True).stdout.strip()


def vidur_layer_kernels(text: str, model: str) -> list[dict]:
    """Kernel rows (GEMMs and memory-bound ops) of one vidur ``mlp.csv``, first row per
    (tokens, TP) among :data:`TOKENS`."""
    out, seen = [], set()
    for row in csv.DictReader(io.StringIO(text)):
        tokens, tp = int(row["num_tokens"]), int(row["num_tensor_parallel_workers"])
        if tokens not in TOKENS or (tokens, tp) in seen:
            continue
        seen.add((tokens, tp))
        heads, kv, hidden = int(row["n_head"]), int(row["n_kv_head"]), int(row["n_embd"])
        ffn, gated = int(row["n_expanded_embd"]), row["use_gated_mlp"] == "True"
        head_dim = hidden // heads
        up = 2 * ffn if gated else ffn
        shapes = {"attn_pre_proj": (tokens, (heads + 2 * kv) * head_dim // tp, hidden),
                  "attn_post_proj": (tokens, hidden, heads * head_dim // tp),
                  "mlp_up_proj": (tokens, up // tp, hidden),
                  "mlp_down_proj": (tokens, hidden, ffn // tp)}
        for timed in GEMMS:
            m, n, k = shapes[timed]
            out.append(_row("gemm", (m, n, k), row[f"time_stats.{timed}.{STAT}"], model, tp,
                            tokens, timed, flops=2 * m * n * k))
        memory = [("attn_rope", "rotary", rotary_bytes(tokens, (heads + kv) * head_dim // tp,
                                                        2)),
                  ("mlp_act", "swiglu" if gated else "gelu",
                   (swiglu_bytes if gated else gelu_bytes)(tokens, ffn // tp, 2))]
        if tp == 1:   # norms and adds see the whole hidden size at every TP degree
            memory.append(("input_layernorm",
                           "layernorm" if model in LAYERNORM_MODELS else "rmsnorm",
                           norm_bytes(tokens, hidden, 2)))
            if model not in LAYERNORM_MODELS:
                memory.append(("add", "residual", residual_bytes(tokens, hidden, 2)))
        for timed, name, nbytes in memory:
            out.append(_row(f"memory:{name}", (int(nbytes),), row[f"time_stats.{timed}.{STAT}"],
                            model, tp, tokens, timed, nbytes=nbytes))
    return out


def infersim_gemms(text: str) -> list[dict]:
    """Kernel rows of InferSim's DeepGEMM table (``m,k,n,latency_us,mfu``); the source's
    microseconds become exact decimal milliseconds."""
    out = []
    for row in csv.DictReader(io.StringIO(text)):
        m, k, n = int(row["m"]), int(row["k"]), int(row["n"])
        ms = str(Decimal(row["latency_us"]) / 1000)
        out.append(_row("gemm", (m, n, k), ms, f"n={n},k={k}", 1, m, "deepgemm_fp8_gemm_nt",
                        flops=2 * m * n * k))
    return out


def _row(op, shape, ms, model, tp, tokens, timed, *, flops=None, nbytes=None) -> dict:
    seconds = float(ms) * 1e-3
    return {"op": op, "shape": "x".join(map(str, shape)), "time_ms": ms, "model": model,
            "tp": tp, "tokens": tokens, "timed": timed,
            "tflops": repr(flops / seconds / 1e12) if flops else "",
            "gbps": repr(nbytes / seconds / 1e9) if nbytes else ""}


def clone_table(out: Path, file: str, header: list[str], gpu: str, dtype: str, rows: list[dict],
                force: bool, **source) -> dict:
    """Write a table built from a clone (:func:`write_table`) and return its source entry:
    ``source`` (repository, commit, licence, paths, timed) with its GPU and file name."""
    write_table(out / file, header, gpu, dtype, rows, force)
    timed = source.pop("timed")
    return {**source, "gpu": gpu, "file": file, "timed": timed}


def write_table(path: Path, header: list[str], gpu: str, dtype: str, rows: list[dict],
                force: bool) -> None:
    if path.exists() and not force:
        sys.exit(f"error: {path} exists; pass --force to rebuild it")
    buf = io.StringIO()
    buf.write("".join(f"# {line}\n" for line in header))
    writer = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({"gpu": gpu, "device_name": "", "driver": "", "torch": "", "cuda": "",
                         "date": "", "dtype": dtype, **r})
    path.write_text(buf.getvalue(), encoding="utf-8")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vidur", help="git dir of a microsoft/vidur clone (omit with --refit)")
    ap.add_argument("--vidur-commit", default="HEAD")
    ap.add_argument("--infersim", help="git dir of an alibaba/InferSim clone (omit with --refit)")
    ap.add_argument("--infersim-commit", default="HEAD")
    ap.add_argument("--liger", help="git dir of a linkedin/Liger-Kernel clone (omit with --refit)")
    ap.add_argument("--liger-commit", default="HEAD")
    ap.add_argument("--refit", action="store_true",
                    help="keep the shipped vidur/InferSim/Liger tables; rewrite the thread "
                         "tables and the calibration fitted on all shipped tables")
    ap.add_argument("--out", default="src/hpnsim/data")
    ap.add_argument("--force", action="store_true", help="rebuild existing files")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.refit:
        previous = json.loads((out / "kernels_calibration.json").read_text(encoding="utf-8"))
        sources = [e for e in previous["sources"]
                   if e["repository"] in (VIDUR, INFERSIM, LIGER)]
    elif args.vidur and args.infersim and args.liger:
        sources = import_clones(args, out)
    else:
        sys.exit("error: --vidur, --infersim and --liger (git dirs of the clones), or --refit")
    sources += write_thread_tables(out, args.force or args.refit)
    calibration = {"sources": sources, **calibrate(out)}
    path = out / "kernels_calibration.json"
    if path.exists() and not (args.force or args.refit):
        sys.exit(f"error: {path} exists; pass --force to rebuild it")
    path.write_text(json.dumps(calibration, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: {p: {x: v for x, v in e.items() if x not in ("fitted_on", "held_out")}
                          for p, e in calibration[k].items()} for k in ("gemm", "memory")},
                     indent=1))


def import_clones(args, out: Path) -> list[dict]:
    """Write the vidur and InferSim tables from the clones; their source entries."""
    vidur_commit = resolve(args.vidur, args.vidur_commit)
    infersim_commit = resolve(args.infersim, args.infersim_commit)
    sources = []
    for gpu in ("a100", "h100"):
        under = f"data/profiling/compute/{gpu}"
        paths = [p for p in git_ls(args.vidur, vidur_commit, under) if p.endswith("/mlp.csv")]
        rows = []
        for p in paths:
            model = "/".join(p.split("/")[4:6])
            rows += vidur_layer_kernels(git_show(args.vidur, vidur_commit, p), model)
        header = [f"source: https://github.com/{VIDUR} commit {vidur_commit}",
                  f"licence: {LICENCES[VIDUR]} (Copyright (c) Microsoft Corporation)",
                  f"paths: {under}/<org>/<model>/mlp.csv ({len(paths)} models)",
                  f"gpu: {gpu} as vidur names it (data/profiling/compute/{gpu})",
                  "timed: one layer's kernels in FP16 under torch.inference_mode (sarathi-serve "
                  "layers); CUDA-kernel time under each op's record_function, torch.profiler",
                  f"statistic: time_stats.<op>.{STAT} over 20 runs, in ms (column time_ms, "
                  "verbatim); tflops/gbps derived; shape MxNxK ([M,K]@[K,N]) or bytes",
                  f"rows: first row per (tokens, TP) for tokens in {TOKENS}; norms and adds at "
                  "TP 1 only (their shape does not depend on TP)",
                  "rebuilt by tools/import_kernels.py"]
        sources.append(clone_table(
            out, f"kernels_vidur_{gpu}.csv", header, gpu, "fp16", rows, args.force,
            repository=VIDUR, commit=vidur_commit, licence=LICENCES[VIDUR], paths=paths,
            timed="FP16 layer kernels (GEMMs, norms, rotary, activation, add)"))
    infersim_path = "bench_data/gemm/h800/data.csv"
    rows = infersim_gemms(git_show(args.infersim, infersim_commit, infersim_path))
    header = [f"source: https://github.com/{INFERSIM} commit {infersim_commit}",
              f"licence: {LICENCES[INFERSIM]}",
              f"path: {infersim_path}",
              "gpu: h800",
              "timed: DeepGEMM FP8 GEMM (1D2D block scaling, K-major A and B, BF16 out), "
              "deep_gemm.testing.bench_kineto (kernel_benchmark/deepgemm_gemm.py)",
              "statistic: latency_us as published, here in ms (column time_ms, exact decimal)",
              "rebuilt by tools/import_kernels.py"]
    sources.append(clone_table(
        out, "kernels_infersim_h800.csv", header, "h800", "fp8", rows, args.force,
        repository=INFERSIM, commit=infersim_commit, licence=LICENCES[INFERSIM],
        paths=[infersim_path], timed="DeepGEMM FP8 GEMMs, BF16 out"))
    liger_commit = resolve(args.liger, args.liger_commit)
    rows = liger_megatron_kernels(git_show(args.liger, liger_commit, LIGER_PATH))
    header = [f"source: https://github.com/{LIGER} commit {liger_commit}",
              f"licence: {LICENCES[LIGER]} (Copyright 2024 LinkedIn Corporation)",
              f"path: {LIGER_PATH} (rows of Megatron-Core's kernels, gpu_name {LIGER_GPU})",
              "gpu: h100 (SXM, HBM3)",
              "timed: Megatron-Core's vocab-parallel cross-entropy, unfused and fused, BF16 "
              "logits [2048, 4, V], TP 1 (benchmark/scripts/benchmark_megatron_cross_entropy.py), "
              "and bias_swiglu_impl's forward on [2048, 4, 2 ffn_local] BF16 "
              "(benchmark_megatron_swiglu.py); triton.testing.do_bench, rep 100",
              "statistic: y_value_50 (median) in ms, verbatim; a backward row is the "
              "forward + backward median less the forward median (exact decimals); shape: the "
              "bytes hpnsim's passes move (cross_entropy.py, memory_ops.swiglu_bytes)",
              "rebuilt by tools/import_kernels.py"]
    sources.append(clone_table(
        out, "kernels_liger_h100.csv", header, "h100", "bf16", rows, args.force,
        repository=LIGER, commit=liger_commit, licence=LICENCES[LIGER], paths=[LIGER_PATH],
        timed="Megatron-Core's cross-entropy (unfused, fused) and SwiGLU forward"))
    return sources


def liger_megatron_kernels(text: str) -> list[dict]:
    """Kernel rows of Megatron-Core's own kernels in Liger's benchmark table: the unfused and
    fused cross-entropy forward and backward (``memory:cross_entropy_<impl>`` and ``..._bwd``,
    shape the bytes :mod:`~hpnsim.training.compute.cross_entropy` counts for its passes) and
    SwiGLU's forward (``memory:swiglu``), on :data:`LIGER_GPU`.

    >>> head = ("kernel_name,kernel_provider,kernel_operation_mode,metric_name,x_value,"
    ...         "y_value_50,extra_benchmark_config_str,gpu_name")
    >>> cfg = '"{""S"": 2048, ""B"": 4, ""TP"": 1}"'
    >>> lines = [head] + [f"megatron_cross_entropy,megatron-fused,{mode},speed,4096,{ms},"
    ...                   f"{cfg},{LIGER_GPU}" for mode, ms in (("forward", "0.3"),
    ...                                                          ("backward", "0.5"))]
    >>> rows = liger_megatron_kernels(chr(10).join(lines))
    >>> # the fused loss moves 22 bytes a logit forward and 10 backward
    >>> [(r["op"], r["shape"], r["time_ms"]) for r in rows]  # doctest: +NORMALIZE_WHITESPACE
    [('memory:cross_entropy_fused', '738197504', '0.3'),
     ('memory:cross_entropy_fused_bwd', '335544320', '0.2')]
    """
    times, out = {}, []
    for row in csv.DictReader(io.StringIO(text)):
        if row["gpu_name"] != LIGER_GPU or row["metric_name"] != "speed":
            continue
        if not row["kernel_name"].startswith("megatron_"):
            continue
        config = json.loads(row["extra_benchmark_config_str"])
        if config.get("TP", 1) != 1:
            continue
        key = (row["kernel_name"], row["kernel_provider"], row["kernel_operation_mode"],
               int(row["x_value"]), config["S"] * config["B"])
        times[key] = row["y_value_50"]
    for (kernel, provider, mode, x, tokens), ms in sorted(times.items()):
        if kernel == "megatron_cross_entropy" and provider in LIGER_CROSS_ENTROPY \
                and mode == "forward":
            impl = LIGER_CROSS_ENTROPY[provider]
            logits = tokens * x
            passes = cross_entropy_passes(impl)
            both = times.get((kernel, provider, "backward", x, tokens))
            model = f"{LIGER} megatron {impl} cross-entropy V={x}"
            forward = sum(p.bytes_per_logit for p in passes if not p.backward) * logits
            out.append(_row(f"memory:{loss_kernel(impl)}", (forward,), ms, model, 1, tokens,
                            f"{provider} forward", nbytes=forward))
            if both is not None:
                backward = sum(p.bytes_per_logit for p in passes if p.backward) * logits
                out.append(_row(f"memory:{loss_kernel(impl, backward=True)}", (backward,),
                                str(Decimal(both) - Decimal(ms)), model, 1, tokens,
                                f"{provider} forward+backward less forward", nbytes=backward))
        elif kernel == "megatron_swiglu" and provider == "megatron" and mode == "forward":
            nbytes = int(swiglu_bytes(tokens, x, 2))
            out.append(_row("memory:swiglu", (nbytes,), ms, f"{LIGER} megatron swiglu "
                            f"ffn_local={x}", 1, tokens, "bias_swiglu_impl forward",
                            nbytes=nbytes))
    return out


def write_thread_tables(out: Path, force: bool) -> list[dict]:
    """Write the tables of figures transcribed from GitHub threads (:mod:`kernel_threads`);
    their source entries (URL, author, date; no licence: quoted measurements)."""
    sources = []
    scaled_mm = ("pytorch/pytorch#143465", "meta-pytorch/float8_experimental#38",
                 "meta-pytorch/float8_experimental#100")
    for name, rows, dtype, threads in (
            ("kernels_scaled_mm_h100.csv", kt.scaled_mm_rows(), "fp8",
             {t: kt.THREADS[t] for t in scaled_mm}),
            ("kernels_te_h100.csv", kt.cast_transpose_rows(), "fp16",
             {"NVIDIA/TransformerEngine#101": kt.THREADS["NVIDIA/TransformerEngine#101"]}),
            ("kernels_f8e_bf16_h100.csv", kt.bf16_reference_rows(), "bf16",
             kt.BF16_REFERENCE_THREADS)):
        header = [f"source: {d['url']} ({d['author']}, {d['date']}): {d['timed']}; figure: "
                  f"{d['figure']}" for d in threads.values()]
        header += ["licence: none (figures quoted from public GitHub threads, with their URL)",
                   "gpu: h100 as each thread names it; model column: thread and shape",
                   "time_ms: the thread's figure in ms (derived from TFLOP/s where the thread "
                   "prints TFLOP/s: pytorch/pytorch#143465); shape MxNxK or bytes",
                   "rebuilt by tools/import_kernels.py from tools/kernel_threads.py"]
        write_table(out / name, header, "h100", dtype, rows, force)
        sources += [{"repository": t.split("#")[0], "thread": d["url"], "author": d["author"],
                     "date": d["date"], "licence": "none (quoted measurement)", "gpu": "h100",
                     "file": name, "timed": d["timed"]} for t, d in threads.items()]
    return sources


def calibrate(out: Path) -> dict:
    """The calibration fitted on the shipped tables in ``out``: GEMMs by part and dtype class,
    elementwise kernels by part."""
    def rows(name):
        return read_measurements((out / name).read_text(encoding="utf-8"), name)
    gemm, memory = {}, {}
    for gpu in ("a100", "h100"):
        measured = rows(f"kernels_vidur_{gpu}.csv")
        gemm[f"{gpu}/16bit"] = fit_gemm(measured, get_gpu(gpu), "fp16", HELD_OUT[gpu])
        memory[gpu] = fit_memory(measured, get_gpu(gpu), HELD_OUT[gpu])
    memory["h100"]["kernels"]["cast_transpose"] = kt.fit_cast_transpose(
        rows("kernels_te_h100.csv"), get_gpu("h100"))
    _megatron_kernels(memory["h100"], rows("kernels_liger_h100.csv"), get_gpu("h100"))
    scaled = [r for r in rows("kernels_scaled_mm_h100.csv")
              if r.model.startswith(kt.SCALED_MM_FIT_SOURCE)]
    gemm["h100/fp8-cublas"] = fit_gemm_scaled(scaled, get_gpu("h100"), "fp8", kt.PT_HELD_OUT,
                                              gemm["h100/16bit"], "h100/16bit")
    measured = rows("kernels_infersim_h800.csv")
    groups = sorted({r.model for r in measured})
    gemm["h800/fp8-deepgemm"] = fit_gemm(measured, get_gpu("h800"), "fp8", tuple(groups[1::2]))
    return {"gemm": gemm, "memory": memory}


def _megatron_kernels(entry: dict, liger, gpu) -> None:
    """Fit Megatron-Core's cross-entropy kernels (Liger's rows) into the part's memory
    ``entry``, and check its SwiGLU fit (vLLM's kernel, vidur's rows) on Megatron's SwiGLU
    forward (``errors_megatron``; not refitted: one implementation's forward at one token
    count cannot fix a floor, and its backward was not measured as a training step runs it).
    A loss fit's floor is the whole measured call's, so each of its passes gets an equal
    share of it."""
    loss = [r for r in liger if r.op.startswith("memory:cross_entropy_")]
    held_out = tuple(sorted({r.model for r in loss
                             if any(r.model.endswith(f"V={v}") for v in LIGER_HELD_OUT)}))
    fitted = fit_memory(loss, gpu, held_out)["kernels"]
    for impl in sorted(LIGER_CROSS_ENTROPY.values()):
        for backward in (False, True):
            name = loss_kernel(impl, backward)
            n = sum(p.backward == backward for p in cross_entropy_passes(impl))
            entry["kernels"][name] = {**fitted[name], "floor_us": fitted[name]["floor_us"] / n,
                                      "passes": n}
    swiglu = entry["kernels"]["swiglu"]
    theirs = [r for r in liger if r.op == "memory:swiglu"]
    x = np.array([r.shape[0] for r in theirs], dtype=float)
    predicted = swiglu["floor_us"] * 1e-6 + x / (gpu.memory_bandwidth * swiglu["efficiency"])
    swiglu["errors_megatron"] = _summary(predicted, np.array([r.seconds for r in theirs]),
                                         np.zeros(len(theirs), dtype=bool))
    entry["fitted_on"] = sorted(set(entry["fitted_on"]) | {r.model for r in loss
                                                           if r.model not in held_out})
    entry["held_out"] = sorted(set(entry["held_out"]) | set(held_out))


if __name__ == "__main__":
    main()
