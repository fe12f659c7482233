"""``hpnsim kernels`` (issue 26, item 5): a Kineto trace the test writes becomes the kernel
table it encodes; its classes, idle gaps and bad input by hand."""

import json

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.training.compute import KernelTable
from hpnsim.training.compute.profiler_trace import parse_trace
from hpnsim.training.compute.trace_kernels import KernelClass, classify, trace_kernels

BF16 = "c10::BFloat16"
GEMM_DURATIONS_US = (90, 100, 120)      # + a 10 us split-K reduction each: 100, 110, 130


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _kernel(name, ts, dur, stream=7, **args):
    return _x("kernel", name, ts, dur, pid=0, tid=stream, device=0, stream=stream,
              grid=[132, 1, 1], block=[384, 1, 1], **args)


def _trace() -> dict:
    """Three profiler steps, 1000 us apart. Per step: an addmm whose GEMM and split-K
    reduction kernels are linked by correlation to launches inside the op (older traces); an
    SDPA flash forward whose kernel carries the op's External id (recent PyTorch); a
    LayerNorm; an NCCL all-reduce beside the attention; an elementwise kernel with no op."""
    events = []
    for i, d in enumerate(GEMM_DURATIONS_US):
        base = 1000 * i
        events.append(_x("user_annotation", f"ProfilerStep#{i}", base, 900))
        events.append(_x("cpu_op", "aten::addmm", base, 50, **{
            "External id": 100 + i, "Input Dims": [[4096], [2048, 1024], [1024, 4096]],
            "Input type": [BF16] * 3}))
        for j, (name, ts, dur) in enumerate((
                ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", 100, d),
                ("void cublasLt::splitKreduce_kernel<32, 16, int, float>", 100 + d, 10))):
            events.append(_x("cuda_runtime", "cudaLaunchKernel", base + 5 + j, 2,
                             correlation=1000 + 10 * i + j))
            events.append(_kernel(name, base + ts, dur, correlation=1000 + 10 * i + j))
        events.append(_x("cpu_op", "aten::_scaled_dot_product_flash_attention", base + 60, 20,
                         **{"External id": 200 + i, "Input Dims": [[2, 16, 1024, 128]] * 3,
                            "Input type": [BF16] * 3,
                            "Concrete Inputs": ["", "", "", "0.", "True", "False", ""]}))
        events.append(_kernel("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>",
                              base + 300, 200, correlation=2000 + i, **{"External id": 200 + i}))
        events.append(_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", base + 300, 150,
                              stream=20, correlation=3000 + i))
        events.append(_x("cpu_op", "aten::native_layer_norm", base + 90, 10, **{
            "External id": 300 + i, "Input Dims": [[2048, 4096], [4096], [4096], [4096], []],
            "Input type": [BF16, "", BF16, BF16, "Scalar"]}))
        events.append(_x("cuda_runtime", "cudaLaunchKernel", base + 92, 2,
                         correlation=4000 + i))
        events.append(_kernel("void layer_norm::ln_fwd_kernel<bf16>", base + 500, 50,
                              correlation=4000 + i))
        events.append(_kernel("void at::native::vectorized_elementwise_kernel<4>", base + 600,
                              20, correlation=5000 + i))
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                      "numSms": 132}],
            "traceEvents": events}


@pytest.fixture()
def trace_file(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_trace()))
    return path


def test_trace_becomes_the_kernel_table_it_encodes(trace_file, tmp_path):
    out = tmp_path / "h100.csv"
    run = CliRunner().invoke(app, ["kernels", str(trace_file), "--out", str(out)])
    assert run.exit_code == 0, run.output
    rows = {(r.op, r.shape, r.dtype): r.value for r in KernelTable.read_csv(out).rows}
    assert {r.gpu for r in KernelTable.read_csv(out).rows} == {"h100"}
    gemm_flops = 2 * 2048 * 4096 * 1024
    # causal: 1024 * 1025 / 2 kept pairs, 4 * 128 FLOPs each, 2 x 16 heads
    attention_flops = 1024 * 1025 // 2 * 4 * 128 * 2 * 16
    norm_bytes = 2 * 2048 * 4096 * 2                          # read x, write y, BF16
    assert rows.keys() == {("gemm", (2048, 4096, 1024), "bf16"),
                           ("attention_fwd_causal", (2, 16, 1024, 128), "bf16"),
                           ("memory:layernorm", (norm_bytes,), "bf16")}
    # the median of three steps' rates: GEMM + split-K reduction 100, 110, 130 us
    assert rows["gemm", (2048, 4096, 1024), "bf16"] == pytest.approx(
        gemm_flops / 110e-6 / 1e12, rel=1e-12)
    assert rows["attention_fwd_causal", (2, 16, 1024, 128), "bf16"] == pytest.approx(
        attention_flops / 200e-6 / 1e12, rel=1e-12)
    assert rows["memory:layernorm", (norm_bytes,), "bf16"] == pytest.approx(
        norm_bytes / 50e-6 / 1e9, rel=1e-12)


