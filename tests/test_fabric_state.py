"""Fabric immutability and FabricState (links up/down, capacities) against hand derivations."""

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.fabrics import LinkKind, hpn7


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
