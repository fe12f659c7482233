"""Per-layer operation lists: GEMM FLOPs against 6*params*tokens closed forms, sharding, FP8."""

import pytest

from hpnsim.errors import InputError
from hpnsim.training.compute import head_ops, layer_ops, step_ops
from hpnsim.workloads.gpus import get_gpu
from hpnsim.workloads.models import get

H100 = get_gpu("h100")


@pytest.mark.parametrize("name,tp,cp,batch", [("llama3-8b", 1, 1, 1), ("llama3-70b", 8, 1, 1),
                                              ("llama3-70b", 8, 2, 2), ("gpt3-175b", 4, 1, 1),
                                              ("llama-7b", 2, 1, 4)])
def test_dense_layer_gemm_flops_are_six_params_tokens_over_tp(name, tp, cp, batch):
    m = get(name)
    seq = 4096
    tokens = batch * seq / cp
    ops = layer_ops(m, H100, tp=tp, cp=cp, micro_batch=batch, seq_len=seq)
    # weights of the four linear layers (biases are epilogue adds, not matmul FLOPs)
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    weights = m.hidden * (q + 2 * kv) + q * m.hidden + (3 if m.gated_mlp else 2) * m.hidden * m.ffn
    assert ops.flops(kind="gemm", phase="forward") == pytest.approx(2 * tokens * weights / tp)
    assert ops.flops(kind="gemm", phase="input_grad") == pytest.approx(2 * tokens * weights / tp)
    assert ops.flops(kind="gemm", phase="weight_grad") == pytest.approx(2 * tokens * weights / tp)
    assert ops.flops(kind="gemm") == pytest.approx(6 * tokens * weights / tp)
    if not m.bias:   # no biases: the linear weights are all of the layer's matrix parameters
        assert weights == m.attention_parameters() + m.mlp_parameters()


def test_layer_attention_flops_are_the_causal_closed_form_per_shard():
    m, seq, tp, cp = get("llama3-70b"), 8192, 8, 2
    ops = layer_ops(m, H100, tp=tp, cp=cp, seq_len=seq)
    causal = 4 * m.heads * m.head_dim * seq * (seq + 1) / 2
    assert ops.flops(kind="attention", phase="forward") == pytest.approx(causal / (tp * cp))
    assert ops.flops(kind="attention") == pytest.approx(3.5 * causal / (tp * cp))


def test_moe_layer_matches_the_model_flop_count():
    m = get("mixtral-8x7b")
    seq = 4096
    ops = layer_ops(m, H100, seq_len=seq)
    # models.py: projections + 4*s*q scores + experts (top_k + shared) + router, per token
    per_token = m.layer_forward_flops_per_token(0, seq) - 4 * seq * m.heads * m.head_dim
    assert ops.flops(kind="gemm", phase="forward") == pytest.approx(seq * per_token)


