"""``hpnsim calibrate``: recovering known NCCL parameters from synthetic nccl-tests logs, and
refusing bad logs and bad calibration files (exit 2, one line).

The logs are written here in nccl-tests' text format from times computed by closed forms
written in this file (NCCL's ring with the Simple protocol: tuning.cc latencies, the ring's
2(n-1)/n bytes per GPU), with seeded multiplicative noise, so the fit is checked against
the parameters that made the data, not against hpnsim's own sums.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from hpnsim.cli.main import app

#: the fabric the logs ran on: hpn7 hosts (8 GPUs, NVLink 400 GB/s bidirectional = 200 GB/s
#: per direction as the H800 has, one 2x200 Gb/s NIC per GPU = 50 GB/s)
FABRIC = ["--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "2",
          "--backup-hosts", "0"]
NVLINK = 200e9
NIC = 50e9
#: NCCL tuning.cc ring / Simple latencies (µs): base, per NVLink hop, per network hop
BASE, NV_HOP, NET_HOP = 8.4, 3.4, 14.0
SIZES = [2**k for k in range(3, 34, 2)]      # 8 B .. 8 GiB, as all_reduce_perf -b 8 -e 8G


def ring_allreduce_time(size, gpus_per_host, hosts, latency_scale, nvlink_eff, net_eff):
    """Ring all-reduce, Simple: latency over 2(n-1) steps (2(H-1) of them across hosts) plus
    2(n-1)/n of the buffer through the slowest of a GPU's NVLink and (one ring per rail) its
    NIC; written out for the two layouts the tests use."""
    n = gpus_per_host * hosts
    latency = latency_scale * (BASE + 2 * (n - hosts) * NV_HOP + 2 * (hosts - 1) * NET_HOP)
    if hosts == 1:
        rate = NVLINK * nvlink_eff
    else:
        assert gpus_per_host == 1           # one GPU per host: the NIC alone
        rate = NIC * net_eff
    return latency * 1e-6 + 2 * (n - 1) / n * size / rate


def write_log(path, op, times, gpus_per_host, hosts, gpu="NVIDIA H800 80GB HBM3"):
    """An nccl-tests log (the layout of all_reduce_perf's output) with these times."""
    n = gpus_per_host * hosts
    factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
    lines = ["# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703",
             f"# Collective test starting: {op}_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 4(factor) warmup "
             "iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0", "#",
             "# Using devices"]
    for r in range(n):
        lines.append(f"#  Rank {r:2d} Group  0 Pid {40000 + r:6d} on node-{r // gpus_per_host} "
                     f"device {r % gpus_per_host:2d} [0000:18:00] {gpu}")
    lines += ["#", "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw "
              " #wrong     time   algbw   busbw  #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s) "
              "            (us)  (GB/s)  (GB/s)"]
    for size, t in zip(SIZES, times, strict=True):
        count = size // 4 if op == "all_reduce" else size // 4 // n
        algbw = size / t / 1e9
        side = f"{t * 1e6:9.2f} {algbw:7.2f} {algbw * factor:7.2f}       0"
        lines.append(f"{size:12d}  {count:12d}     float     sum      -1 {side} {side}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0", "#"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def noisy(times, seed, spread=0.015):
    """Times times a seeded uniform factor in [1 - spread, 1 + spread]."""
    rng = np.random.default_rng(seed)
    return np.asarray(times) * rng.uniform(1 - spread, 1 + spread, len(times))


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_one_host_recovers_nvlink_efficiency_and_latency(tmp_path):
    truth = {"latency_scale": 1.3, "nvlink_efficiency": 0.78}
    times = [ring_allreduce_time(s, 8, 1, truth["latency_scale"], truth["nvlink_efficiency"],
                                 None) for s in SIZES]
    log = write_log(tmp_path / "all_reduce_perf.txt", "all_reduce", noisy(times, 1), 8, 1)
    out = tmp_path / "calib.yaml"
    result = invoke("calibrate", log, *FABRIC, "--algo", "ring", "--protocol", "simple",
                    "--out", str(out))
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(out.read_text())
    assert set(data["fitted"]) == {"latency_scale", "nvlink_efficiency"}
    for name, value in truth.items():
        assert data["fitted"][name] == pytest.approx(value, rel=0.02), name
    # one host, ring logs: neither the network nor NVLS (H800 has it, the logs ran ring)
    assert "network_efficiency" in data["held"] and "nvls_efficiency" in data["held"]
    assert data["nccl"]["network_efficiency"] == pytest.approx(4096 / (4096 + 82))
    # the residual table: one row per size, the measured time as printed in the log
    rows = [line for line in result.output.splitlines() if "all_reduce_perf.txt" in line]
    assert len(rows) == len(SIZES)
    assert data["rms_error"]["closed_form"] < 0.015


def test_several_hosts_also_recover_network_efficiency(tmp_path):
    truth = {"latency_scale": 0.8, "nvlink_efficiency": 0.85, "network_efficiency": 0.9}
    one_host = [ring_allreduce_time(s, 8, 1, truth["latency_scale"],
                                    truth["nvlink_efficiency"], None) for s in SIZES]
    across = [ring_allreduce_time(s, 1, 2, truth["latency_scale"], None,
                                  truth["network_efficiency"]) for s in SIZES]
    logs = [write_log(tmp_path / "all_reduce_perf_1x8.txt", "all_reduce",
                      noisy(one_host, 2), 8, 1),
            write_log(tmp_path / "all_reduce_perf_2x1.txt", "all_reduce",
                      noisy(across, 3), 1, 2)]
    result = invoke("calibrate", *logs, *FABRIC, "--algo", "ring", "--protocol", "simple",
                    "--json")
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output[result.output.index("{"):])
    assert set(data["fitted"]) == set(truth)
    for name, value in truth.items():
        assert data["fitted"][name] == pytest.approx(value, rel=0.02), name
    # the simulation at the optimum agrees with the closed form the fit used
    for row in data["residuals"]:
        assert row["simulated"] == pytest.approx(row["closed_form"], rel=1e-4)


def test_network_bound_only_when_nvlink_is_not_the_bottleneck(tmp_path):
    """16 GPUs on 2 hosts: 8 rings share a host's 8 NICs (400 GB/s) while each GPU's NVLink
    gives 200 GB/s: NVLink is the bottleneck, the network efficiency is not identifiable."""
    from hpnsim.collectives.nccl.calibrate import Measurement, identifiable
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.fabrics import build_fabric

    fab = build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0})
    gpus = list(range(16))
    m = Measurement("x", "allreduce", gpus, SIZES, np.ones(len(SIZES)), algo="ring",
                    protocol="simple")
    kept, held = identifiable(fab, [m], NcclParams())
    assert kept == ["latency_scale", "nvlink_efficiency"]
    assert "no measured time depends on it" in held["network_efficiency"]


