"""fp8_param_gather (Megatron-Core's --fp8-param-gather): the parameter all-gathers of FSDP
and the distributed optimizer move the transformer layers' linear weights as 1 byte each,
the rest (norms, embedding, output layer) as 2; counted here by hand for llama3-8b."""

import pytest

from hpnsim.errors import InputError
from hpnsim.scenario.jobs import JobSpec
from hpnsim.training.from_job import program_from_job
from hpnsim.training.job import TrainJob
from hpnsim.training.program import Collective

# llama3-8b: hidden 4096, 32 query heads and 8 K/V heads of 128, SwiGLU FFN 14336, RMSNorm,
# vocabulary 128256, untied output layer
WEIGHTS = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336   # Q, K, V, O, gate, up, down
NORMS = 2 * 4096                                                  # two RMSNorm weights
TABLE = 128256 * 4096
LAYER_BF16 = 2 * (WEIGHTS + NORMS)
LAYER_FP8 = WEIGHTS + 2 * NORMS


def _gathers(job, row):
    return [op.size for op in program_from_job(job).stages[0]
            if isinstance(op, Collective) and op.op == "allgather" and op.row == row]


@pytest.mark.parametrize("fp8", [False, True])
def test_fsdp_units_gather_their_linear_weights_in_fp8(fp8):
    job = TrainJob("llama3-8b", dtype="fp8", dp=2, zero=3, global_batch=2,
                   fp8_param_gather=fp8)
    layer = LAYER_FP8 if fp8 else LAYER_BF16
    forward = _gathers(job, "fsdp-ag")[:32]                 # the first forward's 32 units
    assert forward[0] == 2 * TABLE + layer                  # embedding + layer0
    assert forward[1:31] == [layer] * 30
    assert forward[31] == 2 * (TABLE + 4096) + layer        # layer31 + head (final norm)


@pytest.mark.parametrize("overlap", [False, True])
def test_the_distributed_optimizer_gathers_fp8_weights_bucket_by_bucket(overlap):
    kwargs = dict(dtype="fp8", dp=2, zero=1, global_batch=2, overlap_param_gather=overlap)
    plain = _gathers(TrainJob("llama3-8b", **kwargs), "allgather")
    fp8 = _gathers(TrainJob("llama3-8b", **kwargs, fp8_param_gather=True), "allgather")
    everything = 2 * TABLE + 4096 + 32 * (WEIGHTS + NORMS)
    assert sum(plain) == pytest.approx(2 * everything, rel=1e-12)
    assert sum(fp8) == pytest.approx(2 * everything - 32 * WEIGHTS, rel=1e-12)
    # 40e6-parameter buckets filled from the output layer back (gather order reversed with
    # overlap_param_gather): the first is the head's, BF16; the 15th lies inside layer31
    backward = fp8[::-1] if overlap else fp8
    head = TABLE + 4096
    assert 14 * 40e6 > head and 15 * 40e6 < head + WEIGHTS + NORMS
    assert backward[0] == 2 * 40e6 == (plain[::-1] if overlap else plain)[0]
    assert backward[14] == pytest.approx(40e6 * (2 - WEIGHTS / (WEIGHTS + NORMS)), rel=1e-12)


def test_fp8_param_gather_needs_fp8_weights_and_a_sharded_optimizer():
    with pytest.raises(InputError, match="needs dtype fp8, got bf16") as refused:
        TrainJob("llama3-8b", dp=2, zero=1, fp8_param_gather=True)
    assert refused.value.field == "fp8_param_gather"
    with pytest.raises(InputError, match="zero 1, 2 or 3"):
        TrainJob("llama3-8b", dtype="fp8", dp=2, fp8_param_gather=True)
    with pytest.raises(InputError, match="true or false"):
        TrainJob("llama3-8b", dtype="fp8", dp=2, zero=1, fp8_param_gather=1)


def test_cli_refuses_it_without_fp8_in_one_line(refused_cli):
    assert refused_cli("train", "--model", "llama3-8b", "--dp", "2", "--zero", "1",
                       "--fp8-param-gather") == ("error: --fp8-param-gather: keeps the "
                                                 "linear weights in FP8: needs dtype fp8, "
                                                 "got bf16")


def test_the_yaml_field_reaches_the_job_and_its_json():
    spec = JobSpec(model="llama3-8b", dp=2, zero=3, dtype="fp8", fp8_param_gather=True)
    job = spec.train_job()
    assert job.fp8_param_gather and job.to_dict()["fp8_param_gather"] is True
    assert "fp8_param_gather" not in spec.model_dump()
    assert "fp8_param_gather" not in TrainJob("llama3-8b").to_dict()


def test_the_step_quantizes_the_shard_and_transposes_instead_of_casting():
    from hpnsim.training.compute.stage import step_ops
    from hpnsim.workloads.gpus import get_gpu

    params, fp8, shard = 10**9, 6 * 10**8, 5 * 10**8
    ops = {op.name: op.bytes for op in step_ops(
        get_gpu("h100"), parameters=params, fp8_parameters=fp8, fp8_shard=shard,
        fp8_recipe="current").ops if op.kind != "gaps"}
    assert ops == {"grad_norm": 4 * params, "adam": 28 * params,
                   "param_copy": 6 * params - shard,         # FP32 read 4, FP8 written 1
                   "zero_grad": 4 * params, "fp8_master_amax": 4 * shard,
                   "fp8_weight_transpose": 2 * fp8}
    plain = [op.name for op in step_ops(get_gpu("h100"), parameters=params,
                                        fp8_parameters=fp8).ops]
    assert "fp8_weight_cast" in plain and "fp8_weight_transpose" not in plain


def test_the_job_step_counts_the_layers_fp8_weights_and_their_shard():
    from hpnsim.training.compute.stage import step_ops

    job = TrainJob("llama3-8b", dtype="fp8", dp=8, zero=3, global_batch=8,
                   fp8_param_gather=True)
    total = 2 * TABLE + 4096 + 32 * (WEIGHTS + NORMS)
    expected = step_ops(job.gpu, parameters=int(total / 8), micro_batches=job.micro_batches,
                        fp8_parameters=32 * WEIGHTS, local_parameters=int(total / 8),
                        fp8_shard=32 * WEIGHTS // 8).seconds()
    assert job.optimizer_time(0) == pytest.approx(expected, rel=1e-12)


def test_yaml_refuses_it_without_fp8_by_path(refused_yaml):
    err = refused_yaml("jobs:\n  - model: llama3-8b\n    dp: 2\n    zero: 1\n"
                       "    fp8_param_gather: true\n")
    assert err == ("error: jobs[0].fp8_param_gather: keeps the linear "
                                           "weights in FP8: needs dtype fp8, got bf16 "
                                           "(line 5)\n")
