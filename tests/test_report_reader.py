"""What a network architect reads off the report: the denominators of per-GPU figures, the
throughput drawn during a stall, every message size in the bus-bandwidth figure."""

import pytest

from hpnsim.fabrics.analysis import fabric_report
from hpnsim.fabrics.registry import build_fabric
from hpnsim.report.fabric import built_for_gpus, fabric_rows


def test_per_gpu_cost_divides_by_the_gpus_present_and_says_the_pod_is_part_built():
    report = fabric_report(build_fabric("hpn7", {"gpus": 2048}))
    rows = dict(fabric_rows(report))
    network = report["bom"]["cost_usd"]["network"]
    assert rows["network cost per GPU (÷ GPUs present)"] == f"${network / 2048:,.0f}"
    # 2 of 15 segments of 1,024 GPUs (128 hosts x 8): the Aggs of a 15,360-GPU pod are built
    assert report["switches"]["agg"] == build_fabric("hpn7", {"gpus": 15360}).meta[
        "tiers"]["agg"]["switches"]
    assert built_for_gpus(report) == 15 * 1024
    assert rows["Agg tier built for"].startswith("15,360 GPUs")


def test_whole_pods_have_no_part_built_row():
    report = fabric_report(build_fabric("dcn_plus", {"gpus": 2048}))
    assert built_for_gpus(report) is None
    assert "Agg tier built for" not in dict(fabric_rows(report))


def test_a_stalled_job_is_drawn_at_zero_during_its_stall():
    from hpnsim.demo.parts import failure
    from hpnsim.demo.pipeline import DemoConfig
    from hpnsim.report.faults import throughput_steps

    config = DemoConfig(failure_iterations=4, failure_at=0.2, failure_duration=0.5)
    single = failure(config, lambda _: None)["designs"][0]
    assert single["dual_tor"] == "single" and not single["restarts"]
    # the NIC's only ToR link is down 0.2..0.7 s: the job is cut off exactly then
    assert single["stalls"] == [{"start": 0.2, "end": 0.7}]
    assert single["worst_samples_per_s"] == 0.0
    [row] = [r for r in single["timeline"] if r["start"] < 0.2 < r["end"]]
    assert row["end"] > 0.7   # the iteration waits out the stall
    xs, ys = throughput_steps(single["timeline"], single["stalls"])
    # by hand: the row's samples over the time it was not stalled, 0 while stalled
    samples = row["samples_per_s"] * (row["end"] - row["start"])
    rate = samples / ((row["end"] - row["start"]) - 0.5)
    i = xs.index(0.2)
    assert xs[i:i + 4] == [0.2, 0.2, 0.7, 0.7]
    assert ys[i:i + 4] == pytest.approx([rate, 0.0, 0.0, rate], rel=1e-12)
    assert xs[i - 1] == row["start"] and xs[i + 4] == row["end"]
    # the average over the stall (what was drawn before) is well above 0
    assert 0.0 < row["samples_per_s"] < rate
