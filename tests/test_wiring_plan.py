"""The cabling plan: the BOM's cables and optics, port numbering, names, plan files."""

from __future__ import annotations

import pytest

from hpnsim.cli.main import run
from hpnsim.fabrics import LinkKind, build_fabric
from hpnsim.fabrics.bom import bill_of_materials
from hpnsim.wiring.names import MAX_PORT_NAME
from hpnsim.wiring.plan import cabling_plan
from hpnsim.wiring.planfile import plan_csv, read_plan

BOM_CASES = [
    ("hpn7", {}),                                    # the published 15,360-GPU pod
    ("hpn7", {"segments": "2", "dual_tor": "stacked"}),
    ("hpn7", {"segments": "2", "dual_tor": "single"}),
    ("hpn7", {"segments": "2", "frontend": "true"}),
    ("hpn7", {"pods": "2", "segments": "2"}),
    ("hpn7", {"segments": "2", "gpus_per_pcie_switch": "2"}),
    ("dcn_plus", {"pods": "2"}),
    ("rail_optimized", {"segments": "2"}),
    ("rail_only", {"segments": "2"}),
    ("fat_tree", {"k": "8"}),
    ("lingjun", {}),
]


@pytest.mark.parametrize(("template", "options"), BOM_CASES,
                         ids=[f"{t}-{'-'.join(o.values()) or 'default'}" for t, o in BOM_CASES])
def test_plan_counts_the_cables_and_optics_of_the_bom(template, options):
    fabric = build_fabric(template, options)
    plan = cabling_plan(fabric, template, options)
    bom = bill_of_materials(fabric)
    counts = plan.counts()
    assert counts["backend"]["cables"] == bom["cables"]
    assert counts["backend"]["transceivers"] == bom["transceivers"]
    if "frontend" in bom:
        assert counts["frontend"]["cables"] == bom["frontend"]["cables"]
        assert counts["frontend"]["transceivers"] == bom["frontend"]["transceivers"]
    # every port is one end of one cable, and every name is a Linux interface name
    assert len(plan.ends) == 2 * len(plan.cables)
    ports = {port for _, port in plan.ends}
    assert max(len(p) for p in ports) <= MAX_PORT_NAME
    assert not any("/" in d for d in plan.devices)


def test_hpn_ports_are_numbered_hosts_then_backups_then_uplinks():
    hosts, backups, uplinks, aggs = 3, 2, 4, 2     # 2 parallel links per ToR-Agg pair
    options = {"segments": "2", "hosts_per_segment": str(hosts), "backup_hosts": str(backups),
               "rails": "2", "tor_uplinks": str(uplinks), "aggs_per_plane": str(aggs)}
    plan = cabling_plan(build_fabric("hpn7", options), "hpn7", options)
    port = {(c.a_device, c.a_port): (c.b_device, c.b_port) for c in plan.cables}
    for seg in range(2):
        for rail in range(2):
            for plane in range(2):
                tor = f"pod0-seg{seg}-tor-r{rail}-p{plane}"
                for h in range(hosts):
                    host = f"pod0-seg{seg}-host{seg * hosts + h}"
                    assert port[(host, f"nic{rail}p{plane}")] == (tor, f"swp{h + 1}")
                for b in range(backups):
                    assert port[(f"pod0-seg{seg}-backup{b}", f"nic{rail}p{plane}")] == \
                        (tor, f"swp{hosts + b + 1}")
                for u in range(uplinks):
                    # ToR uplink u goes to Agg u // 2 of its plane; the Agg numbers its down
                    # ports by ToR of its plane (segment, rail), then parallel link
                    agg = f"pod0-agg-p{plane}-{u // 2}"
                    tor_of_plane = seg * 2 + rail
                    assert port[(tor, f"swp{hosts + backups + u + 1}")] == \
                        (agg, f"swp{tor_of_plane * 2 + u % 2 + 1}")


def test_stacked_and_single_tor_cables():
    stacked = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "0", "rails": "1",
               "tor_uplinks": "2", "aggs_per_plane": "2", "dual_tor": "stacked",
               "peer_links": "2"}
    plan = cabling_plan(build_fabric("hpn7", stacked), "hpn7", stacked)
    peers = [c for c, cls in zip(plan.cables, plan.link_class, strict=True) if cls == "peer"]
    # two peer cables between the pair, after the 2 host ports and before the uplinks
    assert [(c.a_device, c.a_port, c.b_device, c.b_port) for c in peers] == [
        ("pod0-seg0-tor-r0-p0", "swp3", "pod0-seg0-tor-r0-p1", "swp3"),
        ("pod0-seg0-tor-r0-p0", "swp4", "pod0-seg0-tor-r0-p1", "swp4")]
    single = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "0", "rails": "1",
              "tor_uplinks": "2", "aggs_per_plane": "2", "dual_tor": "single"}
    plan = cabling_plan(build_fabric("hpn7", single), "hpn7", single)
    access = [c.key() for c, cls in zip(plan.cables, plan.link_class, strict=True)
              if cls == "access"]
    # a bonded NIC: both ports to the one ToR of its rail, on consecutive ports
    assert access[:2] == [
        {"a_device": "pod0-seg0-host0", "a_port": "nic0p0", "b_device": "pod0-seg0-tor-r0",
         "b_port": "swp1"},
        {"a_device": "pod0-seg0-host0", "a_port": "nic0p1", "b_device": "pod0-seg0-tor-r0",
         "b_port": "swp2"}]


