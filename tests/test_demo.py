"""``hpnsim demo``: the main job writes its results and its numbers keep their definitions."""

import json

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.demo.pipeline import DemoConfig, run_demo


@pytest.fixture(scope="module")
def small_demo():
    return run_demo(DemoConfig(pod_gpus=2048, allreduce_gpus=256, allreduce_size=2**26,
                               model="llama3-8b", tp=8, pp=2, dp=2, sizes=(2**20, 2**24),
                               scaling_dps=(1, 2), failure_duration=1.0,
                               failure_iterations=8, cluster_scale=0.25))


def test_fabric_section_counts_the_segments_it_was_sized_for(small_demo):
    hpn, dcn = small_demo.fabrics
    assert hpn["gpus"] == dcn["gpus"] == 2048
    # two HPN segments: 8 rails x 2 planes ToRs each; 60 Aggs per plane regardless of size
    assert hpn["switches"]["tor"] == 2 * 16 and hpn["switches"]["agg"] == 120


def test_allreduce_rows_follow_nccl_tests_definitions(small_demo):
    n, size = 256, 2**26
    for row in small_demo.allreduce:
        algbw = size / row["time"] / 1e9
        assert row["algbw"] == pytest.approx(algbw, rel=1e-12)
        assert row["busbw"] == pytest.approx(algbw * 2 * (n - 1) / n, rel=1e-12)


def test_iteration_parts_add_up(small_demo):
    for row in small_demo.training:
        parts = (row["compute_time"] + sum(row["exposed_comm"].values()) + row["bubble"]
                 + row["optimizer_time"] + row["straggler_time"])
        assert parts == pytest.approx(row["iteration_time"], rel=1e-9)


