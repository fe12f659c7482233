"""DCN+, fat-tree, rail-optimized, rail-only and Lingjun against closed forms (hypothesis)."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpnsim.errors import InputError
from hpnsim.fabrics import (
    LinkKind,
    NodeKind,
    dcn_plus,
    fat_tree,
    from_lingjun,
    rail_only,
    rail_optimized,
)
from hpnsim.fabrics.analysis import bisection_bandwidth, counts, oversubscription, path_choices


def _degree(f, kind):
    nodes = f.nodes_where(kind=kind)
    return np.bincount(f.link_src, minlength=f.n_nodes)[nodes]


@settings(max_examples=12, deadline=None)
@given(k=st.integers(1, 12).map(lambda h: 2 * h))
@example(k=2)
def test_fat_tree_closed_forms(k):
    f = fat_tree(k)
    half = k // 2
    c = counts(f)
    assert c["gpus"] == k ** 3 // 4
    assert c["switches"] == {"tor": k * half, "agg": k * half, "core": half * half}
    assert c["cables"] == k ** 3  # PCIe + access + edge-agg + agg-core, k^3/4 each
    for kind in (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE):
        assert (_degree(f, kind) == k).all()  # every switch port used exactly once
    choices = path_choices(f)
    assert choices["cross_segment"] == (half if k > 2 else None)
    assert choices["cross_pod"] == half * half
    assert bisection_bandwidth(f) == pytest.approx(k ** 3 / 8 * 50e9)
    # diameter: edges of two different pods are edge-agg-core-agg-edge apart, 4 hops; every
    # k >= 2 has k >= 2 pods (k = 2: 2 pods of 1 edge and 1 Agg, 1 core), so always 4
    assert int(f.switch_distance.max()) == 4


@settings(max_examples=12, deadline=None)
@given(pods=st.integers(1, 6), segments=st.integers(1, 4), hosts=st.integers(1, 16),
       gpus_per_host=st.sampled_from([4, 8]))
def test_dcn_plus_closed_forms(pods, segments, hosts, gpus_per_host):
    f = dcn_plus(pods=pods, segments=segments, hosts_per_segment=hosts,
                 gpus_per_host=gpus_per_host)
    gpus = pods * segments * hosts * gpus_per_host
    c = counts(f)
    cores = 64 * -(-8 // min(8, 128 // pods)) if pods > 1 else 0
    assert c["gpus"] == gpus and c["hosts"] == pods * segments * hosts
    assert c["switches"] == {"tor": 2 * pods * segments, "agg": 8 * pods, "core": cores}
    cables = (gpus + gpus + 2 * gpus                    # PCIe, NVLink, two access ports
              + 2 * pods * segments * 64                # ToR uplinks
              + (8 * pods * 64 if pods > 1 else 0))     # Agg uplinks to the core
    assert c["cables"] == cables
    # not rail-optimized: every NIC of a host lands on the same ToR pair
    tor = f.gpu_tor.reshape(-1, gpus_per_host, 2)
    assert (tor == tor[:, :1, :]).all()
    assert oversubscription(f)["agg"] == pytest.approx(segments * 2 * 8 / 64)
    choices = path_choices(f)
    assert choices["cross_segment"] == (8 * 8 * 8 if segments > 1 else None)


def test_dcn_plus_published_scale():
    f = dcn_plus(pods=32)
    assert f.n_gpus == 16_384
    assert oversubscription(f) == {"tor": 1.0, "agg": 1.0, "core": None}
    assert counts(f)["switches"]["core"] == 128


@settings(max_examples=8, deadline=None)
@given(pods=st.integers(1, 3), segments=st.integers(1, 8), hosts=st.integers(1, 64))
def test_rail_optimized_closed_forms(pods, segments, hosts):
    f = rail_optimized(pods=pods, segments=segments, hosts_per_segment=hosts)
    c = counts(f)
    assert c["gpus"] == pods * segments * hosts * 8
    assert c["switches"]["tor"] == pods * segments * 8
    assert c["switches"]["agg"] == pods * 64
    assert (f.node_rail[f.gpu_tor[:, 0]] == f.node_rail[f.gpu_node]).all()
    if pods > 1:
        q = min(64, 128 // pods)  # Aggs of one pod behind one core
        group = [min(q, 64 - (j // q) * q) for j in range(64)]
        # ToR picks 1 of 64 Aggs, the Agg 1 of 64 cores, the core 1 of its Aggs in the pod
        assert path_choices(f)["cross_pod"] == 64 * sum(group)


def test_rail_only_keeps_rails_apart():
    f = rail_only(segments=4, aggs_per_rail=8)
    assert counts(f)["switches"] == {"tor": 32, "agg": 64, "core": 0}
    up = f.link_kind == LinkKind.UPLINK
    assert (f.node_rail[f.link_src[up]] == f.node_plane[f.link_dst[up]])[
        f.node_kind[f.link_src[up]] == NodeKind.TOR].all()
    a, b = f.gpu_tor[0, 0], f.gpu_tor[1, 0]  # rails 0 and 1 of host 0
    assert f.switch_distance[f.switch_row[a], f.switch_row[b]] > 100  # unreachable


def test_lingjun_import():
    f = from_lingjun()
    c = counts(f)
    assert c["hosts"] == 847 and c["gpus"] == 847 * 8
    assert c["switches"]["tor"] == 119  # distinct (PSW, ASW) pairs in the file
    assert len(f.meta["psw_names"]) == 3
    with pytest.raises(InputError) as info:
        from_lingjun("/nonexistent.csv")
    assert info.value.field == "path"


@pytest.mark.parametrize(("builder", "kwargs", "field"), [
    (fat_tree, {"k": 3}, "k"), (fat_tree, {"k": 0}, "k"), (fat_tree, {"k": 130}, "k"),
    (fat_tree, {"k": 8, "gpus_per_host": 3}, "gpus_per_host"),
    (dcn_plus, {"hosts_per_segment": 17}, "hosts_per_segment"),
    (dcn_plus, {"segments": 5}, "segments"), (dcn_plus, {"dual_tor": "x"}, "dual_tor"),
    (rail_optimized, {"hosts_per_segment": -2}, "hosts_per_segment"),
    (rail_only, {"segments": 0}, "segments"),
])
def test_bad_parameters(builder, kwargs, field):
    with pytest.raises(InputError) as info:
        builder(**kwargs)
    assert info.value.field == field
