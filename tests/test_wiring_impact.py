"""What a miswire costs (collectives on the planned and the as-built fabric) and observed
hop lists checked against the planned routes."""

from __future__ import annotations

import json

import pytest
from wiring_tables import built_cables, find, small_plan, write_tables

from hpnsim.cli.main import run
from hpnsim.fabrics import LinkKind
from hpnsim.wiring.asbuilt import as_built
from hpnsim.wiring.impact import run_both, wiring_impact
from hpnsim.wiring.lldp import Sighting
from hpnsim.wiring.planfile import plan_csv

#: one segment of 8 hosts with 2 rails (16 GPUs), 4 Aggs per plane
SEGMENT = {"segments": "1", "hosts_per_segment": "8", "backup_hosts": "0", "rails": "2",
           "tor_uplinks": "4", "aggs_per_plane": "4"}


def _sightings(cables):
    out = []
    for (ad, ap), (bd, bp) in cables:
        out += [Sighting(ad, ap, bd, bp, "test"), Sighting(bd, bp, ad, ap, "test")]
    return out


def _swapped(plan, first, second):
    return _sightings(built_cables(plan, swaps=[(find(plan, *first), find(plan, *second))]))


def _access(fabric, host, rail, port):
    """Where a NIC port's access link goes, by name."""
    nic = fabric.find_node(f"pod0/seg0/host{host}/nic-r{rail}")
    links = fabric.out_of(nic)
    link = [int(k) for k in links if fabric.link_kind[k] == LinkKind.ACCESS
            and fabric.link_port[k] == port][0]
    return fabric.node_name(fabric.link_dst[link])


def test_cross_plane_swap_on_one_nic_breaks_the_one_path_property():
    plan = small_plan(SEGMENT)
    seen = _swapped(plan, ("pod0-seg0-host0", "nic0p0"), ("pod0-seg0-host0", "nic0p1"))
    built = as_built(plan, seen)
    assert _access(built.fabric, 0, 0, 0) == "pod0/seg0/tor-r0-p1"
    assert _access(built.fabric, 0, 0, 1) == "pod0/seg0/tor-r0-p0"
    assert _access(built.fabric, 1, 0, 0) == "pod0/seg0/tor-r0-p0"
    rail0 = list(range(0, 16, 2))
    # a ring sends one flow to its next GPU and takes one from its previous: the swapped
    # NIC's ports are only relabelled for it, so it runs exactly as planned
    ring = run_both(plan, built, "allreduce", rail0, 2**28, "hpn_dual_plane")
    assert ring["algo"] == "ring" and ring["busbw_as_built"] == ring["busbw_planned"]
    assert ring["colliding_links"] == 0
    # an all-to-all's ports are balanced for both ends on the rule port p -> plane p ->
    # port p; flows of host 0 now arrive on the other port: receive ports collide
    a2a = run_both(plan, built, "alltoall", rail0, 2**28, "hpn_dual_plane")
    assert a2a["busbw_as_built"] < 0.9 * a2a["busbw_planned"]
    assert a2a["colliding_links"] > 0
    for item in a2a["colliding"]:            # only rail 0's access links carry other loads
        assert "tor-r0-" in item["link"] and "nic-r0" in item["link"], item
        assert item["flows"] > item["flows_planned"]


def test_cross_plane_swap_between_hosts_cuts_the_rail():
    plan = small_plan(SEGMENT)
    seen = _swapped(plan, ("pod0-seg0-host0", "nic0p0"), ("pod0-seg0-host1", "nic0p1"))
    result = wiring_impact(plan, seen, plan.devices)
    assert result["swaps"][0][0]["class"] == "across_planes"
    by_label = {c["label"]: c for c in result["collectives"]}
    assert set(by_label) == {"rail 0 of pod0-seg0", "segment pod0-seg0"}
    ring = by_label["rail 0 of pod0-seg0"]
    # host 0's rail-0 NIC now has both ports in plane 1, host 1's both in plane 0: with no
    # switch joining the planes, GPU 0 and GPU 2 share no path
    assert ring["reachable"] is False and "unreachable" in ring["why"]
    assert ring["busbw_planned"] > 0 and ring["busbw_as_built"] == 0.0


def test_cross_rail_swap_sends_rail_traffic_through_the_agg_tier():
    plan = small_plan(SEGMENT)
    seen = _swapped(plan, ("pod0-seg0-host0", "nic0p0"), ("pod0-seg0-host0", "nic1p0"))
    result = wiring_impact(plan, seen, plan.devices)
    assert result["swaps"][0][0]["class"] == "across_rails"
    for rail in (0, 1):
        ring = {c["label"]: c for c in result["collectives"]}[f"rail {rail} of pod0-seg0"]
        # planned, a rail of one segment never leaves its ToRs; as built, the flows of the
        # swapped port go up to an Agg and down to the other rail's ToR
        assert ring["uplink_bytes_planned"] == 0.0
        assert ring["uplink_bytes_as_built"] > 0.0