def test_in_host_rows_list_every_nvlink_and_pcie_link():
    options = {"segments": "1", "hosts_per_segment": "2", "backup_hosts": "0"}
    fabric = build_fabric("hpn7", options)
    plain = cabling_plan(fabric, "hpn7", options)
    full = cabling_plan(fabric, "hpn7", options, in_host=True)
    in_host = int(((fabric.link_kind == LinkKind.NVLINK) | (fabric.link_kind == LinkKind.PCIE))
                  .sum()) // 2
    assert len(full.cables) == len(plain.cables) + in_host == len(plain.cables) + 2 * 16
    assert full.cables[len(plain.cables)].key() == {
        "a_device": "pod0-seg0-host0", "a_port": "gpu0-nic0", "b_device": "pod0-seg0-host0",
        "b_port": "nic0-gpu0"}
    assert len(full.ends) == 2 * len(full.cables)


def test_same_parameters_same_plan_byte_for_byte():
    a = plan_csv(cabling_plan(build_fabric("hpn7", {"segments": "1"}), "hpn7",
                              {"segments": "1"}))
    b = plan_csv(cabling_plan(build_fabric("hpn7", {"segments": "1"}), "hpn7",
                              {"segments": "1"}))
    assert a == b and a.count("\n") == 2 + 128 * 8 * 2 + 8 * 8 * 2 + 16 * 60


def _refused(capsys, argv, *words):
    with pytest.raises(SystemExit) as done:
        run([str(a) for a in argv])
    out = capsys.readouterr()
    assert done.value.code == 2, out
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_plan_file_round_trip_and_bad_plans(tmp_path, capsys):
    path = tmp_path / "plan.csv"
    with pytest.raises(SystemExit) as done:
        run(["wiring", "plan", "fat_tree", "--k", "4", "--out", str(path)])
    assert done.value.code in (0, None)
    text = path.read_text()
    assert len(read_plan(path).cables) == 48
    lines = text.splitlines()
    cases = {
        "not_a_plan.csv": ("\n".join(lines[1:]), "not an hpnsim wiring plan"),
        "bad_fabric.csv": (text.replace("--k 4", "--k 3", 1), "cannot be built"),
        "bad_row.csv": (text.replace("pod0-seg0-tor,swp1", "pod0-seg0-tor,swp7", 1),
                        "line 3: pod0-seg0-host0 nic0p0 - pod0-seg0-tor swp7 is no cable"),
        "short.csv": ("\n".join(lines[:-1]) + "\n", "lacks 1 of the 48 cables"),
        "twice.csv": (text + lines[2] + "\n", "line 51: repeats the cable of line 3"),
        "medium.csv": (text.replace("400G-MM", "400G-SM", 1), "not 400G 400G-SM"),
    }
    for name, (body, message) in cases.items():
        bad = tmp_path / name
        bad.write_text(body)
        _refused(capsys, ["wiring", "check", bad, "--lldp", tmp_path], name, message)
    # reversed ends name the same cable
    flipped = lines[:2] + [",".join(lines[2].split(",")[2:4] + lines[2].split(",")[:2]
                                    + lines[2].split(",")[4:])] + lines[3:]
    (tmp_path / "flipped.csv").write_text("\n".join(flipped) + "\n")
    assert len(read_plan(tmp_path / "flipped.csv").cables) == 48


def test_json_plan_is_read_back(tmp_path, capsys):
    with pytest.raises(SystemExit):
        run(["wiring", "plan", "fat_tree", "--k", "4", "--json"])
    data = capsys.readouterr().out
    (tmp_path / "plan.json").write_text(data)
    plan = read_plan(tmp_path / "plan.json")
    assert len(plan.cables) == 48 and plan.template == "fat_tree"
    broken = data.replace('"swp1"', '"swp99"', 1)
    (tmp_path / "broken.json").write_text(broken)
    _refused(capsys, ["wiring", "check", tmp_path / "broken.json", "--lldp", tmp_path],
             "broken.json", "cables[0]: ", "is no cable of fat_tree --k 4")
