"""hpnsim sweep: points from a grid or a list, rows equal to running each point with hs.run,
bad sweeps named by their path, resume after SIGKILL, Ray and the process pool agree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import hpnsim as hs
from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.sweep.execute import read_rows, run_sweep
from hpnsim.sweep.spec import load_sweep, parse_sweep

BASE = {
    "fabric": {"template": "hpn7", "segments": 2, "hosts_per_segment": 2, "backup_hosts": 0,
               "aggs_per_plane": 2, "tor_uplinks": 2},
    "routing": "ecmp",
    "jobs": [{"name": "llm", "model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 4}],
    "collectives": [{"name": "ar", "gpus": 16, "sizes": "1M", "algo": "ring"}],
}
GRID = {"jobs[0].dp": [2, 4], "routing": ["ecmp", "precise"]}


def write_sweep(folder: Path, sweep: dict) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    return path


def expected_row(dp: int, routing: str) -> dict:
    """The point's scenario written out by hand and run with hs.run directly."""
    scenario = json.loads(json.dumps(BASE))
    scenario["jobs"][0]["dp"] = dp
    scenario["routing"] = routing
    result = hs.run(scenario)
    job = result.job("llm")
    return {"llm.iteration_time_s": job.iteration_time,
            "llm.mfu": job.iterations[0].mfu,
            "llm.slowdown": None,
            "ar.avg_busbw_GBps": result.collective("ar").results[0].busbw / 1e9,
            "makespan_s": job.finish}


def test_grid_rows_equal_running_each_point(tmp_path):
    sweep = parse_sweep({"base": BASE, "grid": GRID})
    result = run_sweep(sweep, tmp_path / "out", workers=2)
    points = [(2, "ecmp"), (2, "precise"), (4, "ecmp"), (4, "precise")]   # first path slowest
    assert [(r["jobs[0].dp"], r["routing"]) for r in result.rows] == points
    assert [r["point"] for r in result.rows] == [0, 1, 2, 3]
    for row, (dp, routing) in zip(result.rows, points, strict=True):
        want = expected_row(dp, routing)
        assert {k: row[k] for k in want} == want
    on_disk = sorted(read_rows(tmp_path / "out" / "rows.jsonl"), key=lambda r: r["point"])
    assert on_disk == result.rows
    summary = (tmp_path / "out" / "summary.csv").read_text().splitlines()
    assert len(summary) == 5 and summary[0].startswith("point,key,jobs[0].dp,routing,")


def test_points_list_and_base_file(tmp_path):
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(BASE))
    path = write_sweep(tmp_path, {"base": "base.yaml", "points": [
        {"jobs[0].dp": 4}, {"routing": "precise", "fabric.tor_uplinks": 4}]})
    result = run_sweep(load_sweep(path), tmp_path / "out", workers=1)
    assert result.parameters == ["jobs[0].dp", "routing", "fabric.tor_uplinks"]
    assert result.rows[0]["llm.iteration_time_s"] == expected_row(4, "ecmp")[
        "llm.iteration_time_s"]
    scenario = json.loads(json.dumps(BASE))
    scenario["routing"] = "precise"
    scenario["fabric"]["tor_uplinks"] = 4
    assert result.rows[1]["llm.iteration_time_s"] == hs.run(scenario).job("llm").iteration_time


