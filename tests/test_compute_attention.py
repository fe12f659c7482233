"""Fused attention: FLOPs under causal and full masks by enumeration, efficiency lookups."""

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.training.compute import attention_efficiency, attention_flops, attention_time
from hpnsim.training.compute.attention import kept_pairs
from hpnsim.workloads.gpus import get_gpu

H100 = get_gpu("h100")


def test_full_and_causal_flops_by_hand():
    b, heads, s, d = 2, 4, 1024, 128
    assert attention_flops(b, heads, s, d, causal=False) == 4 * b * heads * s * s * d
    assert attention_flops(b, heads, s, d, causal=True) == 4 * b * heads * d * (s * (s + 1) / 2)
    assert attention_flops(b, heads, s, d, causal=True, direction="backward") == \
        2.5 * 4 * b * heads * d * (s * (s + 1) / 2)


@pytest.mark.parametrize("sq,skv", [(1, 1), (4, 4), (3, 8), (8, 8), (5, 13)])
def test_causal_pairs_match_an_enumerated_bottom_right_mask(sq, skv):
    i = np.arange(sq)[:, None] + (skv - sq)     # query i sits at key position skv - sq + i
    j = np.arange(skv)[None, :]
    assert kept_pairs(sq, skv, True) == (j <= i).sum()
    assert kept_pairs(sq, skv, False) == sq * skv


def test_different_v_head_dim():
    assert attention_flops(1, 1, 16, 64, head_dim_v=128, causal=False) == 2 * (64 + 128) * 256


def test_efficiency_is_the_published_point_and_log_interpolates_between():
    assert attention_efficiency(H100, 8192, 128, causal=False) == pytest.approx(646 / 989.4)
    mid = int(round(2 ** 12.5))   # halfway between 4k and 8k in log2
    expected = (638 + (646 - 638) * (np.log2(mid) - 12)) / 989.4
    assert attention_efficiency(H100, mid, 128, causal=False) == pytest.approx(expected)
    assert attention_efficiency(H100, 10**6, 128, causal=False) == pytest.approx(648 / 989.4)


def test_derived_curves_follow_their_stated_rules():
    # causal backward = full backward x (causal forward / full forward) at that length
    got = attention_efficiency(H100, 4096, 128, causal=True, direction="backward")
    assert got == pytest.approx(542 / 989.4 * 579 / 638)
    # A100: FlashAttention-2's 73% forward plateau
    assert attention_efficiency(get_gpu("a100"), 16384, 128, causal=False) == pytest.approx(0.73)


def test_attention_time_is_flops_over_efficiency_when_compute_bound():
    t = attention_time(H100, 1, 32, 8192, 128, kv_heads=8, causal=True)
    eff = attention_efficiency(H100, 8192, 128, causal=True)
    assert t.seconds == pytest.approx(t.flops / (989.4e12 * eff))
    assert t.bytes == 2 * (8192 * 32 * 128 + 8192 * 8 * 128) * 2


def test_bad_input_is_refused_by_name():
    with pytest.raises(InputError) as err:
        attention_flops(1, 0, 128, 64)
    assert err.value.field == "heads"
    with pytest.raises(InputError) as err:
        attention_time(H100, 1, 8, 1024, 128, dtype="fp8")
    assert err.value.field == "dtype"
    with pytest.raises(InputError) as err:
        attention_flops(1, 1, 128, 64, direction="sideways")
    assert err.value.field == "direction"


def test_cudnn_kernel_reads_the_cudnn_bars_of_the_same_figures():
    # Shah et al. 2024, Figs. 5-6, cuDNN bars at 8k: causal forward 529, full forward 600,
    # full backward 518 TFLOP/s; the causal backward by the stated rule
    assert attention_efficiency(H100, 8192, 128, kernel="cudnn") == pytest.approx(529 / 989.4)
    assert attention_efficiency(H100, 8192, 128, causal=False, kernel="cudnn") == \
        pytest.approx(600 / 989.4)
    assert attention_efficiency(H100, 8192, 128, causal=True, direction="backward",
                                kernel="cudnn") == pytest.approx(518 * 529 / 600 / 989.4)
    # slower than FlashAttention-3 at training lengths on Hopper, so a TE job's step grows
    t_fa3 = attention_time(H100, 1, 32, 8192, 128, kv_heads=8)
    t_cudnn = attention_time(H100, 1, 32, 8192, 128, kv_heads=8, kernel="cudnn")
    assert t_cudnn.seconds == pytest.approx(t_fa3.seconds * 602 / 529)


def test_flash2_reads_the_flashattention_2_bars_of_the_same_figures():
    # Shah et al. 2024, Figs. 5-6, FlashAttention-2 bars on H100: causal forward 333 and full
    # forward 370 TFLOP/s at 8k, full backward 310 at 4k; the causal backward by the stated rule
    assert attention_efficiency(H100, 8192, 128, kernel="flash2") == pytest.approx(333 / 989.4)
    assert attention_efficiency(H100, 8192, 128, causal=False, kernel="flash2") == \
        pytest.approx(370 / 989.4)
    assert attention_efficiency(H100, 4096, 128, causal=True, direction="backward",
                                kernel="flash2") == pytest.approx(310 * 319 / 368 / 989.4)
    # head dim 64's full forward: 322 at 8k
    assert attention_efficiency(H100, 8192, 64, causal=False, kernel="flash2") == \
        pytest.approx(322 / 989.4)
    # slower than cuDNN's kernel at training lengths: TransformerEngine 1.x with
    # NVTE_FUSED_ATTN=0 (NeMo 24.07's launcher) lengthens the step
    t_cudnn = attention_time(H100, 1, 32, 8192, 128, kv_heads=8, kernel="cudnn")
    t_fa2 = attention_time(H100, 1, 32, 8192, 128, kv_heads=8, kernel="flash2")
    assert t_fa2.seconds == pytest.approx(t_cudnn.seconds * 529 / 333)
    # on Ampere FlashAttention-2 is what "flash" already times
    a100 = get_gpu("a100")
    for direction in ("forward", "backward"):
        assert attention_efficiency(a100, 4096, 128, direction=direction, kernel="flash2") == \
            attention_efficiency(a100, 4096, 128, direction=direction)


def test_cudnn_on_ampere_times_as_flashattention_2():
    # TransformerEngine's FusedAttention preference applies from sm90; sm80 runs FA2
    a100 = get_gpu("a100")
    for direction in ("forward", "backward"):
        assert attention_efficiency(a100, 4096, 128, direction=direction, kernel="cudnn") == \
            attention_efficiency(a100, 4096, 128, direction=direction)
    with pytest.raises(InputError, match="kernel"):
        attention_efficiency(H100, 4096, 128, kernel="fa4")