def test_a_swap_within_one_tor_costs_nothing():
    plan = small_plan(SEGMENT)
    seen = _swapped(plan, ("pod0-seg0-host0", "nic0p0"), ("pod0-seg0-host1", "nic0p0"))
    result = wiring_impact(plan, seen, plan.devices)
    assert result["swaps"][0][0]["class"] == "within_switch"
    assert result["changed_nodes"] == [] and result["collectives"] == []


def test_impact_and_paths_on_the_command_line(tmp_path, capsys):
    plan = small_plan(SEGMENT)
    swap = (find(plan, "pod0-seg0-host0", "nic0p0"), find(plan, "pod0-seg0-host0", "nic1p0"))
    write_tables(tmp_path / "lldp", built_cables(plan, swaps=[swap]), sorted(plan.devices))
    (tmp_path / "plan.csv").write_text(plan_csv(plan))
    with pytest.raises(SystemExit) as done:
        run(["wiring", "impact", str(tmp_path / "plan.csv"), "--lldp", str(tmp_path / "lldp"),
             "--size", "256MiB"])
    out = capsys.readouterr().out
    assert done.value.code in (0, None), out
    assert "swap (across_rails): pod0-seg0-host0 nic0p0 <-> pod0-seg0-host0 nic1p0" in out
    assert "rail 0 of pod0-seg0: allreduce (ring) of 8 GPUs, 256.00 MiB" in out
    # hop lists: ToR r0-p0 has hosts on swp1-8 and Agg uplinks on swp9-12
    paths = [
        # host 1 -> host 2 on rail 1, plane 1: one ToR, as planned
        {"source": {"device": "pod0-seg0-host1", "port": "nic1p1"},
         "destination": {"device": "pod0-seg0-host2", "port": "nic1p1"},
         "hops": [["pod0-seg0-tor-r1-p1", "swp3"]]},
        # host 0's rail-0 port 0 is cabled to rail 1's ToR: the first hop departs
        {"source": {"device": "pod0-seg0-host0", "port": "nic0p0"},
         "destination": {"device": "pod0-seg0-host1", "port": "nic0p0"},
         "hops": [["pod0-seg0-tor-r1-p0", "swp9"], ["pod0-agg-p0-0", "swp1"],
                  ["pod0-seg0-tor-r0-p0", "swp2"]]},
        # a detour through an Agg between two hosts of one ToR leaves the shortest path
        {"source": {"device": "pod0-seg0-host1", "port": "nic0p1"},
         "destination": {"device": "pod0-seg0-host2", "port": "nic0p1"},
         "hops": [["pod0-seg0-tor-r0-p1", "swp9"], ["pod0-agg-p1-0", "swp1"],
                  ["pod0-seg0-tor-r0-p1", "swp3"]]},
    ]
    (tmp_path / "paths.jsonl").write_text("".join(json.dumps(p) + "\n" for p in paths))
    with pytest.raises(SystemExit) as done:
        run(["wiring", "check", str(tmp_path / "plan.csv"), "--paths",
             str(tmp_path / "paths.jsonl"), "--json"])
    assert done.value.code == 1
    checked = json.loads(capsys.readouterr().out)["paths"]
    assert [(p["ok"], p["departs_at"]) for p in checked] == [(True, None), (False, 0),
                                                             (False, 0)]
    assert checked[1]["why"] == ("reached pod0-seg0-tor-r1-p0; the plan's cable from "
                                 "pod0-seg0-host0 nic0p0 goes to pod0-seg0-tor-r0-p0 swp1")
    assert checked[2]["why"].startswith("pod0-seg0-tor-r0-p1 swp9 leads to pod0-agg-p1-0, "
                                        "away from pod0-seg0-tor-r0-p1")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**paths[0], "source": {"device": "pod0-seg0-tor-r0-p0",
                                                      "port": "swp1"}}) + "\n")
    with pytest.raises(SystemExit) as done:
        run(["wiring", "check", str(tmp_path / "plan.csv"), "--paths", str(bad)])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1
    assert "bad.jsonl: line 1: source pod0-seg0-tor-r0-p0 swp1 is no host port" in err[0]


def test_a_cable_moved_to_a_free_port_of_its_switch_changes_no_link():
    plan = small_plan(SEGMENT)
    cables = built_cables(plan, missing=[find(plan, "pod0-seg0-host3", "nic1p1")])
    cables.append((("pod0-seg0-host3", "nic1p1"), ("pod0-seg0-tor-r1-p1", "swp20")))
    result = wiring_impact(plan, _sightings(cables), plan.devices)
    assert [u["class"] for u in result["unexpected"]] == ["within_switch"]
    assert [m["why"] for m in result["missing"]] == ["its ends see pod0-seg0-tor-r1-p1 swp20"]
    assert result["changed_nodes"] == [] and result["collectives"] == []
    # the same cable on a free port of the other plane's ToR moves the link
    cables[-1] = (("pod0-seg0-host3", "nic1p1"), ("pod0-seg0-tor-r1-p0", "swp20"))
    moved = as_built(plan, _sightings(cables))
    assert _access(moved.fabric, 3, 1, 1) == "pod0/seg0/tor-r1-p0"
    assert moved.state is None
    report = wiring_impact(plan, _sightings(cables), plan.devices)
    assert [u["class"] for u in report["unexpected"]] == ["across_planes"]