def test_classes_seconds_and_idle_gaps_by_hand(trace_file):
    run = CliRunner().invoke(app, ["kernels", str(trace_file), "--json"])
    assert run.exit_code == 0, run.output
    d = json.loads(run.stdout)
    assert (d["gpu"], d["steps"], d["rows"]) == ("h100", 3, 3)
    assert d["seconds"] == pytest.approx({"gemm": 340e-6, "attention": 600e-6,
                                          "memory": 210e-6, "communication": 450e-6})
    assert d["measurements"] == {"gemm": 3, "attention": 3, "memory": 6, "communication": 3}
    assert d["tabled"] == {"gemm": 3, "attention": 3, "memory": 3}
    # per step: GEMM ends at 110 + d, attention starts at 300 (190 - d idle); LayerNorm ends at
    # 550, the elementwise kernel starts at 600 (50); between steps 620 -> 1100 (480, twice)
    expected = sum(190 - d for d in GEMM_DURATIONS_US) + 3 * 50 + 2 * 480
    assert d["idle_gap_s"] == pytest.approx(expected * 1e-6)


def test_kernel_names_classify_and_link_to_their_ops():
    names = {"ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn": KernelClass.GEMM,
             "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<>": KernelClass.ATTENTION,
             "ncclKernel_AllGather_RING_LL_Sum_int8_t": KernelClass.COMMUNICATION,
             "void dpsk::ep::internode::dispatch<false, 8, true, 8>": KernelClass.COMMUNICATION,
             "void at::native::reduce_kernel<512, 1>": KernelClass.MEMORY}
    for name, klass in names.items():
        assert classify(name) is klass, name
    trace = parse_trace(json.dumps(_trace()))
    ops = {k.name.split("<")[0]: k.op.name for k in trace.kernels if k.op is not None}
    assert ops["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64"] == "aten::addmm"
    assert ops["void flash::flash_fwd_kernel"] == "aten::_scaled_dot_product_flash_attention"


def test_the_table_is_one_train_takes(trace_file, tmp_path):
    out = tmp_path / "h100.csv"
    assert CliRunner().invoke(app, ["kernels", str(trace_file), "--out", str(out)]).exit_code == 0
    args = ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "1", "--gpu", "h100", "--json"]
    plain = CliRunner().invoke(app, args)
    measured = CliRunner().invoke(app, [*args, "--kernel-table", str(out)])
    assert plain.exit_code == measured.exit_code == 0, measured.output
    assert json.loads(measured.stdout)["compute_time"] != json.loads(plain.stdout)["compute_time"]
    again = CliRunner().invoke(app, ["kernels", str(trace_file), "--out", str(out)])
    assert again.exit_code == 2
    assert again.output.strip() == f"error: --out: {out} exists; pass --force to replace it"


def test_trace_without_gpu_kernels_is_one_line_exit_2(tmp_path):
    data = _trace()
    data["traceEvents"] = [e for e in data["traceEvents"] if e["cat"] != "kernel"]
    path = tmp_path / "cpu_only.json"
    path.write_text(json.dumps(data))
    run = CliRunner().invoke(app, ["kernels", str(path)])
    assert run.exit_code == 2
    assert run.output.strip() == (f"error: trace: {path} has no GPU kernels (no events of cat "
                                  f"\"kernel\"); profile with ProfilerActivity.CUDA")
    path.write_text("{not json")
    run = CliRunner().invoke(app, ["kernels", str(path)])
    assert run.exit_code == 2 and run.output.startswith(f"error: trace: {path} is not JSON")


def test_an_unnamed_device_needs_gpu(tmp_path):
    data = _trace()
    data["deviceProperties"][0]["name"] = "NVIDIA L40S"
    path = tmp_path / "l40s.json"
    path.write_text(json.dumps(data))
    run = CliRunner().invoke(app, ["kernels", str(path)])
    assert run.exit_code == 2
    assert "pass --gpu" in run.output and len(run.output.strip().splitlines()) == 1
    result = trace_kernels(parse_trace(json.dumps(data)), "h100")
    assert result.gpu == "h100" and len(result.rows) == 3
