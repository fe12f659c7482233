"""The check of a built fabric against its plan, on neighbour tables written by hand in
lldpd's JSON shapes (one interface as an object, several as a list, json0), exit codes and
bad input."""

from __future__ import annotations

import json

import pytest
from wiring_tables import built_cables, find, small_plan, write_tables

from hpnsim.cli.main import run
from hpnsim.wiring.diff import check
from hpnsim.wiring.lldp import read_neighbour_tables
from hpnsim.wiring.planfile import plan_csv


def _key(a_device, a_port, b_device, b_port):
    return {"a_device": a_device, "a_port": a_port, "b_device": b_device, "b_port": b_port}


def _run(argv, capsys):
    with pytest.raises(SystemExit) as done:
        run([str(a) for a in argv])
    return done.value.code or 0, capsys.readouterr()


@pytest.fixture
def planted(tmp_path):
    """A small HPN with a swap within one ToR, a cross-plane swap, a cross-rail swap, a
    missing cable and a cable nobody planned; tables of every device, some in json0."""
    plan = small_plan()
    within = (find(plan, "pod0-seg0-host0", "nic0p0"), find(plan, "pod0-seg0-host1", "nic0p0"))
    planes = (find(plan, "pod0-seg0-host0", "nic1p0"), find(plan, "pod0-seg0-host0", "nic1p1"))
    rails = (find(plan, "pod0-seg0-host1", "nic0p1"), find(plan, "pod0-seg0-host1", "nic1p1"))
    missing = find(plan, "pod0-seg0-backup0", "nic1p0")
    cables = built_cables(plan, swaps=[within, planes, rails], missing=[missing])
    cables.append((("pod0-seg0-tor-r0-p0", "swp9"), ("pod0-seg0-tor-r1-p0", "swp9")))
    (tmp_path / "plan.csv").write_text(plan_csv(plan))
    write_tables(tmp_path / "lldp", cables, sorted(plan.devices),
                 json0={"pod0-agg-p0-0", "pod0-seg0-host1"})
    return plan, tmp_path


def test_check_finds_exactly_the_planted_miswires(planted):
    plan, folder = planted
    report = check(plan, *read_neighbour_tables(folder / "lldp", plan.devices))
    assert not report.ok
    assert report.cables == len(plan.cables) == 2 * 2 * 3 + 4 * 2
    assert report.matched == report.cables - 6 - 1
    swaps = {tuple((c["a_device"], c["a_port"]) for c in s): (s[0]["class"], s[0]["fix"])
             for s in report.swaps}
    assert swaps == {
        (("pod0-seg0-host0", "nic0p0"), ("pod0-seg0-host1", "nic0p0")):
            ("within_switch", "exchange the cables in pod0-seg0-tor-r0-p0 swp1 and "
                              "pod0-seg0-tor-r0-p0 swp2"),
        (("pod0-seg0-host0", "nic1p0"), ("pod0-seg0-host0", "nic1p1")):
            ("across_planes", "exchange the cables in pod0-seg0-host0 nic1p0 and "
                              "pod0-seg0-host0 nic1p1"),
        (("pod0-seg0-host1", "nic0p1"), ("pod0-seg0-host1", "nic1p1")):
            ("across_rails", "exchange the cables in pod0-seg0-host1 nic0p1 and "
                             "pod0-seg0-host1 nic1p1"),
    }
    assert report.swaps[1][0]["found"] == {"device": "pod0-seg0-tor-r1-p1", "port": "swp1"}
    assert [{k: m[k] for k in ("a_device", "a_port", "b_device", "b_port")}
            for m in report.missing] == [_key("pod0-seg0-backup0", "nic1p0",
                                              "pod0-seg0-tor-r1-p0", "swp3")]
    assert report.missing[0]["why"] == "not seen from either end"
    assert [(u["a_device"], u["a_port"], u["b_device"], u["b_port"], u["class"])
            for u in report.unexpected] == [
        ("pod0-seg0-tor-r0-p0", "swp9", "pod0-seg0-tor-r1-p0", "swp9", "unplanned")]
    assert report.one_sided == []


