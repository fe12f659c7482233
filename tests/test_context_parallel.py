"""Context parallelism: ring attention's KV exchange overlapped with attention, and refusals."""

import numpy as np
import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.collectives import CollectiveOptions
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.fabrics import hpn7
from hpnsim.training import simulate_iteration
from hpnsim.training.comm import time_groups
from hpnsim.training.compute.layer import layer_ops
from hpnsim.training.compute.overhead import KERNEL_GAP_S
from hpnsim.training.job import TrainJob
from hpnsim.training.tp_overlap import gemm_shares
from hpnsim.workloads import models
from hpnsim.workloads.placement import place

SEQ = 32768


def _two_layers():
    return models.ModelSpec("two-layer", layers=2, hidden=4096, heads=32, kv_heads=8,
                            ffn=14336, vocab=1, seq_len=SEQ)


def test_ring_attention_hides_min_of_exchange_and_attention_step():
    cp = 4
    spec = _two_layers()
    fabric = hpn7(segments=1, hosts_per_segment=cp, backup_hosts=0)
    # the constant compute model: the backward's attention costs its forward, as below
    job = TrainJob(spec, tp=8, cp=cp, global_batch=1, optimizer_bytes_per_param=0,
                   compute_efficiency=0.45)
    r = simulate_iteration(job, fabric)
    # every CP group (one per TP rank) exchanges at once: time them together, alone
    groups = place(job.layout, fabric.gpus_per_host).groups("cp")
    nccl = CollectiveOptions(nccl=NcclParams.for_gpu("h800"))   # the job's GPU's NCCL
    c_fwd, sent = time_groups(fabric, "sendrecv", groups, job.kv_bytes, nccl)
    c_bwd, _ = time_groups(fabric, "sendrecv", groups, 2 * job.kv_bytes, nccl)
    layer = next(b for b in job.stage_cost(0).blocks if b.name == "layer0")
    qkv, proj, _, _ = gemm_shares(spec, SEQ)
    g = layer.forward_attention * (1 - qkv - proj) / cp       # one step of attention
    # per layer and pass: cp - 1 exchanges, each hiding min(c, g) behind a step
    exposed = 2 * (cp - 1) * (c_fwd - min(c_fwd, g) + c_bwd - min(c_bwd, g))
    assert r.exposed_comm["cp"] == pytest.approx(exposed, rel=1e-9)
    # K and V of s/cp tokens, 1 of 8 KV heads per TP rank, BF16: sent to the next rank
    assert job.kv_bytes == 2 * SEQ / cp * 128 * 2
    assert r.comm_bytes["cp"] == pytest.approx(2 * (cp - 1) * 3 * sent, rel=1e-12)
    parts = r.compute_time + sum(r.exposed_comm.values()) + r.bubble + r.optimizer_time
    assert parts == pytest.approx(r.iteration_time, rel=1e-12)


def test_each_cp_rank_computes_a_cp_th_of_the_tokens_against_the_whole_sequence():
    spec = _two_layers()
    one = TrainJob(spec, tp=8, global_batch=1, compute_efficiency=0.45)
    four = TrainJob(spec, tp=8, cp=4, global_batch=1, compute_efficiency=0.45)
    # causal load balancing gives every rank the same share: compute / cp, per stage cost
    assert four.stage_cost(0).forward_compute == pytest.approx(
        one.stage_cost(0).forward_compute / 4, rel=1e-12)
    # the per-operation model: the same FLOPs per rank, at the efficiency of smaller GEMMs
    # (wave quantization) and with the same memory-bound work per token: close to 1/cp, once
    # the ring attention's own copies and corrections (and a dispatch gap each) are taken out.
    # Layers only: the one-token-vocabulary head's kernels sit at their floors and do not
    # shrink with the tokens (the whole stage measured +7.9% before those kernels existed)
    op_one, op_four = TrainJob(spec, tp=8, global_batch=1), TrainJob(spec, tp=8, cp=4,
                                                                   global_batch=1)
    ring_kernels = [op for op in layer_ops(spec, op_four.gpu, tp=8, cp=4).ops
                    if op.name.startswith("attention_cp_") and op.phase == "forward"]
    ring_seconds = sum(op.seconds for op in ring_kernels) + len(ring_kernels) * KERNEL_GAP_S
    layer = next(b for b in op_four.stage_cost(0).blocks if b.name == "layer0")
    layer_one = next(b for b in op_one.stage_cost(0).blocks if b.name == "layer0")
    assert layer.forward_compute - ring_seconds == pytest.approx(
        layer_one.forward_compute / 4, rel=0.05)     # measured: +4.1%
    assert four.activation_bytes == one.activation_bytes / 4
    assert four.gpus == 32


def test_gradients_reduce_over_dp_times_cp():
    spec = _two_layers()
    fabric = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    job = TrainJob(spec, tp=8, cp=2, dp=2, global_batch=2, bucket_params=10**12)
    r = simulate_iteration(job, fabric, dp_algo="ring")
    # one all-reduce of the BF16 gradients over DP x CP = 4 ranks, from each of 32 GPUs
    params = job.stage_params(0)
    assert r.comm_bytes["dp"] == pytest.approx(32 * 2 * 3 / 4 * 2 * params, rel=1e-9)
    assert np.isfinite(r.exposed_comm["cp"])


@pytest.mark.parametrize("args,message", [
    (["--cp", "3"], "error: --cp: must divide the sequence length 8192, got 3"),
    (["--cp", "2", "--seq-len", "4098"],
     "error: --cp: must split the sequence (4098 tokens) into 2*cp equal chunks (causal load "
     "balancing), got cp=2"),
])
def test_cp_that_does_not_divide_the_sequence_is_refused(args, message):
    result = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--tp", "8", *args])
    assert result.exit_code == 2
    assert result.output.strip() == message