def test_cli_writes_json_and_figures(tmp_path):
    result = CliRunner().invoke(app, ["demo", "--quick", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    saved = json.loads((tmp_path / "demo.json").read_text())
    assert printed == saved
    own = [r for r in saved["allreduce"] if r["forced_algo"] is None]
    assert [r["routing"] for r in own][:4] == ["ecmp", "hpn_dual_plane", "precise", "spray"]
    # both host generations, each with every routing case, NCCL's choice; a forced ring
    # beside HPN dual-plane and DCN+ ECMP on the fabrics' own (H800) hosts
    assert sorted({r["host_gpu"] for r in saved["allreduce"]}) == ["h100", "h800"]
    assert len(own) == 2 * 6
    assert [(r["host_gpu"], r["fabric"], r["routing"], r["algo"]) for r in saved["allreduce"]
            if r["forced_algo"]] == [("h800", "hpn7", "hpn_dual_plane", "ring"),
                                     ("h800", "dcn_plus", "ecmp", "ring")]
    for stem in ("allreduce_busbw", "iteration_breakdown", "busbw_by_size", "linearity",
                 "failure_timeline", "cluster_utilization"):
        assert (tmp_path / f"{stem}.png").stat().st_size > 10_000
        assert f"{stem}.png" in (tmp_path / "index.html").read_text()
        assert not (tmp_path / f"{stem}.svg").exists()   # --quick writes PNG only
    assert len(saved["cluster"]["jobs"]) == 2
    # the page says which demo it is; a second demo never silently replaces this one
    assert saved["config"]["variant"] == "quick"
    assert "hpnsim demo --quick (small sizes" in (tmp_path / "index.html").read_text()
    refused = CliRunner().invoke(app, ["demo", "--quick", "--out", str(tmp_path)])
    assert refused.exit_code == 2 and "--force" in refused.stderr
    for key in ("busbw_by_size", "scaling", "failure", "cluster"):
        assert saved[key]
    # the report command renders the demo's folder again from demo.json alone
    again = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert again.exit_code == 0, again.output


def test_bom_counts_match_the_published_pod():
    # HPN 7.0 (SIGCOMM 2024, reference/hpn.md): a 15,360-GPU pod is 15 segments of 1,024
    # GPUs, 16 ToRs per segment (8 rails x 2 planes) and 60 Aggs per plane (120)
    from hpnsim.fabrics import build_fabric
    from hpnsim.fabrics.analysis import fabric_report

    r = fabric_report(build_fabric("hpn7", {"gpus": 15360}))
    assert r["gpus"] == 15 * 1024 and r["hosts"] == 15 * 128
    assert r["switches"]["tor"] == 15 * 8 * 2 and r["switches"]["agg"] == 2 * 60
    assert r["switches"].get("core", 0) == 0


def test_busbw_by_size_follows_nccl_tests_and_grows_with_size(small_demo):
    n = 256
    for row in small_demo.busbw_by_size:
        algbw = row["size"] / row["time"] / 1e9
        assert row["busbw"] == pytest.approx(algbw * 2 * (n - 1) / n, rel=1e-12)
    keys = {(r["host_gpu"], r["fabric"], r["routing"]) for r in small_demo.busbw_by_size}
    # every curve in the H800 hosts, each fabric under its own routing in the H100 hosts
    assert len(keys) == 3 + 2
    for key in keys:
        curve = sorted((r for r in small_demo.busbw_by_size
                        if (r["host_gpu"], r["fabric"], r["routing"]) == key),
                       key=lambda r: r["size"])
        assert [r["size"] for r in curve] == [2**20, 2**24]
        assert curve[0]["busbw"] < curve[1]["busbw"]   # latency dominates the small size


def test_scaling_linearity_is_throughput_over_linear(small_demo):
    for fabric in ("hpn7", "dcn_plus"):
        pts = sorted((p for p in small_demo.scaling["points"] if p["fabric"] == fabric),
                     key=lambda p: p["gpus"])
        assert [p["gpus"] for p in pts] == [16, 32]
        base = pts[0]["tokens_per_second"] / pts[0]["gpus"]
        for p in pts:
            assert p["linearity"] == pytest.approx(p["tokens_per_second"] / p["gpus"] / base)
            assert 0 < p["linearity"] <= 1 + 1e-9


def test_single_tor_stalls_for_the_fault_dual_tor_loses_less(small_demo):
    f = small_demo.failure
    single, dual = f["designs"]
    d = f["fault_duration"]
    t0 = single["nominal_iteration_time"]
    # single ToR: the GPU's NIC has no path while the link is down, so the job stalls until
    # the repair: it loses the fault's duration, less the part of it before the job first
    # needed the link (under one iteration: every iteration crosses every NIC)
    assert d - t0 <= single["time_lost"] <= d + 1e-6
    assert single["restarts"] == []            # repaired before the collective timeout
    # dual ToR: the other port carries on; the job never stops
    assert 0 < dual["time_lost"] < single["time_lost"]
    assert dual["worst_samples_per_s"] > 0


def test_crux_utilization_at_least_none_on_the_demo_cluster(small_demo):
    none, crux = small_demo.cluster["runs"]
    assert (none["scheduler"], crux["scheduler"]) == ("none", "crux")
    assert crux["gpu_utilization"] >= none["gpu_utilization"]
    # computation over cluster GPUs x makespan cannot exceed the GPU time the jobs held
    # over the cluster's GPU time (64 GPUs: 2 segments x 4 hosts x 8)
    held = sum(j["gpus"] * (j["finish"] - j["start"]) for j in none["jobs"])
    assert none["gpu_utilization"] <= held / (64 * none["makespan"]) + 1e-9
    assert all(j["iterations"] == spec["iterations"]
               for j, spec in zip(none["jobs"], small_demo.cluster["jobs"], strict=True))


# ------------------------------------------------ the all-reduce in two host generations
@pytest.fixture(scope="module")
def generations():
    """The demo's all-reduce, 4 GiB ring on 64 GPUs (8 hosts, half in each of two HPN
    segments' worth of a 2,048-GPU pod), in both host generations; the rest kept tiny."""
    r = run_demo(DemoConfig(pod_gpus=2048, allreduce_gpus=64, allreduce_size=4 * 2**30,
                            allreduce_algo="ring",
                            model="llama3-8b", tp=8, pp=1, dp=1, sizes=(2**20,),
                            scaling_dps=(1,), failure_iterations=2, failure_duration=0.2,
                            failure_at=0.1, cluster_scale=0.01, cluster_jobs=(1,)))
    return {(a["host_gpu"], a["fabric"], a["routing"]): a for a in r.allreduce}


def test_h800_is_nvlink_bound_on_both_fabrics(generations):
    hpn, dcn = generations["h800", "hpn7", "hpn_dual_plane"], generations["h800", "dcn_plus",
                                                                           "ecmp"]
    assert hpn["nvlink_bandwidth"] == dcn["nvlink_bandwidth"] == 400e9   # H800 sheet
    assert hpn["bottleneck_kind"] == dcn["bottleneck_kind"] == "nvlink"
    assert hpn["bottleneck"].endswith("nvswitch") and dcn["bottleneck"].endswith("nvswitch")


def test_h800_ratio_is_the_nvlink_send_ratio(generations):
    hpn, dcn = generations["h800", "hpn7", "hpn_dual_plane"], generations["h800", "dcn_plus",
                                                                           "ecmp"]
    # A ring channel visits a host's g = 8 GPUs: g - 1 NVLink hops, then the exit hop. On
    # DCN+ the exit GPU sends through its own NIC; on a rail-optimized fabric it hands the
    # bytes over NVLink to the GPU on the next host's rail (PXN): g NVLink sends. NCCL runs
    # one channel per NIC port (8 NICs x 2 ports = 16), so per GPU: 16 vs 14 = 16 (g-1)/g.
    g, channels = 8, 8 * 2
    assert hpn["ring_channels"] == dcn["ring_channels"] == channels
    assert hpn["nvlink_sends_per_gpu"] == pytest.approx(channels, abs=1e-3)
    assert dcn["nvlink_sends_per_gpu"] == pytest.approx(channels * (g - 1) / g, abs=1e-3)
    # Both NVLink-bound at the same NVLink rate, so time = L + (NVLink busy time), where L
    # (latencies, the pipeline's fill) is the same on both fabrics: the same ring steps and
    # hop kinds. With u the busy share of HPN's busiest NVLink link, B = u T_hpn and DCN+'s
    # busy time is (g-1)/g B, so busbw_hpn / busbw_dcn = T_dcn / T_hpn = 1 - u / g exactly
    # (7/8 when u = 1). The only slack is the busy share's own rounding to the finish time
    # of the last link; 0.5% covers it and is far below the 1/g - u/g gap being tested.
    u = hpn["bottleneck_utilization"]
    assert 0.9 < u <= 1.0        # 4 GiB on 64 GPUs: bandwidth, not latency, decides
    assert hpn["busbw"] / dcn["busbw"] == pytest.approx(1 - u / g, rel=5e-3)
    assert hpn["busbw"] / dcn["busbw"] < 1 - 0.9 / g   # HPN is below DCN+, by the relay


def test_h100_class_network_decides_and_dual_plane_wins(generations):
    hpn = generations["h100", "hpn7", "hpn_dual_plane"]
    dcn = generations["h100", "dcn_plus", "ecmp"]
    hpn_ecmp = generations["h100", "hpn7", "ecmp"]
    assert hpn["nvlink_bandwidth"] == 900e9      # H100 SXM sheet: 900 GB/s NVLink
    assert hpn["busbw"] >= dcn["busbw"]
    # DCN+ under ECMP is bound in the network (a NIC port or switch link), by collisions
    assert dcn["bottleneck_kind"] != "nvlink" and dcn["hash_collisions"] > 0
    assert hpn["hash_collisions"] == 0
    # A ring's busbw is channels x one channel's rate. One NIC whose two channels hash onto
    # the same 200G port (25 GB/s, RoCE payload 4096 / (4096 + 82 header bytes) of it)
    # gives those channels half a port each, and the lockstep ring runs at that rate:
    # busbw <= 16 x 25 x 0.9804 / 2 = 196 GB/s, half of what one channel per port allows
    port = 25 * 4096 / (4096 + 82)
    assert dcn["busbw"] <= 16 * port / 2 + 1e-9
    assert hpn["busbw"] > 16 * port / 2
    # HPN under ECMP has DCN+'s figure: the gain is the routing, not the topology
    assert hpn_ecmp["busbw"] == pytest.approx(dcn["busbw"], rel=5e-3)


def test_the_demo_runs_what_nccl_picks_on_the_fabrics_hosts(small_demo):
    """No GPU given: the demo's hosts are hpn7's and dcn_plus's (H800, the HPN paper's), and
    its all-reduce is what NCCL's choice (algo auto) gives with the H800's parameters (NVLS
    among the candidates), not with NCCL's generic ones; the forced ring beside it is a ring."""
    from hpnsim.collectives import NcclParams, run_collective
    from hpnsim.fabrics import build_fabric

    assert small_demo.config["gpu"] == "h800" and NcclParams.for_gpu("h800").nvls
    assert small_demo.config["gpu_from"].startswith("the hpn7 hosts (Qian et al.")
    row, = [a for a in small_demo.allreduce if (a["host_gpu"], a["fabric"], a["routing"],
                                                 a["forced_algo"]) == ("h800", "hpn7",
                                                                       "hpn_dual_plane", None)]
    fabric = build_fabric("hpn7", {"gpus": 2048, "nvlink": "400GB/s"})
    picked = run_collective(fabric, "allreduce", range(256), 2**26, algo="auto",
                            routing="hpn_dual_plane", nccl=NcclParams.for_gpu("h800"))
    assert (row["algo"], row["busbw"]) == (picked.algo, pytest.approx(picked.busbw / 1e9))
    forced = [a for a in small_demo.allreduce if a["forced_algo"]]
    assert {a["algo"] for a in forced} == {"ring"} and {a["host_gpu"] for a in forced} == {"h800"}
