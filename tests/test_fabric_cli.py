"""Registry, BOM, export and the `hpnsim fabric` CLI: numbers and one-line errors."""

import json

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.fabrics import build_fabric, hpn7, size_options
from hpnsim.fabrics.bom import bill_of_materials
from hpnsim.fabrics.export import from_json, to_json, to_simai

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
    assert bom["gpus_per_mw"] == pytest.approx(15360 / (bom["power_w"]["total"] / 1e6))


def test_exports_roundtrip_and_simai_layout():
    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=4, aggs_per_plane=4)
    g = from_json(json.loads(json.dumps(to_json(f))))
    assert (g.link_src == f.link_src).all() and g.n_gpus == f.n_gpus
    lines = to_simai(f).splitlines()
    n_switch = 4 + 16 + 8  # NVSwitches, ToRs, Aggs
    assert lines[0].split() == [str(32 + n_switch), "8", "4", str(n_switch),
                                str(32 + 64 + 16 * 4), "H800"]
    assert lines[1].split() == [str(i) for i in range(32, 32 + n_switch)]
    assert len(lines) == 2 + 32 + 64 + 64
    assert "0 36 200Gbps 0.001ms 0" in lines  # GPU 0 port 0 -> first ToR


def _one_line_error(result, field):
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:")


@pytest.mark.parametrize(("args", "field"), [
    (["fabric", "hpn7", "--segments", "-1"], "segments"),
    (["fabric", "hpn7", "--segments", "0"], "segments"),
    (["fabric", "hpn7", "--hosts-per-segment", "200"], "hosts_per_segment"),
    (["fabric", "nope"], "template"),
    (["fabric", "hpn7", "--dual-tor", "triple"], "dual_tor"),
    (["fabric", "hpn7", "--bogus", "1"], "bogus"),
    (["fabric", "fat_tree", "--k", "7"], "k"),
    (["fabric", "compare", "hpn7"], "compare"),
    (["fabric", "hpn7", "--export", "x", "--format", "dot"], "format"),
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
                                        "0"]), "storage_hosts")
