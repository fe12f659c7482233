"""Registry, BOM, export and the `hpnsim fabric` CLI: numbers and one-line errors."""

import json
import math

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.fabrics import build_fabric, fat_tree, hpn7, size_options
from hpnsim.fabrics.bom import UNIT_TABLE, bill_of_materials
from hpnsim.fabrics.export import from_json, to_json, to_simai
from hpnsim.report.fabric import merge_labels

runner = CliRunner()


def test_build_fabric_converts_strings_and_sizes():
    f = build_fabric("hpn7", {"segments": "2", "dual-tor": "stacked", "port_speed": "200G"})
    assert f.n_gpus == 2048 and f.meta["dual_tor"] == "stacked"
    assert size_options("hpn7", 131_072) == {"pods": 9, "segments": 15, "last_pod_segments": 8}
    assert build_fabric("dcn_plus", {"gpus": "15360"}).meta["pods"] == 30
    assert build_fabric("fat_tree", {"gpus": "128"}).meta["k"] == 8
    with pytest.raises(InputError) as info:
        build_fabric("hpn8", {})
    assert info.value.field == "template" and "hpn7" in info.value.message
    with pytest.raises(InputError) as info:
        build_fabric("hpn7", {"segmetns": "2"})
    assert "segments" in info.value.message
    with pytest.raises(InputError):
        build_fabric("hpn7", {"dual_plane": "maybe"})
    with pytest.raises(InputError):
        build_fabric("fat_tree", {})


def test_bom_counts_backup_ports_and_optics():
    bom = bill_of_materials(hpn7())
    # 240 ToRs x (128 + 8) 200G ports; each cable two transceivers (NIC side + ToR side)
    assert bom["cables"] == {"access": 240 * 136, "uplink": 240 * 60}
    assert bom["switch_ports"] == {"200G": 240 * 136, "400G": 240 * 60 + 120 * 128}
    assert bom["reserved_ports"] == 120 * 8
    assert bom["transceivers"] == {"200G-MM": 2 * 240 * 136, "400G-MM": 2 * 240 * 60}
    far = bill_of_materials(hpn7(), distances={"uplink": 150})
    assert far["transceivers"]["400G-SM"] == 2 * 240 * 60
    custom = bill_of_materials(hpn7(), units={"switch_51.2T": {"power_w": 1000.0}})
    assert custom["power_w"]["switches"] == 360 * 1000.0
    gpu_w = 1275.0 * (1920 + 120) * 8
    assert bom["power_w"]["gpus"] == gpu_w
    assert bom["power_w"]["backup_hosts"] == 1275.0 * 15 * 8 * 8  # 8 spare hosts x 15 segments
    assert bom["gpus_per_mw"] == pytest.approx(15360 / (bom["power_w"]["total"] / 1e6))


def test_exports_roundtrip_and_simai_layout():
    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=4, aggs_per_plane=4)
    g = from_json(json.loads(json.dumps(to_json(f))))
    assert (g.link_src == f.link_src).all() and g.n_gpus == f.n_gpus
    lines = to_simai(f).splitlines()
    n_switch = 16 + 8  # ToRs, Aggs; SimAI's switch_num leaves the 4 NVSwitches out
    assert lines[0].split() == [str(32 + 4 + n_switch), "8", "4", str(n_switch),
                                str(32 + 64 + 16 * 4), "H800"]
    assert lines[1].split() == [str(i) for i in range(32, 32 + 4 + n_switch)]
    assert len(lines) == 2 + 32 + 64 + 64
    assert "0 36 200Gbps 0.001ms 0" in lines  # GPU 0 port 0 -> first ToR


def _one_line_error(result, field):
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:")