def test_malformed_log_exits_2_with_line_number(tmp_path):
    times = [ring_allreduce_time(s, 8, 1, 1.0, 0.8, None) for s in SIZES]
    path = tmp_path / "all_reduce_perf.txt"
    write_log(path, "all_reduce", times, 8, 1)
    lines = path.read_text().splitlines()
    bad = next(i for i, line in enumerate(lines) if line.strip().startswith("32 "))
    lines[bad] = lines[bad].replace("float", "float 7", 1)     # one field too many
    path.write_text("\n".join(lines) + "\n")
    result = invoke("calibrate", str(path), *FABRIC)
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"error: {path} line {bad + 1}: ")


def test_log_without_table_exits_2(tmp_path):
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("# nThread 1 nGpus 8\nNCCL INFO nothing here\n")
    result = invoke("calibrate", str(path), *FABRIC)
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "no nccl-tests table" in result.output and "line 2" in result.output


def test_log_whose_gpus_do_not_fit_the_fabric_exits_2(tmp_path):
    times = [ring_allreduce_time(s, 8, 1, 1.0, 0.8, None) for s in SIZES]
    # 16 GPUs on one host: the fabric's hosts have 8
    path = write_log(tmp_path / "all_reduce_perf.txt", "all_reduce", times * 1, 16, 1)
    result = invoke("calibrate", path, *FABRIC)
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "16 GPUs" in result.output and "8 GPUs per host" in result.output
    # 2 hosts x 8 on a fabric of one host
    path = write_log(tmp_path / "all_reduce_perf_2.txt", "all_reduce", times, 8, 2)
    result = invoke("calibrate", path, "--fabric", "hpn7", "--segments", "1",
                    "--hosts-per-segment", "1", "--backup-hosts", "0")
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "fabric has 8" in result.output


