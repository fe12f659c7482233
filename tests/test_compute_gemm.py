"""GEMM model: roofline sides, wave quantization, calibration and bad input, derived by hand."""

import math

import pytest

from hpnsim.errors import InputError
from hpnsim.training.compute import gemm_time, issue_efficiency, wave_count
from hpnsim.training.compute.memory_ops import HBM_EFFICIENCY
from hpnsim.workloads.gpus import get_gpu

H100 = get_gpu("h100")
PEAK = 989.4e12


def test_memory_bound_side_is_bytes_over_achievable_bandwidth():
    # 4096 x 4096 x 64 BF16: A and B are 4096*64 elements each, C is 4096^2; 2 bytes each.
    t = gemm_time(4096, 4096, 64, "bf16", H100)
    nbytes = (4096 * 64 + 64 * 4096 + 4096 * 4096) * 2
    assert t.bytes == nbytes
    assert t.memory_s == pytest.approx(nbytes / (3.35e12 * HBM_EFFICIENCY))
    assert t.bound == "memory" and t.seconds == t.memory_s > t.compute_s


def test_compute_bound_side_by_hand():
    # 16896 = 132 * 128 rows, 2048 = 8 * 256 columns: 132 * 8 tiles of 128x256 = 8 full waves.
    # K = 8192 is 128 blocks of 64 BF16 elements, plus one prologue step.
    t = gemm_time(16896, 2048, 8192, "bf16", H100)
    assert t.tile == (128, 256) and t.waves == 8
    eta = issue_efficiency(H100, "bf16")
    per_tile = 2 * 128 * 256 * 64 * (8192 // 64 + 1)
    expected = 8 * per_tile / (PEAK / 132 * eta)
    assert t.compute_s == pytest.approx(expected, rel=1e-12)
    assert t.bound == "compute" and t.seconds == t.compute_s > t.memory_s
    assert t.flops == 2 * 16896 * 2048 * 8192


def test_issue_efficiency_reproduces_the_mamf_measurement_it_is_calibrated_on():
    # H100 BF16 MAMF 794.5 TFLOPS at 2048 x 2048 x 13312: tiles divide the shape exactly,
    # K = 13312 is 208 blocks + 1 prologue step.
    eta = issue_efficiency(H100, "bf16")
    assert eta == pytest.approx(794.5e12 / PEAK * (209 * 64) / 13312, rel=1e-12)
    assert issue_efficiency(get_gpu("h800"), "bf16") == eta


def test_wave_quantization_last_wave_with_one_tile():
    # 133 tiles of 128x256 on 132 SMs: the second wave runs one tile, twice the time of 132.
    full, ragged = 128 * 132, 128 * 133
    assert wave_count(full, 256, (128, 256), 132) == 1
    assert wave_count(ragged, 256, (128, 256), 132) == 2
    a = gemm_time(full, 256, 4096, "bf16", H100)
    b = gemm_time(ragged, 256, 4096, "bf16", H100)
    assert (a.waves, b.waves) == (1, 2)
    assert b.compute_s == pytest.approx(2 * a.compute_s, rel=1e-12)


def test_tile_quantization_pads_the_ragged_edge():
    # one extra row of C costs a whole extra row of tiles
    a = gemm_time(128 * 264, 2048, 4096, "bf16", H100)      # 264 x 8 tiles: 16 waves
    b = gemm_time(128 * 264 + 1, 2048, 4096, "bf16", H100)  # 265 x 8 tiles: 17 waves
    assert (a.waves, b.waves) == (16, 17)
    assert b.compute_s / a.compute_s == pytest.approx(17 / 16)


def test_small_grid_uses_smaller_tiles_and_small_m_pays_a_64_row_tile():
    t = gemm_time(16, 4096, 4096, "bf16", H100)
    assert t.tile[0] == 64          # the smallest tile is 64 rows: 75% of it wasted at M=16
    assert t.compute_s == pytest.approx(gemm_time(64, 4096, 4096, "bf16", H100).compute_s)


def test_fp8_uses_its_own_peak_and_a_longer_k_block():
    t8 = gemm_time(16896, 2048, 8192, "fp8", H100)
    eta = issue_efficiency(H100, "fp8")
    expected = 8 * 2 * 128 * 256 * 128 * (8192 // 128 + 1) / (1978.9e12 / 132 * eta)
    assert t8.compute_s == pytest.approx(expected, rel=1e-12)
    assert t8.bytes == 16896 * 8192 + 8192 * 2048 + 16896 * 2048 * 2   # BF16 output


def test_clock_under_load_scales_compute_only():
    a = gemm_time(16896, 2048, 8192, "bf16", H100)
    b = gemm_time(16896, 2048, 8192, "bf16", H100, clock_hz=H100.sustained_clock_hz / 2)
    assert b.compute_s == pytest.approx(2 * a.compute_s) and b.memory_s == a.memory_s


def test_grouped_gemm_shares_waves():
    one = gemm_time(128 * 66, 256, 1024, "bf16", H100)            # 66 tiles: half a wave
    two = gemm_time(128 * 66, 256, 1024, "bf16", H100, batch=2)   # 132 tiles: one wave
    assert two.waves == one.waves == 1 and two.flops == 2 * one.flops


@pytest.mark.parametrize("field,args", [("m", (0, 1, 1)), ("n", (1, -2, 1)), ("k", (1, 1, 1.5))])
def test_non_positive_shapes_are_refused_by_name(field, args):
    with pytest.raises(InputError) as err:
        gemm_time(*args, "bf16", H100)
    assert err.value.field == field


def test_fp8_on_a100_is_refused_naming_the_dtype():
    with pytest.raises(InputError, match="fp8") as err:
        gemm_time(4096, 4096, 4096, "fp8", get_gpu("a100"))
    assert err.value.field == "dtype"


def test_every_catalog_gpu_and_dtype_calibrates_below_one():
    for name in ("a100", "h100", "h200", "h800", "b200"):
        gpu = get_gpu(name)
        for dtype in gpu.dtypes:
            assert 0.5 < issue_efficiency(gpu, dtype) <= 1, (name, dtype)
            t = gemm_time(8192, 8192, 8192, dtype, gpu)
            assert t.achieved_flops < gpu.tensor_peak(dtype)
            assert math.isfinite(t.seconds)
