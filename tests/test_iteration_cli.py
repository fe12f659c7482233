"""``hpnsim train`` with ZeRO-3 and expert parallelism: JSON fields, table rows, bad input."""

import json

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.workloads.traffic import iteration_traffic


def _train(*args):
    return CliRunner().invoke(app, ["train", *args])


def test_train_cli_zero3_json_reports_fsdp_traffic_and_timeline():
    out = _train("--model", "llama3-8b", "--dp", "8", "--zero", "3", "--seq-len", "1024",
                 "--global-batch", "8", "--json", "--timeline")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["job"]["zero"] == 3 and data["job"]["fsdp_prefetch"] is True
    assert data["exposed_comm"]["dp"] > 0
    # one micro-batch: every parameter gathered twice and reduce-scattered once, ring 7/8
    from hpnsim.workloads import models

    p = models.get("llama3-8b").num_parameters()
    assert data["comm_bytes"]["dp"] == pytest.approx(8 * 3 * 7 / 8 * 2 * p, rel=1e-12)
    kinds = {row["kind"] for row in data["timeline"]}
    assert {"fsdp-ag", "fsdp-rs", "F", "B", "optimizer"} <= kinds
    off = json.loads(_train("--model", "llama3-8b", "--dp", "8", "--zero", "3", "--seq-len",
                            "1024", "--global-batch", "8", "--no-prefetch", "--json").stdout)
    assert off["job"]["fsdp_prefetch"] is False
    assert off["exposed_comm"]["dp"] > data["exposed_comm"]["dp"]


def test_train_cli_ep_json_and_table():
    args = ["--model", "mixtral-8x7b", "--tp", "2", "--dp", "8", "--ep", "8", "--seq-len", "1024",
            "--global-batch", "8", "--bucket-params", "1000000000000"]
    out = _train(*args, "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["job"]["ep"] == 8 and data["exposed_comm"]["ep"] > 0
    assert data["ep_alltoall_time"] > 0
    from hpnsim.workloads.layout import Layout

    lay = Layout(tp=2, dp=8, ep=8, global_batch=8)
    expected = iteration_traffic("mixtral-8x7b", lay, seq_len=1024).by_dimension()["ep"]
    assert data["comm_bytes"]["ep"] == pytest.approx(expected["total_bytes"], rel=1e-12)
    table = _train(*args)
    assert table.exit_code == 0, table.output
    assert "(EP8)" in table.stdout and "MoE all-to-all" in table.stdout
    assert "EP all-to-all" in table.stdout


@pytest.mark.parametrize("args, field", [
    (["--model", "llama3-8b", "--dp", "8", "--ep", "2"], "--ep"),
    (["--model", "mixtral-8x7b", "--dp", "6", "--ep", "4"], "--ep"),
    (["--model", "llama3-8b", "--dp", "2", "--zero", "4"], "--zero"),
])
def test_train_cli_bad_ep_or_zero_exits_2_with_one_line(args, field):
    out = _train(*args)
    assert out.exit_code == 2, out.output
    line = out.output.strip()
    assert line.startswith(f"error: {field}:") and "\n" not in line
