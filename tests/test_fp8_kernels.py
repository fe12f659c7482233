"""FP8 as the framework ran it (issue 26): cuBLASLt FP8 GEMMs and TransformerEngine's casts
from measured kernels. The transcribed thread figures read back exactly from the shipped
tables, the shipped calibration is their fit, held-back measured kernels are reproduced within
the stated error, and the layer model casts what TransformerEngine 1.x casts."""

import csv
import importlib.util
from decimal import Decimal
from pathlib import Path

import pytest

from hpnsim.errors import InputError
from hpnsim.training import TrainJob
from hpnsim.training.compute import gemm_time, layer_ops, memory_op_time
from hpnsim.training.compute.calibration import calibration_data, gemm_calibration
from hpnsim.training.compute.gemm import calibration
from hpnsim.training.compute.kernel_fit import fit_gemm_scaled, read_measurements
from hpnsim.training.compute.kernel_tables import packaged_table
from hpnsim.workloads.gpus import get_gpu
from hpnsim.workloads.models import get

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "hpnsim" / "data"
spec = importlib.util.spec_from_file_location("import_kernels",
                                              ROOT / "tools" / "import_kernels.py")
ik = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ik)
kt = ik.kt


def _shipped(name):
    lines = [line for line in (DATA / name).read_text().splitlines() if not line.startswith("#")]
    return {r["model"]: r for r in csv.DictReader(lines)}


def test_thread_figures_read_back_exactly():
    rows = _shipped("kernels_scaled_mm_h100.csv")
    # pytorch/pytorch#143465 prints TFLOP/s per (m, n, k): kept verbatim, time derived
    for (m, n, k), tflops in kt.PT_143465.items():
        row = rows[f"pytorch/pytorch#143465 {m}x{n}x{k}"]
        assert row["tflops"] == tflops and row["dtype"] == "fp8" and row["gpu"] == "h100"
        assert Decimal(row["time_ms"]) * Decimal(tflops) * 10 ** 9 == pytest.approx(
            Decimal(2 * m * n * k), rel=Decimal("1e-20"))
    # float8_experimental prints seconds per (M, K, N): the same digits, in ms
    assert rows["meta-pytorch/float8_experimental#100 16384x7168x8192"]["time_ms"] == "1.470"
    assert rows["meta-pytorch/float8_experimental#38 16384x1280x8192"]["time_ms"] == "0.243"
    te = _shipped("kernels_te_h100.csv")
    assert te["NVIDIA/TransformerEngine#101 4096x4096"]["time_ms"] == "0.05195"
    assert te["NVIDIA/TransformerEngine#101 4096x4096"]["shape"] == str(4 * 4096 * 4096)
    # the kernel-table reader sees the same figures
    table = packaged_table("scaled_mm_h100")
    got = {r.shape: r.value for r in table.select("h100", "gemm", "fp8")}
    assert got[(8192, 8192, 8192)] == float(kt.PT_143465[(8192, 8192, 8192)])
    assert len(table.select("h100", "memory:cast_transpose", None)) == 0
    assert packaged_table("te_h100").select("h100", "memory:cast_transpose", None)[-1].value \
        == pytest.approx(4 * 4096 * 4096 / 51.95e-6 / 1e9)


def test_meta_bf16_reference_rows_read_back_the_printed_seconds(tmp_path):
    rows = _shipped("kernels_f8e_bf16_h100.csv")
    # the threads print (M, K, N) and seconds: #38 "ffn.w13 (16384, 8192, 7168) 3.57E-03",
    # #100 the torch.bfloat16 ref_time_s 0.003445; A [M, K] @ B [K, N] is shape MxNxK
    w13_38 = rows["meta-pytorch/float8_experimental#38 16384x7168x8192"]
    w13_100 = rows["meta-pytorch/float8_experimental#100 16384x7168x8192"]
    assert (w13_38["time_ms"], w13_100["time_ms"]) == ("3.57", "3.445")
    assert w13_38["dtype"] == "bf16" and len(rows) == 8
    # the kernel-table reader sees 2 M N K / time, and the writer rebuilds the shipped file
    table = packaged_table("f8e_bf16_h100")
    got = sorted(r.value for r in table.select("h100", "gemm", "bf16")
                 if r.shape == (16384, 7168, 8192))
    assert got == pytest.approx([2 * 16384 * 7168 * 8192 / t / 1e12 for t in (3.57e-3, 3.445e-3)])
    ik.write_thread_tables(tmp_path, force=True)
    assert (tmp_path / "kernels_f8e_bf16_h100.csv").read_text() == \
        (DATA / "kernels_f8e_bf16_h100.csv").read_text()


def test_shipped_fp8_calibrations_are_the_fit_of_the_shipped_tables():
    data = calibration_data()
    measured = [r for r in read_measurements((DATA / "kernels_scaled_mm_h100.csv").read_text())
                if r.model.startswith(kt.SCALED_MM_FIT_SOURCE)]
    refit = fit_gemm_scaled(measured, get_gpu("h100"), "fp8", kt.PT_HELD_OUT,
                            data["gemm"]["h100/16bit"], "h100/16bit")
    shipped = data["gemm"]["h100/fp8-cublas"]
    assert refit["eta"] == pytest.approx(shipped["eta"], rel=1e-12)
    assert shipped["held_out"] == sorted(kt.PT_HELD_OUT)
    te = read_measurements((DATA / "kernels_te_h100.csv").read_text())
    cast = kt.fit_cast_transpose(te, get_gpu("h100"))
    assert cast["efficiency"] == pytest.approx(
        data["memory"]["h100"]["kernels"]["cast_transpose"]["efficiency"], rel=1e-12)


