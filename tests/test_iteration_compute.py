"""The per-operation compute model inside the iteration: blocks are their ops, the class
split adds up, the constant override reproduces the old model, inputs and bad input."""

import json
import warnings

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.fabrics import build_fabric
from hpnsim.scenario.jobs import JobSpec
from hpnsim.training import TrainJob, simulate_iteration
from hpnsim.training.compute import HBM_EFFICIENCY, layer_ops
from hpnsim.training.compute.overhead import HOST_PER_KERNEL_S, KERNEL_GAP_S, LAUNCH_LATENCY_S
from hpnsim.workloads import models
from hpnsim.workloads.gpus import get_gpu


def _fabric():
    return build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0})


@pytest.mark.parametrize("recompute", [False, True])
def test_a_layer_block_is_the_sum_of_its_ops(recompute):
    job = TrainJob("llama3-8b", tp=2, seq_len=4096, sequence_parallel=True, gpu="h100",
                   recompute=recompute)
    ops = layer_ops(job.model, get_gpu("h100"), layer=3, seq_len=4096, tp=2,
                    sequence_parallel=True, attention=job.attention)
    block = next(b for b in job.stage_cost(0).blocks if b.name == "layer3")
    # between kernels: the measured dispatch gap after each (these kernels are longer than
    # the host's 28.5 us per launch, so the GPU sets the pace)
    n_fwd, n_bwd = len(ops.select(phase="forward")), len(ops.select(phase="backward"))
    assert ops.forward_seconds > n_fwd * HOST_PER_KERNEL_S
    gap_fwd, gap_bwd = n_fwd * KERNEL_GAP_S, n_bwd * KERNEL_GAP_S
    again = ops.forward_seconds + gap_fwd if recompute else 0.0
    assert block.forward_compute == pytest.approx(ops.forward_seconds + gap_fwd, rel=1e-12)
    assert block.backward_compute == pytest.approx(ops.backward_seconds + gap_bwd + again,
                                                   rel=1e-12)
    assert block.gaps == pytest.approx(gap_fwd + gap_bwd + (gap_fwd if recompute else 0.0),
                                       rel=1e-12)
    # the program issues input- and weight-gradient pieces of each sub-layer apart, each
    # with its kernels' share of the pass's gaps
    parts = block.attention_ig + block.attention_wg + block.mlp_ig + block.mlp_wg
    assert parts == pytest.approx(ops.backward_seconds + gap_bwd, rel=1e-12)
    n_wg = len(ops.select(phase="weight_grad"))
    assert block.attention_wg + block.mlp_wg == pytest.approx(
        ops.seconds(phase="weight_grad") + n_wg * KERNEL_GAP_S, rel=1e-12)
    # the fused attention kernel and the projections around it belong to the attention part
    assert block.forward_attention > ops.seconds(kind="attention", phase="forward")
    for kind in ("gemm", "attention", "memory"):
        expected = ops.seconds(kind=kind) + (ops.seconds(kind=kind, phase="forward")
                                             if recompute else 0.0)
        assert getattr(block, kind) == pytest.approx(expected, rel=1e-12)
    assert block.backward_tp_ops == (4 if recompute else 2)


def test_class_split_adds_up_to_compute_and_breakdown_to_the_iteration():
    job = TrainJob("llama3-8b", tp=8, pp=2, global_batch=4, seq_len=2048)
    it = simulate_iteration(job, _fabric())
    assert set(it.compute_by_class) == {"gemm", "attention", "memory", "gaps", "contention"}
    assert sum(it.compute_by_class.values()) == pytest.approx(it.compute_time, rel=1e-9)
    assert sum(it.breakdown().values()) == pytest.approx(it.iteration_time, rel=1e-9)
    # the GPU average of micro-batches x each stage cost's classes, by hand
    gemm = [job.micro_batches * sum(b.gemm for b in job.stage_cost(s).blocks) for s in (0, 1)]
    assert it.compute_by_class["gemm"] == pytest.approx(sum(gemm) / 2, rel=1e-12)
    data = it.to_dict(timeline=False)
    assert data["compute_by_class"] == it.compute_by_class
    assert data["job"]["dtype"] == "bf16" and data["job"]["compute_model"] == "operations"


