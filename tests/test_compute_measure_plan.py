"""tools/measure_kernels.py: its catalog parser and GEMM plan cover what the layer model asks."""

import importlib.util
from pathlib import Path

import pytest

from hpnsim.errors import InputError
from hpnsim.training.compute import head_ops, layer_ops
from hpnsim.workloads import models
from hpnsim.workloads.gpus import get_gpu

TOOL = Path(__file__).resolve().parents[1] / "tools" / "measure_kernels.py"
spec = importlib.util.spec_from_file_location("measure_kernels", TOOL)
mk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mk)


def test_catalog_parser_reads_the_fields_the_model_catalog_has():
    parsed = mk.read_catalog()
    assert set(parsed) == set(models.names())
    for name in ("llama3-70b", "mixtral-8x7b", "gpt3-175b", "deepseek-moe-16b"):
        spec_ = models.get(name)
        for field in ("layers", "hidden", "heads", "ffn", "vocab", "seq_len"):
            assert parsed[name][field] == getattr(spec_, field), (name, field)
    assert parsed["gpt3-175b"]["gated_mlp"] is False


def test_gemm_plan_covers_every_catalog_layer_under_tp_1_2_4_8():
    plan = mk.gemm_plan(mk.read_catalog())
    groups = {(n, k) for m, n, k in plan if m in mk.TOKENS}
    h100 = get_gpu("h100")
    checked = 0
    for name in models.names():
        spec_ = models.get(name)
        if spec_.kind != "transformer":
            continue
        for tp in mk.TPS:
            try:   # the first and last layers: a dense and an MoE one where the model has both
                ops = sum((layer_ops(spec_, h100, layer=i, tp=tp, seq_len=4096,
                                     sequence_parallel=False) for i in (0, spec_.layers - 1)),
                          head_ops(spec_, h100, tp=tp, seq_len=4096))
            except InputError:   # a TP size the model's heads or widths do not divide
                continue
            for op in ops.select(kind="gemm", phase="forward"):
                assert (op.shape[1], op.shape[2]) in groups, (name, tp, op.name, op.shape)
                checked += 1
    assert checked > 100


def test_attention_plan_counts_flops_as_the_model_does():
    from hpnsim.training.compute import attention_flops
    for batch, heads, seq, d, causal in mk.attention_plan()[:4]:
        assert 4.0 * batch * heads * d * mk.causal_pairs(seq, causal) == \
            attention_flops(batch, heads, seq, d, causal=causal)


@pytest.mark.parametrize("name,key", [("NVIDIA H100 80GB HBM3", "h100"),
                                      ("NVIDIA H200", "h200"), ("NVIDIA B200", "b200"),
                                      ("NVIDIA A100-SXM4-80GB", "a100"),
                                      ("NVIDIA L40S", "nvidia-l40s")])
def test_device_names_map_to_catalog_keys(name, key):
    assert mk.catalog_gpu(name) == key