def test_moe_experts_sharded_over_ep_and_tp():
    m, seq, tp, ep = get("mixtral-8x7b"), 4096, 2, 4
    ops = layer_ops(m, H100, seq_len=seq, tp=tp, ep=ep)
    expert = [op for op in ops.ops if op.name == "expert_fc1" and op.phase == "forward"][0]
    # 8 / 4 = 2 local experts, each receiving 4096 * 2 * 4 / 8 = 4096 token copies
    assert expert.shape == (4096, 2 * m.expert_ffn // tp, m.hidden, 2)
    experts_flops = sum(op.flops for op in ops.select(kind="gemm", phase="forward")
                        if op.name.startswith("expert_"))
    assert experts_flops == pytest.approx(2 * seq * m.top_k * 3 * m.hidden * m.expert_ffn / tp)


def test_sequence_parallel_shards_the_norms_but_not_the_gemm_tokens():
    m, seq, tp = get("llama3-70b"), 8192, 8
    sp = {op.name: op for op in layer_ops(m, H100, tp=tp, seq_len=seq).select(phase="forward")}
    no = {op.name: op for op in layer_ops(m, H100, tp=tp, seq_len=seq,
                                          sequence_parallel=False).select(phase="forward")}
    assert sp["input_norm"].bytes == 2 * (seq // tp) * m.hidden * 2
    assert no["input_norm"].bytes == 2 * seq * m.hidden * 2
    assert sp["qkv"].shape == no["qkv"].shape == (seq, (64 + 2 * 8) * 128 // tp, m.hidden)


def test_fp8_layer_keeps_flops_adds_casts_and_is_faster():
    m, seq, tp = get("llama3-70b"), 8192, 8
    bf16 = layer_ops(m, H100, tp=tp, seq_len=seq)
    fp8 = layer_ops(m, H100, tp=tp, seq_len=seq, dtype="fp8")
    assert fp8.flops(kind="gemm") == pytest.approx(bf16.flops(kind="gemm"))
    casts = {op.name: op for op in fp8.ops if "_cast" in op.name}
    assert set(casts) == {"o_proj_input_cast", "fc2_input_cast", "qkv_grad_cast",
                          "o_proj_grad_cast", "fc1_grad_cast", "fc2_grad_cast"}
    # cast-transpose: read 2 bytes, write two 1-byte layouts, per element of the GEMM input
    assert casts["o_proj_input_cast"].bytes == 4 * seq * (m.heads // tp) * m.head_dim
    assert casts["fc2_grad_cast"].bytes == 4 * seq * m.hidden
    assert fp8.seconds(kind="gemm") < bf16.seconds(kind="gemm")
    assert fp8.seconds(kind="attention") == bf16.seconds(kind="attention")   # attention in BF16


def test_totals_split_by_class_and_direction():
    ops = layer_ops(get("llama3-8b"), H100, seq_len=2048)
    totals = ops.totals()
    assert totals["forward"]["all"] == pytest.approx(ops.forward_seconds)
    assert totals["backward"]["all"] == pytest.approx(ops.backward_seconds)
    assert sum(totals["forward"][k] for k in ("gemm", "attention", "memory")) == \
        pytest.approx(ops.forward_seconds)
    assert all(op.seconds > 0 for op in ops.ops)


def test_head_gemms_and_step_ops():
    m, seq, tp = get("llama3-70b"), 8192, 8
    ops = head_ops(m, H100, tp=tp, seq_len=seq)
    assert ops.flops(kind="gemm") == pytest.approx(6 * seq * (m.vocab / tp) * m.hidden)
    step = step_ops(H100, parameters=10**9, local_parameters=2 * 10**9)
    kernels = {op.name: op.bytes for op in step.select(kind="memory")}
    # Megatron's step, counted by hand: norm reads the FP32 grad (4 B), Adam reads g, p, m, v
    # and writes p, m, v (28 B), the master-to-model copy reads 4 and writes 2, the grad buffer
    # of every local parameter is zeroed (4 B)
    assert kernels == {"grad_norm": 4e9, "adam": 28e9, "param_copy": 6e9, "zero_grad": 8e9}
    (gaps,) = step.select(kind="gaps")
    launches = -(-10**9 // (65536 * 320))        # 48: one launch per 320 chunks of 64 Ki
    assert gaps.shape == (3 * launches + 1,)
    memory = step.totals()["optimizer"]["memory"]
    assert memory + gaps.seconds == pytest.approx(step.seconds()) and step.backward_seconds == 0


@pytest.mark.parametrize("kwargs,field", [(dict(tp=3), "heads"), (dict(cp=3), "seq_len"),
                                          (dict(dtype="int8"), "dtype"), (dict(layer=99), "layer"),
                                          (dict(micro_batch=0), "micro_batch")])
def test_bad_sharding_is_refused_by_name(kwargs, field):
    with pytest.raises(InputError) as err:
        layer_ops(get("llama3-8b"), H100, seq_len=4096, **kwargs)
    assert err.value.field == field


def test_fp8_layer_on_a100_is_refused():
    with pytest.raises(InputError, match="fp8"):
        layer_ops(get("llama3-8b"), get_gpu("a100"), dtype="fp8")


def test_a_lower_clock_slows_gemms_and_attention_but_not_memory_ops():
    m = get("llama3-8b")
    base = layer_ops(m, H100, seq_len=4096)
    capped = layer_ops(m, H100, seq_len=4096, clock_hz=H100.sustained_clock_hz / 2)
    assert capped.seconds(kind="memory") == base.seconds(kind="memory")
    assert capped.seconds(kind="attention") == pytest.approx(2 * base.seconds(kind="attention"))
    assert capped.seconds(kind="gemm") > 1.9 * base.seconds(kind="gemm")


def test_stage_ops_sum_their_layers_embedding_and_head():
    from hpnsim.training.compute import embedding_ops, stage_ops
    m, kw = get("deepseek-moe-16b"), dict(seq_len=4096, tp=2)
    stage = stage_ops(m, H100, layers=range(0, 3), first=True, last=True, **kw)
    parts = [embedding_ops(m, H100, **kw), layer_ops(m, H100, layer=0, **kw),
             layer_ops(m, H100, layer=1, **kw), layer_ops(m, H100, layer=2, **kw),
             head_ops(m, H100, **kw)]
    assert stage.forward_seconds == pytest.approx(sum(p.forward_seconds for p in parts))
    assert stage.backward_seconds == pytest.approx(sum(p.backward_seconds for p in parts))
    assert len(stage) == sum(len(p) for p in parts)
    names = [op.name for op in stage.ops]
    # forward: embedding first, head last; backward: head first, embedding last
    assert names[0] == "embedding" and names[-1] == "embedding"
    assert "layer1.expert_fc1" in names and "layer0.fc1" in names   # layer 0 is dense
    forward = stage.select(phase="forward")
    assert forward[-1].name == "ce_normalize"   # the unfused loss's last forward pass