def test_constant_model_by_hand_on_gpt3():
    """compute_efficiency e: forward FLOPs 24h^2 + 4sh per token and layer at e x peak,
    backward twice; the score products (4sh) are the attention class."""
    s, e = 2048, 0.5
    job = TrainJob("gpt3-175b", tp=8, pp=8, gpu="a100", seq_len=s, compute_efficiency=e)
    h, rate, tokens = 12288, 312e12 * e, s
    layer = next(b for b in job.stage_cost(3).blocks if b.name.startswith("layer"))
    assert layer.forward_compute == pytest.approx((24 * h * h + 4 * s * h) * tokens / 8 / rate)
    assert layer.backward_compute == pytest.approx(2 * layer.forward_compute)
    assert layer.attention == pytest.approx(3 * 4 * s * h * tokens / 8 / rate)
    assert layer.gemm == pytest.approx(3 * 24 * h * h * tokens / 8 / rate)
    assert layer.memory == 0.0


def test_compute_efficiency_reproduces_the_old_constant_model():
    """Pinned from the constant model at 710eb75 (TrainJob default mfu 0.45 on H800): the
    override gives the same iteration to the last digit (its fraction of peak folds in the
    gaps, contention and stragglers the operation model adds)."""
    job = TrainJob("llama3-8b", tp=8, pp=2, global_batch=4, compute_efficiency=0.45)
    it = simulate_iteration(job, _fabric())
    assert it.iteration_time == pytest.approx(0.5339003477887434, rel=1e-12)
    assert it.compute_time == pytest.approx(0.2663915771152887, rel=1e-12)