@pytest.mark.parametrize("value", [-0.2, 1.3])
def test_calibration_file_with_bad_efficiency_exits_2(tmp_path, value):
    path = tmp_path / "calib.yaml"
    path.write_text(f"nccl:\n  network_efficiency: {value}\n")
    result = invoke("collective", "--fabric", "hpn7", "--segments", "1",
                    "--hosts-per-segment", "1", "--backup-hosts", "0", "--sizes", "1M",
                    "--calibration", str(path))
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output.startswith("error: --calibration: ")
    assert f"nccl.network_efficiency: must be in [0.05, 1.0], got {value}" in result.output


def test_calibration_file_changes_collective_time(tmp_path):
    """A calibration's NVLink efficiency divides the bandwidth term of a one-host ring:
    the 1 GiB time grows by 0.824/0.5 minus the latency share."""
    path = tmp_path / "calib.yaml"
    path.write_text("nccl:\n  nvlink_efficiency: 0.5\n  latency_scale: 0.0\n")
    args = ["collective", "--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "1",
            "--backup-hosts", "0", "--sizes", "1G", "--algo", "ring", "--protocol", "simple",
            "--json"]
    import json

    calibrated = invoke(*args, "--calibration", str(path))
    assert calibrated.exit_code == 0, calibrated.output
    (row,) = json.loads(calibrated.output)
    # 2·7/8·2^30 bytes through 200 GB/s NVLink at efficiency 0.5, no latency
    assert row["time_us"] * 1e-6 == pytest.approx(2 * 7 / 8 * 2**30 / (200e9 * 0.5), rel=1e-9)


def test_scenario_calibration_key_relative_to_the_scenario(tmp_path):
    """``calibration:`` in a scenario file (relative to it) reaches the collectives: the
    one-host ring time is the closed form with the file's NVLink efficiency."""
    from hpnsim.scenario.runner import run

    (tmp_path / "calib.yaml").write_text("nccl:\n  nvlink_efficiency: 0.4\n"
                                         "  latency_scale: 0.0\n")
    (tmp_path / "s.yaml").write_text(
        "fabric: {template: hpn7, segments: 1, hosts_per_segment: 1, backup_hosts: 0}\n"
        "calibration: calib.yaml\n"
        "collectives: [{op: allreduce, gpus: 8, sizes: 1G, algo: ring, protocol: simple}]\n")
    (result,) = run(str(tmp_path / "s.yaml")).collectives[0].results
    assert result.time == pytest.approx(2 * 7 / 8 * 2**30 / (200e9 * 0.4), rel=1e-9)


def test_train_refuses_a_bad_calibration_file_before_simulating(tmp_path):
    path = tmp_path / "calib.yaml"
    path.write_text("nccl:\n  eff_ll: -1\n")
    result = invoke("train", "--model", "llama3-8b", "--tp", "8", "--dp", "2",
                    "--global-batch", "8", "--calibration", str(path))
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "nccl.eff_ll: must be in [0.05, 1.0], got -1" in result.output
