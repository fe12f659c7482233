"""One convention for units (issue 21): MFU and utilizations are fractions in data (JSON,
CSV) and percentages in printed tables; no JSON key of any command holds a percentage.

Table-driven over the commands' JSON: every key naming a share (``mfu``, ``*utilization``,
``*_fraction``) holds a number in [0, 1], and no key says ``pct`` or ``percent``.
"""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
SHARE = re.compile(r"^(mfu|.*utilization|.*_fraction)$")
PERCENT = re.compile(r"pct|percent")

COMMANDS = {
    "run": ["run", str(ROOT / "examples/one_job.yaml"), "--json"],
    "cluster": ["cluster", str(ROOT / "examples/cluster.yaml"), "--json"],
    "collective": ["collective", "--fabric", "hpn7", "--gpus", "64", "--sizes", "1M,64M",
                   "--json"],
    "train": ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--fabric", "hpn7",
              "--json"],
}


def _shares(value, path=""):
    """(path, value) of every share-named key in a JSON value, and the keys saying percent."""
    shares, percent = [], []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}/{key}"
            if PERCENT.search(key):
                percent.append(where)
            if SHARE.match(key) and not isinstance(item, (dict, list)):
                shares.append((where, item))
            inner = _shares(item, where)
            shares += inner[0]
            percent += inner[1]
    elif isinstance(value, list):
        for i, item in enumerate(value):
            inner = _shares(item, f"{path}[{i}]")
            shares += inner[0]
            percent += inner[1]
    return shares, percent


def _run(args):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", list(COMMANDS))
def test_json_shares_are_fractions(name):
    shares, percent = _shares(json.loads(_run(COMMANDS[name])))
    assert percent == []
    assert shares, f"{name} prints no share to check"
    outside = [(p, v) for p, v in shares if v is not None and not 0.0 <= v <= 1.0]
    assert outside == []


def test_printed_mfu_is_the_json_fraction_as_a_percentage():
    args = COMMANDS["train"]
    mfu = json.loads(_run(args))["mfu"]
    assert 0.0 < mfu < 1.0
    table = _run(args[:-1])
    assert f"{100 * mfu:.1f}%" in table
