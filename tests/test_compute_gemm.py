"""GEMM model: roofline sides, wave quantization, calibration and bad input, derived by hand."""

import math

import pytest

from hpnsim.errors import InputError
from hpnsim.training.compute import gemm_time, issue_efficiency, wave_count
from hpnsim.training.compute.calibration import ShapeClass
from hpnsim.training.compute.gemm import calibration
from hpnsim.workloads.gpus import get_gpu

H100 = get_gpu("h100")
PEAK = 989.4e12


def test_memory_bound_side_is_bytes_over_the_fitted_streaming_bandwidth():
    # 4096 x 4096 x 64 BF16: A and B are 4096*64 elements each, C is 4096^2; 2 bytes each.
    t = gemm_time(4096, 4096, 64, "bf16", H100)
    nbytes = (4096 * 64 + 64 * 4096 + 4096 * 4096) * 2
    cal = calibration(H100, "bf16")
    assert t.bytes == nbytes
    assert t.memory_s == pytest.approx(nbytes / (3.35e12 * cal.memory_efficiency)
                                       + cal.memory_floor_s)
    assert t.bound == "memory" and t.seconds == t.memory_s > t.compute_s


def test_compute_bound_side_by_hand():
    # 16896 = 132 * 128 rows, 2048 = 8 * 256 columns: 132 * 8 tiles of 128x256 = 8 full waves
    # (no other tile pads less). K = 8192 is 128 blocks of 64 BF16 elements, plus one
    # prologue step; 8 waves of the largest tiles is the many-waves class.
    t = gemm_time(16896, 2048, 8192, "bf16", H100)
    assert t.tile == (128, 256) and t.waves == 8
    assert t.shape_class is ShapeClass.MANY_WAVES
    cal = calibration(H100, "bf16")
    per_tile = 2 * 128 * 256 * 64 * (8192 // 64 + 1)
    expected = 8 * per_tile / (PEAK / 132 * cal.eta[ShapeClass.MANY_WAVES]) + cal.floor_s
    assert t.compute_s == pytest.approx(expected, rel=1e-12)
    assert t.bound == "compute" and t.seconds == t.compute_s > t.memory_s
    assert t.flops == 2 * 16896 * 2048 * 8192


def test_mamf_calibration_reproduces_the_measurement_it_is_calibrated_on():
    # B200 has no measured kernels: eta from MAMF 1745 TFLOPS at 1792 x 16128 x 3072, the
    # model's K-block and edge losses there divided out: K = 3072 is 48 blocks + 1 prologue
    # step; 1792 rows are 14 tiles of 128, 16128 columns 63 tiles of 256 exactly.
    eta = issue_efficiency(get_gpu("b200"), "bf16")
    assert eta == pytest.approx(1745e12 / 2250e12 * (49 * 64) / 3072, rel=1e-12)


def test_h800_and_h200_share_the_h100_fit_and_the_mamf_ceiling_bounds_every_gemm():
    for name in ("h800", "h200"):
        assert calibration(get_gpu(name), "bf16") == calibration(H100, "bf16")
    for shape in ((2048, 2048, 13312), (8192, 8192, 8192), (16896, 2048, 8192)):
        t = gemm_time(*shape, "bf16", H100)
        assert t.achieved_flops <= 794.5e12 * (1 + 1e-12)


def test_wave_quantization_last_wave_with_one_tile():
    # 133 tiles of 128x256 on 132 SMs: the second wave runs one tile. Smaller tiles pad
    # less: 64x256 gives 266 tiles, 3 waves of half the work (1.5 big-tile waves); 64x128
    # 532 tiles, 5 waves of a quarter (1.25), the fastest plan. 132 tiles are one full wave.
    full, ragged = 128 * 132, 128 * 133
    assert wave_count(full, 256, (128, 256), 132) == 1
    assert wave_count(ragged, 256, (128, 256), 132) == 2
    a = gemm_time(full, 256, 4096, "bf16", H100)
    b = gemm_time(ragged, 256, 4096, "bf16", H100)
    assert (a.tile, a.waves, b.tile, b.waves) == ((128, 256), 1, (64, 128), 5)
    floor = calibration(H100, "bf16").floor_s
    assert b.compute_s - floor == pytest.approx(1.25 * (a.compute_s - floor), rel=1e-12)


def test_tile_quantization_pads_the_ragged_edge():
    # one extra row of C costs a whole extra row of tiles: 264 x 8 tiles of 128x256 are 16
    # waves; 265 rows of them 17, but 64x128 tiles pad one 64-row strip: 529 x 16 = 8464
    # tiles = 65 waves of a quarter of the work (16.25 big-tile waves)
    a = gemm_time(128 * 264, 2048, 4096, "bf16", H100)
    b = gemm_time(128 * 264 + 1, 2048, 4096, "bf16", H100)
    assert (a.tile, a.waves, b.tile, b.waves) == ((128, 256), 16, (64, 128), 65)
    floor = calibration(H100, "bf16").floor_s
    assert (b.compute_s - floor) / (a.compute_s - floor) == pytest.approx(16.25 / 16)


def test_small_grid_uses_smaller_tiles_split_k_and_small_m_pays_a_64_row_tile():
    # M=16: 32 tiles of 64x128 on 132 SMs, K (64 blocks) split 4 ways: 128 CTAs of 16 + 1
    # block-steps (64x256: 16 tiles split 8 ways, 2 x (8 + 1) quarter-steps, is slower)
    t = gemm_time(16, 4096, 4096, "bf16", H100)
    assert t.tile == (64, 128) and t.split == 4      # 75% of the 64-row tile wasted at M=16
    assert t.shape_class is ShapeClass.SUB_WAVE
    assert t.compute_s == pytest.approx(gemm_time(64, 4096, 4096, "bf16", H100).compute_s)


def test_fp8_uses_its_own_peak_a_longer_k_block_and_the_h800_fp8_fit():
    t8 = gemm_time(16896, 2048, 8192, "fp8", H100)
    cal = calibration(H100, "fp8")
    assert cal == calibration(get_gpu("h800"), "fp8") != calibration(H100, "bf16")
    eta = cal.eta[ShapeClass.MANY_WAVES]
    expected = (8 * 2 * 128 * 256 * 128 * (8192 // 128 + 1) / (1978.9e12 / 132 * eta)
                + cal.floor_s)
    assert t8.compute_s == pytest.approx(expected, rel=1e-12)
    assert t8.bytes == 16896 * 8192 + 8192 * 2048 + 16896 * 2048 * 2   # BF16 output


def test_clock_under_load_scales_compute_only():
    a = gemm_time(16896, 2048, 8192, "bf16", H100)
    b = gemm_time(16896, 2048, 8192, "bf16", H100, clock_hz=H100.sustained_clock_hz / 2)
    floor = calibration(H100, "bf16").floor_s
    assert b.compute_s - floor == pytest.approx(2 * (a.compute_s - floor))
    assert b.memory_s == a.memory_s


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
