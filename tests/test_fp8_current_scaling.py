"""FP8 current scaling (issue 26): the kernels TransformerEngine 2.9 runs around each FP8 GEMM
under ``Float8CurrentScaling``, their bytes derived by hand from its tensor operations; the
option's refusals; and the delayed recipe (the default) reproducing the figures it had."""

import pytest

from hpnsim.errors import InputError
from hpnsim.training import TrainJob
from hpnsim.training.compute import layer_ops, step_ops
from hpnsim.training.compute.amax_reduction import reduction_latency
from hpnsim.workloads.gpus import get_gpu
from hpnsim.workloads.models import get

H100 = get_gpu("h100")


def _layer(tp, recipe):
    return layer_ops(get("llama3-70b"), H100, seq_len=8192, tp=tp, dtype="fp8",
                     fp8_recipe=recipe)


def _bytes(ops, name):
    return [op.bytes for op in ops.ops if op.name == name]


def test_the_casts_of_a_tp4_sequence_parallel_layer_by_hand():
    # Llama 3 70B, 8192 tokens, TP 4 with SP: hidden 8192; 64/4 = 16 query and 8/4 = 2 KV heads
    # of 128 (QKV width 20 x 128 = 2560, attention output 2048); FFN 28672/4 = 7168 (FC1 14336).
    ops = _layer(4, "current")
    T, local, h = 8192, 2048, 8192
    # QKV and FC1 (LayerNormLinear, column-parallel): TE's norm kernel gives the amax, so no
    # amax pass; a row-wise cast of the local norm output (read 2, write 1 byte an element),
    # all-gathered in FP8, transposed in the backward (read 1, write 1 of all T tokens)
    for name in ("qkv", "fc1"):
        assert _bytes(ops, f"{name}_input_amax") == []
        assert _bytes(ops, f"{name}_input_cast") == [3 * local * h]
        assert _bytes(ops, f"{name}_input_transpose") == [2 * T * h]
        assert [op.phase for op in ops.ops if op.name == f"{name}_input_transpose"] == \
            ["weight_grad"]
    # O and FC2 (Linear, row-parallel) inputs: an amax pass (read 2 bytes, write the 4-byte
    # amax) and one cast-transpose (read 2, write 1 + 1) over T x their input width
    for name, width in (("o_proj", 2048), ("fc2", 7168)):
        assert _bytes(ops, f"{name}_input_amax") == [2 * T * width + 4]
        assert _bytes(ops, f"{name}_input_cast_transpose") == [4 * T * width]
    # the output gradients of O and FC2 (row-parallel under SP): amax and a row-wise cast on the
    # local tokens, gathered, transposed over T
    for name in ("o_proj", "fc2"):
        assert _bytes(ops, f"{name}_grad_amax") == [2 * local * h + 4]
        assert _bytes(ops, f"{name}_grad_cast") == [3 * local * h]
        assert _bytes(ops, f"{name}_grad_transpose") == [2 * T * h]
    # of QKV and FC1 (column-parallel, T x out/tp, not gathered): amax and a cast-transpose
    for name, width in (("qkv", 2560), ("fc1", 14336)):
        assert _bytes(ops, f"{name}_grad_amax") == [2 * T * width + 4]
        assert _bytes(ops, f"{name}_grad_cast_transpose") == [4 * T * width]
    # one scale kernel per quantize: reads the amax, writes the scale and its inverse
    assert [op.bytes for op in ops.ops if op.name.endswith("_scale")] == [12.0] * 8


def test_the_amax_all_reduces_run_over_tp_under_sequence_parallelism():
    reduced = [op for op in _layer(4, "current").ops if op.name.endswith("_amax_allreduce")]
    # TE sets with_amax_reduction on a column-parallel input and a row-parallel output gradient
    assert [(op.name, op.phase) for op in reduced] == [
        ("qkv_input_amax_allreduce", "forward"), ("fc1_input_amax_allreduce", "forward"),
        ("fc2_grad_amax_allreduce", "input_grad"), ("o_proj_grad_amax_allreduce", "input_grad")]
    assert all(op.kind == "gaps" and op.seconds == reduction_latency(4) for op in reduced)
    assert round(reduction_latency(4) * 1e6, 1) == 10.2   # NCCL LL ring, 4 NVLink ranks
    assert not [op for op in _layer(1, "current").ops if "allreduce" in op.name]


