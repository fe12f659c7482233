"""nccl-tests logs: values parsed exactly, each log's own arithmetic, line-numbered errors.

The sample logs in tests/data/nccl were written for these tests in the format nccl-tests
prints (src/util.cu): row = size count type redop root, then time(us) algbw(GB/s) busbw(GB/s)
#wrong out-of-place and in-place; numbers as getFloatStr prints them (2 decimals while they
fit the column, then 1, then 0); footer '# Avg bus bandwidth : mean busbw of every run'.

nccl-tests' definitions (src/*.cu *GetBw, *GetCollByteCount), written out here:
  algbw = size / time (GB = 1e9 B);
  busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather, reduce-scatter, all-to-all;
  size = count x word for all-reduce, count x word x n for the other three (count is per rank).
"""

from pathlib import Path

import pytest

from hpnsim.errors import InputError
from hpnsim.fabrics import hpn7
from hpnsim.workloads.nccl_tests import check_fits, load_nccl_tests, parse_nccl_tests

DATA = Path(__file__).parent / "data" / "nccl"
LOGS = {"all_reduce_perf_2x8.txt": ("allreduce", 16), "all_gather_perf_1x8.txt": ("allgather", 8),
        "reduce_scatter_perf_2x8.txt": ("reducescatter", 16),
        "alltoall_perf_2x8.txt": ("alltoall", 16)}
BUS_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
              "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n}
WORD = {"float": 4, "bfloat16": 2}


def half_unit_us(t_us):
    """Rounding of a time as printed in a 7-wide column: %.2f up to 9999.99, then %.1f."""
    return 0.005 if t_us < 9999.995 else 0.05 if t_us < 99999.95 else 0.5


def test_values_parsed_exactly():
    log = load_nccl_tests(DATA / "all_reduce_perf_2x8.txt")[0]
    assert (log.op, log.n_gpus, log.hosts, log.n_hosts) == ("allreduce", 16,
                                                            ("node-a", "node-b"), 2)
    assert log.gpu_names == ("NVIDIA H100 80GB HBM3",) * 16
    assert (log.threads, log.gpus_per_thread, log.out_of_bounds) == (1, 1, 0)
    # 8 rows; the NCCL INFO line between the 1 MiB and 4 MiB rows is skipped
    assert [r.size for r in log.rows] == [8, 1024] + [4 ** k for k in range(10, 16)]
    row = log.rows[3]  # line 30:  4194304  1048576  float  sum  -1  59.61  70.36  131.92  0 ...
    assert (row.line, row.size, row.count, row.dtype, row.redop, row.root) == (
        30, 4194304, 1048576, "float", "sum", -1)
    assert (row.oop_time, row.oop_algbw, row.oop_busbw, row.oop_wrong) == (
        59.61e-6, 70.36e9, 131.92e9, 0)
    assert (row.ip_time, row.ip_algbw, row.ip_busbw, row.ip_wrong) == (
        59.94e-6, 69.98e9, 131.20e9, 0)
    assert log.avg_busbw == 187.043e9
    assert log.column("ip_busbw")[-1] == 364.21e9
    # an older nccl-tests: no program line (op from the file name), no Group, validation off
    old = load_nccl_tests(DATA / "all_gather_perf_1x8.txt")[0]
    assert (old.op, old.n_gpus, old.hosts, old.threads, old.gpus_per_thread) == (
        "allgather", 8, ("gpu-07",), 1, 8)
    assert old.rows[-1].oop_wrong is None and old.rows[-1].oop_time == 2616.51e-6  # line 22


def test_several_files_in_order():
    logs = load_nccl_tests([DATA / name for name in LOGS])
    assert [(log.op, log.n_gpus) for log in logs] == list(LOGS.values())


