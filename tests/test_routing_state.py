"""Routing under a FabricState: down links are never chosen where a policy has a choice,
kept where there is none, and no cache serves a route from another state.

Fabrics (hand derivations below refer to them):
- ``seg``: hpn7, 1 segment, 2 hosts x 8 rails, dual ToR (planes 0 and 1), each ToR with one
  uplink to each of the 2 Aggs of its plane. A flow from rail r to another rail s crosses
  ToR(r, plane p) -> Agg(p, a) -> ToR(s, p).
- ``pods``: the same with 2 pods and 2 core uplinks per Agg: pod0 -> pod1 crosses
  ToR -> Agg -> core -> Agg -> ToR.
- ``single``: dual_tor="single": each NIC has one (bonded) access link to one ToR per rail.
"""

import numpy as np
import pytest

from hpnsim.collectives import plan_collective, run_collective
from hpnsim.errors import InputError
from hpnsim.fabrics import FabricState, hpn7
from hpnsim.routing import diagnose, route
from hpnsim.routing.diagnostics import alternative_groups
from hpnsim.routing.tables import routing_tables

SMALL = dict(backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)


@pytest.fixture(scope="module")
def seg():
    return hpn7(segments=1, hosts_per_segment=2, **SMALL)


@pytest.fixture(scope="module")
def pods():
    return hpn7(pods=2, segments=1, hosts_per_segment=2, agg_core_uplinks=2, **SMALL)


@pytest.fixture(scope="module")
def single():
    return hpn7(segments=1, hosts_per_segment=2, dual_tor="single", **SMALL)


def cable(f, a, b):
    """Both directed links of the cable between nodes named a and b."""
    link = int(f.link_ids([f.find_node(a)], [f.find_node(b)])[0])
    assert link >= 0
    return [link, link ^ 1]


