"""TransformerEngine's delayed-scaling amax reduction: its bytes counted by hand from TE's
buffers, its wait from NCCL's latency table by hand, its group from Megatron-Core's code, and
where a job's chunk pays it."""

import pytest

from hpnsim.collectives.nccl.params import BASE_LATENCY_US, NET_HOP_US, NVLINK_HOP_US
from hpnsim.errors import InputError
from hpnsim.training import TrainJob
from hpnsim.training.compute.amax_reduction import (
    amax_group,
    amax_reduction_ops,
    reduction_latency,
)
from hpnsim.training.compute.overhead import pass_gaps
from hpnsim.workloads.gpus import get_gpu

LL = 0   # protocol index of LL in NCCL's tables


def test_bytes_are_te_buffers_by_hand():
    # 4 GEMMs (QKV, proj, FC1, FC2): 12 forward amaxes, 8 backward; fp32; history 1024
    fwd = {op.name: op for op in amax_reduction_ops(get_gpu("h100"), gemms=4, group=8,
                                                    phase="forward").ops}
    assert fwd["amax_cat"].bytes == 2 * 4 * 12
    assert fwd["amax_update"].bytes == 4 * 12 * (2 * 1024 + 3)
    assert fwd["amax_allreduce"].bytes == 4 * 12 and fwd["amax_allreduce"].kind == "gaps"
    bwd = {op.name: op for op in amax_reduction_ops(get_gpu("h100"), gemms=4, group=8,
                                                    phase="input_grad").ops}
    assert bwd["amax_cat"].bytes == 2 * 4 * 8 and bwd["amax_cat"].phase == "input_grad"


def test_wait_is_nccl_ll_latency_by_hand():
    ring_4 = BASE_LATENCY_US["ring"][LL] + 2 * 3 * NVLINK_HOP_US["ring"][LL]
    tree_4 = BASE_LATENCY_US["tree"][LL] + 2 * 3 * NVLINK_HOP_US["tree"][LL]
    assert reduction_latency(4) == pytest.approx(min(ring_4, tree_4) * 1e-6)
    # 16 GPUs on 2 hosts: the tree (6.8 + 2 (7 x 0.6 + 1 x 5.0)) beats the ring's network hops
    tree_16 = BASE_LATENCY_US["tree"][LL] + 2 * (7 * NVLINK_HOP_US["tree"][LL]
                                                + 1 * NET_HOP_US["tree"][LL])
    assert reduction_latency(16) == pytest.approx(tree_16 * 1e-6)
    assert reduction_latency(1) == 0.0
    assert [op.name for op in amax_reduction_ops(get_gpu("h100"), gemms=4, group=1,
                                                 phase="forward").ops] == ["amax_cat",
                                                                           "amax_update"]


def test_group_follows_megatron_core():
    # core 0.8.0: TP x CP; 0.5-0.7 and 0.9+: TP x DP x CP
    assert amax_group((0, 8), tp=4, cp=2, dp=16) == 8
    assert amax_group((0, 7), tp=4, cp=2, dp=16) == 128
    assert amax_group((0, 15), tp=8, cp=1, dp=2) == 16


def test_bad_arguments_name_the_field():
    with pytest.raises(InputError, match="phase"):
        amax_reduction_ops(get_gpu("h100"), gemms=4, group=2, phase="weight_grad")
    with pytest.raises(InputError, match="group"):
        reduction_latency(12)


def _layer_blocks(job):
    return {b.name: b for b in job.stage_cost(0).blocks}


def test_chunk_pays_one_reduction_per_pass():
    job = TrainJob("llama-7b", tp=4, dp=2, global_batch=16, seq_len=4096, gpu="h100",
                   dtype="fp8", megatron_core="0.8")
    blocks = _layer_blocks(job)
    inner, last, first = blocks["layer5"], blocks["layer31"], blocks["layer0"]
    gpu, layers = get_gpu("h100"), 32
    fwd = amax_reduction_ops(gpu, gemms=4 * layers, group=4, phase="forward")
    bwd = amax_reduction_ops(gpu, gemms=4 * layers, group=4, phase="input_grad")
    model = job.compute_model
    ops = model.block_kernels(job, "layer5")
    n = len(ops.select(phase="forward"))
    t = sum(op.seconds for op in ops.select(phase="forward"))
    k, a = len(fwd), fwd.seconds()
    extra_gaps = pass_gaps(n + k, t + a) - pass_gaps(n, t)
    assert last.forward_compute - inner.forward_compute == pytest.approx(a + extra_gaps)
    assert last.backward_compute == pytest.approx(inner.backward_compute)
    nb = len(ops.select(phase="input_grad")) + len(ops.select(phase="weight_grad"))
    tb = sum(op.seconds for op in ops.select(phase="backward"))
    extra_b = pass_gaps(nb + len(bwd), tb + bwd.seconds()) - pass_gaps(nb, tb)
    assert first.backward_compute - inner.backward_compute == pytest.approx(
        bwd.seconds() + extra_b)
    assert first.forward_compute == pytest.approx(inner.forward_compute)


def test_bf16_jobs_have_no_reduction():
    job = TrainJob("llama-7b", tp=4, dp=2, global_batch=16, seq_len=4096, gpu="h100")
    blocks = _layer_blocks(job)
    assert blocks["layer31"].forward_compute == blocks["layer5"].forward_compute
    assert blocks["layer0"].backward_compute == blocks["layer5"].backward_compute
