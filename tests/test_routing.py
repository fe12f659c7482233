"""route(): path structure on HPN 7.0 and Clos fabrics, policies, determinism, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hpnsim.fabrics as fb
from hpnsim.errors import InputError
from hpnsim.fabrics import LinkKind, NodeKind
from hpnsim.fabrics.lingjun import DEFAULT_PATH as LINGJUN_DEFAULT
from hpnsim.routing import ROUTING_POLICIES, Paths, route


@pytest.fixture(scope="module")
def hpn():
    # 3 segments x 4 hosts x 8 rails; each ToR has 60 uplinks, one to each of its plane's Aggs
    return fb.hpn7(segments=3, hosts_per_segment=4, backup_hosts=0)


def gpu(f, segment, host, rail):
    return (segment * f.meta["hosts_per_segment"] + host) * f.gpus_per_host + rail


def nodes_along(f, path):
    return [int(f.link_src[path[0]])] + [int(f.link_dst[link]) for link in path]


def assert_contiguous(f, paths: Paths):
    for i in range(paths.n_flows):
        path = paths.path(i)
        if path.size == 0:
            continue
        if paths.weight[paths.ptr[i]:paths.ptr[i + 1]].min() < 1.0:
            continue  # sprayed: a DAG, not a chain
        assert np.array_equal(f.link_dst[path[:-1]], f.link_src[path[1:]])
        assert f.link_src[path[0]] == f.gpu_node[paths.src[i]]
        assert f.link_dst[path[-1]] == f.gpu_node[paths.dst[i]]


@pytest.mark.parametrize("policy", ["ecmp", "hpn_dual_plane", "precise"])
def test_hpn_same_rail_other_segment_path_structure(hpn, policy):
    f = hpn
    src = np.array([gpu(f, 0, h, r) for h in range(4) for r in range(8)])
    dst = np.array([gpu(f, 1 + h % 2, 3 - h, r) for h in range(4) for r in range(8)])
    paths = route(f, src, dst, policy, seed=5)
    assert_contiguous(f, paths)
    kinds = [NodeKind.GPU, NodeKind.NIC, NodeKind.TOR, NodeKind.AGG, NodeKind.TOR,
             NodeKind.NIC, NodeKind.GPU]
    assert (paths.hop_counts() == 6).all()
    for i in range(paths.n_flows):
        nodes = nodes_along(f, paths.path(i))
        assert [NodeKind(int(k)) for k in f.node_kind[nodes]] == kinds
        p = int(paths.port[i])
        # port p -> plane p all the way, and the flow arrives at port p of the destination NIC
        assert nodes[2] == f.gpu_tor[src[i], p] and nodes[4] == f.gpu_tor[dst[i], p]
        assert f.node_plane[nodes[2:5]].tolist() == [p, p, p]
        assert f.link_port[paths.path(i)[[1, 4]]].tolist() == [p, p]


def test_hpn_same_segment_same_rail_is_one_tor_hop(hpn):
    f = hpn
    src, dst = gpu(f, 2, 0, 5), gpu(f, 2, 3, 5)
    for policy in ROUTING_POLICIES:
        paths = route(f, [src], [dst], policy)
        tors = {int(f.link_dst[link]) for link in paths.path(0)
                if f.node_kind[f.link_dst[link]] == NodeKind.TOR}
        assert tors <= set(f.gpu_tor[src].tolist())
        assert paths.hop_counts()[0] == (4 if policy != "spray" else 6)   # spray: both ToRs
    assert_contiguous(f, route(f, [src], [dst]))


def test_in_host_traffic_uses_nvlink_only(hpn):
    f = hpn
    paths = route(f, [gpu(f, 0, 1, 2), 7], [gpu(f, 0, 1, 6), 7])
    assert f.link_kind[paths.path(0)].tolist() == [LinkKind.NVLINK, LinkKind.NVLINK]
    assert paths.path(1).size == 0 and paths.port.tolist() == [-1, -1]
    assert paths.sport.tolist() == [-1, -1]


def test_sixty_aggs_reachable_over_many_connections(hpn):
    f = hpn
    n = 3000
    src, dst = np.full(n, gpu(f, 0, 0, 0)), np.full(n, gpu(f, 1, 0, 0))
    paths = route(f, src, dst, "ecmp", conn=np.arange(n), port=0)
    aggs = np.array([f.link_dst[paths.path(i)[2]] for i in range(n)])
    counts = np.bincount(f.node_index[aggs], minlength=60)
    assert (f.node_plane[aggs] == 0).all() and (counts > 0).sum() == 60
    # uniform over 60 Aggs: chi-square with 59 dof stays below its 99.9% point (95.0)
    chi2 = ((counts - n / 60) ** 2 / (n / 60)).sum()
    assert chi2 < 95.0
    # the bond spreads connections over both ports about evenly; dual-plane exactly evenly
    ports = route(f, src, dst, "ecmp", conn=np.arange(n)).port
    assert abs((ports == 0).mean() - 0.5) < 4 * np.sqrt(0.25 / n)
    dual = route(f, src, dst, "hpn_dual_plane", conn=np.arange(n)).port
    assert np.bincount(dual).tolist() == [n // 2, n // 2]


def test_dual_plane_round_robin_counts_only_flows_that_leave_the_host(hpn):
    f = hpn
    a, b, rail2 = gpu(f, 0, 0, 0), gpu(f, 0, 0, 1), gpu(f, 0, 0, 2)
    far_a, far_b = gpu(f, 1, 0, 2), gpu(f, 1, 1, 2)
    # GPUs a and b each send one flow to rail 2 of another segment; with PXN both leave
    # through rail 2's NIC; NVLink flows (of a, b and the relay itself) sit in between
    src = [a, rail2, b, a, a, b]
    dst = [far_a, b, far_b, b, rail2, rail2]
    paths = route(f, src, dst, "hpn_dual_plane", pxn=True)
    net = paths.port >= 0
    assert net.tolist() == [True, False, True, False, False, False]
    assert sorted(paths.port[net].tolist()) == [0, 1]   # one flow per port of the rail-2 NIC
    for i in np.flatnonzero(net):
        access = paths.path(i)[f.link_kind[paths.path(i)] == LinkKind.ACCESS]
        assert f.link_port[access].tolist() == [paths.port[i]] * 2
        assert f.link_src[access[0]] == f.gpu_nic[rail2]


@settings(max_examples=25, deadline=None)
@given(order=st.permutations(list(range(12))))
def test_dual_plane_ports_alternate_per_nic_whatever_the_nvlink_flows(hpn, order):
    f = hpn
    # two GPUs of one host, each with 3 network flows and 3 NVLink flows, in any order
    flows = [(g, gpu(f, 1, i, g)) for g in (0, 1) for i in range(3)]
    flows += [(g, 2 + i) for g in (0, 1) for i in range(3)]
    src, dst = np.array([flows[i] for i in order]).T
    paths = route(f, src, dst, "hpn_dual_plane")
    for g in (0, 1):
        ports = paths.port[(src == g) & (paths.port >= 0)].tolist()
        assert ports == [0, 1, 0]   # the NIC's own network flows, in order, round-robin


def test_default_connections_get_distinct_source_ports(hpn):
    paths = route(hpn, [0, 0, 0, 8], [40, 40, 40, 40])
    assert len(set(paths.sport[:3].tolist())) == 3
    assert ((paths.sport >= 49152) & (paths.sport < 65536)).all()


def test_cross_rail_with_and_without_pxn(hpn):
    f = hpn
    src, dst = gpu(f, 0, 1, 2), gpu(f, 1, 2, 6)
    plain = route(f, [src], [dst], "hpn_dual_plane")
    assert plain.hop_counts()[0] == 6
    nodes = nodes_along(f, plain.path(0))
    assert f.node_rail[nodes[2]] == 2 and f.node_rail[nodes[4]] == 6   # ToR r2 -> Agg -> ToR r6
    pxn = route(f, [src], [dst], "hpn_dual_plane", pxn=True)
    path = pxn.path(0)
    assert f.link_kind[path[:2]].tolist() == [LinkKind.NVLINK, LinkKind.NVLINK]
    relay = f.link_dst[path[1]]
    assert f.node_rail[relay] == 6 and f.node_host[relay] == f.node_host[f.gpu_node[src]]
    assert all(f.node_rail[n] == 6 for n in nodes_along(f, path[2:])
               if f.node_kind[n] in (NodeKind.TOR, NodeKind.NIC))
    assert_contiguous(f, pxn)


def test_spray_weights_on_hpn(hpn):
    f = hpn
    src, dst = gpu(f, 0, 0, 3), gpu(f, 2, 1, 3)
    one_port = route(f, [src], [dst], "spray", port=1)
    links, w = one_port.path(0), one_port.path_weight(0)
    up = (f.link_kind[links] == LinkKind.UPLINK) & (f.node_kind[f.link_src[links]] == NodeKind.TOR)
    down = (f.link_kind[links] == LinkKind.UPLINK) & (f.node_kind[f.link_src[links]] == NodeKind.AGG)
    assert up.sum() == 60 and np.allclose(w[up], 1 / 60)
    assert down.sum() == 60 and np.allclose(w[down], 1 / 60)
    assert set(f.link_src[links[up]].tolist()) == {int(f.gpu_tor[src, 1])}
    both = route(f, [src], [dst], "spray")
    links, w = both.path(0), both.path_weight(0)
    tier_sums = {}
    for kind in (LinkKind.PCIE, LinkKind.ACCESS, LinkKind.UPLINK):
        tier_sums[kind] = w[f.link_kind[links] == kind].sum()
    # each tier carries the whole flow once per crossing: PCIe x2, ACCESS x2, UPLINK x2
    assert tier_sums == pytest.approx({LinkKind.PCIE: 2.0, LinkKind.ACCESS: 2.0,
                                       LinkKind.UPLINK: 2.0})
    uplinks = (f.link_kind[links] == LinkKind.UPLINK) & (f.node_tier[f.link_src[links]] == 1)
    assert uplinks.sum() == 120 and np.allclose(w[uplinks], 1 / 120)


def test_spray_conserves_flow_at_every_node_on_a_fat_tree():
    f = fb.fat_tree(8)
    src = np.arange(0, 128, 7)
    dst = (src * 5 + 33) % 128
    paths = route(f, src, dst, "spray")
    for i in range(paths.n_flows):
        if src[i] == dst[i]:
            continue
        links, w = paths.path(i), paths.path_weight(i)
        inflow = np.bincount(f.link_dst[links], weights=w, minlength=f.n_nodes)
        outflow = np.bincount(f.link_src[links], weights=w, minlength=f.n_nodes)
        balance = inflow - outflow
        balance[f.gpu_node[src[i]]] += 1.0
        balance[f.gpu_node[dst[i]]] -= 1.0
        assert np.allclose(balance, 0.0)


@pytest.mark.parametrize("policy", ROUTING_POLICIES)
def test_same_seed_same_paths(hpn, policy):
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, hpn.n_gpus, 200), rng.integers(0, hpn.n_gpus, 200)
    a = route(hpn, src, dst, policy, seed=11)
    b = route(hpn, src, dst, policy, seed=11)
    assert a.same_routes(b) and np.array_equal(a.sport, b.sport)
    if policy in ("ecmp", "hpn_dual_plane"):
        assert not a.same_routes(route(hpn, src, dst, policy, seed=12))


FABRICS = {
    "fat_tree": lambda: fb.fat_tree(8, gpus_per_host=2),
    "dcn_plus": lambda: fb.dcn_plus(pods=2, segments=2, hosts_per_segment=2),
    "hpn7_2pods": lambda: fb.hpn7(pods=2, segments=2, hosts_per_segment=2, backup_hosts=0,
                                  tor_uplinks=8, aggs_per_plane=8),
}
_built: dict = {}


def built(name):
    if name not in _built:
        _built[name] = FABRICS[name]()
    return _built[name]


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(FABRICS)), policy=st.sampled_from(["ecmp", "hpn_dual_plane",
                                                                       "precise"]),
       pairs=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1,
                      max_size=20), seed=st.integers(0, 2**31))
def test_paths_are_shortest_and_contiguous(name, policy, pairs, seed):
    f = built(name)
    src = np.array([a % f.n_gpus for a, _ in pairs])
    dst = np.array([b % f.n_gpus for _, b in pairs])
    paths = route(f, src, dst, policy, seed=seed)
    assert_contiguous(f, paths)
    same_host = f.node_host[f.gpu_node[src]] == f.node_host[f.gpu_node[dst]]
    for i in np.flatnonzero(~same_host):
        path = paths.path(i)
        switches = [n for n in nodes_along(f, path) if f.switch_row[n] >= 0]
        first, last = f.switch_row[switches[0]], f.switch_row[switches[-1]]
        best = min(f.switch_distance[f.switch_row[a], f.switch_row[b]]
                   for a in f.gpu_tor[src[i]] if a >= 0 for b in f.gpu_tor[dst[i]] if b >= 0)
        # switch hops taken = fewest possible from the ToR the chosen port leads to
        assert len(switches) - 1 == f.switch_distance[first, last]
        assert f.switch_distance[first, last] <= best + 2


def test_core_hop_is_fixed_per_destination_under_dual_plane():
    f = built("hpn7_2pods")
    per_pod = f.n_gpus // 2
    n = 400
    src, dst = np.zeros(n, dtype=int), np.full(n, per_pod)   # same rail, other pod
    paths = route(f, src, dst, "hpn_dual_plane", conn=np.arange(n), port=0)
    kinds = f.node_kind
    after = {}
    for i in range(n):
        upper = tuple(x for x in nodes_along(f, paths.path(i))
                      if kinds[x] in (NodeKind.CORE, NodeKind.AGG))
        after.setdefault(upper[0], set()).add(upper[1:])
    assert len(after) == 8         # the ToR hash spreads over the 8 Aggs of plane 0
    assert all(len(rest) == 1 for rest in after.values())   # then the path is fixed
    assert len({next(iter(rest)) for rest in after.values()}) == 8   # and stays spread


def test_bad_input_names_the_field(hpn):
    with pytest.raises(InputError, match="^policy:"):
        route(hpn, [0], [1], "ospf")
    with pytest.raises(InputError, match="^hash_agg:"):
        route(hpn, [0], [1], "hpn_dual_plane", hash_agg="crc32")
    with pytest.raises(InputError, match="^hash_tor:"):
        route(hpn, [0], [50], "ecmp", hash_tor="sha1")
    with pytest.raises(InputError, match="^dst:"):
        route(hpn, [0], [hpn.n_gpus])
    with pytest.raises(InputError, match="^dst:"):
        route(hpn, [0, 1], [2])
    with pytest.raises(InputError, match="^port:"):
        route(hpn, [0], [50], port=2)
    with pytest.raises(InputError, match="^candidates:"):
        route(hpn, [0], [50], "precise", candidates=0)
    with pytest.raises(InputError, match="^seed_mode:"):
        route(hpn, [0], [50], seed_mode="random")


def lingjun_csv() -> Path | None:
    """The Lingjun trace: ``shared/`` beside the repository (CI), else the template's default."""
    beside_repo = Path(__file__).resolve().parents[1].parent / "shared/data/lingjun/topo.csv"
    for path in (beside_repo, Path(LINGJUN_DEFAULT)):
        if path.is_file():
            return path
    return None


