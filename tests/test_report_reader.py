"""What a network architect reads off the report: the denominators of per-GPU figures, the
throughput drawn during a stall, every message size in the bus-bandwidth figure."""

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
