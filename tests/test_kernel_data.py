"""Measured-kernel package data (issue 26, item 1): the imported tables read back the source's
values, the shipped calibration is the fit of those tables, and the fitted model reproduces
measured kernels it was not fitted on within the error docs/compute.md states."""

import csv
import importlib.util
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.training import TrainJob
from hpnsim.training.compute import gemm_time, memory_op_time
from hpnsim.training.compute.calibration import calibration_data, gemm_calibration
from hpnsim.training.compute.kernel_fit import fit_gemm, fit_memory, read_measurements
from hpnsim.training.compute.kernel_tables import packaged_table
from hpnsim.training.compute.memory_ops import norm_bytes
from hpnsim.workloads.gpus import get_gpu

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "hpnsim" / "data"
FIXTURE = ROOT / "tests" / "data" / "vidur" / "h100_llama2_70b_mlp_rows.csv"
spec = importlib.util.spec_from_file_location("import_kernels",
                                              ROOT / "tools" / "import_kernels.py")
ik = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ik)

MODEL = "meta-llama/Llama-2-70b-hf"
# Llama-2-70B: hidden 8192, 64 query heads of 128, 8 KV heads, FFN 28672 (gated)
SHAPES_TP1 = {"attn_pre_proj": (4096, (64 + 2 * 8) * 128, 8192),
              "attn_post_proj": (4096, 8192, 8192),
              "mlp_up_proj": (4096, 2 * 28672, 8192),
              "mlp_down_proj": (4096, 8192, 28672)}


def _source_rows():
    text = "".join(line for line in FIXTURE.read_text().splitlines(keepends=True)
                   if not line.startswith("#"))
    return text, list(csv.DictReader(io.StringIO(text)))