def test_cli_exit_codes_and_json(planted, capsys):
    plan, folder = planted
    code, out = _run(["wiring", "check", folder / "plan.csv", "--lldp", folder / "lldp",
                      "--json"], capsys)
    data = json.loads(out.out)
    assert code == 1
    assert {"cables", "matched", "missing", "unexpected", "swaps"} <= set(data)
    assert all(len(s) == 2 and {"a_device", "a_port", "b_device", "b_port"} <= set(s[0])
               for s in data["swaps"])
    clean = folder / "clean"
    write_tables(clean, built_cables(plan), sorted(plan.devices))
    code, out = _run(["wiring", "check", folder / "plan.csv", "--lldp", clean], capsys)
    assert code == 0, out
    assert f"{len(plan.cables)} matched, 0 missing, 0 unexpected, 0 swaps" in out.out


def test_single_interface_tables_port_descriptions_and_one_sided(tmp_path):
    """fat_tree(4): every host has one cable, so its table is lldpd's single-interface
    object; port IDs are MACs, the interface name is the description (lldpd's default)."""
    plan = small_plan({"k": "4"}, template="fat_tree")
    a, b = find(plan, "pod0-seg0-host0", "nic0p0"), find(plan, "pod1-seg1-host7", "nic0p0")
    cables = built_cables(plan, swaps=[(a, b)])
    silent = ("pod3-seg1-host15", "pod3-seg1-tor")     # host 15 sends no table
    folder = write_tables(tmp_path, cables, sorted(plan.devices - {silent[0]}),
                          port_as_descr=True)
    one = json.loads((folder / "pod0-seg0-host1.json").read_text())
    assert isinstance(one["lldp"]["interface"], dict)           # the single-interface shape
    # a cable listed by only one end whose far device has a table: one-sided
    tor = json.loads((folder / "pod0-seg1-tor.json").read_text())
    kept = [e for e in tor["lldp"]["interface"] if "swp1" not in e]
    (folder / "pod0-seg1-tor.json").write_text(json.dumps({"lldp": {"interface": kept}}))
    report = check(plan, *read_neighbour_tables(folder, plan.devices))
    assert [[c["a_device"] for c in s] + [s[0]["class"]] for s in report.swaps] == [
        ["pod0-seg0-host0", "pod1-seg1-host7", "between_hosts"]]
    assert report.one_sided == [{"a_device": "pod0-seg1-host2", "a_port": "nic0p0",
                                 "b_device": "pod0-seg1-tor", "b_port": "swp1",
                                 "seen_from": "pod0-seg1-host2",
                                 "not_listed_by": "pod0-seg1-tor"}]
    assert report.not_reporting == 1 and report.missing == [] and report.unexpected == []


def test_bad_neighbour_tables_exit_2_naming_the_file(planted, capsys):
    plan, folder = planted
    bad = {
        "pod0-seg0-host0.json": ("{not json", "not valid JSON"),
        "pod0-seg0-host1.json": (json.dumps({"neighbours": []}), 'no top-level "lldp"'),
        "pod0-seg9-host9.json": (json.dumps({"lldp": {}}), "'pod0-seg9-host9' is not in the "
                                                           "plan"),
        "pod0-agg-p0-1.json": (json.dumps({"lldp": {"interface": {"swp1": {
            "chassis": {"mgmt-switch": {}}, "port": {"descr": "eth0"}}}}}),
            "neighbour 'mgmt-switch' is not a device of the plan"),
    }
    for name, (text, message) in bad.items():
        tables = folder / f"bad-{name}"
        tables.mkdir()
        (tables / name).write_text(text)
        code, out = _run(["wiring", "check", folder / "plan.csv", "--lldp", tables], capsys)
        lines = out.err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and name in lines[0] and message in lines[0], \
            out.err
        assert out.out == ""
