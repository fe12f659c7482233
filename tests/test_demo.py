"""``hpnsim demo``: the main job writes its results and its numbers keep their definitions."""

import json

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.demo import DemoConfig, run_demo


@pytest.fixture(scope="module")
def small_demo():
    return run_demo(DemoConfig(pod_gpus=2048, allreduce_gpus=256, allreduce_size=2**26,
                               model="llama3-8b", tp=8, pp=2, dp=2))


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
                 + row["optimizer_time"])
        assert parts == pytest.approx(row["iteration_time"], rel=1e-9)


def test_cli_writes_json_and_figures(tmp_path):
    result = CliRunner().invoke(app, ["demo", "--quick", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    saved = json.loads((tmp_path / "demo.json").read_text())
    assert printed == saved
    assert [r["routing"] for r in saved["allreduce"]][:4] == [
        "ecmp", "hpn_dual_plane", "precise", "spray"]
    assert (tmp_path / "allreduce_busbw.png").stat().st_size > 10_000
    assert (tmp_path / "iteration_breakdown.png").stat().st_size > 10_000
