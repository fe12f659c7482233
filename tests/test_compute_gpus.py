"""GPU catalog fields of the compute model: values, sources, and unchanged legacy fields."""

import pytest

from hpnsim.errors import InputError
from hpnsim.workloads.gpus import GPU_SOURCES, GPUS, get_gpu


def test_legacy_fields_are_unchanged():
    legacy = {"a100": (312e12, 80e9, 2.039e12, 600e9, 0.50, False),
              "h100": (989.4e12, 80e9, 3.35e12, 900e9, 0.45, True),
              "h200": (989.4e12, 141e9, 4.8e12, 900e9, 0.45, True),
              "h800": (989.4e12, 80e9, 3.35e12, 400e9, 0.45, True),   # NVLS on every Hopper part (issue 18)
              "b200": (2250e12, 180e9, 8.0e12, 1800e9, 0.40, True)}
    for name, values in legacy.items():
        g = get_gpu(name)
        assert (g.peak_flops, g.memory_bytes, g.memory_bandwidth, g.nvlink_bandwidth, g.mfu,
                g.nvls) == values


def test_bf16_peak_is_the_legacy_peak_and_the_sm_clock_product_on_hopper():
    for g in GPUS.values():
        assert g.tensor_peak("bf16") == g.peak_flops
    h100 = get_gpu("h100")   # 132 SMs x 4 tensor cores x 1024 dense BF16 FLOP/clk x 1.83 GHz
    assert h100.sm_count * 4096 * h100.boost_clock_hz == pytest.approx(989.4e12, rel=1e-3)
    a100 = get_gpu("a100")   # 108 SMs x 4 x 512 x 1.41 GHz
    assert a100.sm_count * 2048 * a100.boost_clock_hz == pytest.approx(312e12, rel=1e-3)


def test_fp8_is_twice_bf16_where_present_and_refused_on_a100():
    for name in ("h100", "h200", "h800", "b200"):
        g = get_gpu(name)
        assert g.tensor_peak("fp8") == pytest.approx(2 * g.tensor_peak("bf16"), rel=1e-3)
    with pytest.raises(InputError, match="fp8") as err:
        get_gpu("a100").tensor_peak("FP8")
    assert err.value.field == "dtype"


def test_every_compute_field_names_a_source():
    for name in GPUS:
        for field in ("sm_count", "boost_clock_hz", "sustained_clock_hz", "tensor_peaks",
                      "memory_bandwidth", "l2_bytes"):
            assert GPU_SOURCES[name][field], (name, field)


def test_get_gpu_with_mfu_keeps_the_compute_fields():
    g = get_gpu("h100", mfu=0.3)
    assert g.sm_count == 132 and g.tensor_peak("fp8") == 1978.9e12
