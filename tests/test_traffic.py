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
    rows = [r for r in iteration_traffic("llama3-8b", lay).rows if r.dimension == "pp"]
    assert rows[0].network_fraction == pytest.approx(1 / 3)   # 0-1 in host, 1-2 across, 2-3 in host


def test_data_parallel_gradient_allreduce_once_per_iteration():
    lay = Layout(tp=8, pp=8, dp=16, global_batch=2048)
    dp = _dims(iteration_traffic(LLAMA70, lay))["dp"]
    grads = LLAMA70.num_parameters() / 64 * 2
    assert dp["calls"] == 1
    assert dp["bytes_per_gpu"] == pytest.approx(2 * 15 / 16 * grads)
    assert dp["network_bytes"] == pytest.approx(dp["total_bytes"])


def test_zero_stages():
    model = models.get("llama3-8b")
    shard = model.num_parameters() * 2
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
    dense = (mix.num_parameters() - mix.expert_parameters()) * 2
    assert dims["dp"]["bytes_per_gpu"] == pytest.approx(2 * 7 / 8 * dense)
    assert "edp" not in dims                                # every expert lives on one rank


def test_context_parallel_ring_attention_bytes():
    spec = models.get("llama3-8b")
    lay = Layout(cp=4, dp=1, global_batch=1)
    cp = _dims(iteration_traffic(spec, lay))["cp"]
    chunk = 2 * (8192 // 4) * 8 * 128 * 2                    # K and V of 2048 tokens, 8 KV heads
    assert cp["bytes_per_gpu"] == pytest.approx(32 * 3 * 3 * chunk)   # 3 hops fwd, 6 bwd, 32 layers


def test_epoch_scaling():
    lay = Layout(tp=8, pp=8, dp=16, global_batch=2048)
    rep = iteration_traffic(LLAMA70, lay, dataset_tokens=156e9)
    assert rep.iterations_per_epoch == pytest.approx(156e9 / (2048 * 8192))
    assert rep.per_epoch_bytes == pytest.approx(rep.total_bytes * rep.iterations_per_epoch)


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


def test_article_3d_reduces_to_single_modes(c4):
    t = article.article_table(c4, 8)
    assert article.article_3d(c4, tp=1, pp=1, dp=8).backward_bytes == pytest.approx(t["dp"].backward_bytes)
    assert article.article_3d(c4, tp=1, pp=8, dp=1).forward_bytes == pytest.approx(t["pp"].forward_bytes)
    assert article.article_3d(c4, tp=8, pp=1, dp=1).forward_bytes == pytest.approx(t["tp"].forward_bytes)


def test_naive_dp_matches_article_and_ring_is_g_over_2_smaller(c4):
    g = 8
    lay = Layout(dp=g, global_batch=g)
    spec = models.get("llama3-70b")
    naive = _dims(iteration_traffic(spec, lay, algorithm="naive"))["dp"]["total_bytes"]
    ring = _dims(iteration_traffic(spec, lay))["dp"]["total_bytes"]
    per_batch = article.article_table(
        article.article_inputs(spec, parameters=spec.num_parameters()), g)["dp"].backward_bytes
    assert naive * c4.batches == pytest.approx(per_batch)
    assert naive / ring == pytest.approx(g / 2)


def test_real_pipeline_forward_equals_article_pp_row():
    spec = models.get("llama3-70b")
    lay = Layout(pp=8, global_batch=8)
    rep = iteration_traffic(spec, lay, dataset_tokens=156e9)
    forward = sum(r.total_bytes for r in rep.rows if r.dimension == "pp" and r.phase == "forward")
    table = article.article_table(article.article_inputs(spec), 8)
    assert forward * rep.iterations_per_epoch == pytest.approx(table["pp"].forward_bytes)


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
    (["--model", "nope"], "model"),
    (["--model", "llama3-70b", "--tp", "8", "--pp", "8", "--dp", "16", "--gpus", "512"], "layout"),
    (["--model", "llama3-70b", "--tp", "16"], "tp"),
    (["--model", "llama3-70b", "--pp", "3"], "pp"),
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