def bfs_shortest_paths(f, source: int) -> tuple[np.ndarray, np.ndarray]:
    """Hop distance from node ``source`` to every node over all links (link_src -> link_dst),
    and the number of distinct shortest walks (parallel links counted apart), level by level."""
    src, dst = f.link_src.astype(np.int64), f.link_dst.astype(np.int64)
    dist = np.full(f.n_nodes, -1, dtype=np.int64)
    count = np.zeros(f.n_nodes, dtype=np.float64)
    dist[source], count[source] = 0, 1.0
    frontier, level = np.array([source]), 0
    while frontier.size:
        out = np.isin(src, frontier)
        new = out & (dist[dst] < 0)
        nxt = np.unique(dst[new])
        dist[nxt] = level + 1
        onto = out & (dist[dst] == level + 1)   # every link from this level into the next
        np.add.at(count, dst[onto], count[src[onto]])
        frontier, level = nxt, level + 1
    return dist, count


@pytest.fixture(scope="module")
def lingjun():
    path = lingjun_csv()
    if path is None:
        pytest.skip("Lingjun topology trace (shared/data/lingjun/topo.csv) not available")
    return fb.from_lingjun(str(path))


def test_ecmp_on_imported_lingjun_takes_shortest_valid_walks_spread_over_all_equal_paths(
        lingjun):
    f = lingjun
    is_switch = np.isin(f.node_kind, (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE))
    tor = f.gpu_tor[:, 0]
    psw = f.node_pod[tor]
    rng = np.random.default_rng(3)
    sources = [int(np.flatnonzero(psw == p)[k]) for p in np.unique(psw) for k in (0, 77)]
    seen_hops = set()
    for s in sources:
        dist, count = bfs_shortest_paths(f, int(f.gpu_node[s]))
        dsts = rng.choice(np.flatnonzero(tor != tor[s]), 60, replace=False)
        dst = np.repeat(dsts, 3)                       # 3 connections per pair
        paths = route(f, np.full(dst.size, s), dst, "ecmp", conn=np.tile(np.arange(3), 60),
                      seed=int(s))
        for i in range(paths.n_flows):
            path = paths.path(i)
            nodes = nodes_along(f, path)
            # a walk: each link starts where the previous one ended, GPU node to GPU node
            assert np.array_equal(f.link_dst[path[:-1]], f.link_src[path[1:]])
            assert nodes[0] == f.gpu_node[s] and nodes[-1] == f.gpu_node[dst[i]]
            # shortest: as many links as the BFS distance; GPU-NIC-ToR at each end, so the
            # switch-to-switch hops are that distance less 4
            assert path.size == dist[f.gpu_node[dst[i]]]
            switch_hops = int((is_switch[f.link_src[path]] & is_switch[f.link_dst[path]]).sum())
            assert switch_hops == path.size - 4
            seen_hops.add((bool(psw[dst[i]] == psw[s]), switch_hops))
    # ToR -> Agg -> ToR inside a PSW, ToR -> Agg -> DSW core -> Agg -> ToR across PSWs
    assert seen_hops == {(True, 2), (False, 4)}

    s = sources[0]
    dist, count = bfs_shortest_paths(f, int(f.gpu_node[s]))
    aggs, cores = 64, 64
    agg_uplinks = f.meta["tiers"]["agg"]["up_ports"]   # parallel Agg -> core links
    assert agg_uplinks == 42

    # same PSW, other ToR: one path per Agg of the PSW (one ToR-Agg link each)
    near = int(np.flatnonzero((psw == psw[s]) & (tor != tor[s]))[0])
    assert count[f.gpu_node[near]] == aggs
    n = 2000
    paths = route(f, np.full(n, s), np.full(n, near), "ecmp", conn=np.arange(n))
    distinct = {tuple(paths.path(i).tolist()) for i in range(n)}
    assert len(distinct) == count[f.gpu_node[near]]   # every equal-cost path is used

    # other PSW: 64 Agg uplinks x 42 parallel Agg->core links x 42 parallel core->Agg links
    far = int(np.flatnonzero(psw != psw[s])[0])
    paths_total = count[f.gpu_node[far]]
    assert paths_total == aggs * agg_uplinks * agg_uplinks
    # more paths than UDP source ports (16384): give each connection its own port and
    # compare with uniform hashing, which would hit M (1 - (1 - 1/M)^K) distinct paths
    k = 16384
    paths = route(f, np.full(k, s), np.full(k, far), "ecmp", sport=49152 + np.arange(k))
    table = np.array([paths.path(i) for i in range(k)])
    distinct = len({tuple(row) for row in table.tolist()})
    uniform = paths_total * (1 - (1 - 1 / paths_total) ** k)
    assert 0.95 * uniform < distinct <= k
    # hop by hop: every choice is an equal-cost next hop (one BFS level closer), and the
    # choices cover them: all 64 ToR uplinks evenly, nearly all 64 x 42 links of each tier
    level = dist[f.link_dst[table]]
    assert (level == np.arange(1, table.shape[1] + 1)).all()
    tor_up = np.unique(table[:, 2], return_counts=True)
    assert tor_up[0].size == aggs and tor_up[1].max() - tor_up[1].min() <= 0.5 * k / aggs
    for hop in (3, 4):   # Agg -> core, core -> Agg: 64 x 42 equal-cost links per tier
        used = np.unique(table[:, hop]).size
        assert 0.99 * aggs * agg_uplinks <= used <= cores * agg_uplinks
