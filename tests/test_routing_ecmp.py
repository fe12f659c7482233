"""ECMP statistics on real fabrics: balls-into-bins, polarization, precise path selection,
and the routing diagnostics that count them."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hpnsim.fabrics as fb
from hpnsim.fabrics import LinkKind
from hpnsim.routing import ballsbins, route
from hpnsim.routing.diagnostics import alternative_groups, diagnose


@pytest.fixture(scope="module")
def wide():
    # 60 hosts per segment: 60 NICs of rail 0 share ToR(seg0, r0, p0) and its 60 uplinks
    return fb.hpn7(segments=2, hosts_per_segment=60, backup_hosts=0)


def sixty_flows(f):
    src = np.arange(60) * 8                  # rail 0 of hosts 0..59 in segment 0
    return src, src + 60 * 8                 # rail 0 of hosts 0..59 in segment 1


def uplink_aggs(f, paths):
    """Agg reached by each flow's ToR uplink (the one hash decision in HPN)."""
    links = paths.links.reshape(paths.n_flows, -1)[:, 2]
    assert (f.link_kind[links] == LinkKind.UPLINK).all()
    return f.link_dst[links]


def test_sixty_flows_on_sixty_uplinks_follow_balls_into_bins(wide):
    f = wide
    src, dst = sixty_flows(f)
    excess, max_load, collisions = [], [], []
    for seed in range(60):
        paths = route(f, src, dst, "ecmp", port=0, seed=seed)
        counts = np.bincount(f.node_index[uplink_aggs(f, paths)], minlength=60)
        excess.append(60 - (counts > 0).sum())
        max_load.append(counts.max())
        collisions.append(diagnose(f, paths).collisions)
    excess, max_load = np.array(excess), np.array(max_load)
    # flows beyond one per uplink: E = 60 - 60 (1 - (59/60)^60) = 22.07; std about 2.0
    assert abs(excess.mean() - ballsbins.expected_excess_flows(60, 60)) < 4.5 * 2.1 / np.sqrt(60)
    dist = ballsbins.max_load_distribution(60, 60)
    k = np.arange(61)
    sd = np.sqrt(np.dot(k**2, dist) - np.dot(k, dist) ** 2)
    assert abs(max_load.mean() - ballsbins.expected_max_load(60, 60)) < 4.5 * sd / np.sqrt(60)
    # diagnostics: the same excess on the ToR uplinks and again on the Agg -> ToR downlinks
    assert collisions == pytest.approx(2 * excess)


def test_precise_removes_collisions_that_ecmp_has(wide):
    f = wide
    src, dst = sixty_flows(f)
    ecmp = diagnose(f, route(f, src, dst, "ecmp", port=0, seed=4))
    precise_paths = route(f, src, dst, "precise", port=0, seed=4, candidates=512)
    precise = diagnose(f, precise_paths)
    assert ecmp.collisions > 0 and ecmp.max_link_load > 1
    assert precise.collisions == 0 and precise.max_link_load == 1
    assert len(set(uplink_aggs(f, precise_paths).tolist())) == 60
    assert precise.uplink_imbalance == 1.0
    # the chosen source ports reproduce the paths under plain ECMP hashing
    again = route(f, src, dst, "ecmp", port=0, seed=4, sport=precise_paths.sport)
    assert again.same_routes(precise_paths)


def test_precise_spreads_over_both_ports_and_planes(wide):
    f = wide
    src, dst = sixty_flows(f)
    src, dst = np.concatenate([src, src]), np.concatenate([dst, dst])   # 120 flows, 2 per NIC
    paths = route(f, src, dst, "precise", seed=1, candidates=512)
    d = diagnose(f, paths)
    assert d.collisions == 0 and d.port_imbalance == 1.0
    assert np.bincount(paths.port).tolist() == [60, 60]


def _two_tier_choices(f, paths):
    """(ToR uplink, Agg uplink) of each flow: the two hashed decisions of a 3-tier Clos."""
    up = ((f.link_kind[paths.links] != LinkKind.ACCESS)
          & (f.node_tier[f.link_dst[paths.links]] > f.node_tier[f.link_src[paths.links]]))
    per_flow = paths.links[up].reshape(paths.n_flows, -1)
    return {tuple(row) for row in per_flow[:, :2].tolist()}


@pytest.mark.parametrize(("name", "builder", "first_tier", "combos"), [
    ("fat_tree", lambda: fb.fat_tree(8), 4, 16),
    ("dcn_plus", lambda: fb.dcn_plus(pods=2), 64, 64 * 64),
])
def test_same_crc_at_tor_and_agg_polarizes(name, builder, first_tier, combos):
    f = builder()
    rng = np.random.default_rng(7)
    tor = f.gpu_tor[0, 0]
    sources = np.flatnonzero(f.gpu_tor[:, 0] == tor)
    remote = np.flatnonzero(f.node_pod[f.gpu_node] != f.node_pod[f.gpu_node[0]])
    m = 2000
    src, dst = rng.choice(sources, m), rng.choice(remote, m)
    distinct = {}
    for label, tor_hash, agg_hash in (("same", "crc32_lo", "crc32_lo"),
                                      ("same16", "crc16", "crc16"),
                                      ("decorrelated", "crc32_lo", "crc32_hi"),
                                      ("murmur", "murmur", "murmur")):
        paths = route(f, src, dst, "ecmp", port=0, seed=3, hash_tor=tor_hash,
                      hash_agg=agg_hash)
        distinct[label] = len(_two_tier_choices(f, paths))
    # CRC seeds only XOR a constant, so the Agg's choice repeats the ToR's: one Agg uplink
    # per ToR uplink; decorrelated tiers reach the balls-into-bins count of combinations
    assert distinct["same"] == distinct["same16"] == first_tier
    expected = ballsbins.expected_distinct_paths(m, combos)
    for label in ("decorrelated", "murmur"):
        assert abs(distinct[label] - expected) < max(4.5 * np.sqrt(expected * 0.25), 1)


def test_diagnostics_port_imbalance_and_histogram(wide):
    f = wide
    # four flows into one NIC, all forced onto port 0: ports carry (4, 0)
    src = np.array([8, 16, 24, 32]) + 0
    dst = np.full(4, 480)
    d = diagnose(f, route(f, src, dst, "ecmp", port=0))
    assert d.nic_port_load[480].tolist() == [4.0, 0.0]
    assert d.port_imbalance == 2.0 and d.worst_nic_gpu == 480
    # the NIC's port group ideally carries 2 + 2: two flows too many on port 0
    groups = alternative_groups(f)
    down0 = f.link_ids([f.gpu_tor[480, 0]], [f.gpu_nic[480]])[0]
    assert d.excess[down0] == 2.0
    network = groups >= 0
    assert sum(d.histogram.values()) == int(network.sum())
    assert json.loads(json.dumps(d.to_dict()))["collisions"] == d.collisions
    by_bytes = diagnose(f, route(f, src, dst, "ecmp", port=0), sizes=1e6)
    assert by_bytes.unit == "bytes" and by_bytes.max_link_load == 4e6
