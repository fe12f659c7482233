"""``hpnsim collective``: table, JSON and one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app

SMALL = ["collective", "--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "4",
         "--backup-hosts", "0", "--tor-uplinks", "2", "--aggs-per-plane", "2"]


def invoke(*args):
    return CliRunner().invoke(app, [*SMALL, *args])


def test_table_has_nccl_tests_columns_and_average_line():
    result = invoke("--gpus", "32", "--algo", "hier", "--routing", "hpn_dual_plane",
                    "--sizes", "1M:4M")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "time(us)" in lines[1] and "busbw" in lines[1] and "bottleneck" in lines[1]
    rows = [line for line in lines if line and not line.startswith("#")]
    assert [int(r.split()[0]) for r in rows] == [2**20, 2**21, 2**22]
    assert [int(r.split()[1]) for r in rows] == [2**18, 2**19, 2**20]  # float elements
    busbw = [float(r.split()[7]) for r in rows]
    avg = float(lines[-1].split(":")[1])
    assert lines[-1].startswith("# Avg bus bandwidth") and avg == pytest.approx(
        sum(busbw) / 3, abs=0.01)


def test_json_matches_definitions():
    result = invoke("--gpus", "16", "--algo", "ring", "--sizes", "8M", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert row["size"] == 8 * 2**20
    assert row["algbw"] == pytest.approx(row["size"] / (row["time_us"] * 1e-6) / 1e9)
    assert row["busbw"] == pytest.approx(row["algbw"] * 2 * 15 / 16)


@pytest.mark.parametrize("args, field", [
    (["--gpus", "4096"], "--gpus"), (["--op", "bogus"], "--op"),
    (["--algo", "magic"], "--algo"), (["--routing", "random"], "--routing"),
    (["--sizes", "0"], "--sizes"), (["--sizes", "12 parsecs"], "--sizes"),
    (["--op", "alltoall", "--algo", "tree"], "--algo"),
    (["--no-such-param", "3"], "--no-such-param"), (["--gpus", "1"], "--gpus"),
    (["--sizes", "1:3"], "--sizes"),
])
def test_bad_input_exits_2_with_one_line(args, field):
    result = invoke("--gpus", "8", "--sizes", "1M", *args) if "--gpus" not in args and \
        "--sizes" not in args else invoke(*args)
    assert result.exit_code == 2
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field}:")