def _shipped(gpu):
    lines = [line for line in (DATA / f"kernels_vidur_{gpu}.csv").read_text().splitlines()
             if not line.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def test_imported_rows_read_back_the_source_values_exactly():
    text, source = _source_rows()
    first = next(r for r in source if r["num_tokens"] == "4096"
                 and r["num_tensor_parallel_workers"] == "1")
    shipped = {(r["model"], r["tp"], r["tokens"], r["timed"]): r for r in _shipped("h100")}
    for timed, (m, n, k) in SHAPES_TP1.items():
        row = shipped[(MODEL, "1", "4096", timed)]
        assert row["time_ms"] == first[f"time_stats.{timed}.median"]     # verbatim, first run
        assert row["shape"] == f"{m}x{n}x{k}"
        assert float(row["tflops"]) == 2 * m * n * k / (float(row["time_ms"]) * 1e-3) / 1e12
    norm = shipped[(MODEL, "1", "4096", "input_layernorm")]
    assert norm["op"] == "memory:rmsnorm" and norm["shape"] == str(2 * 4096 * 8192 * 2)
    assert norm["time_ms"] == first["time_stats.input_layernorm.median"]
    # the importer run on the copied rows gives exactly the shipped rows (TP 8 included)
    for row in ik.vidur_layer_kernels(text, MODEL):
        got = shipped[(MODEL, str(row["tp"]), str(row["tokens"]), row["timed"])]
        assert {k: str(v) for k, v in row.items()} == {k: got[k] for k in row}
    # and the kernel table reader sees the same value
    table = packaged_table("vidur_h100")
    up = [r for r in table.select("h100", "gemm", "fp16") if r.shape == SHAPES_TP1["mlp_up_proj"]]
    assert [r.value for r in up] == [float(shipped[(MODEL, "1", "4096", "mlp_up_proj")]["tflops"])]


def test_infersim_rows_are_the_published_microseconds_in_exact_milliseconds():
    rows = ik.infersim_gemms("m,k,n,latency_us,mfu\n4096,7168,1536,73.091,0.623547\n")
    assert rows[0]["shape"] == "4096x1536x7168" and rows[0]["time_ms"] == "0.073091"


def test_shipped_calibration_is_the_fit_of_the_shipped_tables():
    data = calibration_data()
    for gpu in ("a100", "h100"):
        measured = read_measurements((DATA / f"kernels_vidur_{gpu}.csv").read_text())
        refit = fit_gemm(measured, get_gpu(gpu), "fp16", ik.HELD_OUT[gpu])
        shipped = data["gemm"][f"{gpu}/16bit"]
        assert refit["eta"] == pytest.approx(shipped["eta"], rel=1e-9)
        assert refit["floor_us"] == pytest.approx(shipped["floor_us"], rel=1e-9)
        memory = fit_memory(measured, get_gpu(gpu), ik.HELD_OUT[gpu])
        assert memory["kernels"]["rmsnorm"]["efficiency"] == pytest.approx(
            data["memory"][gpu]["kernels"]["rmsnorm"]["efficiency"], rel=1e-9)
    for entry in data["sources"]:
        if "thread" in entry:   # figures quoted from a GitHub thread: its URL is the source
            assert entry["thread"].startswith("https://github.com/" + entry["repository"])
        else:
            assert entry["licence"] in ("MIT", "Apache-2.0", "BSD-2-Clause")
            assert len(entry["commit"]) == 40


def test_issue_example_llama2_70b_up_projection_lands_within_the_stated_error():
    # vidur, H100, Llama-2-70B at 4096 tokens, TP 1: the MLP up-projection 4096 x 57344 x 8192
    # (two 28672-wide halves fused) measured 5.636 ms (mean of the first run; 5.6685 median).
    # Llama-2-70B's rows are held out of the fit. The MAMF calibration gave 4.92 ms (-13%).
    cal = gemm_calibration("h100", "16bit")
    assert MODEL in cal.held_out
    stated = calibration_data()["gemm"]["h100/16bit"]["errors"]["M>=1024"]["held_out"]
    t = gemm_time(4096, 57344, 8192, "fp16", get_gpu("h100")).seconds
    assert abs(t / 5.636e-3 - 1) <= stated["p90_abs"]
    assert abs(t / 5.636e-3 - 1) < abs(4.92e-3 / 5.636e-3 - 1)


@pytest.mark.parametrize("timed", list(SHAPES_TP1))
def test_held_out_projection_gemms_within_the_stated_error(timed):
    _, source = _source_rows()
    first = next(r for r in source if r["num_tokens"] == "4096"
                 and r["num_tensor_parallel_workers"] == "1")
    measured = float(first[f"time_stats.{timed}.median"]) * 1e-3
    stated = calibration_data()["gemm"]["h100/16bit"]["errors"]["M>=1024"]["held_out"]
    t = gemm_time(*SHAPES_TP1[timed], "fp16", get_gpu("h800")).seconds   # H800: H100's fit
    assert abs(t / measured - 1) <= stated["p90_abs"], (timed, t, measured)


def test_held_out_fp8_gemm_within_the_stated_error():
    # InferSim, H800, DeepGEMM FP8: 4096 x 36864 x 7168 (N = 36864, K = 7168: a held-out shape)
    # measured 1489 us; the DeepGEMM fit applies to H100 too (the same die) when the job says
    # it runs DeepGEMM
    cal = gemm_calibration("h800", "fp8-deepgemm")
    assert "n=36864,k=7168" in cal.held_out
    stated = calibration_data()["gemm"]["h800/fp8-deepgemm"]["errors"]["M>=1024"]["held_out"]
    for gpu in ("h800", "h100"):
        t = gemm_time(4096, 36864, 7168, "fp8", get_gpu(gpu), library="deepgemm").seconds
        assert abs(t / 1489e-6 - 1) <= stated["p90_abs"], (gpu, t)


def test_held_out_rmsnorm_within_the_stated_error():
    _, source = _source_rows()
    first = next(r for r in source if r["num_tokens"] == "4096"
                 and r["num_tensor_parallel_workers"] == "1")
    measured = float(first["time_stats.input_layernorm.median"]) * 1e-3
    entry = calibration_data()["memory"]["h100"]["kernels"]["rmsnorm"]
    t = memory_op_time("rmsnorm", norm_bytes(4096, 8192, 2), get_gpu("h100")).seconds
    assert t == pytest.approx(entry["floor_us"] * 1e-6
                              + norm_bytes(4096, 8192, 2) / (3.35e12 * entry["efficiency"]))
    assert abs(t / measured - 1) <= entry["errors"]["held_out"]["max_abs"]


LIGER_FIXTURE = ROOT / "tests" / "data" / "liger" / "megatron_unfused_cross_entropy_rows.csv"


def _liger_source():
    return "".join(line for line in LIGER_FIXTURE.read_text().splitlines(keepends=True)
                   if not line.startswith("#"))


def test_liger_loss_rows_read_back_the_source_medians_exactly():
    from decimal import Decimal

    source = list(csv.DictReader(io.StringIO(_liger_source())))
    median = {(r["kernel_operation_mode"], int(r["x_value"])): r["y_value_50"] for r in source}
    lines = [line for line in (DATA / "kernels_liger_h100.csv").read_text().splitlines()
             if not line.startswith("#")]
    shipped = {(r["op"], r["model"]): r for r in csv.DictReader(io.StringIO("\n".join(lines)))}
    for vocab in (65536, 131072):
        model = f"linkedin/Liger-Kernel megatron unfused cross-entropy V={vocab}"
        forward = shipped[("memory:cross_entropy_unfused", model)]
        backward = shipped[("memory:cross_entropy_unfused_bwd", model)]
        assert forward["time_ms"] == median[("forward", vocab)]           # verbatim
        # the benchmark's backward mode times forward + backward: its backward is the rest
        assert Decimal(backward["time_ms"]) == (Decimal(median[("backward", vocab)])
                                                - Decimal(median[("forward", vocab)]))
        # bytes: Megatron's unfused passes, 38 forward and 14 backward per BF16 logit
        assert int(forward["shape"]) == 38 * 2048 * 4 * vocab
        assert int(backward["shape"]) == 14 * 2048 * 4 * vocab
    # the importer on the copied source rows gives the shipped rows
    for row in ik.liger_megatron_kernels(_liger_source()):
        got = shipped[(row["op"], row["model"])]
        assert {k: str(v) for k, v in row.items()} == {k: got[k] for k in row}


def test_held_out_megatron_loss_within_the_stated_error():
    # V = 65536 is held out of the loss fit. The loss of 8192 tokens over 65536 logits a token,
    # Megatron's unfused passes, on an H100: forward 7.934 ms, backward 2.735 ms measured
    from hpnsim.training.compute.stage import head_ops
    from hpnsim.workloads.model_spec import ModelSpec

    model = ModelSpec("v64k", layers=1, hidden=4096, heads=32, ffn=11008, vocab=65536,
                      seq_len=8192)
    ops = head_ops(model, get_gpu("h100"), seq_len=8192, cross_entropy="unfused")
    kernels = calibration_data()["memory"]["h100"]["kernels"]
    logits = 8192 * 65536
    for phase, kernel, per_logit, measured in (
            ("forward", "cross_entropy_unfused", 38, 7.9344024658203125e-3),
            ("input_grad", "cross_entropy_unfused_bwd", 14, 10.669661521911621e-3
             - 7.9344024658203125e-3)):
        entry = kernels[kernel]
        assert "linkedin/Liger-Kernel megatron unfused cross-entropy V=65536" in \
            calibration_data()["memory"]["h100"]["held_out"]
        loss = [op for op in ops.select(kind="memory", phase=phase) if op.name.startswith("ce_")]
        assert len(loss) == entry["passes"]
        t = sum(op.seconds for op in loss)
        # by hand: the call's floor, shared by its passes, and its bytes at the fitted rate
        assert t == pytest.approx(entry["passes"] * entry["floor_us"] * 1e-6
                                  + per_logit * logits / (3.35e12 * entry["efficiency"]))
        assert abs(t / measured - 1) <= entry["errors"]["held_out"]["max_abs"] + 1e-9
        # independent of the fit's own statement: docs/compute.md states these held-out rows
        # within 2.1% (forward) and 0.8% (backward); the bytes at HBM_EFFICIENCY, the model
        # before this fit, are 15% (forward) and 9% fast on them
        assert abs(t / measured - 1) < 0.025
        assert per_logit * logits / (3.35e12 * 0.90) < 0.92 * measured


def test_the_loss_without_a_measurement_streams_at_the_stream_fraction():
    # TransformerEngine's loss was not measured: its passes stream at HBM_EFFICIENCY, no floor
    from hpnsim.training.compute.memory_ops import HBM_EFFICIENCY
    from hpnsim.training.compute.stage import head_ops
    from hpnsim.workloads.models import get

    ops = head_ops(get("llama3-8b"), get_gpu("h100"), seq_len=8192, cross_entropy="te")
    loss = [op for op in ops.ops if op.name.startswith("ce_")]
    assert [op.seconds for op in loss] == pytest.approx(
        [op.bytes / (3.35e12 * HBM_EFFICIENCY) for op in loss])


def test_backward_gemms_use_the_fitted_model_at_their_shapes():
    from hpnsim.training.compute import layer_ops
    from hpnsim.workloads.models import get

    ops = layer_ops(get("llama3-8b"), get_gpu("h100"), seq_len=4096)
    shapes = {}
    for phase in ("input_grad", "weight_grad"):
        for op in ops.select(kind="gemm", phase=phase):
            m, n, k = op.shape[:3]
            batch = op.shape[3] if len(op.shape) == 4 else 1
            assert op.seconds == gemm_time(m, n, k, "bf16", get_gpu("h100"),
                                           batch=batch).seconds
            shapes.setdefault(phase, set()).add(op.shape)
    # QKV (out 6144 = (32 + 2 x 8) x 128, in 4096) at 4096 tokens: the input gradient
    # [T, out] @ [out, in], the weight gradient [out, T] @ [T, in] (K = tokens)
    assert (4096, 4096, 6144) in shapes["input_grad"]
    assert (6144, 4096, 4096) in shapes["weight_grad"]


def test_kernel_table_of_another_gpu_is_refused_before_any_work():
    out = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "1",
                                   "--gpu", "h100", "--kernel-table",
                                   str(DATA / "kernels_vidur_a100.csv")])
    assert out.exit_code == 2
    assert out.output.strip() == (f"error: --kernel-table: {DATA / 'kernels_vidur_a100.csv'} "
                                  f"has rows for a100, none for the job's GPU h100")


def test_kernel_table_by_shipped_name_is_the_shipped_file():
    by_name = TrainJob("llama3-8b", tp=8, dp=1, gpu="h100", kernel_table="f8e_bf16_h100")
    by_path = TrainJob("llama3-8b", tp=8, dp=1, gpu="h100",
                       kernel_table=DATA / "kernels_f8e_bf16_h100.csv")
    assert by_name.kernel_table.rows == by_path.kernel_table.rows
    assert len(by_name.kernel_table.rows) == 8
    # a name that is neither a file nor a shipped table: one line, the shipped names listed
    out = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "1",
                                   "--gpu", "h100", "--kernel-table", "vidur_h200"])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1
    assert out.output.startswith("error: --kernel-table: cannot read vidur_h200")
    assert "shipped with hpnsim: f8e_bf16_h100, infersim_h800" in out.output