def cross_rail_pairs(f, conns=4):
    """Every (src, dst) on different rails and hosts, ``conns`` connections each."""
    g = np.arange(f.n_gpus)
    src, dst = np.meshgrid(g, g, indexing="ij")
    keep = (src % 8 != dst % 8) & (src // 8 != dst // 8)
    return np.repeat(src[keep], conns), np.repeat(dst[keep], conns)


def names(f, paths, i):
    return [f.link_name(k) for k in paths.path(i)]


def uses(paths, links):
    return np.isin(paths.links, links).reshape(-1)


@pytest.mark.parametrize("policy", ["ecmp", "hpn_dual_plane", "precise", "spray"])
def test_no_state_and_all_up_state_give_identical_paths(seg, policy):
    src, dst = cross_rail_pairs(seg, 2)
    plain = route(seg, src, dst, policy, seed=5)
    state = FabricState(seg).set_down([0]).set_up([0])     # changed and changed back
    assert plain.same_routes(route(seg, src, dst, policy, seed=5, state=state))
    assert np.array_equal(plain.sport, route(seg, src, dst, policy, seed=5, state=state).sport)


def test_ecmp_with_a_tor_uplink_down_uses_the_other_uplink(seg):
    # ToR(r0, p0) has two uplinks: to agg-p0-0 and agg-p0-1. With the first cable down,
    # every flow leaving that ToR upward must take agg-p0-1, and every flow into it must
    # come down from agg-p0-1 (agg-p0-0 no longer reaches it in one hop).
    f = seg
    dead = cable(f, "pod0/seg0/tor-r0-p0", "pod0/agg-p0-0")
    state = FabricState(f).set_down(dead)
    src, dst = cross_rail_pairs(f)
    before = route(f, src, dst, "ecmp", seed=1)
    after = route(f, src, dst, "ecmp", seed=1, state=state)
    assert uses(before, dead).any() and not uses(after, dead).any()
    up_other, down_other = cable(f, "pod0/seg0/tor-r0-p0", "pod0/agg-p0-1")
    tor = f.find_node("pod0/seg0/tor-r0-p0")
    links = after.links
    leaving = links[(f.link_src[links] == tor) & (f.node_tier[f.link_dst[links]] == 2)]
    entering = links[(f.link_dst[links] == tor) & (f.node_tier[f.link_src[links]] == 2)]
    assert set(leaving.tolist()) == {up_other} and set(entering.tolist()) == {down_other}
    assert (after.links == up_other).sum() == (before.links == up_other).sum() + \
        (before.links == dead[0]).sum()
    # flows that touch neither rail 0 nor plane 0 ToR r0 keep their paths exactly
    untouched = (src % 8 != 0) & (dst % 8 != 0)
    assert after.subset(untouched).same_routes(before.subset(untouched))


def test_dual_plane_with_a_dead_port_uses_the_other_port_and_plane(seg):
    # GPU 0's port-0 cable (NIC <-> ToR r0-p0) is down: its connections, which round-robin
    # over ports 0 and 1, all leave on port 1 into ToR r0-p1 (plane 1); flows to GPU 0
    # can only arrive over ToR r0-p1 too (ToR r0-p0 withdrew GPU 0's route and plane 0
    # cannot reach plane 1), so every sender uses its port 1 for them.
    f = seg
    dead = [int(f.gpu_access_link[0, 0]), int(f.gpu_access_link[0, 0]) ^ 1]
    state = FabricState(f).set_down(dead)
    out = route(f, np.zeros(8, int), np.arange(8, 16), "hpn_dual_plane", state=state)
    assert out.port.tolist() == [1] * 8
    assert all(names(f, out, i)[1] == "pod0/seg0/host0/nic-r0->pod0/seg0/tor-r0-p1[port1]"
               for i in range(8))
    inbound = route(f, np.arange(8, 16), np.zeros(8, int), "hpn_dual_plane", state=state)
    assert inbound.port.tolist() == [1] * 8
    assert all(names(f, inbound, i)[-2] == "pod0/seg0/tor-r0-p1->pod0/seg0/host0/nic-r0"
               "[port1]" for i in range(8))
    # without the failure the round-robin alternates ports
    assert route(f, np.zeros(8, int), np.arange(8, 16), "hpn_dual_plane").port.tolist() \
        == [0, 1] * 4


def test_dual_plane_fixed_core_mapping_falls_back_only_where_its_link_is_dead(pods):
    # Agg -> core uses a fixed per-destination mapping over the 2 core uplinks. Take down
    # the core uplink of one flow: that flow moves to the Agg's other core uplink; every
    # flow that did not cross the dead link keeps its path exactly.
    f = pods
    g = np.arange(16)
    src, dst = np.repeat(g, 16), np.tile(g + 16, 16)
    before = route(f, src, dst, "hpn_dual_plane")
    agg_core = [k for k in before.path(0) if f.node_tier[f.link_dst[k]] == 3][0]
    state = FabricState(f).set_down([agg_core])
    after = route(f, src, dst, "hpn_dual_plane", state=state)
    crossed = np.array([agg_core in before.path(i) for i in range(before.n_flows)])
    assert crossed.sum() > 1 and not uses(after, [agg_core]).any()
    assert after.subset(~crossed).same_routes(before.subset(~crossed))
    agg = f.link_src[agg_core]
    other = [k for k in f.out_of(agg) if f.node_tier[f.link_dst[k]] == 3 and k != agg_core]
    for i in np.flatnonzero(crossed):
        assert other[0] in after.path(i)


@pytest.mark.parametrize("policy", ["precise", "spray"])
def test_precise_and_spray_exclude_down_links(seg, policy):
    f = seg
    dead = cable(f, "pod0/seg0/tor-r0-p0", "pod0/agg-p0-0")
    state = FabricState(f).set_down(dead)
    src, dst = cross_rail_pairs(f, 1)
    after = route(f, src, dst, policy, state=state)
    assert not uses(after, dead).any()
    if policy == "spray":
        # everything sprayed to ToR r0-p0 now goes up its one remaining uplink
        up_other = cable(f, "pod0/seg0/tor-r0-p0", "pod0/agg-p0-1")[0]
        i = int(np.flatnonzero((src == 0) & (dst == 9))[0])
        weights = dict(zip(after.path(i).tolist(), after.path_weight(i).tolist(), strict=True))
        assert weights[up_other] == 0.5      # half of GPU 0's packets leave on port 0
        assert sum(w for k, w in weights.items() if f.node_tier[f.link_dst[k]] == 2) == 1.0


def test_single_tor_host_cut_off_keeps_the_dead_link(single):
    # dual_tor="single": GPU 0's NIC has one access cable. With it down there is no
    # alternative: the path keeps the dead link (the transfer will stall at rate 0).
    f = single
    up = int(f.gpu_access_link[0, 0])
    state = FabricState(f).set_down([up, up ^ 1])
    for policy in ("ecmp", "hpn_dual_plane", "precise", "spray"):
        away = route(f, [0], [9], policy, state=state)
        assert up in away.path(0).tolist()
        back = route(f, [9], [0], policy, state=state)
        assert up ^ 1 in back.path(0).tolist()
        assert away.same_routes(route(f, [0], [9], policy))
    assert state.capacity[up] == 0.0
    result = run_collective(f, "allreduce", range(16), 2**20, algo="ring", state=state)
    assert result.time == np.inf and result.busbw == 0.0


def test_fail_then_restore_invalidates_every_cache(seg):
    f = seg
    dead = cable(f, "pod0/seg0/tor-r0-p0", "pod0/agg-p0-0")
    state = FabricState(f)
    src, dst = cross_rail_pairs(f, 2)
    first = route(f, src, dst, "ecmp", state=state)
    plan = plan_collective(f, "alltoall", range(16), 2**20, routing="ecmp", pxn=False,
                          state=state)
    groups = alternative_groups(f, state)
    assert uses(first, dead).any()
    assert any(uses(p, dead).any() for p in plan.paths if p is not None)

    state.set_down(dead)                    # the same object, now with a dead cable
    assert routing_tables(f, state) is not routing_tables(f)
    failed = route(f, src, dst, "ecmp", state=state)
    failed_plan = plan_collective(f, "alltoall", range(16), 2**20, routing="ecmp",
                                  pxn=False, state=state)
    assert not uses(failed, dead).any()
    assert failed_plan is not plan
    assert not any(uses(p, dead).any() for p in failed_plan.paths if p is not None)
    assert (alternative_groups(f, state)[dead] == -1).all() and (groups[dead] >= 0).all()
    collisions = diagnose(f, failed, state=state).collisions
    assert collisions <= diagnose(f, failed).collisions

    state.set_up(dead)                      # recovery: exactly the first paths again
    assert route(f, src, dst, "ecmp", state=state).same_routes(first)
    assert plan_collective(f, "alltoall", range(16), 2**20, routing="ecmp", pxn=False,
                           state=state) is plan
    assert routing_tables(f, state) is routing_tables(f)
    assert np.array_equal(alternative_groups(f, state), groups)


def test_state_of_another_fabric_is_refused(seg, single):
    with pytest.raises(InputError) as e:
        route(seg, [0], [9], state=FabricState(single))
    assert e.value.field == "state"
