"""Fabric immutability and FabricState (links up/down, capacities) against hand derivations."""

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.fabrics import FabricState, LinkKind, hpn7


@pytest.fixture(scope="module")
def small():
    return hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)


def test_every_fabric_array_is_read_only(small):
    f = small
    with pytest.raises(ValueError, match="read-only"):
        f.link_capacity[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        f.link_capacity[:] = 1e30
    with pytest.raises(ValueError, match="read-only"):
        f.node_kind[0] = 1
    with pytest.raises(AttributeError, match="read-only"):
        f.link_capacity = np.zeros(f.n_links)
    derived = [f.out_ptr, f.out_links, f.gpu_tor, f.gpu_access_link, f.link_network,
               f.switch_nodes, f.switch_row, f.switch_distance, f.switch_graph.data,
               f.gpu_node, f.gpu_nic, f._link_keys[0]]
    assert not any(a.flags.writeable for a in derived)


def test_builder_arrays_stay_with_the_builder():
    src = np.array([0, 1], dtype=np.int32)
    from hpnsim.fabrics import Fabric
    nodes = {"node_kind": np.array([0, 2]), **{k: np.full(2, -1) for k in (
        "node_tier", "node_pod", "node_segment", "node_rail", "node_plane", "node_host",
        "node_index")}}
    links = {"link_src": src, "link_dst": np.array([1, 0]), "link_capacity": np.ones(2),
             "link_latency": np.zeros(2), "link_kind": np.ones(2), "link_port": np.full(2, -1)}
    f = Fabric(nodes, links, [0], [1])
    src[0] = 1          # the caller keeps a writeable array of its own
    assert not f.link_src.flags.writeable


def test_with_link_capacity_builds_a_new_fabric(small):
    f = small
    nv = f.link_kind == LinkKind.NVLINK
    g = f.with_link_capacity(LinkKind.NVLINK, "900GB/s")
    assert g is not f and not g.link_capacity.flags.writeable
    assert np.all(g.link_capacity[nv] == 900e9) and np.all(f.link_capacity[nv] == 200e9)
    assert np.array_equal(g.link_capacity[~nv], f.link_capacity[~nv])
    h = f.with_link_capacity([0, 3], [1.0, 2.0])
    assert h.link_capacity[[0, 3]].tolist() == [1.0, 2.0]
    assert f.with_link_capacity(None, 5.0).link_capacity.max() == 5.0
    with pytest.raises(InputError) as e:
        f.with_link_capacity([f.n_links], 1.0)
    assert e.value.field == "links"
    with pytest.raises(InputError) as e:
        f.with_link_capacity([0], -1.0)
    assert e.value.field == "bytes_per_s"
    with pytest.raises(InputError) as e:
        f.replace(link_colour=np.zeros(f.n_links))
    assert e.value.field == "link_colour"


# ----------------------------------------------------------------------------- FabricState
def test_state_starts_all_up_with_the_fabric_capacities(small):
    s = FabricState(small)
    assert s.version == 0 and s.down_links.size == 0 and s.up.all() and s.all_up
    assert np.array_equal(s.capacity, small.link_capacity)
    assert not s.capacity.flags.writeable and not s.up.flags.writeable


def test_down_up_capacity_version_and_fingerprint(small):
    f = small
    s = FabricState(f)
    empty = s.fingerprint
    s.set_down([5, 4])
    assert s.version == 1 and s.down_links.tolist() == [4, 5]
    assert s.capacity[[4, 5]].tolist() == [0.0, 0.0] and not s.up[[4, 5]].any()
    s.set_down(4)                                  # already down: nothing changes
    assert s.version == 1
    s.set_capacity(5, 1e9)                         # kept for when the link comes back
    assert s.version == 2 and s.capacity[5] == 0.0
    s.set_up([4, 5])
    assert s.version == 3 and s.capacity[5] == 1e9 and s.capacity[4] == f.link_capacity[4]
    assert s.fingerprint != empty
    s.set_capacity(5, f.link_capacity[5])          # back to the fabric's value
    assert s.fingerprint == empty and s.all_up and s.version == 4
    hash(s.fingerprint)


def test_equal_states_have_equal_fingerprints_whatever_their_history(small):
    a = FabricState(small).set_down([1, 2]).set_capacity(7, "100G")
    b = FabricState(small).set_capacity(7, 12.5e9).set_down(2).set_down(1)
    c = FabricState(small).set_down([1, 2, 3]).set_up(3).set_capacity(7, 12.5e9)
    assert a.fingerprint == b.fingerprint == c.fingerprint
    assert a.version != c.version


def test_copy_is_independent(small):
    a = FabricState(small).set_down(3)
    b = a.copy()
    b.set_up(3).set_down(9)
    assert a.down_links.tolist() == [3] and b.down_links.tolist() == [9]
    assert b.version == a.version + 2


def test_names_select_links(small):
    f = small
    s = FabricState(f)
    tor = f.find_node("pod0/seg0/tor-r0-p0")
    # a ToR of this fabric: 2 NICs (one per host) and 2 Aggs, a cable each way per neighbour
    s.set_down("pod0/seg0/tor-r0-p0")
    assert s.down_links.size == 8
    assert set(s.down_links.tolist()) == set(np.flatnonzero((f.link_src == tor)
                                                            | (f.link_dst == tor)).tolist())
    access = int(f.gpu_access_link[0, 1])
    assert s.links(f.link_name(access)).tolist() == [access]
    assert s.links(["pod0/agg-p0-0", 0]).size == 2 * 8 + 1   # 8 plane-0 ToRs, + link 0


def test_bad_input_names_the_field(small):
    s = FabricState(small)
    for call, field in [(lambda: s.set_down([small.n_links]), "links"),
                        (lambda: s.set_down([-1]), "links"),
                        (lambda: s.set_down([1.5]), "links"),
                        (lambda: s.set_capacity(0, -1.0), "bytes_per_s"),
                        (lambda: s.set_capacity(0, float("nan")), "bytes_per_s"),
                        (lambda: s.set_capacity([0, 1], [1.0, 2.0, 3.0]), "bytes_per_s"),
                        (lambda: s.set_down("pod0/nowhere"), "node"),
                        (lambda: s.set_down("pod0/seg0/tor-r0-p0->pod0/agg-p1-0"), "links")]:
        with pytest.raises(InputError) as e:
            call()
        assert e.value.field == field
    assert s.version == 0
