"""Issue 26, items 2-4: attention as the framework ran it, the time between kernels, the
slowest GPU of a synchronous step, and compute beside communication; each against a
derivation by hand."""

import math

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.training import TrainJob
from hpnsim.training.compute import attention_flops, gemm_time, layer_ops
from hpnsim.training.compute.contention import contended_seconds, slowdown, without_sms
from hpnsim.training.compute.core_attention import unfused_attention_ops
from hpnsim.training.compute.gemm import TILES, calibration
from hpnsim.training.compute.ops import Op
from hpnsim.training.compute.overhead import (
    HOST_PER_KERNEL_S,
    KERNEL_GAP_S,
    LAUNCH_LATENCY_S,
    pass_gaps,
)
from hpnsim.training.straggler import GPU_VARIATION, expected_max_normal, straggler_fraction
from hpnsim.workloads import models
from hpnsim.workloads.gpus import get_gpu

A100, H100 = get_gpu("a100"), get_gpu("h100")


# ----- item 2: unfused core attention ----------------------------------------------------------
def test_unfused_attention_hbm_bytes_by_hand():
    b, h, s, d = 2, 16, 1024, 64
    mats = b * h                                 # one score matrix per sequence and head
    fwd, bwd = unfused_attention_ops(A100, b, h, h, s, d)
    by_name = {op.name: op.bytes for op in fwd}
    # Q K^T: Q [s, d] and K^T [d, s] read, the BF16 scores [s, s] written, per matrix
    assert by_name["attention_scores"] == mats * (s * d + d * s + s * s) * 2
    # fused scale-mask-softmax: scores read, probabilities written
    assert by_name["attention_softmax"] == mats * s * s * 2 * 2
    # dropout: probabilities read, dropped ones written, a one-byte mask written
    assert by_name["attention_dropout"] == mats * s * s * (2 + 2 + 1)
    # P V: P [s, s] and V [s, d] read, the context [s, d] written
    assert by_name["attention_context"] == mats * (s * s + s * d + s * d) * 2
    backward = [(op.name, op.bytes) for op in bwd]
    assert backward == [
        ("attention_context", mats * (s * d + d * s + s * s) * 2),    # dP = dO V^T
        ("attention_context", mats * (s * s + s * d + s * d) * 2),    # dV = P^T dO
        ("attention_dropout", mats * s * s * (2 + 1 + 2)),            # read dP', mask; write
        ("attention_softmax", mats * s * s * 3 * 2),                  # read P, dP; write dS
        ("attention_scores", mats * (s * s + s * d + s * d) * 2),     # dQ = dS K
        ("attention_scores", mats * (s * s + s * d + s * d) * 2),     # dK = dS^T Q
    ]
    # the full square is computed (the mask is applied in the softmax): twice the causal
    # pairs' FLOPs forward, and two GEMMs per product backward (2x, not FlashAttention's 2.5x)
    forward_flops = sum(op.flops for op in fwd)
    assert forward_flops == attention_flops(b, h, s, d, causal=False) == 4 * mats * s * s * d
    assert sum(op.flops for op in bwd) == 2 * forward_flops
    assert all(op.kind == "attention" and op.phase == "input_grad" for op in bwd)


def test_grouped_query_keys_and_values_are_expanded_to_every_head():
    b, h, kv, s, d = 1, 8, 2, 512, 128
    fwd, bwd = unfused_attention_ops(A100, b, h, kv, s, d)
    expand = 2 * b * s * d * (kv + h) * 2     # K and V: read the 2 KV heads, write 8 copies
    assert fwd[0].name == bwd[-1].name == "attention_kv_expand"
    assert fwd[0].bytes == bwd[-1].bytes == expand


def test_unfused_attention_is_slower_and_counted_as_attention():
    m = models.get("gpt3-175b")
    flash = layer_ops(m, A100, tp=8, seq_len=2048)
    unfused = layer_ops(m, A100, tp=8, seq_len=2048, attention="unfused")
    assert unfused.seconds(kind="gemm") == pytest.approx(flash.seconds(kind="gemm"))
    assert unfused.seconds(kind="attention") > 2 * flash.seconds(kind="attention")


