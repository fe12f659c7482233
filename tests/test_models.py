"""Model catalog: parameter counts against published sizes, FLOPs against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpnsim.errors import InputError
from hpnsim.workloads import models
from hpnsim.workloads.models import ModelSpec

# Sizes the authors publish (paper or model card), independent of the catalog file.
PUBLISHED = {
    "gpt3-175b": 175.0e9,        # Brown et al. 2020 (GPT-3), Table 2.1: 175.0B
    "llama-7b": 6.7e9,           # Touvron et al. 2023 (LLaMA), Table 2: 6.7B
    "llama-13b": 13.0e9,         # ibid.: 13.0B
    "llama-65b": 65.2e9,         # ibid.: 65.2B
    "llama3-8b": 8.03e9,         # Meta-Llama-3-8B model card (Hugging Face): 8.03B
    "llama3-70b": 70.6e9,        # Meta-Llama-3-70B model card (Hugging Face): 70.6B
    "llama3-405b": 405e9,        # Dubey et al. 2024 (The Llama 3 Herd of Models): 405B
    "bert-large": 340e6,         # Devlin et al. 2019 (BERT), section 3: BERT-large 340M
    "resnet-50": 25.6e6,         # He et al. 2016 / torchvision ResNet50_Weights: 25.6M
    "mixtral-8x7b": 46.7e9,      # Mistral AI, "Mixtral of experts" (2023): 46.7B total
    "deepseek-moe-16b": 16.4e9,  # Dai et al. 2024 (DeepSeekMoE): 16.4B total
}
PUBLISHED_ACTIVE = {
    "mixtral-8x7b": 12.9e9,      # Mistral AI (2023): 12.9B used per token
    "deepseek-moe-16b": 2.8e9,   # Dai et al. 2024: 2.8B activated per token
}


def test_catalog_has_the_required_models():
    # every catalog model needs a published size in PUBLISHED above, and vice versa
    assert set(PUBLISHED) == set(models.names())


def test_resnet50_count_is_torchvisions():
    # torchvision.models.ResNet50_Weights.IMAGENET1K_V1.meta["num_params"] == 25_557_032
    assert models.get("resnet-50").num_parameters() == 25_557_032


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_within_2_percent_of_published(name):
    count = models.get(name).num_parameters()
    assert count == pytest.approx(PUBLISHED[name], rel=0.02)


@pytest.mark.parametrize("name", sorted(PUBLISHED_ACTIVE))
def test_moe_active_parameters_within_2_percent(name):
    spec = models.get(name)
    assert spec.active_parameters() == pytest.approx(PUBLISHED_ACTIVE[name], rel=0.02)
    assert spec.active_parameters() < spec.num_parameters()


def test_llama3_70b_exact_count_from_its_config():
    # 80 x (attention 2*8192^2 + 2*8192*1024, SwiGLU 3*8192*28672, 2 RMSNorms)
    # + embeddings and untied head 2*128256*8192 + final norm.
    layer = 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    expected = 80 * layer + 2 * 128256 * 8192 + 8192
    assert models.get("llama3-70b").num_parameters() == expected


def test_mixtral_expert_parameters():
    spec = models.get("mixtral-8x7b")
    assert spec.expert_parameters() == 32 * 8 * 3 * 4096 * 14336
    assert spec.moe_layers == 32


def test_deepseek_first_layer_dense_rest_moe():
    spec = models.get("deepseek-moe-16b")
    assert not spec.is_moe_layer(0)
    assert all(spec.is_moe_layer(i) for i in range(1, spec.layers))
    assert spec.moe_layers == 27


def test_dense_forward_flops_are_2N_plus_attention():
    spec = models.get("llama3-8b")
    matmul_params = spec.num_parameters() - spec.vocab * spec.hidden - (2 * spec.layers + 1) * spec.hidden
    expected = 2 * matmul_params + 4 * spec.seq_len * spec.hidden * spec.layers
    assert spec.forward_flops_per_token() == pytest.approx(expected, rel=1e-12)


def test_gpt3_training_flops_match_megatron_formula():
    # Narayanan et al. 2021 without recomputation: 72 L h^2 (1 + s/(6h) + V/(12 h L)) per token.
    spec = models.get("gpt3-175b")
    lay, h, s, v = spec.layers, spec.hidden, spec.seq_len, spec.vocab
    megatron = 72 * lay * h**2 * (1 + s / (6 * h) + v / (12 * h * lay))
    assert spec.training_flops_per_token() == pytest.approx(megatron, rel=1e-12)
    assert spec.training_flops_per_token(recompute=True) == pytest.approx(4 / 3 * megatron)


def test_moe_flops_use_only_active_experts():
    spec = models.get("mixtral-8x7b")
    dense_like = 2 * (spec.active_parameters() - spec.vocab * spec.hidden)
    attention = 4 * spec.seq_len * spec.hidden * spec.layers
    # norms are not matmuls; the router is; both are tiny
    assert spec.forward_flops_per_token() == pytest.approx(dense_like + attention, rel=1e-3)


def test_resnet50_published_flops_and_no_layers():
    spec = models.get("resnet-50")
    assert spec.forward_flops_per_token() == pytest.approx(2 * 4.09e9)
    assert spec.training_flops_per_token() == pytest.approx(3 * 2 * 4.09e9)
    with pytest.raises(InputError, match="cnn"):
        spec.hidden_state_bytes(1)


def test_activation_memory_korthikanti():
    spec = models.get("gpt3-175b")
    s, b, h, a = 2048, 1, 12288, 96
    assert spec.activation_bytes_per_layer(b) == s * b * h * (34 + 5 * a * s / h)
    assert spec.activation_bytes_per_layer(b, tp=8) == pytest.approx(
        s * b * h * (10 + 24 / 8 + 5 * a * s / (h * 8)))
    assert spec.activation_bytes_per_layer(b, tp=8, sequence_parallel=True) == pytest.approx(
        s * b * h / 8 * (34 + 5 * a * s / h))
    assert spec.activation_bytes_per_layer(b, tp=8, sequence_parallel=True,
                                           recompute="selective") == pytest.approx(s * b * h * 34 / 8)
    assert spec.hidden_state_bytes(b) == s * b * h * 2


def test_unknown_model_lists_catalog():
    with pytest.raises(InputError) as info:
        models.get("gpt-5")
    assert info.value.field == "model"
    assert "llama3-70b" in info.value.message and "mixtral-8x7b" in info.value.message


def test_yaml_user_models(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("tiny:\n  layers: 4\n  hidden: 256\n  heads: 8\n  kv_heads: 2\n  ffn: 1024\n"
                    "  vocab: 1000\n  seq_len: 512\n  published_parameters: 5e6\n")
    extra = models.load_yaml(path)
    spec = models.get("tiny", extra)
    assert spec.kv_heads == 2 and spec.published_parameters == 5e6
    # attention 2*256^2 + 2*256*64, SwiGLU 3*256*1024, 2 norms; embeddings + head + final norm
    assert spec.num_parameters() == 4 * (2 * 256**2 + 2 * 256 * 64 + 3 * 256 * 1024 + 512) + 2 * 256000 + 256


@pytest.mark.parametrize("text, field", [
    ("tiny:\n  layers: 4\n  hidden: 256\n  heads: 8\n  ffn: 1\n  vocab: 1\n  colour: red\n", "tiny.colour"),
    ("tiny:\n  layers: 0\n  hidden: 256\n  heads: 8\n  ffn: 1\n  vocab: 1\n", "tiny.layers"),
    ("tiny:\n  layers: 2\n  hidden: 256\n  heads: 7\n  ffn: 1\n  vocab: 1\n", "tiny.heads"),
    ("tiny: [1, 2]\n", "tiny"),
    ("a: [unclosed\n", "model-file"),
])
def test_yaml_errors_name_the_field(tmp_path, text, field):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        models.load_yaml(path)
    assert info.value.field == field


def _brute_force_parameters(spec: ModelSpec) -> int:
    """Sum of every weight and norm tensor's size, built shape by shape."""
    h, q, kv = spec.hidden, spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
    shapes = [(spec.vocab, h), (h,)]                                # embedding, final norm
    if not spec.tied_embeddings:
        shapes.append((spec.vocab, h))
    for _ in range(spec.layers):
        shapes += [(h, q), (h, kv), (h, kv), (q, h), (h,), (h,)]
        shapes += [(h, spec.ffn)] * (3 if spec.gated_mlp else 2)
    return int(sum(np.prod(shape) for shape in shapes))


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 6), heads=st.sampled_from([1, 2, 4, 8]), head_dim=st.sampled_from([8, 16]),
       groups=st.sampled_from([1, 2, 4]), ffn=st.integers(1, 300), vocab=st.integers(1, 500),
       gated=st.booleans(), tied=st.booleans())
def test_parameter_count_matches_brute_force(layers, heads, head_dim, groups, ffn, vocab, gated, tied):
    kv = max(1, heads // groups)
    spec = ModelSpec("p", layers=layers, hidden=heads * head_dim, heads=heads, kv_heads=kv, ffn=ffn,
                     vocab=vocab, gated_mlp=gated, tied_embeddings=tied)
    assert spec.num_parameters() == _brute_force_parameters(spec)