def test_without_sequence_parallelism_every_input_is_one_cast_transpose():
    ops = _layer(1, "current")
    T, h = 8192, 8192
    assert _bytes(ops, "qkv_input_cast_transpose") == [4 * T * h]   # no amax pass: the norm's
    assert _bytes(ops, "qkv_input_amax") == []
    assert _bytes(ops, "qkv_input_transpose") == []
    assert _bytes(ops, "o_proj_grad_cast_transpose") == [4 * T * h]


def test_current_scaling_leaves_the_gemms_and_drops_the_region_reduction():
    current, delayed = _layer(4, "current"), _layer(4, "delayed")
    assert current.select(kind="gemm") == delayed.select(kind="gemm")
    job = dict(gpu="h100", dtype="fp8", tp=4, pp=2, dp=2, global_batch=16, seq_len=8192,
               sequence_parallel=True, megatron_core="0.15")
    current_job = TrainJob("llama3-70b", fp8_recipe="current", **job)
    cached = {False: layer_ops(get("llama3-70b"), H100, seq_len=8192, tp=4, dtype="fp8",
                               fp8_recipe="current")}
    assert current_job.compute_model._amax_reductions(current_job, [0, 1], cached) == {}
    delayed_job = TrainJob("llama3-70b", **job)
    assert delayed_job.compute_model._amax_reductions(delayed_job, [0, 1], cached)


def test_weights_cast_once_a_step_with_their_amax_pass():
    delayed = step_ops(H100, parameters=10**6, fp8_parameters=1000)
    current = step_ops(H100, parameters=10**6, fp8_parameters=1000, fp8_recipe="current")
    assert [op.name for op in current.ops] == [op.name for op in delayed.ops][:-2] + [
        "fp8_weight_amax", "fp8_weight_cast", "gaps"]
    assert [op.bytes for op in current.ops if op.name == "fp8_weight_amax"] == [2 * 1000 + 4]


def test_delayed_reproduces_the_figures_before_the_option():
    # read from main at a1e811d, before fp8_recipe existed
    for recipe in (None, "delayed"):
        for tp, fwd, bwd in ((1, 0.014486063431460649, 0.030287185191581665),
                             (4, 0.003681434268694223, 0.008126048110429922)):
            ops = _layer(tp, recipe)
            assert (ops.forward_seconds, ops.backward_seconds, len(ops)) == (fwd, bwd, 34)
        job = TrainJob("llama3-70b", gpu="h100", dtype="fp8", tp=4, pp=2, dp=2,
                       global_batch=16, seq_len=8192, sequence_parallel=True,
                       megatron_core="0.15", fp8_recipe=recipe)
        cost = job.stage_cost(0)
        assert (cost.forward_compute, cost.backward_compute) == (0.15096286522415023,
                                                                 0.3344401343889149)
        assert job.compute_model.optimizer_seconds(job, 1e9, 8e8) == 0.01653634601261272


def test_the_option_is_kept_and_refused_by_name():
    job = TrainJob("llama3-8b", gpu="h100", dtype="fp8", megatron_core="0.15",
                   fp8_recipe="current")
    assert job.to_dict()["fp8_recipe"] == "current"
    assert "fp8_recipe" not in TrainJob("llama3-8b", gpu="h100", dtype="fp8").to_dict()
    for kwargs, message in (
            (dict(dtype="bf16"), "current scaling scales FP8 casts; needs dtype fp8, got bf16"),
            (dict(dtype="fp8", megatron_core="0.11"),
             "Megatron-Core 0.11 lacks it (--fp8-recipe tensorwise arrived in 0.12); give "
             "megatron_core 0.12 or later, or leave it off")):
        with pytest.raises(InputError) as err:
            TrainJob("llama3-8b", gpu="h100", fp8_recipe="current", **kwargs)
        assert (err.value.field, err.value.message) == ("fp8_recipe", message)
    with pytest.raises(InputError) as err:
        layer_ops(get("llama3-8b"), H100, fp8_recipe="current")
    assert err.value.field == "fp8_recipe"


def test_cli_refuses_current_scaling_without_fp8_in_one_line():
    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    result = CliRunner().invoke(app, ["train", "--model", "llama-7b", "--gpu", "h100",
                                      "--dp", "8", "--fp8-recipe", "current"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "error: --fp8-recipe: current scaling scales FP8 casts; needs dtype fp8, got bf16")


def test_yaml_refuses_by_path(refused_yaml):
    err = refused_yaml("jobs:\n  - model: llama3-8b\n    gpu: h100\n    dtype: fp8\n"
                       "    fp8_recipe: current\n    megatron_core: '0.11'\n")
    assert err.startswith("error: jobs[0].fp8_recipe: Megatron-Core 0.11 lacks it")
