"""Kernel tables: CSV read-back and log-shape interpolation on a small hand-written table."""

import pytest

from hpnsim.errors import InputError
from hpnsim.training.compute import KernelTable, attention_time, gemm_time, memory_op_time
from hpnsim.training.compute.kernel_tables import interpolate
from hpnsim.workloads.gpus import get_gpu

H100 = get_gpu("h100")
HEADER = "gpu,device_name,driver,torch,cuda,date,op,shape,dtype,tflops,gbps\n"
PROV = "NVIDIA H100 80GB HBM3,550.54.15,2.5.1+cu124,12.4,2025-02-01"
CSV = HEADER + "".join(f"h100,{PROV},{row}\n" for row in (
    "gemm,1024x4096x4096,bf16,400,",
    "gemm,4096x4096x4096,bf16,600,",
    "gemm,1024x8192x8192,bf16,700,",
    "attention_fwd_causal,1x16x2048x128,bf16,450,",
    "attention_fwd_causal,1x16x8192x128,bf16,550,",
    "memory:rmsnorm,1000000,bf16,,2000",
    "memory:rmsnorm,4000000,bf16,,3000",
))


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "h100.csv"
    path.write_text(CSV)
    return KernelTable.read_csv(path)


def test_read_back_keeps_every_row_and_its_provenance(table):
    assert len(table.rows) == 7
    first = table.rows[0]
    assert (first.gpu, first.op, first.shape, first.dtype, first.value) == \
        ("h100", "gemm", (1024, 4096, 4096), "bf16", 400.0)
    assert first.provenance == tuple(PROV.split(","))


def test_log_interpolation_in_the_sweep_axis():
    shapes = [(1024, 4096, 4096), (4096, 4096, 4096)]
    # 2048 is halfway between 1024 and 4096 in log2: halfway between the values
    assert interpolate(shapes, [400.0, 600.0], (2048, 4096, 4096), sweep_axis=0) == 500.0
    # 1024 * 2**0.5 is a quarter of the way
    assert interpolate(shapes, [400.0, 600.0], (1448.1546878700494, 4096, 4096),
                       sweep_axis=0) == pytest.approx(450.0)
    # outside the measured range: clamped
    assert interpolate(shapes, [400.0, 600.0], (10**6, 4096, 4096), sweep_axis=0) == 600.0


def test_nearest_group_in_the_other_axes():
    shapes = [(1024, 4096, 4096), (4096, 4096, 4096), (1024, 8192, 8192)]
    # (N, K) = (6000, 6000) is nearer 8192 than 4096 in log2 (log2 6000 = 12.55)
    assert interpolate(shapes, [400.0, 600.0, 700.0], (2048, 6000, 6000), sweep_axis=0) == 700.0


def test_gemm_override_equals_the_measurement_at_a_measured_shape(table):
    t = gemm_time(1024, 4096, 4096, "bf16", H100, table=table)
    assert t.bound == "table"
    assert t.achieved_flops == pytest.approx(400e12)


def test_gemm_override_between_points_interpolates_the_ratio(table):
    ratio_lo = 400e12 / gemm_time(1024, 4096, 4096, "bf16", H100).achieved_flops
    ratio_hi = 600e12 / gemm_time(4096, 4096, 4096, "bf16", H100).achieved_flops
    model = gemm_time(2048, 4096, 4096, "bf16", H100)
    t = gemm_time(2048, 4096, 4096, "bf16", H100, table=table)
    assert t.achieved_flops == pytest.approx(model.achieved_flops * (ratio_lo + ratio_hi) / 2)


def test_table_of_another_gpu_or_dtype_changes_nothing(table):
    assert gemm_time(1024, 4096, 4096, "fp8", H100, table=table).bound != "table"
    h200 = get_gpu("h200")
    assert gemm_time(1024, 4096, 4096, "bf16", h200, table=table).seconds == \
        gemm_time(1024, 4096, 4096, "bf16", h200).seconds


def test_attention_and_memory_overrides(table):
    t = attention_time(H100, 1, 16, 4096, 128, causal=True, table=table)
    assert t.efficiency == pytest.approx(500e12 / 989.4e12)
    m = memory_op_time("rmsnorm", 2e6, H100, table=table)
    assert m.seconds == pytest.approx(2e6 / 2500e9)
    assert memory_op_time("swiglu", 2e6, H100, table=table).seconds == \
        memory_op_time("swiglu", 2e6, H100).seconds


@pytest.mark.parametrize("row,match", [("gemm,1024x4096,bf16,400,", "3 positive"),
                                       ("gemm,1024x4096x0,bf16,400,", "3 positive"),
                                       ("gemm,axbxc,bf16,400,", "integers"),
                                       ("gemm,1x1x1,bf16,-5,", "positive"),
                                       ("memory:x,100,bf16,3,", "gbps"),
                                       ("conv,1x1x1,bf16,1,", "op must be")])
def test_bad_rows_are_refused_with_their_line(row, match):
    with pytest.raises(InputError, match=match) as err:
        KernelTable.from_text(HEADER + f"h100,{PROV},{row}\n", "t.csv")
    assert err.value.field == "t.csv line 2"


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError) as err:
        KernelTable.read_csv(tmp_path / "none.csv")
    assert err.value.field == "kernel-table"


def test_layer_ops_use_the_table_by_kernel_name(table):
    from hpnsim.training.compute import layer_ops
    from hpnsim.workloads.models import get
    m = get("llama3-8b")
    plain = {(op.name, op.phase): op for op in layer_ops(m, H100, seq_len=1024).ops}
    measured = {(op.name, op.phase): op
                for op in layer_ops(m, H100, seq_len=1024, table=table).ops}
    norm = measured[("input_norm", "forward")]
    # 2 * 1024 * 4096 * 2 bytes = 16.8 MB, beyond the measured 4 MB: clamped to 3000 GB/s
    assert norm.bytes == 2 * 1024 * 4096 * 2
    assert norm.seconds == pytest.approx(norm.bytes / 3000e9)
    # the backward kernel (rmsnorm_bwd) and other kernels have no rows: the model's time
    assert measured[("input_norm", "input_grad")].seconds == plain[("input_norm", "input_grad")].seconds
    assert measured[("swiglu", "forward")].seconds == plain[("swiglu", "forward")].seconds