@pytest.mark.parametrize("name", sorted(LOGS))
def test_each_log_is_consistent_with_nccl_tests_definitions(name):
    op, n = LOGS[name]
    log = load_nccl_tests(DATA / name)[0]
    assert (log.op, log.n_gpus) == (op, n)
    f = BUS_FACTOR[op](n)
    runs = []
    for r in log.rows:
        assert r.size == r.count * WORD[r.dtype] * (1 if op == "allreduce" else n)
        for t, alg, bus in ((r.oop_time, r.oop_algbw, r.oop_busbw),
                            (r.ip_time, r.ip_algbw, r.ip_busbw)):
            # busbw and algbw are printed with 2 decimals (GB/s): each within 0.005e9
            assert abs(bus - alg * f) <= 0.005e9 * (1 + f) + 1
            h = half_unit_us(t * 1e6) * 1e-6
            assert r.size / (t + h) - 0.005e9 - 1 <= alg <= r.size / (t - h) + 0.005e9 + 1
            runs.append(bus)
    # the footer is the mean busbw of every out-of-place and in-place run (printed %g)
    mean = sum(runs) / len(runs)
    assert abs(log.avg_busbw - mean) <= 0.005e9 + 5e-6 * mean


def _err(text, name, **kw):
    with pytest.raises(InputError) as info:
        parse_nccl_tests(text, source=name, **kw)
    return info.value


def test_malformed_rows_named_by_line():
    name = "all_reduce_perf_2x8.txt"
    lines = (DATA / name).read_text().splitlines()
    cut = list(lines)
    cut[29] = cut[29].rsplit(maxsplit=1)[0]  # line 30 loses its in-place #wrong
    err = _err("\n".join(cut), name)
    assert err.field == f"{name} line 30" and "13 fields" in err.message
    bad = list(lines)
    bad[31] = bad[31].replace("383.16", "383.l6")  # line 32: a letter in the time
    err = _err("\n".join(bad), name)
    assert err.field == f"{name} line 32" and "time" in err.message
    busbw = list(lines)
    busbw[32] = busbw[32].replace("356.21", "178.11")  # line 33: busbw not algbw x 15/8
    err = _err("\n".join(busbw), name)
    assert err.field == f"{name} line 33" and "busbw" in err.message


def test_no_table_and_empty_table():
    path = DATA / "no_table_all_reduce_perf.txt"  # the run died after the device list
    with pytest.raises(InputError) as info:
        load_nccl_tests(path)
    assert info.value.field == f"{path} line 15" and "no nccl-tests table" in info.value.message
    lines = (DATA / "all_reduce_perf_2x8.txt").read_text().splitlines()
    no_rows = lines[:25] + lines[34:]
    err = _err("\n".join(no_rows), "all_reduce_perf.txt")
    assert "no rows" in err.message and err.field == f"all_reduce_perf.txt line {len(no_rows)}"


def test_wrong_op_and_gpu_count_rejected():
    text = (DATA / "all_gather_perf_1x8.txt").read_text()
    # an all-gather log read as all-reduce: size = 32 x count, not 4 x count (line 16)
    err = _err(text, "all_gather_perf_1x8.txt", op="allreduce")
    assert err.field == "all_gather_perf_1x8.txt line 16"
    err = _err(text, "all_gather_perf_1x8.txt", gpus=16)
    assert "8 GPUs, expected 16" in err.message and err.field.endswith("line 14")
    err = _err(text, "perf.log")
    assert "cannot tell the collective" in err.message
    sixteen = load_nccl_tests(DATA / "all_reduce_perf_2x8.txt")[0]
    check_fits(sixteen, hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
                             aggs_per_plane=2))  # 2 hosts x 8 GPUs: fits
    one_host = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0, tor_uplinks=2,
                    aggs_per_plane=2)
    with pytest.raises(InputError) as info:
        check_fits(sixteen, one_host)
    assert "16 GPUs, the fabric has 8" in info.value.message
    with pytest.raises(InputError) as info:
        load_nccl_tests(DATA / "all_reduce_perf_2x8.txt", fabric=one_host)
    assert info.value.field.endswith("all_reduce_perf_2x8.txt")
