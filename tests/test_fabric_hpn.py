"""HPN 7.0 pinned to the published pod (SIGCOMM 2024) and the fabric's structural invariants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpnsim.errors import InputError
from hpnsim.fabrics import UNREACHABLE, LinkKind, NodeKind, hpn7
from hpnsim.fabrics.analysis import counts, oversubscription, path_choices, reach_table


@pytest.fixture(scope="module")
def pod():
    return hpn7()


def test_published_pod_counts(pod):
    c = counts(pod)
    assert c["gpus"] == 15_360
    assert c["hosts"] == 1_920
    assert c["backup_hosts"] == 15 * 8
    assert c["switches"] == {"tor": 240, "agg": 120, "core": 0}
    ratio = oversubscription(pod)
    assert ratio["tor"] == pytest.approx(128 * 200 / (60 * 400))  # 1.067:1
    assert ratio["tor"] == pytest.approx(1.067, abs=5e-4)
    assert ratio["agg"] == pytest.approx(15.0)


def test_each_tor_one_link_to_each_agg_of_its_plane(pod):
    up = np.flatnonzero((pod.link_kind == LinkKind.UPLINK)
                        & (pod.node_kind[pod.link_src] == NodeKind.TOR))
    tor, agg = pod.link_src[up], pod.link_dst[up]
    assert (pod.node_plane[tor] == pod.node_plane[agg]).all()
    pairs = np.unique(tor.astype(np.int64) * pod.n_nodes + agg)
    assert len(pairs) == len(up) == 240 * 60  # no parallel links, 60 distinct Aggs per ToR
    assert (np.bincount(tor)[pod.nodes_where(kind=NodeKind.TOR)] == 60).all()
    for plane in (0, 1):
        aggs = pod.nodes_where(kind=NodeKind.AGG, plane=plane)
        assert len(aggs) == 60
        per_agg = np.bincount(agg, minlength=pod.n_nodes)[aggs]
        assert (per_agg == 120).all()  # 15 segments x 8 rails of this plane


def test_port_p_goes_to_plane_p_on_its_rail(pod):
    tor = pod.gpu_tor
    assert tor.shape == (15_360, 2)
    assert (pod.node_plane[tor[:, 0]] == 0).all() and (pod.node_plane[tor[:, 1]] == 1).all()
    gpu = pod.gpu_node
    for p in (0, 1):
        assert (pod.node_rail[tor[:, p]] == pod.node_rail[gpu]).all()
        assert (pod.node_segment[tor[:, p]] == pod.node_segment[gpu]).all()
        assert (pod.link_port[pod.gpu_access_link[:, p]] == p).all()
    # one ToR pair serves 128 GPUs (one per host)
    assert (np.bincount(tor[:, 0])[pod.nodes_where(kind=NodeKind.TOR, plane=0)] == 128).all()


def test_links_pair_up_and_lookup_roundtrips(pod):
    lid = np.arange(pod.n_links)
    assert (pod.link_src[lid ^ 1] == pod.link_dst).all()
    sample = np.random.default_rng(0).choice(pod.n_links, 500, replace=False)
    assert (pod.link_ids(pod.link_src[sample], pod.link_dst[sample]) == sample).all()
    assert (pod.link_ids(pod.gpu_node[:5], pod.gpu_node[5:10]) == -1).all()
    ptr, out = pod.out_ptr, pod.out_links
    assert (pod.link_src[out] == np.repeat(np.arange(pod.n_nodes), np.diff(ptr))).all()


def test_capacities_follow_the_parameters(pod):
    cap = {k: np.unique(pod.link_capacity[pod.link_kind == k]) for k in LinkKind}
    assert cap[LinkKind.ACCESS].tolist() == [25e9]            # 200G per port
    assert cap[LinkKind.UPLINK].tolist() == [50e9]            # 400G
    assert cap[LinkKind.NVLINK].tolist() == [200e9]           # 400 GB/s bidirectional / 2
    assert cap[LinkKind.PCIE] == pytest.approx(32e9 * 16 * 128 / 130 / 8)


def test_names_roundtrip(pod):
    tor = pod.gpu_tor[5 * 1024 + 3 * 8 + 5, 1]       # segment 5, host 3 of it, rail 5, port 1
    assert pod.node_name(tor) == "pod0/seg5/tor-r5-p1"
    for node in np.random.default_rng(1).choice(pod.n_nodes, 50, replace=False):
        assert pod.find_node(pod.node_name(node)) == node
    with pytest.raises(InputError):
        pod.find_node("pod0/seg99/tor-r0-p0")


def test_path_choices_single_pod_and_planes_disjoint():
    f = hpn7(segments=3)
    assert path_choices(f) == {"same_segment": 1, "cross_segment": 60, "cross_pod": None}
    rows = f.switch_row
    a, b = f.gpu_tor[0]
    assert f.switch_distance[rows[a], rows[b]] == UNREACHABLE  # the two planes never meet
    assert f.switch_distance[rows[a], rows[f.gpu_tor[2048, 0]]] == 2


def test_multi_pod_core_closed_form():
    pods = 3
    f = hpn7(pods=pods, segments=2)
    per_pod = min(60, 128 // pods)              # Aggs of one pod on one core
    groups = -(-60 // per_pod)
    assert counts(f)["switches"]["core"] == 2 * 8 * groups
    core_links = f.link_kind == LinkKind.CORE
    assert core_links.sum() == 2 * pods * 120 * 8
    core_nodes = f.nodes_where(kind=NodeKind.CORE)
    assert np.bincount(f.link_src[core_links], minlength=f.n_nodes)[core_nodes].max() \
        <= 128
    # cross-pod: 60 Aggs x 8 uplinks x the Aggs of the destination pod behind that core
    assert path_choices(f)["cross_pod"] == 8 * sum(
        min(per_pod, 60 - (j // per_pod) * per_pod) for j in range(60))


def test_dual_tor_modes():
    stacked = hpn7(segments=1, dual_tor="stacked")
    peer = stacked.link_kind == LinkKind.PEER
    assert peer.sum() == 2 * 8 and stacked.meta["backup_hosts_per_segment"] == 6
    assert (stacked.node_rail[stacked.link_src[peer]] == stacked.node_rail[stacked.link_dst[peer]]).all()
    single = hpn7(segments=1, dual_tor="single")
    assert single.n_gpus == 64 * 8 and single.gpu_tor.shape == (512, 1)
    access = single.link_kind == LinkKind.ACCESS
    assert np.unique(single.link_capacity[access]).tolist() == [50e9]
    assert counts(single)["switches"]["tor"] == 8
    plain = hpn7(segments=1)
    assert (plain.link_kind == LinkKind.PEER).sum() == 0


def test_reach_table_pins_published_figures():
    rows = reach_table()
    assert [r["mechanism"] for r in rows] == [
        "plain Clos", "+ dual-ToR", "+ rail-optimized", "+ dual-plane", "+ 15:1 agg-core"]
    assert [(r["published_tier1"], r["published_tier2"]) for r in rows] == [
        (64, 2048), (128, 4096), (1024, None), (None, 8192), (None, 15360)]
    assert [r["tier1"] for r in rows] == [64, 128, 1024, 1024, 1024]
    assert [r["tier2"] for r in rows][1:] == [4096, 4096, 8192, 15360]
    assert rows[0]["tier2"] == 4096 and "2K" in rows[0]["note"]  # documented disagreement
    # the reach of the 15:1 row is the built pod
    assert rows[-1]["tier2"] == hpn7().n_gpus


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"segments": -1}, "segments"), ({"pods": 0}, "pods"), ({"rails": 0}, "rails"),
    ({"hosts_per_segment": 129}, "hosts_per_segment"), ({"segments": 16}, "segments"),
    ({"dual_tor": "triple"}, "dual_tor"), ({"tor_uplinks": 61}, "tor_uplinks"),
    ({"port_speed": "fast"}, "port_speed"), ({"ports_per_nic": 1}, "ports_per_nic"),
    ({"pods": 200}, "pods"), ({"segments": 2.5}, "segments"),
])
def test_bad_parameters_raise_input_error(kwargs, field):
    with pytest.raises(InputError) as info:
        hpn7(**kwargs)
    assert info.value.field == field


def test_partial_last_pod_sizes_exactly():
    from hpnsim.fabrics import build_fabric, size_options

    assert size_options("hpn7", 131_072) == {"pods": 9, "segments": 15, "last_pod_segments": 8}
    assert 8 * 15_360 + 8 * 1_024 == 131_072
    f = build_fabric("hpn7", {"gpus": "131072"})
    assert f.n_gpus == 131_072 and f.meta["active_hosts"] == 16_384
    gpu_pod = f.node_pod[f.gpu_node]
    assert np.bincount(gpu_pod).tolist() == [15_360] * 8 + [8_192]
    c = counts(f)
    assert c["switches"]["tor"] == (8 * 15 + 8) * 16
    assert c["switches"]["agg"] == 9 * 120        # the last pod keeps all its Aggs
    per_pod = min(60, 128 // 9)                    # 14 Aggs of a pod per core
    assert c["switches"]["core"] == 2 * 8 * -(-60 // per_pod)
    core_links = f.link_kind == LinkKind.CORE
    aggs = f.nodes_where(kind=NodeKind.AGG)
    assert (np.bincount(f.link_src[core_links], minlength=f.n_nodes)[aggs] == 8).all()
    assert oversubscription(f)["agg"] == pytest.approx(15.0)  # the design ratio
    # each Agg of the last pod takes one link from each of its plane's 8 x 8 ToRs
    last_aggs = f.nodes_where(kind=NodeKind.AGG, pod=8)
    up = f.link_kind == LinkKind.UPLINK
    assert (np.bincount(f.link_dst[up], minlength=f.n_nodes)[last_aggs] == 64).all()
    assert f.meta["tiers"]["agg"]["total_down_ports"] == (8 * 15 + 8) * 16 * 60
    for gpus in (1_024, 16_384, 2 * 15_360 + 3 * 1_024):
        assert build_fabric("hpn7", {"gpus": str(gpus)}).n_gpus == gpus
    assert size_options("hpn7", 4_096, {"segments": 3}) == {"pods": 2, "last_pod_segments": 1}


@settings(max_examples=12, deadline=None)
@given(pods=st.integers(2, 5), segments=st.integers(1, 6), data=st.data())
def test_partial_last_pod_closed_forms(pods, segments, data):
    last = data.draw(st.integers(1, segments))
    f = hpn7(pods=pods, segments=segments, last_pod_segments=last, hosts_per_segment=2,
             backup_hosts=0, tor_uplinks=4, aggs_per_plane=4, agg_core_uplinks=2)
    n_seg = (pods - 1) * segments + last
    assert f.n_gpus == n_seg * 2 * 8
    c = counts(f)
    per_pod = min(4, 128 // pods)
    assert c["switches"] == {"tor": n_seg * 16, "agg": pods * 8,
                             "core": 2 * 2 * -(-4 // per_pod)}
    seg = f.node_pod[f.gpu_node] * segments + f.node_segment[f.gpu_node]
    assert np.bincount(seg).tolist() == [16] * n_seg
    # every pair of pods meets through the core, plane by plane
    rows = f.switch_row
    first, last_tor = f.gpu_tor[0, 0], f.gpu_tor[f.n_gpus - 8, 0]
    assert f.switch_distance_from(first)[rows[last_tor]] == 4
    assert path_choices(f)["cross_pod"] == 2 * sum(min(per_pod, 4 - (j // per_pod) * per_pod)
                                                   for j in range(4))


def test_last_pod_segments_bounds():
    with pytest.raises(InputError) as info:
        hpn7(pods=2, segments=3, last_pod_segments=4)
    assert info.value.field == "last_pod_segments"
    with pytest.raises(InputError) as info:
        hpn7(pods=2, last_pod_segments=0)
    assert info.value.field == "last_pod_segments"


def _agg_tbps(segments, tors_per_plane, links_per_tor, up=8):
    """Tb/s an Agg needs: one 400G down port per ToR of its plane and link, plus up ports."""
    return (segments * tors_per_plane * links_per_tor + up) * 0.4


@pytest.mark.parametrize(("kwargs", "field", "need"), [
    # 16 rails: 16 ToRs of a plane per segment (rails x 2 sides / 2 planes)
    ({"rails": 16}, "rails", _agg_tbps(15, 16, 1)),
    # one plane: the Agg sees both ToRs of every rail (8 x 2 / 1)
    ({"dual_plane": False}, "dual_plane", _agg_tbps(15, 16, 1)),
    # 30 Aggs per plane: each ToR sends 60 / 30 = 2 links to each
    ({"aggs_per_plane": 30}, "aggs_per_plane", _agg_tbps(15, 8, 2)),
    ({"segments": 16}, "segments", _agg_tbps(16, 8, 1)),
    ({"agg_core_uplinks": 16}, "agg_core_uplinks", _agg_tbps(15, 8, 1, up=16)),
    # ToR: (128 + 8) x 200G down + 60 x 800G up
    ({"uplink_speed": "800G"}, "uplink_speed", 136 * 0.2 + 60 * 0.8),
])
def test_chip_budget_error_names_the_parameter(kwargs, field, need):
    with pytest.raises(InputError) as info:
        hpn7(**kwargs)
    assert info.value.field == field
    assert f"would need {need:.1f} Tbps" in info.value.message
    assert f"set by {field} (at its default it would fit)" in info.value.message


def test_chip_sizes_the_pod_by_hand_derived_radix():
    # 25.6T, 2 x 200G NICs: ToR 12.8T / 200G = 64 active + 64/16 = 4 backup ports, then
    # (25.6T - 68 x 200G) / 400G = 30 uplinks to 30 Aggs a plane; an Agg has 25.6T / 400G
    # = 64 ports, 64/16 = 4 up, 60 down: 60 // 8 ToRs of a plane = 7 segments of 512 GPUs
    f = hpn7(chip="25.6T")
    assert (f.n_gpus, f.meta["hosts_per_segment"], f.meta["backup_hosts_per_segment"]) == \
        (7 * 64 * 8, 64, 4)
    assert f.meta["tiers"]["tor"]["up_ports"] == 30 and f.meta["tiers"]["agg"]["up_ports"] == 4
    assert (f.nodes_where(kind=NodeKind.TOR).size, f.nodes_where(kind=NodeKind.AGG).size) == \
        (7 * 16, 2 * 30)
    # 102.4T: 256 + 16 ports of 200G, (102.4T - 272 x 200G) / 400G = 120 uplinks; Agg 256
    # ports, 16 up, 240 down: 30 segments of 2,048 GPUs (HPN 8.0 class)
    g = hpn7(chip="102.4T")
    assert (g.n_gpus, g.meta["segments"], g.meta["hosts_per_segment"]) == (61440, 30, 256)
    assert g.meta["tiers"]["tor"]["up_ports"] == 120 and g.meta["tiers"]["agg"]["up_ports"] == 16
    assert (g.nodes_where(kind=NodeKind.TOR).size, g.nodes_where(kind=NodeKind.AGG).size) == \
        (480, 240)
    # 15 segments do not fit the 25.6T Agg: either the chip or the segments is to blame
    with pytest.raises(InputError, match=r"would need 49.6 Tbps .* set by chip, segments"):
        hpn7(chip="25.6T", segments=15)
    # the single and stacked modes keep their published 51.2T counts
    assert hpn7(dual_tor="single", segments=1).meta["hosts_per_segment"] == 64
    assert hpn7(dual_tor="stacked", segments=1).meta["backup_hosts_per_segment"] == 6


def test_chip_budget_error_lists_every_contributing_parameter():
    # rails 16 and 16 segments: 16 x 16 + 8 = 264 ports; neither default alone fits
    # (16 x 8 + 8 = 136 > 128, 15 x 16 + 8 = 248 > 128), rails lowers it most
    with pytest.raises(InputError) as info:
        hpn7(rails=16, segments=16)
    assert info.value.field == "rails"
    assert f"would need {_agg_tbps(16, 16, 1):.1f} Tbps" in info.value.message
    assert "set by rails, segments (each at its default it would need less)" in \
        info.value.message
    # parameters set below their default are not blamed: 2 segments of 64 rails
    with pytest.raises(InputError) as info:
        hpn7(rails=64, segments=2)
    assert info.value.field == "rails" and "segments" not in info.value.message.split(";")[-1]
