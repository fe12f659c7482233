"""GPU groups as indices and ranges (``0-127,1024-1151``): one parser for ``--gpus`` and a
scenario's ``collectives[].gpus``; expected lists are built by hand from the ranges."""

from __future__ import annotations

import json
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.scenario.collectives import CollectiveSpec
from hpnsim.units import parse_index_ranges


def test_two_segment_ranges_are_exactly_those_gpus():
    expected = list(range(0, 128)) + list(range(1024, 1152))
    assert parse_index_ranges("0-127,1024-1151") == expected
    assert parse_index_ranges("5") == [5]
    assert parse_index_ranges(" 8 - 9 , 0 ") == [8, 9, 0]       # rank order as written
    assert parse_index_ranges([16, "0-1"]) == [16, 0, 1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5)), min_size=1, max_size=6))
def test_disjoint_ranges_round_trip(pieces):
    # lay the ranges out disjointly: each starts 10 past the previous end
    text, expected, start = [], [], 0
    for gap, length in pieces:
        low = start + gap
        high = low + length
        text.append(f"{low}-{high}" if length else str(low))
        expected.extend(range(low, high + 1))
        start = high + 10
    assert parse_index_ranges(",".join(text)) == expected


@pytest.mark.parametrize("bad", ["3-1", "0-3,2", "x", "0-3,,4", "-1", [1, -2], [True]])
def test_bad_ranges_are_input_errors_naming_the_field(bad):
    with pytest.raises(InputError) as err:
        parse_index_ranges(bad, "--gpus")
    assert err.value.field == "--gpus"


def test_scenario_gpus_take_the_same_ranges():
    spec = CollectiveSpec.model_validate({"gpus": "0-3,8-11", "sizes": "1M"})
    assert spec.gpus == [0, 1, 2, 3, 8, 9, 10, 11]
    assert CollectiveSpec.model_validate({"gpus": "16"}).gpus == 16     # a count
    assert CollectiveSpec.model_validate({"gpus": ["0-1", 8]}).gpus == [0, 1, 8]


def test_cli_gpus_ranges_run_the_same_collective_as_the_list(tmp_path):
    runner = CliRunner()
    common = ["collective", "--fabric", "hpn7", "--segments", "2", "--hosts_per_segment", "2",
              "--backup_hosts", "0", "--tor_uplinks", "2", "--aggs_per_plane", "2",
              "--sizes", "64M", "--routing", "hpn_dual_plane", "--json"]
    by_range = runner.invoke(app, [*common, "--gpus", "0-7,16-23"])
    assert by_range.exit_code == 0, by_range.output
    scenario = tmp_path / "s.yaml"
    scenario.write_text(textwrap.dedent("""\
        fabric: {template: hpn7, segments: 2, hosts_per_segment: 2, backup_hosts: 0,
                 tor_uplinks: 2, aggs_per_plane: 2}
        routing: hpn_dual_plane
        collectives:
          - gpus: [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]
            sizes: 64M
        """))
    by_list = runner.invoke(app, ["run", str(scenario), "--json"])
    assert by_list.exit_code == 0, by_list.output
    got = json.loads(by_range.stdout)[0]
    want = json.loads(by_list.stdout)["collectives"][0]["per_size"][0]
    assert got["n_gpus"] == 16 and got["time"] == want["time"]


def test_cli_bad_range_is_one_line_exit_2():
    out = CliRunner().invoke(app, ["collective", "--fabric", "fat_tree", "--k", "4",
                                   "--gpus", "0-3,2", "--sizes", "1M"])
    assert out.exit_code == 2
    assert out.output.strip() == "error: --gpus: GPU 2 appears twice, got '0-3,2'"