def test_optimizer_step_by_hand():
    """Megatron's step at HBM_EFFICIENCY x the datasheet bandwidth: gradient norm 4, Adam 28,
    master-to-model copy 6 bytes per parameter of the shard, zeroing the gradient buffer 4 per
    local parameter; each multi-tensor kernel launches once per 320 chunks of 65,536, one
    dispatch gap after each and one launch latency after the norm's host sync. ZeRO-1 shards
    all but the zeroing over DP."""
    params = models.get("llama3-8b").num_parameters()
    bw = HBM_EFFICIENCY * get_gpu("h100").memory_bandwidth

    def by_hand(shard):
        launches = 3 * -(-shard // (65536 * 320)) + 1
        return (38 * shard + 4 * params) / bw + launches * KERNEL_GAP_S + LAUNCH_LATENCY_S

    job = TrainJob("llama3-8b", gpu="h100")
    assert job.optimizer_time(0) == pytest.approx(by_hand(params), rel=1e-9)
    sharded = TrainJob("llama3-8b", gpu="h100", dp=4, zero=1)
    assert sharded.optimizer_time(0) == pytest.approx(by_hand(params // 4), rel=1e-6)
    assert TrainJob("llama3-8b", optimizer_bytes_per_param=0).optimizer_time(0) == 0.0


def test_fp8_gemms_run_at_the_fp8_rate_and_add_casts():
    bf16 = TrainJob("llama3-8b", gpu="h100", seq_len=4096)
    fp8 = TrainJob("llama3-8b", gpu="h100", seq_len=4096, dtype="fp8")
    a = next(b for b in bf16.stage_cost(0).blocks if b.name == "layer0")
    b = next(b for b in fp8.stage_cost(0).blocks if b.name == "layer0")
    ops = layer_ops(fp8.model, get_gpu("h100"), seq_len=4096, dtype="fp8")
    assert b.gemm == pytest.approx(ops.seconds(kind="gemm"), rel=1e-12)
    assert b.attention == pytest.approx(a.attention, rel=1e-12)   # attention stays BF16
    assert b.memory > a.memory                                     # the casts
    assert fp8.to_dict()["dtype"] == "fp8"


def test_mfu_is_a_deprecated_name_of_compute_efficiency():
    with pytest.warns(DeprecationWarning, match="compute_efficiency"):
        job = TrainJob("llama3-8b", mfu=0.3)
    assert job.compute_efficiency == 0.3 and job.compute_model.name == "constant"
    with pytest.warns(DeprecationWarning):
        spec = JobSpec.model_validate({"model": "llama3-8b", "mfu": 0.3})
    assert spec.compute_efficiency == 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert JobSpec.model_validate({"model": "llama3-8b", "compute_efficiency": 0.3})


def _train(*args):
    return CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--tp", "8",
                                    "--global-batch", "1", "--seq-len", "1024", *args])


@pytest.mark.parametrize(("args", "line"), [
    (["--gpu", "a100", "--dtype", "fp8"],
     "error: --dtype: a100 has no fp8 tensor cores; choose from tf32, bf16, fp16"),
    (["--compute-efficiency", "0.5", "--kernel-table", "{table}"],
     "error: --compute-efficiency: give either a kernel table or a compute efficiency, "
     "not both"),
    (["--kernel-table", "{table}"],
     "error: --kernel-table: {table} line 3: gemm needs a shape of 3 positive integers, "
     "got '1x2'"),
])
def test_bad_compute_input_exits_2_with_one_line(tmp_path, args, line):
    table = tmp_path / "k.csv"
    table.write_text("gpu,device_name,driver,torch,cuda,date,op,shape,dtype,tflops,gbps\n"
                     "h800,x,1,2,3,d,gemm,64x64x64,bf16,100,1\n"
                     "h800,x,1,2,3,d,gemm,1x2,bf16,1,1\n")
    out = _train(*(a.format(table=table) for a in args))
    assert out.exit_code == 2
    assert out.output.strip() == line.format(table=table)


def test_cli_reports_compute_by_class_in_json_and_table():
    out = _train("--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert sum(data["compute_by_class"].values()) == pytest.approx(data["compute_time"])
    assert sum(data["breakdown"].values()) == pytest.approx(data["iteration_time"])
    table = _train()
    assert "GEMM" in table.stdout and "memory-bound" in table.stdout
    old = _train("--mfu", "0.45", "--json")
    assert old.exit_code == 0 and "deprecated" in old.stderr
    assert json.loads(old.stdout)["job"]["compute_efficiency"] == 0.45


def test_scaling_takes_the_compute_flags():
    args = ["scaling", "--model", "llama3-8b", "--tp", "8", "--dp", "1", "--fabrics", "hpn7",
            "--micro-batches", "1", "--json"]
    bad = CliRunner().invoke(app, [*args, "--gpu", "a100", "--dtype", "fp8"])
    assert bad.exit_code == 2
    assert bad.output.strip() == ("error: --dtype: a100 has no fp8 tensor cores; choose from "
                                  "tf32, bf16, fp16")
    old = CliRunner().invoke(app, [*args, "--compute-efficiency", "0.45"])
    new = CliRunner().invoke(app, args)
    assert old.exit_code == new.exit_code == 0
    # the constant model at H800's old default: the pin of test_pinned_figures before issue 19
    assert json.loads(old.stdout)["points"][0]["iteration_time"] == pytest.approx(
        0.2137724827613353, rel=1e-9)
    # the per-operation model: 0.17987 s before issue 26's measured-kernel calibration, gaps,
    # optimizer kernels and slowest-GPU term (the same point as test_pinned_figures' scaling);
    # 0.19585 before the cuDNN attention default, 0.19786 before the loss's passes over the
    # logits (Megatron's unfused cross-entropy: 52 bytes a logit where 6 were counted), 0.19990
    # before those passes streamed at the rate Megatron's measured loss does
    assert json.loads(new.stdout)["points"][0]["iteration_time"] == pytest.approx(
        0.20034115786607795, rel=1e-9)