def test_held_back_cublas_fp8_gemm_within_the_stated_error():
    # pytorch/pytorch#143465, H100, torch._scaled_mm: m=16384 n=3584 k=8192 at 1309.445 TFLOP/s,
    # a shape the fit did not see; H800 shares the fit (the same die and clocks)
    assert "pytorch/pytorch#143465 16384x3584x8192" in gemm_calibration("h100", "fp8-cublas").held_out
    stated = calibration_data()["gemm"]["h100/fp8-cublas"]["errors"]["M>=1024"]["held_out"]
    measured = 2 * 16384 * 3584 * 8192 / 1309.4453003269748e12
    for gpu in ("h100", "h800"):
        t = gemm_time(16384, 3584, 8192, "fp8", get_gpu(gpu)).seconds
        assert abs(t / measured - 1) <= stated["max_abs"], (gpu, t)
    # cuBLASLt's kernels are modelled slower than DeepGEMM's at this shape, as measured
    assert t > gemm_time(16384, 3584, 8192, "fp8", get_gpu("h800"), library="deepgemm").seconds


def test_cublas_fp8_keeps_cublas_16bit_shape_classes():
    # one fitted factor on the cuBLAS 16-bit efficiencies: the class ratios are cuBLAS's
    fp8, bf16 = calibration(get_gpu("h100"), "fp8"), calibration(get_gpu("h100"), "bf16")
    ratios = {c: fp8.eta[c] / bf16.eta[c] for c in fp8.eta}
    assert max(ratios.values()) == pytest.approx(min(ratios.values()), rel=1e-12)
    assert fp8.floor_s == bf16.floor_s and fp8.memory_efficiency == bf16.memory_efficiency


def test_cast_transpose_is_the_measured_te_kernel_beyond_l2():
    # TransformerEngine#101: 4096 x 4096 FP16 -> FP8 cast-transpose, 51.95 us, 67 MB moved
    # (more than H100's 50 MiB L2); floor: the shortest measured kernel (768 x 768, 3.79 us)
    h100 = get_gpu("h100")
    floor, nbytes = 3.79e-6, 4 * 4096 * 4096
    t = memory_op_time("cast_transpose", nbytes, h100).seconds
    assert t == pytest.approx(51.95e-6, rel=1e-12)
    e = nbytes / ((51.95e-6 - floor) * h100.memory_bandwidth)
    assert memory_op_time("cast_transpose_bwd", 1e8, h100).seconds == pytest.approx(
        floor + 1e8 / (e * h100.memory_bandwidth))
    # the FP8 transpose runs TE's same tiled kernel: its fit
    assert memory_op_time("transpose_bwd", 1e8, h100).seconds == pytest.approx(
        floor + 1e8 / (e * h100.memory_bandwidth))


def test_layer_casts_what_transformer_engine_casts():
    m = get("llama-7b")
    t, h, f = 4096, m.hidden, m.ffn
    ops = {op.name: op for op in layer_ops(m, get_gpu("h100"), seq_len=t, dtype="fp8").ops}
    # LayerNormLinear (QKV, FC1): the norm writes FP8; the backward transposes it (1 + 1 B)
    assert ops["qkv_input_transpose"].bytes == ops["fc1_input_transpose"].bytes == 2 * t * h
    assert ops["qkv_input_transpose"].phase == "weight_grad"
    # Linear (O, FC2): BF16 input cast to both FP8 layouts (2 in, 1 + 1 out)
    assert ops["o_proj_input_cast"].bytes == 4 * t * h
    assert ops["fc2_input_cast"].bytes == 4 * t * f
    # every output gradient: one cast-transpose for dgrad and wgrad
    assert ops["fc1_grad_cast"].bytes == 4 * t * 2 * f
    assert "qkv_input_cast" not in ops and "fc1_input_cast" not in ops
    bf16 = [op.name for op in layer_ops(m, get_gpu("h100"), seq_len=t).ops]
    assert not [n for n in bf16 if "cast" in n or "transpose" in n]
    # an MoE expert's FC1 reads the permuted BF16 tokens, no fused norm: cast-transpose
    moe = get("mixtral-8x7b")
    names = [op.name for op in layer_ops(moe, get_gpu("h100"), seq_len=4096, dtype="fp8").ops]
    assert "expert_fc1_input_cast" in names and "expert_fc1_input_transpose" not in names


def test_fp8_gemm_option():
    job = TrainJob("llama-7b", dp=8, global_batch=16, seq_len=4096, gpu="h100", dtype="fp8",
                   fp8_gemm="deepgemm")
    assert job.to_dict()["fp8_gemm"] == "deepgemm"
    assert "fp8_gemm" not in TrainJob("llama-7b", gpu="h100", dtype="fp8").to_dict()
    with pytest.raises(InputError) as err:
        TrainJob("llama-7b", gpu="h100", dtype="fp8", fp8_gemm="cutlass")
    assert err.value.field == "fp8_gemm"


def test_cli_refuses_an_unknown_fp8_library_before_any_work():
    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    result = CliRunner().invoke(app, ["train", "--model", "llama-7b", "--gpu", "h100",
                                      "--dtype", "fp8", "--dp", "8", "--fp8-gemm", "cutlass"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "error: --fp8-gemm: Input should be 'cublas' or 'deepgemm', got 'cutlass'")