@pytest.mark.parametrize(("args", "field"), [
    (["fabric", "hpn7", "--segments", "-1"], "--segments"),
    (["fabric", "hpn7", "--segments", "0"], "--segments"),
    (["fabric", "hpn7", "--hosts-per-segment", "200"], "--hosts-per-segment"),
    (["fabric", "nope"], "template"),
    (["fabric", "hpn7", "--dual-tor", "triple"], "--dual-tor"),
    (["fabric", "hpn7", "--bogus", "1"], "--bogus"),
    (["fabric", "fat_tree", "--k", "7"], "--k"),
    (["fabric", "compare", "hpn7"], "compare"),
    (["fabric", "hpn7", "--export", "x", "--format", "dot"], "--format"),
    (["fabric", "hpn7", "--rails", "16"], "--rails"),
    (["fabric", "hpn7", "--dual-plane", "false"], "--dual-plane"),
    (["fabric", "hpn7", "--chip", "25.6T", "--segments", "15"], "--chip"),
])
def test_cli_bad_input_exits_2_with_one_line(args, field):
    _one_line_error(runner.invoke(app, args), field)


def test_cli_json_and_compare(tmp_path):
    result = runner.invoke(app, ["fabric", "hpn7", "--segments", "2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["gpus"] == 2048 and data["switches"]["tor"] == 32
    assert data["path_choices"]["cross_segment"] == 60
    assert {"links", "oversubscription", "bom"} <= set(data)
    result = runner.invoke(app, ["fabric", "compare", "hpn7", "dcn_plus", "--gpus", "15360",
                                 "--json"])
    assert result.exit_code == 0, result.output
    both = json.loads(result.stdout)["fabrics"]
    assert [f["gpus"] for f in both] == [15360, 15360]
    assert both[0]["path_choices"]["cross_segment"] == 60
    assert both[1]["path_choices"]["cross_segment"] == 512
    out = tmp_path / "topo.txt"
    result = runner.invoke(app, ["fabric", "fat_tree", "--k", "4", "--export", str(out),
                                 "--format", "simai"])
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[0].split()[:2] == ["36", "1"]
    result = runner.invoke(app, ["fabric", "hpn7"])
    assert result.exit_code == 0 and "15.000:1" in result.stdout and "1.067:1" in result.stdout


def test_cli_frontend_and_partial_pod():
    result = runner.invoke(app, ["fabric", "hpn7", "--segments", "2", "--frontend", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    fe = data["frontend"]
    # 2 segments x 2 pairs + 1 storage pair (ceil(2048 x 0.3 GB/s / 50 GB/s) = 13 hosts)
    assert fe["storage_hosts"] == 13 and fe["switches"] == {"tor": 10, "agg": 64, "core": 8}
    assert fe["oversubscription"] == {"tor": 1.0, "agg": 1.0, "core": None}
    assert data["switches"] == {"tor": 32, "agg": 120, "core": 0}  # backend apart
    assert data["bom"]["frontend"]["switches"] == fe["switches"]
    assert fe["checkpoint"]["seconds"] == pytest.approx(2048 * 30e9 / (13 * 50e9))
    result = runner.invoke(app, ["fabric", "hpn7", "--segments", "1", "--frontend"])
    assert result.exit_code == 0 and "frontend oversubscription tor" in result.stdout
    result = runner.invoke(app, ["fabric", "hpn7", "--gpus", "17408", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["gpus"] == 17408 and data["options"]["last_pod_segments"] == 2
    _one_line_error(runner.invoke(app, ["fabric", "hpn7", "--frontend", "--storage-hosts",
                                        "0"]), "--storage-hosts")


@pytest.mark.parametrize(("units", "message"), [
    ({"switch_51.2T": {"power_w": "abc"}},
     "switch_51.2T.power_w: must be a number >= 0, got 'abc'"),
    ({"switch_51.2T": {"power_w": -680}}, "switch_51.2T.power_w: must be a number >= 0, got -680"),
    ({"400G-MM": {"cost_usd": float("nan")}}, "400G-MM.cost_usd: must be a finite number >= 0"),
    ({"gpu": {"power_w": float("inf")}}, "gpu.power_w: must be a finite number >= 0"),
    ({"gpu": {"power_w": True}}, "gpu.power_w: must be a number >= 0, got True"),
    ({"gpu": {"power_w": None}}, "gpu.power_w: must be a number >= 0, got None"),
    ({"gpu": {"watts": 1000}}, "gpu.watts: unknown figure; use power_w or cost_usd"),
    ({"gpu": 1000}, "gpu: must be an object"),
    ({"swich_51.2T": {"power_w": 1}}, "unknown unit 'swich_51.2T'; known: gpu, switch_25.6T"),
    ({"switch_204.8T": {"power_w": 3000}}, "switch_204.8T: a new unit needs both power_w and "
                                          "cost_usd, missing cost_usd"),
])
def test_unit_overrides_are_validated(units, message):
    with pytest.raises(InputError) as info:
        bill_of_materials(hpn7(segments=1), units=units)
    assert info.value.field == "units" and info.value.message.startswith(message)


def test_unit_overrides_accept_new_chips_and_zero():
    # a new chip that follows the naming pattern joins the table (both figures given)
    f = hpn7(segments=1, chip="204.8T")
    with pytest.raises(InputError, match="no power/cost figures for 'switch_204.8T'"):
        bill_of_materials(f)
    bom = bill_of_materials(f, units={"switch_204.8T": {"power_w": 3000, "cost_usd": 1e5},
                                      "1600G-SM": {"power_w": 25, "cost_usd": 2000},
                                      "gpu": {"power_w": 0}})
    # 16 ToRs; the chip sizes the Aggs: (204.8T - 544 x 200G) / 400G = 240 a plane
    assert bom["power_w"]["switches"] == (16 + 480) * 3000.0
    assert bom["cost_usd"]["switches"] == (16 + 480) * 1e5
    assert bom["power_w"]["gpus"] == 0.0 and bom["power_w"]["backup_hosts"] == 0.0


def test_cli_units_file_is_validated(tmp_path):
    bad = tmp_path / "units.json"
    bad.write_text('{"switch_51.2T": {"power_w": "abc"}}')
    result = runner.invoke(app, ["fabric", "hpn7", "--units", str(bad)])
    _one_line_error(result, "--units")
    assert result.stderr.strip() == ("error: --units: switch_51.2T.power_w: must be a number "
                                     ">= 0, got 'abc'")
    bad.write_text('{"switch_51.2T": {"power_w": -680}}')
    _one_line_error(runner.invoke(app, ["fabric", "hpn7", "--units", str(bad)]), "--units")
    bad.write_text('{"bogus": {"power_w": 1}}')
    result = runner.invoke(app, ["fabric", "compare", "hpn7", "dcn_plus", "--units", str(bad)])
    _one_line_error(result, "--units")
    assert "switch_51.2T" in result.stderr  # lists the known names
    good = tmp_path / "good.json"
    good.write_text('{"switch_51.2T": {"power_w": 1000}}')
    result = runner.invoke(app, ["fabric", "hpn7", "--units", str(good), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["bom"]["power_w"]["switches"] == (240 + 120) * 1000.0


def test_switch_25_6T_power_follows_the_hpn_fact():
    # HPN: the 51.2T chip draws about 45% more power than the 25.6T generation
    per_switch = UNIT_TABLE["switch_51.2T"]["power_w"] / 1.45
    assert UNIT_TABLE["switch_51.2T"]["power_w"] / UNIT_TABLE["switch_25.6T"]["power_w"] == \
        pytest.approx(1.45)
    k = 8  # k-port switches at 400G need 3.2 Tb/s: a 25.6T chip fits; 5 k^2 / 4 switches
    bom = bill_of_materials(fat_tree(k, chip="25.6T"))
    assert bom["power_w"]["switches"] == pytest.approx(5 * k * k / 4 * per_switch)
    # hpn7 on 25.6T: halve the ToR (64 + 4 hosts x 200G + 30 x 400G up = 25.6T) and fit
    # the Agg (7 segments x 8 ToRs of a plane + 8 up = 64 x 400G = 25.6T)
    result = runner.invoke(app, ["fabric", "hpn7", "--chip", "25.6T", "--hosts-per-segment",
                                 "64", "--backup-hosts", "4", "--tor-uplinks", "30",
                                 "--aggs-per-plane", "30", "--segments", "7", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["switches"] == {"tor": 7 * 16, "agg": 2 * 30, "core": 0}
    assert data["bom"]["power_w"]["switches"] == pytest.approx((7 * 16 + 60) * per_switch)
    # next generation: an estimate, the same +45% step again
    assert UNIT_TABLE["switch_102.4T"]["power_w"] / UNIT_TABLE["switch_51.2T"]["power_w"] == \
        pytest.approx(1.45)
    # 102.4T sizes its own pod: 480 ToRs and 240 Aggs (HPN 8.0 class, 61,440 GPUs)
    assert bill_of_materials(hpn7(chip="102.4T"))["power_w"]["switches"] == \
        pytest.approx(720 * 1500.0 * 1.45)


def test_compare_keeps_row_groups_together():
    assert merge_labels([["a", "b", "d"], ["a", "b", "c", "d", "e"], ["x", "a"]]) == \
        ["x", "a", "b", "c", "d", "e"]
    result = runner.invoke(app, ["fabric", "compare", "hpn7", "dcn_plus", "--gpus", "15360"],
                           terminal_width=200)
    assert result.exit_code == 0, result.output
    labels = [line.split("│")[1].strip() for line in result.stdout.splitlines()
              if line.count("│") == 4]
    # rows of dcn_plus only (a core, single-mode core optics) sit inside their groups
    at = labels.index
    assert at("oversubscription core") == at("oversubscription agg") + 1
    assert at("transceivers 400G-SM") == at("transceivers 400G-MM") + 1
    assert at("network power") == at("transceivers 400G-SM") + 1
    assert labels[-1] == "GPUs per MW (GPUs present ÷ total power)"


def test_gpus_that_do_not_fit_exactly_are_reported():
    # hpn7 grows in whole segments of 128 hosts x 8 GPUs
    result = runner.invoke(app, ["fabric", "hpn7", "--gpus", "1000", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    built = math.ceil(1000 / (128 * 8)) * 128 * 8
    assert data["gpus"] == built == 1024 and data["requested_gpus"] == 1000
    note = result.stderr.strip().splitlines()
    assert note == ["note: gpus: 1,000 GPUs round up to 1,024 for hpn7 (whole segments of "
                    "1,024 GPUs: 128 hosts x 8 GPUs)"]
    exact = runner.invoke(app, ["fabric", "hpn7", "--gpus", "2048", "--json"])
    assert exact.exit_code == 0 and exact.stderr == ""
    assert json.loads(exact.stdout)["requested_gpus"] == 2048
    plain = runner.invoke(app, ["fabric", "hpn7", "--segments", "1", "--json"])
    assert json.loads(plain.stdout)["requested_gpus"] is None
    # fat-tree: the smallest even k with k^3 / 4 >= 1000
    k = next(k for k in range(2, 100, 2) if k ** 3 // 4 >= 1000)
    result = runner.invoke(app, ["fabric", "compare", "hpn7", "fat_tree", "--gpus", "1000"])
    assert result.exit_code == 0, result.output
    assert f"round up to {k ** 3 // 4:,} for fat_tree" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 2  # one note per template
    # sizing parameters the user fixed are kept, and the shortfall is said
    f = build_fabric("hpn7", {"gpus": "15360", "pods": "1", "segments": "2"})
    assert f.n_gpus == 2 * 1024 and f.meta["requested_gpus"] == 15360
    result = runner.invoke(app, ["fabric", "hpn7", "--gpus", "15360", "--pods", "1",
                                 "--segments", "2", "--json"])
    assert result.stderr.strip() == ("note: gpus: 15,360 GPUs requested but hpn7 with pods=1, "
                                     "segments=2 holds only 2,048")


def test_table_shows_backup_host_power():
    result = runner.invoke(app, ["fabric", "hpn7"], terminal_width=200)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if "of which backup hosts" in line)
    assert f"{120 * 8 * 1275 / 1e6:.2f} MW" in row  # 120 spare hosts x 8 GPUs x 1275 W
