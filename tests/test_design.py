"""hpnsim design: the family's radix arithmetic against the HPN paper's own tables (Table 2,
Table 4, the 15,360-GPU pod), hand-derived figures for a 102.4T chip, and every emitted
design built by its template with a bill of materials equal to the design's own counts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.design import (
    Mechanisms,
    design_inputs,
    design_space,
    evaluate,
    ladder,
    template_options,
)
from hpnsim.design.records import design_dict
from hpnsim.fabrics import NodeKind, hpn7
from hpnsim.fabrics.bom import bill_of_materials
from hpnsim.fabrics.registry import build_fabric
from hpnsim.report.design import design_figure

runner = CliRunner()
HPN = Mechanisms(tiers=2, dual_tor=True, rail_optimized=True, dual_plane=True)

# The paper's Table 2 (tier-1 scale, tier-2 scale; None where it prints "-") and Table 4
TABLE_2 = [("51.2T Clos", 64, 2048), ("dual-ToR", 128, 4096), ("rail-optimized", 1024, None),
           ("dual-plane", None, 8192), ("oversubscription 15:1", None, 15360)]
TABLE_2_FACTORS = [(None, None), (2, 2), (8, None), (None, 2), (None, 1.875)]


def test_ladder_reproduces_table_2_and_table_4():
    steps = [s.to_dict() for s in ladder(design_inputs())]
    got = [(s["mechanism"], s["tier1_gpus"], s["tier2_gpus"]) for s in steps[:5]]
    assert got == TABLE_2
    assert [(s["factor"]["tier1"], s["factor"]["tier2"]) for s in steps[:5]] == TABLE_2_FACTORS
    # Table 4: any-to-any tier 2 on 2 planes holds 15,360; rail-only tier 2 on 16, 122,880
    assert (steps[4]["planes"], steps[4]["tier2_scale"]) == (2, 15360)
    assert (steps[5]["mechanism"], steps[5]["planes"], steps[5]["tier2_gpus"]) == \
        ("rail-only tier 2", 16, 122880)


def test_ladder_for_102_4T_by_hand():
    # 2 x 200G: plain Clos 51.2T / 400G = 128 GPUs a ToR; 800G links, 128 ports, 64 down:
    # 64 x 128 = 8,192. Dual ToR: 51.2T / 200G = 256 a pair; 400G links, 256 ports, 128
    # down, 64 pairs: 16,384. 8 rails: 2,048 a segment, 128 // 16 = 8 segments (same).
    # Dual plane: 128 // 8 = 16: 32,768. 15:1: 256 ports, 16 up, 240 down: 30 x 2,048 =
    # 61,440. Rail-only: 240 x 2,048 = 491,520.
    steps = [(s.tier1_scale, s.tier2_scale) for s in ladder(design_inputs(chip="102.4T"))]
    assert steps == [(128, 8192), (256, 16384), (2048, 16384), (2048, 32768), (2048, 61440),
                     (2048, 491520)]
    # 2 x 400G NICs on 102.4T: HPN 7.0's arithmetic at twice the speed
    steps = [(s.tier1_scale, s.tier2_scale)
             for s in ladder(design_inputs(chip="102.4T", nic_speed="400G"))]
    assert steps[:5] == [(64, 2048), (128, 4096), (1024, 4096), (1024, 8192), (1024, 15360)]


def test_hpn_pod_from_first_principles():
    x = evaluate(design_inputs(), HPN)
    s = x.shape
    # ToR: 128 active + 8 backup x 200G down, (51.2T - 27.2T) / 400G = 60 up (16:15)
    assert (s.units_per_tor, s.backup_units, s.tor_uplinks) == (128, 8, 60)
    assert s.tor_oversub == pytest.approx(128 * 200 / (60 * 400))
    # Agg: 128 x 400G, 120 down / 8 up (15:1); 60 Aggs per plane, 2 planes
    assert (s.agg_down, s.agg_up, s.aggs_per_plane, s.planes) == (120, 8, 60, 2)
    assert (s.segment_gpus, x.segments, x.gpus) == (1024, 15, 15360)
    assert x.bill["switches"] == {"tor": 240, "agg": 120}
    # one hash decision: the ToR uplink, one of 60 (the paper's Table 1: O(60))
    assert x.ecmp() == (60, 1) and x.hops() == 3


def test_102_4T_design_by_hand_and_the_hpn7_builder_agree():
    x = evaluate(design_inputs(chip="102.4T"), HPN)
    s = x.shape
    # ToR: 51.2T / 200G = 256 active + 16 backup ports; (102.4T - 272 x 200G) / 400G = 120
    assert (s.units_per_tor, s.backup_units, s.tor_uplinks) == (256, 16, 120)
    # Agg: 102.4T / 400G = 256 ports, 256 / 16 = 16 up, 240 down: 240 // 8 = 30 segments
    assert (s.agg_down, s.agg_up, x.segments, s.segment_gpus) == (240, 16, 30, 2048)
    assert (x.gpus, x.bill["switches"]) == (61440, {"tor": 480, "agg": 240})
    f = hpn7(chip="102.4T")   # the builder derives the same pod from the chip alone
    assert f.n_gpus == 61440 and f.meta["tiers"]["tor"]["up_ports"] == 120
    assert (f.nodes_where(kind=NodeKind.TOR).size, f.nodes_where(kind=NodeKind.AGG).size) == \
        (480, 240)


def test_hpn7_defaults_are_the_published_counts():
    derived, explicit = hpn7(segments=2), hpn7(segments=2, hosts_per_segment=128,
                                               backup_hosts=8, tor_uplinks=60,
                                               aggs_per_plane=60, agg_core_uplinks=8)
    for name in ("link_src", "link_dst", "link_capacity", "node_kind"):
        assert np.array_equal(getattr(derived, name), getattr(explicit, name))
    assert derived.meta == explicit.meta


@pytest.mark.parametrize("kwargs", [
    {"gpus": 2000},
    {"chip": "102.4T", "gpus": 5000},
    {"domain": "nvl72", "tor_oversub": "1", "agg_oversub": "7", "gpus": 3000},
], ids=["51.2T", "102.4T", "nvl72-1to1"])
def test_every_emitted_design_builds_with_its_own_bill(kwargs):
    d = design_inputs(**kwargs)
    built = 0
    for x in design_space(d):
        if not x.feasible:
            continue
        template, options = template_options(d, x)
        f = build_fabric(template, options)
        bom = bill_of_materials(f)
        assert f.n_gpus == x.gpus, x.name
        for key in ("switches", "switch_ports", "cables", "transceivers", "fibres"):
            assert bom[key] == x.bill[key], (x.name, key)
        for key in ("switches", "optics", "network", "gpus", "backup_hosts", "total"):
            assert bom["power_w"][key] == pytest.approx(x.bill["power_w"][key]), (x.name, key)
        for key in ("switches", "optics", "cables", "network"):
            assert bom["cost_usd"][key] == pytest.approx(x.bill["cost_usd"][key]), (x.name, key)
        built += 1
    assert built == sum(x.feasible for x in design_space(d)) >= 16


def test_18_MW_building_and_the_power_binding():
    # 1,035 W a GPU all-in: 16,320 GPUs (backups included) x 1,035 W + the pod's network
    # (360 switches x 1,500 W + 65,280 x 5 W + 28,800 x 8 W) = 17.988 MW: the pod fits 18 MW
    fits = evaluate(design_inputs(power_budget="18MW", gpu_power="1035W"), HPN)
    assert fits.gpus == 15360 and fits.binding.value == "Agg radix"
    # at the DGX H100 maximum (1,275 W) a segment draws 1,088 x 1,275 + 16 x 1,500
    # + 16 x 136 x 2 x 5 + 16 x 60 x 2 x 8 = 1,448,320 W; the Aggs 120 x 1,500 W:
    # (18e6 - 180,000) // 1,448,320 = 12 segments
    capped = evaluate(design_inputs(power_budget="18MW"), HPN)
    assert capped.gpus == 12 * 1024 and capped.binding.value == "power"
    assert capped.bill["power_w"]["total"] == pytest.approx(12 * 1448320 + 180000)


def test_nvl72_racks_as_hosts_and_their_rails():
    # 8 rails (the default, a divisor of 72): a rack puts 9 GPUs on each rail's ToR pair.
    # 14 racks = 126 x 200G (25.2T) leave 26T: 65 x 400G, capped at 1:1 = 63; 15 racks =
    # 135 ports (27T) leave 60 up, 27 / 24 = 1.125 > 16/15. 14 // 16 = 0 backup racks.
    y = evaluate(design_inputs(domain="nvl72"), HPN)
    s = y.shape
    assert (s.units_per_tor, s.unit_gpus, s.backup_units, s.tor_uplinks) == (14, 9, 0, 63)
    assert (s.segment_gpus, s.max_segments, s.pod_gpus) == (14 * 72, 15, 15120)
    f = hpn7(domain_gpus=72, segments=1)   # the builder: 72-GPU hosts on one NVSwitch
    assert (f.n_gpus, f.gpus_per_host, f.meta["tiers"]["tor"]["up_ports"]) == (1008, 72, 63)
    assert f.nodes_where(kind=NodeKind.NVSWITCH).size == 14
    # --gpus sizes in whole segments of 14 racks: 3,000 GPUs -> 3 x 1,008
    assert build_fabric("hpn7", {"domain_gpus": "72", "gpus": "3000"}).n_gpus == 3024
    # 72 rails: a segment is 72 ToR pairs x 128 = 9,216 GPUs in one hop, but a segment then
    # takes 72 of an Agg's 120 down ports: one segment a pod
    x = evaluate(design_inputs(domain="nvl72", rails=72), HPN)
    assert (x.shape.segment_gpus, x.shape.max_segments, x.shape.pod_gpus) == (9216, 1, 9216)
    # a single ToR for a whole rack: 72 x 2 x 200G = 28.8T down needs 28.8T up at 1:1
    plain = evaluate(design_inputs(domain="nvl72", tor_oversub="1"), Mechanisms(2))
    assert not plain.feasible and plain.binding.value == "ToR radix"


def test_collectives_and_training_run_on_an_nvl72_fabric():
    from hpnsim.collectives import run_collective

    f = hpn7(domain_gpus=72, segments=2, nvlink="1.8TB/s")
    # within a rack every GPU pair is one NVSwitch hop: no network link carries anything
    from hpnsim.fabrics import LinkKind

    r = run_collective(f, "allreduce", range(72), 2**28, algo="ring")
    network = f.link_kind != int(LinkKind.NVLINK)
    assert r.link_bytes[network].sum() == 0 and r.link_bytes.sum() > 0
    # NVLS across the whole 72-GPU domain: the NVSwitch reduces, nothing leaves the rack
    nvls = run_collective(f, "allreduce", range(72), 2**28, algo="nvls")
    assert nvls.algo == "nvls" and nvls.link_bytes[network].sum() == 0
    assert nvls.busbw > r.busbw
    # across two racks under HPN's routing: one hash decision, no collision
    r = run_collective(f, "allreduce", range(144), 2**28, routing="hpn_dual_plane")
    assert r.hash_collisions == 0 and r.busbw > 0


def test_design_json_shapes():
    result = runner.invoke(app, ["design", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["designs"]) == 18
    hpn = next(x for x in data["designs"] if x["name"] == "2tier-dualtor-rail-dualplane")
    assert {"name", "mechanisms", "tiers", "segment_gpus", "pod_gpus", "switches", "power_w",
            "cost_usd"} <= set(hpn)
    assert (hpn["segment_gpus"], hpn["pod_gpus"], hpn["switches"]) == \
        (1024, 15360, {"tor": 240, "agg": 120})
    assert hpn["mechanisms"] == ["dual_tor", "rail_optimized", "dual_plane"]
    result = runner.invoke(app, ["design", "--ladder", "--json"])
    assert result.exit_code == 0, result.output
    step = json.loads(result.stdout)["ladder"][2]
    assert (step["mechanism"], step["tier1_gpus"], step["tier2_gpus"]) == \
        ("rail-optimized", 1024, None)
    assert step["factor"] == {"tier1": 8.0, "tier2": None}


def test_emit_prints_the_command_that_builds_it():
    result = runner.invoke(app, ["design", "--chip", "102.4T", "--emit",
                                 "2tier-dualtor-rail-dualplane", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["template"] == "hpn7" and out["command"].startswith("hpnsim fabric hpn7 ")
    assert "segments: 30" in out["scenario_yaml"]
    args = out["command"].split()[2:] + ["--json"]
    built = runner.invoke(app, ["fabric", *args])
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)["gpus"] == 61440


def test_figure_plots_scale_against_cost():
    d = design_inputs()
    designs = [design_dict(d, x) for x in design_space(d)]
    fig = design_figure(designs)
    points = np.concatenate([c.get_offsets() for c in fig.axes[0].collections])
    expected = sorted((x["max_gpus"], x["cost_per_gpu_usd"]) for x in designs)
    assert np.asarray(sorted(map(tuple, points.tolist()))).ravel().tolist() == pytest.approx(
        np.asarray(expected, dtype=float).ravel().tolist())


@pytest.mark.parametrize(("args", "flag"), [
    (["--chip", "25.6T", "--nic-speed", "800G"], "--nic-speed"),
    (["--agg-oversub", "0.5"], "--agg-oversub"),
    (["--tor-oversub", "1:2"], "--tor-oversub"),
    (["--domain", "576"], "--domain"),
    (["--chip", "12.8T"], "--chip"),
    (["--domain", "nvl72", "--rails", "7"], "--rails"),
    (["--emit", "nope"], "--emit"),
    (["--power-budget", "lots"], "--power-budget"),
    (["--compare", "allreduce:1G"], "--compare"),
    (["--compare", "allreduce:1G:2048", "--designs", "nope"], "--designs"),
    (["--designs", "2tier-dualtor"], "--designs"),
    (["--compare", "train:nope:8:1:2"], "--compare"),
    (["--compare", "train:llama3-8b:8:0:2"], "--compare"),
], ids=["nic-speed", "agg-oversub", "tor-oversub", "domain", "chip", "rails", "emit",
        "power", "compare", "designs", "designs-alone", "train-model", "train-degree"])
def test_bad_input_is_one_line_and_exit_2(args, flag):
    result = runner.invoke(app, ["design", *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}:"), result.stderr


def test_compare_runs_one_collective_on_the_named_designs():
    from hpnsim.collectives import run_collective
    from hpnsim.design.compare import compare, parse_workload, pick

    work = parse_workload("allreduce:64MiB:2048")
    d = design_inputs(gpus=work.gpus)
    space = design_space(d)
    chosen = pick(space, work, ["2tier-dualtor-rail-dualplane", "2tier-dualtor-rail"])
    rows = compare(d, chosen, work)
    hpn, single_plane = rows
    assert (hpn["routing"], single_plane["routing"]) == ("hpn_dual_plane", "ecmp")
    # HPN's one hash decision against two on a single plane: fewer colliding flows
    assert hpn["hash_collisions"] < single_plane["hash_collisions"]
    # the row is the collective run on the emitted fabric, nothing else
    template, options = template_options(d, chosen[0])
    direct = run_collective(build_fabric(template, options), "allreduce", range(2048),
                            work.size, routing="hpn_dual_plane")
    assert hpn["busbw_GBps"] == pytest.approx(direct.busbw / 1e9)
    # one training iteration: the same hosts run the same kernels and TP stays on NVLink; only
    # the DP all-reduce across hosts sees the network, less exposed on HPN's planes, and its
    # NCCL kernels, beside the last backward for as long as it runs, slow that compute less
    work = parse_workload("train:llama3-8b:8:1:32")
    d = design_inputs(gpus=work.gpus)
    hpn, single_plane = compare(d, pick(design_space(d), work, [
        "2tier-dualtor-rail-dualplane", "2tier-dualtor-rail"]), work)
    assert hpn["compute_time_s"] <= single_plane["compute_time_s"]
    assert hpn["contention_s"] < single_plane["contention_s"]
    assert hpn["compute_time_s"] - hpn["contention_s"] == pytest.approx(
        single_plane["compute_time_s"] - single_plane["contention_s"], rel=1e-9)
    assert hpn["exposed_comm_s"]["tp"] == pytest.approx(single_plane["exposed_comm_s"]["tp"])
    assert hpn["exposed_comm_s"]["dp"] < single_plane["exposed_comm_s"]["dp"]
    # rail-only designs cannot carry a collective across rails through the network
    with pytest.raises(Exception, match="rail-only"):
        pick(space, work, ["2tier-dualtor-rail-dualplane-railonly"])
