"""TransformerEngine v1.9 ring attention's memory-bound kernels (``AttnFuncWithCP``), counted
by hand from the tensors the code allocates and slices."""

import pytest

from hpnsim.errors import InputError
from hpnsim.training.compute.cp_attention_kernels import cp_attention_passes
from hpnsim.training.compute.layer import layer_ops
from hpnsim.workloads.gpus import get_gpu
from hpnsim.workloads.models import get

# b = 2 sequences of s = 32 tokens, cp = 2: a rank holds s_l = 16 tokens of each, two chunks of 8
B, S, H, G, D, CP = 2, 32, 4, 2, 8, 2
S_L = S // CP
Q = S_L * B * H * D * 2      # q, out, dq: [s_l, b, H, d] BF16, bytes
K = S_L * B * G * D * 2      # k or v: [s_l, b, G, d] BF16
L = B * H * S_L              # softmax statistics [b, H, s_l, 1], elements


def test_rank_1_of_2_forward_bytes_by_hand():
    fwd, _ = cp_attention_passes(B, S, H, G, D, CP, rank=1)
    expected = [
        ("attention_cp_kv_cat", 2 * (2 * K)),         # cat(k, v): read k, v; write [2, ...]
        ("attention_cp_kv_half", 2 * K),              # step 1: kv[:, 0] (K and V chunk 0)
        ("attention_cp_out_zero", Q),                 # empty_like(q).zero_()
        ("attention_cp_lse_clone", 4 * L + 4 * L),    # clone FP32
        ("attention_cp_lse_double", 4 * L + 8 * L),   # .to(torch.double)
        ("attention_cp_lse_correction", 8 * L + 4 * L + 8 * L),   # step 1 <= rank: all of l
        ("attention_cp_lse_float", 8 * L + 4 * L),    # .to(torch.float)
        # steps 0 and 1 (both <= rank): read out, out_per_step, two LSEs; write out
        ("attention_cp_out_correction", 3 * Q + 2 * 4 * L),
        ("attention_cp_out_correction", 3 * Q + 2 * 4 * L),
    ]
    assert [(p.name, p.bytes) for p in fwd] == expected


def test_rank_0_of_2_forward_corrects_step_1_on_the_second_half_only():
    fwd, _ = cp_attention_passes(B, S, H, G, D, CP, rank=0)
    names = [p.name for p in fwd]
    assert "attention_cp_kv_half" not in names        # step 1 > rank: q[1] is contiguous
    corrections = [p.bytes for p in fwd if p.name == "attention_cp_out_correction"]
    assert corrections == [3 * Q + 8 * L, (3 * Q + 8 * L) / 2]
    lse = [p.bytes for p in fwd if p.name == "attention_cp_lse_correction"]
    assert lse == [(8 + 4 + 8) * L / 2]


def test_rank_1_of_2_backward_bytes_by_hand():
    _, bwd = cp_attention_passes(B, S, H, G, D, CP, rank=1)
    # rank 1: step 0 is the rank-0 KV (kv_[:, 0] copied, dq_ whole), step 1 its own diagonal
    expected = [
        ("attention_cp_lse_half", 2 * 4 * L / 2),     # softmax_lse[..., 1, :].contiguous()
        ("attention_cp_kv_buffer", 2 * 2 * K),        # p2p_comm_buffers[0][0].copy_(kv)
        ("attention_cp_kv_half", 2 * K),              # step 0: kv[:, 0].contiguous()
        ("attention_cp_dq_copy", 2 * Q),              # step 0 == cp - rank - 1, last rank: copy
        ("attention_cp_dkv_cat", 2 * K),              # cat(dk_, dv_) of half the keys
        ("attention_cp_dkv_copy", 2 * K),             # dkv[:, 0].copy_(dkv_)
        ("attention_cp_dq_add", 3 * Q),               # step 1: dq.add_(dq_)
        ("attention_cp_dkv_cat", 2 * 2 * K),
        ("attention_cp_dkv_add", 3 * 2 * K),          # dkv.add_(dkv_)
    ]
    assert [(p.name, p.bytes) for p in bwd] == expected


def test_rank_0_of_2_backward_splits_the_copies_and_adds():
    _, bwd = cp_attention_passes(B, S, H, G, D, CP, rank=0)
    by_name = {}
    for p in bwd:
        by_name.setdefault(p.name, []).append(p.bytes)
    assert "attention_cp_kv_half" not in by_name      # no half-KV step on rank 0
    # step 0 (< cp - rank - 1 = 1): dq[1].copy_; step 1: dq[0].copy_, dq[1].add_
    assert by_name["attention_cp_dq_copy"] == [Q / 2 * 2, Q / 2 * 2]
    assert by_name["attention_cp_dq_add"] == [Q / 2 * 3]
    # step 0: dkv.copy_ (all); step 1 on rank 0: dkv[:, 0].add_, dkv[:, 1].copy_
    assert by_name["attention_cp_dkv_copy"] == [2 * 2 * K, 2 * K]
    assert by_name["attention_cp_dkv_add"] == [3 * K]
    assert by_name["attention_cp_dkv_cat"] == [2 * 2 * K, 2 * 2 * K]


def test_default_is_the_busiest_rank_in_each_direction():
    fwd, bwd = cp_attention_passes(B, S, H, G, D, 4)
    per_rank = [cp_attention_passes(B, S, H, G, D, 4, rank=r) for r in range(4)]
    assert sum(p.bytes for p in fwd) == max(sum(p.bytes for p in f) for f, _ in per_rank)
    assert sum(p.bytes for p in bwd) == max(sum(p.bytes for p in b) for _, b in per_rank)
    # rank r makes r half-KV copies in each direction; c forward output corrections
    for r, (f, b) in enumerate(per_rank):
        assert [p.name for p in f].count("attention_cp_kv_half") == r
        assert [p.name for p in b].count("attention_cp_kv_half") == r
        assert [p.name for p in f].count("attention_cp_out_correction") == 4
        assert [p.name for p in f].count("attention_cp_lse_correction") == 3


def test_cp_1_adds_nothing():
    assert cp_attention_passes(B, S, H, G, D, 1) == ([], [])
    m, h100 = get("llama3-8b"), get_gpu("h100")
    names = {op.name for op in layer_ops(m, h100, seq_len=8192).ops}
    assert not any(n.startswith("attention_cp_") for n in names)


def test_layer_ops_carry_the_passes_for_cp_2():
    m, h100 = get("llama3-8b"), get_gpu("h100")
    one = layer_ops(m, h100, seq_len=8192, cp=2)
    fwd, bwd = cp_attention_passes(1, 8192, m.heads, m.kv_heads, m.head_dim, 2)
    ops = [op for op in one.ops if op.name.startswith("attention_cp_")]
    assert [(op.name, op.phase, op.bytes) for op in ops] == (
        [(p.name, "forward", p.bytes) for p in fwd]
        + [(p.name, "input_grad", p.bytes) for p in bwd])
    assert all(op.kind == "memory" and op.seconds > 0 for op in ops)


def test_chunks_must_split_evenly():
    with pytest.raises(InputError, match="2 \\* cp"):
        cp_attention_passes(1, 30, H, G, D, 4)