@pytest.mark.parametrize(("sweep", "message"), [
    ({"base": BASE, "grid": {"jobs[0].dp": [2, 64]}},
     "error: grid: point 1 (jobs[0].dp=64): jobs[0].global_batch: must be a multiple of "
     "dp*micro_batch = 64*1 = 64, got 4 (line 15)"),
    ({"base": BASE, "grid": {"jobs[0].tp": [8, 3]}},
     "error: grid.jobs[0].tp[1]: must divide the GPUs per host (8), got 3"),
    ({"base": BASE, "grid": {"fabric.tor_uplinks": [2, 3]}},
     "error: grid.fabric.tor_uplinks[1]: must be a multiple of aggs_per_plane=2"),
    ({"base": BASE, "grid": {"routing": ["ecmp", "bogus"]}}, "error: grid.routing[1]: "),
    ({"base": BASE, "points": [{"routing": "ecmp"}, {"jobs[0].dp": 0}]},
     "error: points[1].jobs[0].dp: Input should be greater than or equal to 1"),
    ({"base": BASE, "points": [{"jobs[3].dp": 2}]},
     "error: points[0].jobs[3].dp: jobs has 1 item(s) in the base scenario"),
    ({"base": BASE, "grid": {"jobs[0].dp": 4}}, "error: grid.jobs[0].dp: must be a non-empty"),
    ({"base": BASE, "grid": {"jobs[0.dp": [1]}}, "error: grid.jobs[0.dp: not a scenario path"),
    ({"base": BASE, "grid": {"routing": ["ecmp", "ecmp"]}}, "error: grid.routing[1]: repeats"),
    ({"base": BASE}, "error: grid: give grid (values per path) or points"),
    ({"base": BASE, "grid": GRID, "extra": 1}, "error: extra: unknown key"),
])
def test_bad_sweeps_exit_2_with_one_line(tmp_path, capsys, sweep, message):
    from hpnsim.cli.main import run

    path = write_sweep(tmp_path, sweep)
    with pytest.raises(SystemExit) as exit_:
        run(["sweep", str(path), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(message), err
    assert "(line " in err or "give grid" in err
    assert not (tmp_path / "out").exists()   # nothing ran


def test_every_point_is_checked_before_any_runs(tmp_path):
    with pytest.raises(InputError, match=r"^grid.jobs\[0\].tp\[2\]: must divide the GPUs"):
        parse_sweep({"base": BASE, "grid": {"jobs[0].tp": [8, 4, 3]}})


def _sigkill_sweep(tmp_path, out: Path) -> Path:
    grid = {"jobs[0].dp": [2, 4], "routing": ["ecmp", "precise", "hpn_dual_plane"]}
    base = json.loads(json.dumps(BASE))
    base["jobs"][0]["iterations"] = 3   # ~1 s a point: the kill lands mid-sweep
    return write_sweep(tmp_path, {"base": base, "grid": grid})


def test_resume_after_sigkill_runs_each_point_once(tmp_path):
    path = _sigkill_sweep(tmp_path, tmp_path / "killed")
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "hpnsim.cli.main", "sweep", str(path), "--workers", "1"]
    proc = subprocess.Popen([*cmd, "--out", str(killed)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows_file = killed / "rows.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (rows_file.exists() and rows_file.read_bytes()):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)   # the sweep and its pool, mid-run
    proc.wait()
    before = read_rows(rows_file)
    assert 1 <= len(before) < 6, "the kill should land after the first row, before the last"
    with open(rows_file, "ab") as handle:   # a write torn by the kill
        handle.write(b'{"point": 5, "key": "torn')
    resumed = subprocess.run([*cmd, "--out", str(killed), "--resume", "--json"],
                             capture_output=True, text=True, check=True)
    assert json.loads(resumed.stdout)["resumed"] == len(before)
    clean = subprocess.run([*cmd, "--out", str(tmp_path / "clean"), "--json"],
                           capture_output=True, text=True, check=True)
    lines = rows_file.read_text().splitlines()
    keys = [json.loads(line)["key"] for line in lines]
    assert len(keys) == 6 and len(set(keys)) == 6   # every point once, none twice
    assert json.loads(resumed.stdout)["rows"] == json.loads(clean.stdout)["rows"]
    assert before == [r for r in read_rows(rows_file)][: len(before)]   # finished rows kept


def test_out_with_rows_needs_resume(tmp_path):
    sweep = parse_sweep({"base": BASE, "points": [{"routing": "precise"}]})
    run_sweep(sweep, tmp_path / "out", workers=1)
    with pytest.raises(InputError, match=r"^--out: .* pass --resume"):
        run_sweep(sweep, tmp_path / "out", workers=1)
    other = parse_sweep({"base": {**BASE, "routing": "precise"},
                         "points": [{"routing": "precise"}]})
    with pytest.raises(InputError, match="another base scenario"):
        run_sweep(other, tmp_path / "out", workers=1, resume=True)


def test_cli_writes_rows_summary_and_plot(tmp_path):
    from typer.testing import CliRunner

    path = write_sweep(tmp_path, {"base": BASE, "grid": GRID})
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--workers", "2",
                                   "--json"])
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} == {"rows.jsonl", "summary.csv", "sweep.json",
                                               "sweep.png", ".hpnsim-files"}


def test_ray_and_process_pool_give_identical_rows(tmp_path):
    ray = pytest.importorskip("ray")
    sweep = parse_sweep({"base": BASE, "grid": GRID})
    local = run_sweep(sweep, tmp_path / "local", workers=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = run_sweep(sweep, tmp_path / "ray", backend="ray")
    finally:
        ray.shutdown()
    assert on_ray.rows == local.rows and len(on_ray.rows) == 4