@pytest.mark.parametrize(("version", "kernel"), [("v2.6", "unfused"), ("0.6", "unfused"),
                                                 ("0.7", "cudnn"), ("0.20", "cudnn")])
def test_the_default_attention_follows_the_megatron_version(version, kernel):
    job = TrainJob("llama3-8b", megatron_core=version, overlap_grad_reduce=False)
    assert job.attention == kernel
    layer = next(b for b in job.stage_cost(0).blocks if b.name == "layer0")
    flash = TrainJob("llama3-8b", megatron_core=version, overlap_grad_reduce=False,
                     attention="flash") if version != "v2.6" else None
    if kernel == "cudnn":   # TransformerEngine runs FlashAttention-2 on Ampere
        a100 = TrainJob("llama3-8b", gpu="a100", megatron_core=version, overlap_grad_reduce=False)
        a100_flash = TrainJob("llama3-8b", gpu="a100", megatron_core=version,
                              overlap_grad_reduce=False, attention="flash")
        def layer0(j):
            return next(b for b in j.stage_cost(0).blocks if b.name == "layer0")
        assert layer0(a100).attention == layer0(a100_flash).attention > 0
        assert layer.attention > next(b for b in flash.stage_cost(0).blocks
                                      if b.name == "layer0").attention
    if kernel == "unfused" and flash is not None:
        assert layer.attention > next(b for b in flash.stage_cost(0).blocks
                                      if b.name == "layer0").attention


def test_flash_attention_before_megatron_had_it_is_refused_in_one_line(refused_cli):
    assert refused_cli("train", "--model", "llama3-8b", "--megatron-core", "v2.6",
                       "--no-overlap-grad-reduce", "--attention", "flash") == (
        "error: --attention: Megatron-LM before Megatron-Core lacks it (--use-flash-attn "
        "arrived in 0.1); give --megatron-core 0.1 or later, or leave it off")
    with pytest.raises(InputError) as refused:
        TrainJob("llama3-8b", tp=2, cp=2, attention="unfused")
    assert refused.value.field == "attention"


# ----- item 3: the time between kernels ---------------------------------------------------------
def test_pass_gaps_dispatch_or_host_pace_by_hand():
    # long kernels: one measured dispatch gap after each
    assert pass_gaps(20, 1e-2) == pytest.approx(20 * 2.06e-6)
    # 10 kernels of 5 us: the host needs 28.5 us for each, so the GPU waits for it
    assert pass_gaps(10, 5e-5) == pytest.approx(10 * 28.5e-6 - 5e-5)
    # after a host synchronization the first kernel also waits for its launch (5 us)
    assert pass_gaps(1, 1e-3, after_sync=True) == pytest.approx(2.06e-6 + 5e-6)
    assert (KERNEL_GAP_S, HOST_PER_KERNEL_S, LAUNCH_LATENCY_S) == (2.06e-6, 28.5e-6, 5e-6)


def test_a_small_model_is_host_bound():
    spec = models.ModelSpec("tiny", layers=2, hidden=256, heads=4, ffn=1024, vocab=1000,
                            seq_len=128)
    job = TrainJob(spec, gpu="h100")
    layer = next(b for b in job.stage_cost(0).blocks if b.name == "layer0")
    ops = layer_ops(spec, H100, seq_len=128)
    n = len(ops.select(phase="forward"))
    assert layer.forward_compute == pytest.approx(n * HOST_PER_KERNEL_S)   # the host's pace


# ----- item 3: the slowest of N GPUs ----------------------------------------------------------
def test_expected_maximum_against_closed_forms_and_monte_carlo():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=1e-9)
    rng = np.random.default_rng(2026)
    for n in (16, 1024):
        draws = rng.standard_normal((20_000, n)).max(axis=1)
        stderr = draws.std() / math.sqrt(len(draws))
        assert abs(expected_max_normal(n) - draws.mean()) < 4 * stderr
    assert straggler_fraction(1024) == pytest.approx(GPU_VARIATION * expected_max_normal(1024))


