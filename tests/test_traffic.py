"""Traffic calculator: real collective volumes by hand derivation; the article's table reproduced."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.workloads import article, models
from hpnsim.workloads.layout import Layout
from hpnsim.workloads.traffic import bytes_sent_per_gpu, iteration_traffic

runner = CliRunner()


# ----- per-collective volumes ---------------------------------------------------------------
@given(n=st.integers(2, 512), size=st.floats(1.0, 1e12))
def test_ring_allreduce_is_reduce_scatter_plus_all_gather(n, size):
    ar = bytes_sent_per_gpu("allreduce", n, size)
    assert ar == pytest.approx(2 * (n - 1) / n * size)
    rs_ag = bytes_sent_per_gpu("reducescatter", n, size) + bytes_sent_per_gpu("allgather", n, size)
    assert ar == pytest.approx(rs_ag)
    assert bytes_sent_per_gpu("allreduce", n, size, "naive") == pytest.approx((n - 1) * size)


def test_single_gpu_moves_nothing():
    assert bytes_sent_per_gpu("allreduce", 1, 1e9) == 0.0


# ----- per-dimension volumes of a job -------------------------------------------------------
LLAMA70 = models.get("llama3-70b")
S, H = 8192, 8192
ACT = 1 * S * H * 2                      # one micro-batch's hidden states, BF16
# Parameter counts from the released configs, written out (not read from the catalog):
# Llama-3 70B: 80 x (Q,O 8192^2 each, K,V 8192x1024 each, SwiGLU 3x8192x28672, 2 RMSNorms)
# + embedding and untied head 128256x8192 each + final norm = 70,553,706,496.
P70 = 80 * (2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192) + 2 * 128256 * 8192 + 8192
# Llama-3 8B: 32 x (2x4096^2 + 2x4096x1024 + 3x4096x14336 + 2x4096) + 2x128256x4096 + 4096.
P8 = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 2 * 128256 * 4096 + 4096
# Mixtral 8x7B without its routed experts: 32 x (attention 2x4096^2 + 2x4096x1024, 2 norms,
# router 4096x8) + embedding and head 32000x4096 each + final norm = 1,605,636,096.
MIXTRAL_DENSE = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 2 * 4096 + 4096 * 8) + 2 * 32000 * 4096 + 4096


def _dims(report):
    return report.by_dimension()


def test_tensor_parallel_two_allreduces_per_layer_each_way():
    lay = Layout(tp=8, pp=8, dp=16, global_batch=2048)
    rep = iteration_traffic(LLAMA70, lay)
    m, layers = 128, 80 // 8
    per_gpu = m * layers * (2 + 2) * 2 * 7 / 8 * ACT
    tp = _dims(rep)["tp"]
    assert tp["bytes_per_gpu"] == pytest.approx(per_gpu)
    assert tp["total_bytes"] == pytest.approx(per_gpu * 1024)
    assert tp["network_bytes"] == 0                      # TP stays inside the host
    assert tp["calls"] == m * layers * 4


def test_sequence_parallel_moves_the_same_tp_bytes():
    plain = iteration_traffic(LLAMA70, Layout(tp=8, pp=8, dp=16, global_batch=2048))
    sp = iteration_traffic(LLAMA70, Layout(tp=8, pp=8, dp=16, global_batch=2048,
                                           sequence_parallel=True))
    assert _dims(sp)["tp"]["total_bytes"] == pytest.approx(_dims(plain)["tp"]["total_bytes"])
    # ...but PP messages shrink by tp (hidden states are sharded along the sequence)
    assert _dims(sp)["pp"]["total_bytes"] == pytest.approx(_dims(plain)["pp"]["total_bytes"] / 8)


def test_recompute_repeats_forward_tp_collectives():
    lay = Layout(tp=8, pp=8, dp=16, global_batch=2048)
    base = _dims(iteration_traffic(LLAMA70, lay))["tp"]["total_bytes"]
    again = _dims(iteration_traffic(LLAMA70, lay, recompute=True))["tp"]["total_bytes"]
    assert again == pytest.approx(1.5 * base)


def test_pipeline_sends_per_boundary_per_micro_batch():
    lay = Layout(tp=8, pp=8, dp=16, global_batch=2048)
    pp = _dims(iteration_traffic(LLAMA70, lay))["pp"]
    m = 128
    assert pp["total_bytes"] == pytest.approx(2 * m * 7 * ACT * (8 * 16))   # fwd+bwd, tp*dp pipelines
    assert pp["network_bytes"] == pytest.approx(pp["total_bytes"])          # stages on other hosts


def test_interleaved_pipeline_crosses_more_boundaries():
    lay = Layout(tp=8, pp=4, vpp=2, dp=1, global_batch=8)
    pp = _dims(iteration_traffic(LLAMA70, lay))["pp"]
    assert pp["total_bytes"] == pytest.approx(2 * 8 * (4 * 2 - 1) * ACT * 8)


def test_pipeline_stages_sharing_a_host_use_nvlink():
    lay = Layout(tp=4, pp=4, dp=2, global_batch=8)       # two stages per 8-GPU host
    rows = [r for r in iteration_traffic("llama3-8b", lay).collectives if r.dimension == "pp"]
    assert rows[0].network_fraction == pytest.approx(1 / 3)   # 0-1 in host, 1-2 across, 2-3 in host


def test_data_parallel_gradient_allreduce_once_per_iteration():
    lay = Layout(tp=8, pp=8, dp=16, global_batch=2048)
    dp = _dims(iteration_traffic(LLAMA70, lay))["dp"]
    grads = P70 / 64 * 2                    # BF16 gradients of a 1/(tp*pp) shard
    assert dp["calls"] == 1
    assert dp["bytes_per_gpu"] == pytest.approx(2 * 15 / 16 * grads)
    assert dp["network_bytes"] == pytest.approx(dp["total_bytes"])


def test_zero_stages():
    model = models.get("llama3-8b")
    shard = P8 * 2
    dp = 8
    volumes = {}
    for zero in (0, 1, 2, 3):
        rep = iteration_traffic(model, Layout(dp=dp, zero=zero, global_batch=32))
        volumes[zero] = _dims(rep)["dp"]["bytes_per_gpu"]
    assert volumes[0] == pytest.approx(2 * 7 / 8 * shard)
    assert volumes[1] == pytest.approx(volumes[0]) and volumes[2] == pytest.approx(volumes[0])
    m = 32 // dp
    assert volumes[3] == pytest.approx(m * 3 * 7 / 8 * shard)    # 2 all-gathers + 1 reduce-scatter


def test_fp32_gradients_double_dp_bytes():
    lay = Layout(dp=4, global_batch=4)
    two = _dims(iteration_traffic("llama3-8b", lay))["dp"]["total_bytes"]
    four = _dims(iteration_traffic("llama3-8b", lay, grad_bytes=4))["dp"]["total_bytes"]
    assert four == pytest.approx(2 * two)


def test_expert_parallel_all_to_all_and_expert_gradients():
    mix = models.get("mixtral-8x7b")
    lay = Layout(tp=1, dp=8, ep=8, global_batch=8)
    dims = _dims(iteration_traffic(mix, lay, seq_len=4096))
    tokens = 4096
    buffer = tokens * 2 * 4096 * 2                          # top-2 copies of each token's hidden state
    assert dims["ep"]["bytes_per_gpu"] == pytest.approx(32 * 4 * 7 / 8 * buffer)
    dense = MIXTRAL_DENSE * 2
    assert dims["dp"]["bytes_per_gpu"] == pytest.approx(2 * 7 / 8 * dense)
    assert "edp" not in dims                                # every expert lives on one rank


def test_context_parallel_ring_attention_bytes():
    spec = models.get("llama3-8b")
    lay = Layout(cp=4, dp=1, global_batch=1)
    cp = _dims(iteration_traffic(spec, lay))["cp"]
    chunk = 2 * (8192 // 4) * 8 * 128 * 2                    # K and V of 2048 tokens, 8 KV heads
    assert cp["bytes_per_gpu"] == pytest.approx(32 * 3 * 3 * chunk)   # 3 hops fwd, 6 bwd, 32 layers


def test_epoch_scaling():
    # Llama-3 70B, TP 8 x PP 8 x DP 16 = 1024 GPUs (8 per host), 2048 sequences of 8192 tokens
    # per iteration, micro-batch 1, over C4's 156e9 tokens; every volume from the ring
    # collectives by hand.
    lay = Layout(tp=8, pp=8, dp=16, global_batch=2048)
    rep = iteration_traffic(LLAMA70, lay, dataset_tokens=156e9)
    iterations = 156e9 / (2048 * 8192)                      # 9,298.1 iterations per epoch
    m = 2048 // 16                                          # 128 micro-batches per pipeline
    per_iteration = {
        # 2 all-reduces per layer forward + 2 backward of b*s*h*2 bytes, 10 layers per stage;
        # a ring all-reduce sends 2(n-1)/n of the buffer per GPU; all 1024 GPUs send.
        "tp": 1024 * m * (80 // 8) * 4 * (2 * 7 / 8) * ACT,
        # 8*16 = 128 pipelines, 7 stage boundaries, one activation forward and one gradient
        # backward per micro-batch per boundary.
        "pp": (8 * 16) * m * 7 * 2 * ACT,
        # ring all-reduce of the BF16 gradients of a P/64 shard over 16 ranks, once; 1024 GPUs.
        "dp": 1024 * (2 * 15 / 16) * (P70 / 64 * 2),
    }
    dims = rep.by_dimension()
    assert rep.iterations_per_epoch == pytest.approx(iterations, rel=1e-12)
    for dim, value in per_iteration.items():
        assert dims[dim]["per_epoch_bytes"] == pytest.approx(value * iterations, rel=1e-12)
    assert rep.per_epoch_bytes == pytest.approx(sum(per_iteration.values()) * iterations, rel=1e-12)
    # the figures docs/traffic.md section 3 prints: 11.45 EB TP, 0.286 EB PP, 0.039 EB DP,
    # 11.8 EB in all (1.27 PB per iteration)
    assert dims["tp"]["per_epoch_bytes"] / 1e18 == pytest.approx(11.45, abs=0.005)
    assert dims["pp"]["per_epoch_bytes"] / 1e18 == pytest.approx(0.286, abs=0.0005)
    assert dims["dp"]["per_epoch_bytes"] / 1e18 == pytest.approx(0.039, abs=0.0005)
    assert rep.per_epoch_bytes / 1e18 == pytest.approx(11.8, abs=0.05)
    assert rep.total_bytes / 1e15 == pytest.approx(1.27, abs=0.005)


# ----- the article ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def c4():
    return article.article_inputs("llama3-70b")


def test_article_inputs(c4):
    assert c4.parameters == 70e9 and c4.layers == 80 and c4.hidden == 8192
    assert c4.batches == pytest.approx(364.6e6 / 2048)
    assert round(c4.batches / 1000) == 178


def test_article_table_reproduced(c4):
    t = article.article_table(c4, 8)
    assert t["dp"].backward_bytes / 1e15 == pytest.approx(1396, abs=0.5)
    assert t["fsdp"].backward_bytes / 1e15 == pytest.approx(175, rel=0.005)  # 174.47, printed 175
    assert t["fsdp"].forward_bytes == t["fsdp"].backward_bytes
    assert t["pp"].backward_bytes / 1e15 == pytest.approx(17.9, abs=0.05)
    assert t["pp"].forward_bytes == t["pp"].backward_bytes
    # the TP row is printed in bytes / (2^20 * 1e9), not in PB
    mixed = 2**20 * 1e9
    assert t["tp"].backward_bytes / mixed == pytest.approx(26622, abs=0.5)
    assert t["tp"].forward_bytes / mixed == pytest.approx(21840, abs=0.5)
    assert t["tp"].backward_bytes / 1e15 == pytest.approx(27915, abs=1)
    assert (t["dp"].backward_syncs, t["fsdp"].backward_syncs, t["tp"].backward_syncs,
            t["pp"].backward_syncs) == (1, 80, 160, 7)


def test_article_3d_line_is_85_exabytes(c4):
    line = article.article_3d(c4, tp=8, pp=8, dp=16)
    assert line.total_bytes / 1e18 == pytest.approx(85, abs=0.5)
    assert line.backward_bytes / 1e18 == pytest.approx(61.83, abs=0.01)
    assert line.forward_bytes / 1e18 == pytest.approx(22.92, abs=0.01)
    days = article.switch_days(line.total_bytes, 51.2e12)
    assert days["as_bytes_per_second"] == pytest.approx(19.2, abs=0.1)   # the article's "20 days"
    assert days["as_bits_per_second"] == pytest.approx(153, abs=1)


def test_article_formulas_evaluated_by_hand(c4):
    # The article's symbols as its text gives them: Llama-3 70B with P = 70e9 (nominal),
    # L = 80, H = 8192; C4 with T = 156e9 tokens in 364.6e6 samples, 2048 samples per
    # mini-batch (N = 178,027); BF16 (the leading 2 of each formula); G = 8.
    n, p, t, layers, h, g = 364.6e6 / 2048, 70e9, 156e9, 80, 8192, 8
    expected = {          # mode: (backward, forward) per epoch, bytes
        "dp": (2 * n * p * g * (g - 1), 0.0),
        "fsdp": (2 * n * p * (g - 1), 2 * n * p * (g - 1)),
        "tp": (4 * n * p * layers * (g - 1), 4 * layers * t * h * (g - 1) * g),
        "pp": (2 * t * h * (g - 1), 2 * t * h * (g - 1)),
    }
    table = article.article_table(c4, g)
    for mode, (backward, forward) in expected.items():
        assert table[mode].backward_bytes == pytest.approx(backward, rel=1e-12), mode
        assert table[mode].forward_bytes == pytest.approx(forward, rel=1e-12, abs=0), mode
    pb = {mode: (bwd / 1e15, fwd / 1e15) for mode, (bwd, fwd) in expected.items()}
    assert pb["dp"][0] == pytest.approx(1395.73, abs=0.01)      # printed 1396 PB
    assert pb["fsdp"][0] == pytest.approx(174.47, abs=0.01)     # printed 175 PB (rounded up)
    assert pb["pp"][0] == pytest.approx(17.89, abs=0.01)        # printed 17.9 PB
    # The printed TP row (26622 backward, 21840 forward, "PB") does not follow from the
    # formulas in PB: they give 27,914.7 and 22,900.9 PB. The printed figures are the same
    # bytes divided by 2^20 * 1e9.
    assert pb["tp"] == pytest.approx((27914.69, 22900.90), abs=0.01)
    assert expected["tp"][0] / (2**20 * 1e9) == pytest.approx(26622, abs=0.5)
    assert expected["tp"][1] / (2**20 * 1e9) == pytest.approx(21840, abs=0.5)

    # 3D, TP 8 x PP 8 x DP 16 on 1024 GPUs
    gtp, gpp, gdp = 8, 8, 16
    backward = 2 * n * p * gdp * (2 * layers * (gtp - 1) / gpp + (gdp - 1)) + 2 * t * h * (gpp - 1)
    forward = 2 * t * h * (2 * layers * gtp * (gtp - 1) + (gpp - 1))
    line = article.article_3d(c4, tp=gtp, pp=gpp, dp=gdp)
    assert line.backward_bytes == pytest.approx(backward, rel=1e-12)
    assert line.forward_bytes == pytest.approx(forward, rel=1e-12)
    assert (backward + forward) / 1e18 == pytest.approx(84.75, abs=0.005)   # "about 85 EB"
    # "About 20 days on one 51.2T switch" holds only for 51.2e12 *bytes*/s; a 51.2 Tbit/s
    # switch carries 6.4e12 B/s and needs 153 days.
    days = article.switch_days(line.total_bytes, 51.2e12)
    assert days["as_bytes_per_second"] == pytest.approx((backward + forward) / 51.2e12 / 86400)
    assert days["as_bits_per_second"] == pytest.approx((backward + forward) / 6.4e12 / 86400)


def test_article_3d_reduces_to_single_modes(c4):
    t = article.article_table(c4, 8)
    assert article.article_3d(c4, tp=1, pp=1, dp=8).backward_bytes == pytest.approx(t["dp"].backward_bytes)
    assert article.article_3d(c4, tp=1, pp=8, dp=1).forward_bytes == pytest.approx(t["pp"].forward_bytes)
    assert article.article_3d(c4, tp=8, pp=1, dp=1).forward_bytes == pytest.approx(t["tp"].forward_bytes)


def test_naive_dp_matches_article_and_ring_is_g_over_2_smaller(c4):
    g = 8
    lay = Layout(dp=g, global_batch=g)
    naive = _dims(iteration_traffic(LLAMA70, lay, algorithm="naive"))["dp"]["total_bytes"]
    ring = _dims(iteration_traffic(LLAMA70, lay))["dp"]["total_bytes"]
    grad = 2 * P70                                   # the whole model's BF16 gradient
    # naive (the article's pattern): each of the g GPUs sends its gradient to the g-1 others
    assert naive == pytest.approx(g * (g - 1) * grad, rel=1e-12)
    # ring: reduce-scatter then all-gather, 2(g-1) steps of grad/g per GPU
    assert ring == pytest.approx(g * 2 * (g - 1) / g * grad, rel=1e-12)
    assert naive / ring == pytest.approx(g / 2)
    # Over the article's N = 364.6e6 / 2048 mini-batches the naive volume is its DP formula
    # 2*N*P*G*(G-1); with the exact P (70.55e9) that is 1406.77 PB, with the nominal
    # P = 70e9 the article uses, 1395.73 PB (printed 1396). Ring: 2*N*P*2(G-1).
    n = 364.6e6 / 2048
    assert naive * n / 1e15 == pytest.approx(1406.77, abs=0.01)
    assert ring * n / 1e15 == pytest.approx(351.69, abs=0.01)
    dp_row = article.article_table(c4, g)["dp"].backward_bytes
    assert dp_row == pytest.approx(2 * n * 70e9 * g * (g - 1), rel=1e-12)
    assert dp_row / 1e15 == pytest.approx(1396, abs=0.5)


def test_real_pipeline_forward_equals_article_pp_row(c4):
    # PP 8, micro-batch 1 of 8192 tokens, 8 micro-batches: each micro-batch's hidden state
    # (b*s*h*2 bytes) crosses each of the 7 stage boundaries once forward, its gradient once
    # backward. Over an epoch every one of the T tokens' h-wide BF16 state crosses G-1
    # boundaries each way: 2*T*H*(G-1), the article's PP row (naive and real agree here).
    lay = Layout(pp=8, global_batch=8)
    rep = iteration_traffic(LLAMA70, lay, dataset_tokens=156e9)
    per_phase = {phase: sum(r.total_bytes for r in rep.collectives if r.dimension == "pp" and r.phase == phase)
                 for phase in ("forward", "backward")}
    assert per_phase["forward"] == pytest.approx(8 * 7 * 1 * 8192 * 8192 * 2, rel=1e-12)
    assert per_phase["backward"] == pytest.approx(per_phase["forward"], rel=1e-12)
    epoch = 2 * 156e9 * 8192 * (8 - 1)               # 17.89 PB; the article prints 17.9 PB
    assert rep.iterations_per_epoch == pytest.approx(156e9 / (8 * 8192), rel=1e-12)
    assert per_phase["forward"] * rep.iterations_per_epoch == pytest.approx(epoch, rel=1e-12)
    row = article.article_table(c4, 8)["pp"]
    assert row.forward_bytes == pytest.approx(epoch, rel=1e-12)
    assert row.backward_bytes == pytest.approx(epoch, rel=1e-12)
    assert row.forward_bytes / 1e15 == pytest.approx(17.9, abs=0.05)


# ----- CLI -----------------------------------------------------------------------------------
def test_cli_article_json_has_one_entry_per_mode():
    result = runner.invoke(app, ["traffic", "--model", "llama3-70b", "--tp", "8", "--pp", "8",
                                 "--dp", "16", "--article", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for mode in ("dp", "fsdp", "tp", "pp", "3d"):
        assert {"backward_bytes", "forward_bytes"} <= set(data[mode])
    assert data["dp"]["backward_bytes"] / 1e15 == pytest.approx(1396, abs=0.5)
    total = data["3d"]["backward_bytes"] + data["3d"]["forward_bytes"]
    assert total / 1e18 == pytest.approx(85, abs=0.5)


def test_cli_article_group_size():
    result = runner.invoke(app, ["traffic", "--model", "llama3-70b", "--article", "--gpus", "4",
                                 "--json"])
    data = json.loads(result.stdout)
    assert "3d" not in data
    assert data["pp"]["backward_syncs"] == 3


def test_cli_real_json():
    result = runner.invoke(app, ["traffic", "--model", "llama3-70b", "--tp", "8", "--pp", "8",
                                 "--dp", "16", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["dimensions"]) == {"tp", "pp", "dp"}
    assert data["iterations_per_epoch"] == pytest.approx(156e9 / (2048 * 8192))


def test_cli_text_output():
    result = runner.invoke(app, ["traffic", "--model", "llama3-70b", "--tp", "8", "--pp", "8",
                                 "--dp", "16", "--article"])
    assert result.exit_code == 0
    assert "26,622" in result.stdout and "84.7 EB" in result.stdout


@pytest.mark.parametrize("args, field", [
    (["--model", "nope"], "--model"),
    (["--model", "llama3-70b", "--tp", "8", "--pp", "8", "--dp", "16", "--gpus", "512"], "layout"),
    (["--model", "llama3-70b", "--tp", "16"], "--tp"),
    (["--model", "llama3-70b", "--pp", "3"], "--pp"),
])
def test_cli_bad_input_exits_2_with_one_line(args, field):
    result = runner.invoke(app, ["traffic", *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:")


def test_cli_model_file(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("name: mini\nlayers: 4\nhidden: 512\nheads: 8\nffn: 2048\nvocab: 1000\nseq_len: 256\n")
    result = runner.invoke(app, ["traffic", "--model", "mini", "--model-file", str(path),
                                 "--tp", "2", "--dp", "2", "--batch", "4", "--json"])
    assert result.exit_code == 0, result.output
    tp = json.loads(result.stdout)["dimensions"]["tp"]
    assert tp["bytes_per_gpu"] == pytest.approx(2 * 4 * 4 * 1 / 2 * 2 * 256 * 512 * 2)
