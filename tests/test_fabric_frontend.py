"""HPN frontend network: closed-form switch counts, 1:1, disjointness, checkpoints, paths."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpnsim.errors import InputError
from hpnsim.fabrics import BACKEND, FRONTEND, UNREACHABLE, LinkKind, NodeKind, hpn7
from hpnsim.fabrics.analysis import counts, frontend_summary, oversubscription
from hpnsim.fabrics.bom import bill_of_materials
from hpnsim.fabrics.frontend import checkpoint_time_bound, default_storage_hosts
from hpnsim.fabrics.frontend_paths import storage_path, storage_paths
from hpnsim.routing import route

PORT, UP = 25e9, 50e9  # 200G frontend NIC port, 400G uplink


def closed_form(pods=1, segments=15, last=None, hosts=128, per_tor=64, storage=None):
    """Frontend switch counts derived by hand from the documented model."""
    last = segments if last is None else last
    n_seg = (pods - 1) * segments + last
    gpus = n_seg * hosts * 8
    if storage is None:  # 30 GB per GPU in 100 s over 2 x 200G per storage host
        storage = math.ceil(gpus * 30e9 / 100 / (2 * PORT))
    pairs_seg = -(-hosts // per_tor)
    storage_pairs = -(-storage // per_tor)
    storage_pods = -(-storage_pairs // (segments * pairs_seg))
    tor_up = math.ceil(min(per_tor, hosts) * PORT / UP)  # 1:1
    aggs = tor_up                                         # one uplink to each Agg
    agg_up = 2 * segments * pairs_seg                      # = its downlinks (1:1)
    fe_pods = pods + storage_pods
    per_pod = min(aggs, 128 // fe_pods)
    return {"tor": 2 * (n_seg * pairs_seg + storage_pairs), "agg": fe_pods * aggs,
            "core": agg_up * -(-aggs // per_pod), "storage": storage, "gpus": gpus,
            "tor_up": tor_up, "agg_up": agg_up}


@pytest.fixture(scope="module")
def pod():
    return hpn7(frontend=True)


def _degree(f, nodes, mask):
    return np.bincount(f.link_src[mask], minlength=f.n_nodes)[nodes]


def test_published_pod_frontend_counts(pod):
    want = closed_form()
    assert want == {"tor": 64, "agg": 64, "core": 60, "storage": 93, "gpus": 15360,
                    "tor_up": 32, "agg_up": 60}
    fe = frontend_summary(pod)
    assert fe["switches"] == {k: want[k] for k in ("tor", "agg", "core")}
    assert fe["hosts"] == 1920 and fe["storage_hosts"] == 93
    assert fe["oversubscription"] == {"tor": 1.0, "agg": 1.0, "core": None}
    # the backend stays the published pod
    assert counts(pod)["switches"] == {"tor": 240, "agg": 120, "core": 0}
    assert counts(pod)["gpus"] == 15360
    assert oversubscription(pod) == pytest.approx({"tor": 128 * 200 / (60 * 400), "agg": 15.0})


@settings(max_examples=10, deadline=None)
@given(pods=st.integers(1, 3), segments=st.integers(1, 4), data=st.data(),
       hosts=st.sampled_from([4, 64, 100, 128]), per_tor=st.sampled_from([16, 32, 64]),
       storage=st.one_of(st.none(), st.integers(1, 300)))
def test_frontend_counts_match_closed_form(pods, segments, data, hosts, per_tor, storage):
    last = data.draw(st.integers(1, segments))
    f = hpn7(pods=pods, segments=segments, last_pod_segments=last, hosts_per_segment=hosts,
             backup_hosts=0, tor_uplinks=4, aggs_per_plane=4, frontend=True,
             frontend_hosts_per_tor=per_tor, storage_hosts=storage)
    want = closed_form(pods, segments, last, hosts, per_tor, storage)
    fe = frontend_summary(f)
    assert fe["switches"] == {k: want[k] for k in ("tor", "agg", "core")}
    assert fe["storage_hosts"] == want["storage"] and f.n_gpus == want["gpus"]
    front = f.node_network == FRONTEND
    tors = np.flatnonzero(front & (f.node_kind == NodeKind.TOR))
    aggs = np.flatnonzero(front & (f.node_kind == NodeKind.AGG))
    cores = np.flatnonzero(front & (f.node_kind == NodeKind.CORE))
    up = f.link_kind == LinkKind.UPLINK
    to_agg = up & np.isin(f.link_dst, aggs)
    assert (_degree(f, tors, to_agg) == want["tor_up"]).all()
    # each ToR reaches tor_up distinct Aggs, all in its own frontend pod
    assert (f.node_pod[f.link_src[to_agg]] == f.node_pod[f.link_dst[to_agg]]).all()
    pairs = np.unique(f.link_src[to_agg].astype(np.int64) * f.n_nodes + f.link_dst[to_agg])
    assert len(pairs) == to_agg.sum()
    to_core = (f.link_kind == LinkKind.CORE) & np.isin(f.link_dst, cores)
    assert (_degree(f, aggs, to_core) == want["agg_up"]).all()
    assert _degree(f, cores, np.isin(f.link_src, cores)).max() <= 128
    # non-stacked: no link between the two ToRs of a pair, no PEER links anywhere
    assert not (f.link_kind == LinkKind.PEER).any()


def test_one_to_one_from_link_capacities(pod):
    f = pod
    front = f.node_network == FRONTEND
    tors = np.flatnonzero(front & (f.node_kind == NodeKind.TOR))
    aggs = np.flatnonzero(front & (f.node_kind == NodeKind.AGG))
    cap = f.link_capacity
    into = np.bincount(f.link_dst, weights=cap, minlength=f.n_nodes)
    host_down = (f.link_kind == LinkKind.ACCESS) & np.isin(f.link_dst, tors)
    tor_in = np.bincount(f.link_dst[host_down], weights=cap[host_down], minlength=f.n_nodes)
    tor_up = (f.link_kind == LinkKind.UPLINK) & np.isin(f.link_src, tors)
    tor_out = np.bincount(f.link_src[tor_up], weights=cap[tor_up], minlength=f.n_nodes)
    compute = tors[f.node_segment[tors] >= 0]
    assert (tor_in[compute] == 64 * PORT).all() and (tor_out[compute] == 32 * UP).all()
    assert (tor_in[tors] <= tor_out[tors]).all()  # storage ToRs are partly filled
    agg_in = np.bincount(f.link_dst[tor_up], weights=cap[tor_up], minlength=f.n_nodes)
    agg_up = (f.link_kind == LinkKind.CORE) & np.isin(f.link_src, aggs)
    agg_out = np.bincount(f.link_src[agg_up], weights=cap[agg_up], minlength=f.n_nodes)
    compute_aggs = aggs[f.node_pod[aggs] == 0]
    assert (agg_in[compute_aggs] == agg_out[compute_aggs]).all()
    assert (agg_in[compute_aggs] == 60 * UP).all()
    assert (agg_in[aggs] <= agg_out[aggs]).all()
    assert into.sum() == cap.sum()


def test_frontend_disjoint_from_backend(pod):
    f = pod
    net = f.node_network
    switch = np.isin(f.node_kind, [NodeKind.TOR, NodeKind.AGG, NodeKind.CORE])
    both = switch[f.link_src] & switch[f.link_dst]
    assert (net[f.link_src[both]] == net[f.link_dst[both]]).all()
    assert both.sum() > 0
    rows = f.switch_row
    back = rows[f.switches(network=BACKEND)]
    front = rows[f.switches(network=FRONTEND)]
    dist = f.switch_distance
    assert (dist[np.ix_(back[::7], front)] == UNREACHABLE).all()
    assert (dist[np.ix_(front, back[::7])] == UNREACHABLE).all()
    assert dist[np.ix_(front, front)].max() == 4  # ToR-Agg-core-Agg-ToR, all connected
    # GPUs' NIC ports only reach backend ToRs; frontend NICs are not GPU NICs
    assert (net[f.gpu_tor] == BACKEND).all() and f.gpu_tor.shape == (15360, 2)


def test_backend_ids_and_routes_unchanged_by_frontend():
    kw = {"segments": 3, "hosts_per_segment": 4, "backup_hosts": 0}
    plain, front = hpn7(**kw), hpn7(frontend=True, **kw)
    n, m = plain.n_nodes, plain.n_links
    for name in ("node_kind", "node_pod", "node_segment", "node_rail", "node_plane"):
        assert (getattr(front, name)[:n] == getattr(plain, name)).all()
    for name in ("link_src", "link_dst", "link_capacity", "link_kind", "link_port"):
        assert (getattr(front, name)[:m] == getattr(plain, name)).all()
    assert (front.node_network[:n] == BACKEND).all() and (front.node_network[n:] == FRONTEND).all()
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, plain.n_gpus, 200), rng.integers(0, plain.n_gpus, 200)
    for policy in ("ecmp", "hpn_dual_plane", "precise", "spray"):
        a, b = route(plain, src, dst, policy, seed=7), route(front, src, dst, policy, seed=7)
        assert (a.ptr == b.ptr).all() and (a.links == b.links).all()
        assert (front.link_network[b.links] == BACKEND).all()


def test_checkpoint_storage_arithmetic(pod):
    # 15,360 GPUs x 30 GB / 100 s = 4.608 TB/s; a storage host takes 2 x 200G = 50 GB/s
    assert 15360 * 30e9 / 100 == pytest.approx(4.608e12)
    assert default_storage_hosts(15360) == math.ceil(4.608e12 / 50e9) == 93
    assert default_storage_hosts(131072) == math.ceil(131072 * 0.3e9 / 50e9) == 787
    bound = checkpoint_time_bound(pod)
    assert bound["storage_nics"] == pytest.approx(15360 * 30e9 / (93 * 50e9))  # 99.1 s
    assert bound["seconds"] == bound["storage_nics"] <= 100.0
    assert bound["host_nic"] == pytest.approx(8 * 30e9 / 50e9)                # 4.8 s
    assert bound["gpu_pcie"] == pytest.approx(30e9 / (32e9 * 16 * 128 / 130 / 8))
    assert bound["compute_pod_uplinks"] == pytest.approx(15360 * 30e9 / (32 * 60 * UP))
    assert bound["storage_pod_uplinks"] == pytest.approx(15360 * 30e9 / (32 * 60 * UP))
    starved = checkpoint_time_bound(hpn7(frontend=True, storage_hosts=46))
    assert starved["seconds"] == pytest.approx(15360 * 30e9 / (46 * 50e9))   # ~200 s
    assert starved["seconds"] > 100.0
    with pytest.raises(InputError):
        checkpoint_time_bound(hpn7(segments=1))


def test_storage_paths_stay_in_the_frontend():
    f = hpn7(segments=2, hosts_per_segment=8, backup_hosts=0, frontend=True,
             frontend_hosts_per_tor=4, storage_hosts=6)
    gpus = np.arange(f.n_gpus)
    storage = gpus % 6
    ptr, links = storage_paths(f, gpus, storage, seed=1)
    assert (np.diff(ptr) == 8).all()  # GPU-CPU, CPU-NIC, NIC-ToR, 4 switch hops, ToR-storage
    kinds = [NodeKind.HOST, NodeKind.NIC, NodeKind.TOR, NodeKind.AGG, NodeKind.CORE,
             NodeKind.AGG, NodeKind.TOR, NodeKind.STORAGE]
    store_nodes = f.nodes_where(kind=NodeKind.STORAGE)
    for i in range(0, f.n_gpus, 7):
        path = links[ptr[i]:ptr[i + 1]]
        assert (f.link_dst[path[:-1]] == f.link_src[path[1:]]).all()
        assert f.link_src[path[0]] == f.gpu_node[i]
        assert f.link_dst[path[-1]] == store_nodes[storage[i]]
        assert [NodeKind(int(k)) for k in f.node_kind[f.link_dst[path]]] == kinds
        assert (f.node_network[f.link_dst[path]] == FRONTEND).all()
        assert f.link_kind[path[0]] == LinkKind.PCIE and f.link_kind[path[2]] == LinkKind.ACCESS
    again = storage_paths(f, gpus, storage, seed=1)
    assert (again[1] == links).all()
    # the hash spreads flows: both NIC ports and every core get used
    used_cores = np.unique(f.link_dst[links][f.node_kind[f.link_dst[links]] == NodeKind.CORE])
    assert len(used_cores) == frontend_summary(f)["switches"]["core"]
    ports = f.link_port[links[ptr[:-1] + 2]]
    assert set(ports.tolist()) == {0, 1}
    short = storage_path(f, 5, 2, from_gpu=False)
    assert len(short) == 7 and f.node_kind[f.link_src[short[0]]] == NodeKind.HOST
    with pytest.raises(InputError):
        storage_paths(f, [0], [6])
    with pytest.raises(InputError):
        storage_paths(hpn7(segments=1, hosts_per_segment=2, backup_hosts=0), [0], [0])


def test_frontend_bom_section(pod):
    bom = bill_of_materials(pod)
    plain = bill_of_materials(hpn7())
    for key in ("switches", "transceivers", "cables", "switch_ports"):
        assert bom[key] == plain[key]  # backend figures unchanged
    fe = bom["frontend"]
    access = 2 * (1920 + 15 * 8) + 2 * 93   # 2 ports per host (incl. backups) and storage
    assert fe["cables"] == {"access": access, "uplink": 64 * 32, "core": 64 * 60}
    assert fe["transceivers"] == {"200G-MM": 2 * access, "400G-MM": 2 * 64 * 32,
                                  "400G-SM": 2 * 64 * 60}  # core runs are 500 m
    assert fe["switches"] == {"tor": 64, "agg": 64, "core": 60}
    assert fe["power_w"]["switches"] == 188 * 1500.0
    optics = 2 * access * 5.0 + 2 * 64 * 32 * 8.0 + 2 * 64 * 60 * 9.0
    assert fe["power_w"]["optics"] == pytest.approx(optics)
    assert bom["power_w"]["frontend_network"] == pytest.approx(188 * 1500.0 + optics)
    assert bom["power_w"]["total"] == pytest.approx(plain["power_w"]["total"]
                                                    + 188 * 1500.0 + optics)
    assert bom["cost_usd"]["all_networks"] == pytest.approx(
        plain["cost_usd"]["network"] + fe["cost_usd"]["network"])


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"frontend_hosts_per_tor": 0}, "frontend_hosts_per_tor"),
    ({"frontend_hosts_per_tor": 128}, "frontend_hosts_per_tor"),  # 136 x 200G + 64 x 400G
    ({"frontend_tor_uplinks": 33, "frontend_aggs_per_pod": 32}, "frontend_tor_uplinks"),
    ({"storage_hosts": 0}, "storage_hosts"),
    ({"frontend_port_speed": "fast"}, "frontend_port_speed"),
    ({"pods": 9, "storage_hosts": 200_000}, "storage_hosts"),
])
def test_bad_frontend_parameters(kwargs, field):
    with pytest.raises(InputError) as info:
        hpn7(frontend=True, **{"segments": 1, **kwargs})
    assert info.value.field == field