def test_the_straggler_is_its_own_line_and_scales_compute():
    from hpnsim.fabrics import fat_tree
    from hpnsim.training import simulate_iteration

    fabric = fat_tree(4)
    kw = dict(dp=8, global_batch=8, bucket_params=10**12, compute_efficiency=0.45)
    on = simulate_iteration(TrainJob("llama3-8b", gpu_variation=0.007, **kw), fabric,
                            dp_algo="ring")
    off = simulate_iteration(TrainJob("llama3-8b", gpu_variation=0, **kw), fabric,
                             dp_algo="ring")
    assert off.straggler_time == 0.0
    assert on.straggler_time == pytest.approx(on.compute_time * 0.007 * expected_max_normal(8),
                                              rel=1e-9)
    assert on.breakdown()["straggler"] == on.straggler_time
    assert on.iteration_time == pytest.approx(off.iteration_time + on.straggler_time, rel=1e-9)
    with pytest.raises(InputError, match="gpu_variation"):
        TrainJob("llama3-8b", gpu_variation=1.5)
    # the per-operation model adds the measured variation by default; the constant model's
    # one fraction of peak already holds it
    assert TrainJob("llama3-8b").gpu_variation == GPU_VARIATION
    assert TrainJob("llama3-8b", compute_efficiency=0.45).gpu_variation == 0.0


# ----- item 4: compute beside communication ------------------------------------------------------
def test_ring_attention_steps_beside_their_exchange_are_slower():
    from hpnsim.fabrics import hpn7
    from hpnsim.training import simulate_iteration

    spec = models.ModelSpec("two-layer", layers=2, hidden=4096, heads=32, kv_heads=8,
                            ffn=14336, vocab=1, seq_len=32768)
    cp = 4
    job = TrainJob(spec, tp=8, cp=cp, global_batch=1, optimizer_bytes_per_param=0,
                   gpu_variation=0)
    r = simulate_iteration(job, hpn7(segments=1, hosts_per_segment=cp, backup_hosts=0))
    # steps 0..cp-2 of each ring run beside a send/recv of 4 SMs: fused attention at 132/128
    from hpnsim.training.tp_overlap import gemm_shares

    qkv, proj, _, _ = gemm_shares(spec, 32768)
    layers = [b for b in job.stage_cost(0).blocks if b.name.startswith("layer")]
    core = sum((b.forward_attention + b.attention_ig) * (1 - qkv - proj) for b in layers)
    assert r.compute_by_class["contention"] == pytest.approx(
        core * (cp - 1) / cp * (132 / 128 - 1), rel=1e-9)


def _padded_tile_area(m, n, sms):
    """The least padded work of a grid of one wave or more over Hopper's tiles, by hand:
    waves x tile area (every tile walks the same K)."""
    return min(math.ceil(math.ceil(m / a) * math.ceil(n / b) / sms) * a * b
               for a, b in TILES["hopper"])


def test_a_gemm_beside_a_communication_kernel_by_its_waves():
    m = n = k = 8192
    t = gemm_time(m, n, k, "bf16", H100)
    assert (t.bound, t.split) == ("compute", 1)
    op = Op("fc1", "gemm", "forward", (m, n, k), "bf16", t.flops, t.bytes, t.seconds)
    floor = calibration(H100, "bf16").floor_s       # the fitted shortest kernel, not per wave
    for sms in (4, 16, 24):
        ratio = _padded_tile_area(m, n, 132 - sms) / _padded_tile_area(m, n, 132)
        expected = floor + (t.compute_s - floor) * ratio
        assert contended_seconds(op, H100, sms) == pytest.approx(expected, rel=1e-9)
    # memory-bound kernels keep HBM's pace; fused attention has many waves: n / (n - c)
    norm = Op("input_norm", "memory", "forward", (10**8,), "bf16", 0.0, 1e8, 3e-5)
    attention = Op("attention", "attention", "forward", (1, 8, 8192, 128), "bf16", 1e12, 1e9,
                   2e-3)
    assert contended_seconds(norm, H100, 16) == norm.seconds
    assert contended_seconds(attention, H100, 16) == pytest.approx(2e-3 * 132 / 116)
    assert slowdown([norm, op], H100, 0) == 1.0
    assert without_sms(H100, 16).tensor_peak("bf16") == pytest.approx(989.4e12 * 116 / 132)
