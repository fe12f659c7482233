"""Simulated collectives on real fabrics against their closed forms."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest

from hpnsim.collectives import (
    PROTOCOL_EFFICIENCY,
    GroupShape,
    alpha_beta_time,
    hierarchical_time,
    hop_latencies,
    model_time,
    plan_cache,
    plan_collective,
)
from hpnsim.collectives import compile_collective as _compile
from hpnsim.collectives import run_collective as _run
from hpnsim.collectives.nccl.params import WIRE_RATE
from hpnsim.engine import TaskGraph, simulate
from hpnsim.errors import InputError
from hpnsim.fabrics import LinkKind, NodeKind, fat_tree, hpn7
from hpnsim.units import parse_bandwidth

# The hand closed forms here are at the links' wire rates (every link efficiency 1);
# tests/test_nccl_realism.py checks that each efficiency moves them by its own factor.
run_collective = partial(_run, nccl=WIRE_RATE)
compile_collective = partial(_compile, nccl=WIRE_RATE)

NIC = parse_bandwidth("400G")  # fat-tree links and HPN NICs (2 x 200G): 50 GB/s
NVLINK = parse_bandwidth("400GB/s") / 2  # per direction


@pytest.fixture(scope="module")
def tree16():
    """k=4 fat-tree: 16 single-GPU hosts, every link 400G; with spraying it is non-blocking."""
    f = fat_tree(4)
    assert f.link_capacity[f.link_kind == LinkKind.PCIE].min() > NIC  # the NIC is the limit
    return f


@pytest.fixture(scope="module")
def segment():
    """One HPN segment of 4 hosts x 8 GPUs (rails one ToR hop apart)."""
    return hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2)


def tree16_by_hand(op, algo, n, size):
    """Closed forms on ``tree16`` (one GPU per host, so every step is a network step), protocol
    simple (efficiency 1), spray routing (non-blocking: each NIC gets B = 50 GB/s per
    direction), written out from the schedules:

    time = base (once, first stage) + network steps x per-step network latency + bytes term.
    """
    base_ring, _, a_ring = hop_latencies("ring", "simple")   # ring family: ring, hd, direct
    base_tree, _, a_tree = hop_latencies("tree", "simple")
    # NCCL tuning.cc: baseLatencies Ring/Tree Simple 8.4 us, NET hwLatencies Simple 14 us
    assert (base_ring, a_ring, base_tree, a_tree) == (8.4e-6, 14e-6, 8.4e-6, 14e-6)
    beta = size / NIC
    if (op, algo) == ("allreduce", "ring"):
        # reduce-scatter + all-gather rounds: 2(n-1) steps, each moving S/n per rank
        return base_ring + 2 * (n - 1) * a_ring + 2 * (n - 1) / n * beta
    if (op, algo) in (("allgather", "ring"), ("reducescatter", "ring")):
        return base_ring + (n - 1) * a_ring + (n - 1) / n * beta
    if (op, algo) == ("allreduce", "tree"):
        # two binary trees over hosts, each half the buffer, pipelined up and down: latency
        # 2 x depth network hops, depth = ceil(log2 n); an interior rank of one tree (3 edges)
        # is a leaf of the other (1 edge): its NIC sends 4 members of S/2 at B -> 2 S/B
        depth = math.ceil(math.log2(n))
        return base_tree + 2 * depth * a_tree + 4 * (size / 2) / NIC
    if (op, algo) == ("allreduce", "hd"):
        # fold the n - p ranks beyond the largest power of two p (whole buffer), log2 p
        # halving steps (S/2, S/4, ..., S/p) and log2 p doubling steps back, then unfold
        p = 2 ** int(math.floor(math.log2(n)))
        halves = sum(size / 2**j for j in range(1, int(math.log2(p)) + 1)) / NIC
        fold = 0.0 if p == n else 2 * (a_ring + beta)
        return base_ring + 2 * math.log2(p) * a_ring + 2 * halves + fold
    if (op, algo) in (("allgather", "hd"), ("reducescatter", "hd")):
        halves = sum(size / 2**j for j in range(1, int(math.log2(n)) + 1)) / NIC
        return base_ring + math.log2(n) * a_ring + halves
    if (op, algo) in (("broadcast", "ring"), ("reduce", "ring")):
        # one pipelined chain: all n-1 hops carry the whole buffer at once, so the bytes
        # term is S/B (not (n-1) S/B) and the latency is the n-1 hops of the chain
        return base_ring + (n - 1) * a_ring + beta
    if (op, algo) == ("alltoall", "direct"):
        # n-1 concurrent flows of S/n out of every NIC, one step
        return base_ring + a_ring + (n - 1) * (size / n) / NIC
    if (op, algo) == ("sendrecv", "direct"):
        return base_ring + a_ring + beta
    raise AssertionError(f"no hand formula for {op}/{algo}")


#: nccl-tests bus-bandwidth factors (traffic.md), written out
BUSBW_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
                "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
                "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "sendrecv": lambda n: 1.0}


OP_ALGOS = [
    ("allreduce", "ring"), ("allgather", "ring"), ("reducescatter", "ring"),
    ("allreduce", "tree"), ("allreduce", "hd"), ("allgather", "hd"), ("reducescatter", "hd"),
    ("broadcast", "ring"), ("reduce", "ring"), ("alltoall", "direct"), ("sendrecv", "direct"),
]


# 16 ranks, and 12 (not a power of two: hd folds 4 ranks; hd all-gather/reduce-scatter
# need a power of two, so they run on 16 only)
@pytest.mark.parametrize("op, algo, n", [(op, algo, n) for n in (16, 12) for op, algo in OP_ALGOS
                                         if not (n == 12 and algo == "hd" and op != "allreduce")])
def test_non_blocking_fabric_matches_hand_closed_forms_exactly(tree16, op, algo, n):
    size = 2.0**30
    r = run_collective(tree16, op, range(n), size, algo=algo, protocol="simple",
                       routing="spray")
    expected = tree16_by_hand(op, algo, n, size)
    assert r.time == pytest.approx(expected, rel=1e-9)
    assert r.busbw == pytest.approx(size / expected * BUSBW_FACTOR[op](n), rel=1e-9)
    # second check only: the package's alpha-beta reference agrees with the hand form
    base, _, net = hop_latencies(algo, "simple")
    assert base + alpha_beta_time(op, algo, n, size, net, NIC) == pytest.approx(expected,
                                                                               rel=1e-9)


def test_ring_allreduce_busbw_tends_to_link_bandwidth(tree16):
    small = run_collective(tree16, "allreduce", range(16), 2.0**20, algo="ring",
                           protocol="simple", routing="spray")
    large = run_collective(tree16, "allreduce", range(16), 2.0**32, algo="ring",
                           protocol="simple", routing="spray")
    assert small.busbw < 0.5 * NIC  # latency-bound
    assert large.busbw == pytest.approx(NIC, rel=3e-3)
    expected = 2 * 15 / 16 * 2.0**32 / NIC  # 2(n-1)/n S/B ...
    assert large.time - expected == pytest.approx(8.4e-6 + 30 * 14e-6)  # ... + latency terms


@pytest.mark.parametrize("op", ["allgather", "reducescatter"])
def test_ring_allgather_reducescatter_busbw_tends_to_link_bandwidth(tree16, op):
    n, size = 16, 16 * 2.0**30  # 16 GiB
    r = run_collective(tree16, op, range(n), size, algo="ring", protocol="simple",
                       routing="spray")
    # t = L + T with L = base + (n-1) network hops, T = (n-1)/n S/B; busbw = (n-1)/n S / t
    # = B T / (L + T): the NIC rate less the latency's share L / (L + T) of the time
    latency = 8.4e-6 + (n - 1) * 14e-6
    wire = (n - 1) / n * size / NIC
    share = latency / (latency + wire)
    assert share == pytest.approx(6.78e-4, rel=1e-3)  # 218.4 us of 322.1 ms
    assert r.busbw == pytest.approx(NIC * (1 - share), rel=1e-9)
    assert NIC * (1 - 1.01 * share) < r.busbw < NIC  # -> 50 GB/s within the latency share
    small = run_collective(tree16, op, range(n), 2.0**20, algo="ring", protocol="simple",
                           routing="spray")
    assert small.busbw < 0.1 * NIC  # 1 MiB: 218 us of latency vs 20 us on the wire


def test_protocol_efficiency_scales_wire_bytes(tree16):
    size = 2.0**28
    simple = run_collective(tree16, "allreduce", range(16), size, algo="ring", protocol="simple",
                            routing="spray")
    ll = run_collective(tree16, "allreduce", range(16), size, algo="ring", protocol="ll",
                        routing="spray")
    assert ll.time == pytest.approx(6.6e-6 + 30 * 2.7e-6 + 2 * 15 / 16 * size / (0.5 * NIC))
    assert ll.link_bytes.sum() == pytest.approx(2 * simple.link_bytes.sum())


def test_hierarchical_uses_nvlink_inside_hosts_exactly(segment):
    k, hosts, size = 8, 4, 2.0**30
    r = run_collective(segment, "allreduce", range(k * hosts), size, algo="hier",
                       protocol="simple", routing="hpn_dual_plane")
    kind, lb = segment.link_kind, r.link_bytes
    # every GPU sends and receives 2(k-1)/k S over its NVLink
    assert np.allclose(lb[kind == LinkKind.NVLINK], 2 * (k - 1) / k * size)
    # every NIC carries 2(H-1)/H of S/k, split evenly over its two ports (2 channels)
    # (pipelined: the phases run at once, time = the slower of NVLink and network)
    assert np.allclose(lb[kind == LinkKind.ACCESS], 2 * (hosts - 1) / hosts * size / k / 2)
    assert lb[kind == LinkKind.UPLINK].sum() == 0  # same rail, one segment: ToR hop only
    base, nv_hop, net_hop = hop_latencies("hier", "simple")   # ring latency table
    assert (base, nv_hop, net_hop) == (8.4e-6, 3.4e-6, 14e-6)
    port = NIC / 2   # 2 x 200G ports per NIC, one rail ring (channel) per port
    # pipelined: the reduce-scatter and all-gather rings (k-1)/k S each share NVLink while
    # the rail rings (2(H-1) network steps, each port one channel with half of 2(H-1)/H S/k)
    # run; the last phase ends after the hops of all three
    nv = 2 * (k - 1) / k * size / NVLINK
    net = 2 * (hosts - 1) / hosts * (size / k) / 2 / port
    # stage latencies are start delays: NVLink is busy from the reduce-scatter's start
    # (both NVLink rings share it; the all-gather needs its own half after its later start)
    by_hand = base + max(nv + (k - 1) * nv_hop,
                         nv / 2 + 2 * (k - 1) * nv_hop + 2 * (hosts - 1) * net_hop,
                         net + (k - 1) * nv_hop + 2 * (hosts - 1) * net_hop)
    # 9.40 ms (NVLink) > 4.03 ms (NIC); the old sequential form was 13.56 ms
    assert by_hand == pytest.approx(9.427e-3, rel=1e-3)
    assert r.time == pytest.approx(by_hand, rel=1e-9)
    sequential = base + hierarchical_time("allreduce", k, hosts, size, alpha_intra=nv_hop,
                                          bw_intra=NVLINK, alpha_inter=net_hop, bw_inter=NIC)
    assert sequential == pytest.approx(13.562e-3, rel=1e-4)
    assert r.hash_collisions == 0


def test_ecmp_bond_hash_collision_on_a_nic_port_is_counted_and_costs_one_network_phase():
    # 8 hosts of one segment, 2 channels per rail: the bond hash of ECMP puts both channels
    # of some NIC on one 200G port, HPN's round-robin puts one on each.
    pod, hosts, size = hpn7(segments=1), 8, 2.0**32
    runs = {policy: run_collective(pod, "allreduce", range(8 * hosts), size, algo="hier",
                                   protocol="simple", routing=policy)
            for policy in ("ecmp", "hpn_dual_plane")}
    ecmp, hpn = runs["ecmp"], runs["hpn_dual_plane"]
    assert (hpn.hash_collisions, hpn.max_link_flows) == (0, 1)
    assert ecmp.hash_collisions > 0 and ecmp.max_link_flows == 2
    # each channel's ring moves 2(H-1)/H of S/8/2 over its port; sharing a port doubles the
    # network phase, which (pipelined) runs alongside NVLink: time = max(NVLink, network)
    port = parse_bandwidth("200G")
    one_phase = 2 * (hosts - 1) / hosts * size / 8 / 2 / port
    nvlink = 2 * 7 / 8 * size / NVLINK
    assert hpn.time == pytest.approx(8.4e-6 + max(
        nvlink + 7 * 3.4e-6, nvlink / 2 + 14 * 3.4e-6 + 14 * 14e-6,
        one_phase + 7 * 3.4e-6 + 14 * 14e-6), rel=1e-9)
    # ECMP: the collided port carries two channels, so the network phase takes twice as long
    # (bounds: the rail ring's hop latencies overlap the NVLink phases' in the engine)
    assert ecmp.time == pytest.approx(2 * one_phase + 8.4e-6 + 7 * 3.4e-6 + 14 * 14e-6,
                                      rel=1e-9)


def test_halving_doubling_on_hosts_matches_hand_formula():
    # 8 GPUs per host: partners at distance 1, 2, 4 share a host (NVLink, S/2 + S/4 + S/8),
    # at 8 and 16 they sit on other hosts of the same rail (NIC, S/16 + S/32)
    seg = hpn7(segments=1, hosts_per_segment=5, backup_hosts=0, tor_uplinks=4,
               aggs_per_plane=4)
    size = 2.0**30
    base, nv_hop, net_hop = hop_latencies("hd", "simple")
    one_pass = (3 * nv_hop + 2 * net_hop + size * (1 / 2 + 1 / 4 + 1 / 8) / NVLINK
                + size * (1 / 16 + 1 / 32) / NIC)
    for op, passes in (("allreduce", 2), ("allgather", 1), ("reducescatter", 1)):
        r = run_collective(seg, op, range(32), size, algo="hd", protocol="simple",
                           routing="spray")
        assert r.time == pytest.approx(base + passes * one_pass, rel=1e-9)
        shape = GroupShape.from_fabric(seg, range(32), nccl=WIRE_RATE)
        assert model_time(op, "hd", "simple", shape, size) == pytest.approx(r.time, rel=1e-9)
    # 40 GPUs: host 4 folds its whole buffer into host 0 first and gets the result back last
    r = run_collective(seg, "allreduce", range(40), size, algo="hd", protocol="simple",
                       routing="spray")
    fold = net_hop + size / NIC
    assert r.time == pytest.approx(base + 2 * one_pass + 2 * fold, rel=1e-9)


def test_hierarchical_allgather_and_reducescatter_bytes(segment):
    k, hosts, size = 8, 4, 2.0**28
    for op in ("allgather", "reducescatter"):
        r = run_collective(segment, op, range(32), size, algo="hier", protocol="simple",
                           routing="spray")
        lb, kind = r.link_bytes, segment.link_kind
        assert np.allclose(lb[kind == LinkKind.NVLINK], (k - 1) / k * size)
        assert np.allclose(lb[kind == LinkKind.ACCESS], (hosts - 1) / hosts * size / k / 2)


def test_ring_on_hosts_is_bound_by_nvlink_with_one_relay_per_host(segment):
    size = 2.0**30
    r = run_collective(segment, "allreduce", range(32), size, algo="ring", protocol="simple",
                       routing="hpn_dual_plane")
    nv = r.link_bytes[segment.link_kind == LinkKind.NVLINK]
    # 16 channels: every GPU sends one chunk per channel over NVLink (the last GPU of a host
    # relays its chunk to the rail GPU, PXN), so NVLink carries 2(n-1)/n S per GPU
    assert np.allclose(nv, 2 * 31 / 32 * size)
    assert r.bottleneck.endswith("nvswitch") or "nvswitch" in r.bottleneck
    assert r.busbw == pytest.approx(NVLINK, rel=0.06)


def test_deps_chain_two_collectives(tree16):
    g = TaskGraph()
    first = compile_collective(g, tree16, "allreduce", range(16), 2.0**26, algo="ring",
                               protocol="simple", routing="spray")
    second = compile_collective(g, tree16, "allreduce", range(16), 2.0**26, algo="ring",
                                protocol="simple", routing="spray", deps=first)
    sim = simulate(g, tree16.link_capacity)
    one = run_collective(tree16, "allreduce", range(16), 2.0**26, algo="ring",
                         protocol="simple", routing="spray").time
    assert sim.finish[first[0]] == pytest.approx(one)
    assert sim.finish[second[0]] == pytest.approx(2 * one)


def test_two_concurrent_collectives_share_links(tree16):
    g = TaskGraph()
    a = compile_collective(g, tree16, "allreduce", range(16), 2.0**28, algo="ring",
                           protocol="simple", routing="spray")
    b = compile_collective(g, tree16, "allreduce", range(16), 2.0**28, algo="ring",
                           protocol="simple", routing="spray", seed=1)
    sim = simulate(g, tree16.link_capacity)
    alone = alpha_beta_time("allreduce", "ring", 16, 2.0**28, 14e-6, NIC)
    both = alpha_beta_time("allreduce", "ring", 16, 2.0**28, 14e-6, NIC / 2)
    assert sim.finish[a[0]] == pytest.approx(8.4e-6 + both) and sim.finish[b[0]] > alone


def test_single_gpu_and_determinism(segment):
    assert run_collective(segment, "allreduce", [3], 1e6, algo="ring").time == 0.0
    a = run_collective(segment, "allreduce", range(32), 2.0**24, algo="hd", routing="ecmp",
                       seed=3)
    b = run_collective(segment, "allreduce", range(32), 2.0**24, algo="hd", routing="ecmp",
                       seed=3)
    assert a.time == b.time and np.array_equal(a.link_bytes, b.link_bytes)


@pytest.fixture(scope="module")
def segment_fast():
    """The same segment with 900 GB/s NVLink: the NICs, not NVLink, limit the collectives."""
    return hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2, nvlink="900GB/s")


@pytest.mark.parametrize("fabric_name", ["segment", "segment_fast"])
@pytest.mark.parametrize("routing", ["spray", "hpn_dual_plane"])
@pytest.mark.parametrize("protocol", ["simple", "ll"])
def test_node_level_tree_matches_its_closed_form(request, fabric_name, routing, protocol):
    f = request.getfixturevalue(fabric_name)
    k, hosts, size = 8, 4, 2.0**30
    r = run_collective(f, "allreduce", range(32), size, algo="tree", protocol=protocol,
                       routing=routing)
    base, nv_hop, net_hop = hop_latencies("tree", protocol)
    eff = PROTOCOL_EFFICIENCY[protocol]
    nvlink = f.link_capacity[f.link_kind == LinkKind.NVLINK].max()
    # chains of 8 GPUs in each host (2(k-1) NVLink hops), trees of depth log2(4) = 2 over
    # hosts; bytes: NVLink 2(k-1)/k S per GPU, network 4 members of S/32 per NIC
    by_hand = (base + 2 * (k - 1) * nv_hop + 2 * 2 * net_hop
               + max(2 * (k - 1) / k * size / nvlink, 2 * size / (k * NIC)) / eff)
    assert r.time == pytest.approx(by_hand, rel=1e-9)
    shape = GroupShape.from_fabric(f, range(32), nccl=WIRE_RATE)
    assert r.time == pytest.approx(model_time("allreduce", "tree", protocol, shape, size),
                                   rel=1e-9)
    kind, lb = f.link_kind, r.link_bytes
    assert np.allclose(lb[kind == LinkKind.NVLINK], 2 * (k - 1) / k * size / eff)
    assert lb[kind == LinkKind.UPLINK].sum() == 0  # rail-aligned: one ToR hop
    # every tree edge between hosts carries S/2 each way per channel pair: 2(H-1) S in all
    access_up = (kind == LinkKind.ACCESS) & (f.node_kind[f.link_src] == NodeKind.NIC)
    assert lb[access_up].sum() == pytest.approx(2 * (hosts - 1) * size / eff)
    if routing == "hpn_dual_plane":  # a channel per port: both ports of a NIC equally
        ports = lb[access_up].reshape(-1, 2)
        assert np.allclose(ports[:, 0], ports[:, 1])


def segment_fast_by_hand(algo, size):
    """All-reduce on 4 hosts x 8 GPUs, NVLink 450 GB/s per direction, NIC 50 GB/s (2 ports),
    protocol LL128 (efficiency 0.92, wire bytes = payload / 0.92), written out."""
    k, hosts, n, eff = 8, 4, 32, 0.92
    nv_bw = 450e9
    if algo == "tree":
        base, nv_hop, net_hop = 14.0e-6, 1.25e-6, 8.5e-6   # NCCL tree LL128
        # chain of k GPUs per host up and down (2(k-1) NVLink hops), two binary trees of
        # depth log2 H = 2 over hosts (2 x 2 network hops); bytes: a mid-chain GPU sends
        # 2 members of S/2/C per tree per channel -> 2(k-1)/k S over NVLink; a NIC sends 4
        # members of S/2/C for the C/k = 2 channels of its rail -> 2 S / k
        return (base + 2 * (k - 1) * nv_hop + 2 * 2 * net_hop
                + max(2 * (k - 1) / k * size / nv_bw, 2 * size / k / NIC) / eff)
    base, nv_hop, net_hop = 14.0e-6, 1.9e-6, 4.0e-6       # NCCL ring LL128
    if algo == "ring":
        # 16 channels (8 rails x 2 ports), each a ring over all 32 GPUs: 2(n-1) steps; the
        # slowest rank's walk of 2(n-1) of the ring's 2n edges leaves out two NVLink edges,
        # so it crosses hosts 2H times; each GPU sends 2(n-1)/n S over NVLink (PXN relay
        # included), each NIC 2 of the 16 channels' 2(n-1)/n S/16 -> NIC-bound here
        return (base + (2 * (n - 1) - 2 * hosts) * nv_hop + 2 * hosts * net_hop
                + max(2 * (n - 1) / n * size / nv_bw,
                      2 * (n - 1) / n * size / 8 / NIC) / eff)
    if algo == "hier":
        # pipelined: NVLink reduce-scatter and all-gather ((k-1)/k S each, sharing NVLink)
        # run with the per-rail ring all-reduce of S/k (2(H-1)/H S/k over the NIC's 2 ports);
        # each phase ends at its bytes time + the hops of the phases up to it
        nv = 2 * (k - 1) / k * size / nv_bw / eff
        net = 2 * (hosts - 1) / hosts * (size / k) / NIC / eff
        # (stage latencies are start delays: NVLink busy from the reduce-scatter's start)
        return base + max(nv + (k - 1) * nv_hop,
                          nv / 2 + 2 * (k - 1) * nv_hop + 2 * (hosts - 1) * net_hop,
                          net + (k - 1) * nv_hop + 2 * (hosts - 1) * net_hop)
    raise AssertionError(algo)


@pytest.mark.parametrize("algo", ["ring", "hier", "tree"])
def test_group_closed_forms_match_simulation_on_a_segment(segment_fast, algo):
    assert segment_fast.link_capacity[segment_fast.link_kind == LinkKind.NVLINK].max() == 450e9
    assert (hop_latencies(algo, "ll128"), PROTOCOL_EFFICIENCY["ll128"]) == (
        (14.0e-6, 1.25e-6, 8.5e-6) if algo == "tree" else (14.0e-6, 1.9e-6, 4.0e-6), 0.92)
    shape = GroupShape.from_fabric(segment_fast, range(32), nccl=WIRE_RATE)
    for size in (2.0**12, 2.0**30):
        r = run_collective(segment_fast, "allreduce", range(32), size, algo=algo,
                           protocol="ll128", routing="hpn_dual_plane")
        assert r.time == pytest.approx(segment_fast_by_hand(algo, size), rel=1e-9)
        # second check only: the package's group closed form agrees
        assert model_time("allreduce", algo, "ll128", shape, size) == pytest.approx(
            segment_fast_by_hand(algo, size), rel=1e-9)


@pytest.mark.parametrize("size", [2.0**12, 2.0**22, 2.0**32])
def test_auto_picks_what_simulates_fastest(segment_fast, size):
    auto = run_collective(segment_fast, "allreduce", range(32), size, routing="spray")
    others = [run_collective(segment_fast, "allreduce", range(32), size, algo=a, protocol=p,
                             routing="spray").time
              for a in ("ring", "tree", "hier") for p in ("ll", "ll128", "simple")]
    assert auto.time == pytest.approx(min(others), rel=1e-9)


def test_auto_chooses_tree_on_many_hosts_and_ring_family_on_few(tree16, segment_fast):
    small = run_collective(tree16, "allreduce", range(16), 4096)
    assert (small.algo, small.protocol) == ("tree", "ll")
    # network-bound hosts, large buffer: the pipelined hierarchical form (max of NVLink and
    # network time, and (H-1)/H instead of (n-1)/n on the NIC)
    assert run_collective(segment_fast, "allreduce", range(32), 2.0**32).algo == "hier"


def test_plan_cache_gives_bit_identical_graphs_and_results(segment):
    def build():
        g = TaskGraph()
        finals = []
        for i in range(3):  # equal buckets, chained: the second and third hit the cache
            for routing, algo in (("hpn_dual_plane", "tree"), ("ecmp", "ring"),
                                  ("precise", "hier"), ("ecmp", "direct")):
                op = "alltoall" if algo == "direct" else "allreduce"
                finals += compile_collective(g, segment, op, range(32), 2.0**24, algo=algo,
                                             routing=routing, seed=3, deps=finals[-1:],
                                             priority=i % 2)
        sim = simulate(g, segment.link_capacity)
        return g.arrays(segment.n_links), sim

    plan_cache(enabled=False, clear=True)
    try:
        plain_graph, plain = build()
        assert plan_cache()["hits"] == 0
    finally:
        plan_cache(enabled=True)
    cached_graph, cached = build()
    assert plan_cache()["hits"] >= 8 and plan_cache()["entries"] >= 4
    for name in plain_graph.__dataclass_fields__:
        assert np.array_equal(getattr(plain_graph, name), getattr(cached_graph, name)), name
    assert np.array_equal(plain.finish, cached.finish)
    assert np.array_equal(plain.link_bytes, cached.link_bytes)


def test_plan_cache_keys_on_parameters_and_fabric(segment, segment_fast):
    a = plan_collective(segment, "allreduce", range(16), 1e6, algo="ring", seed=1)
    assert plan_collective(segment, "allreduce", range(16), 1e6, algo="ring", seed=1) is a
    assert plan_collective(segment, "allreduce", range(16), 1e6, algo="ring", seed=2) is not a
    assert plan_collective(segment, "allreduce", range(16), 2e6, algo="ring", seed=1) is not a
    assert plan_collective(segment, "allreduce", range(8, 24), 1e6, algo="ring",
                           seed=1) is not a
    assert plan_collective(segment_fast, "allreduce", range(16), 1e6, algo="ring",
                           seed=1) is not a


def test_bad_input(segment):
    with pytest.raises(InputError, match="gpus"):
        run_collective(segment, "allreduce", range(33), 1e6)
    with pytest.raises(InputError, match="policy|routing"):
        run_collective(segment, "allreduce", range(8), 1e6, routing="magic")
    with pytest.raises(InputError, match="size"):
        run_collective(segment, "allreduce", range(8), 0)


def test_schedule_cache_shares_a_schedule_across_routing_seeds(segment):
    # path selection plans a job's collectives once per routing seed: the algorithm and
    # schedule (which no seed changes) are worked out once, the routes per seed, and every
    # plan equals the one planned with both caches off
    from hpnsim.collectives.planning.plan import SCHEDULE_CACHE, plan_collective

    def plans():
        return [plan_collective(segment, "allreduce", range(32), 2.0**24, seed=s)
                for s in (0, 1, 2)]

    plan_cache(enabled=False, clear=True)
    try:
        plain = plans()
        assert SCHEDULE_CACHE.info()["hits"] == 0
    finally:
        plan_cache(enabled=True)
    cached = plans()
    assert SCHEDULE_CACHE.info()["hits"] == 2               # seeds 1 and 2
    assert cached[0].schedule is cached[1].schedule is cached[2].schedule
    assert plain[0].schedule is not plain[1].schedule
    for a, b in zip(plain, cached, strict=True):
        assert (a.algo, a.protocol, a.qps) == (b.algo, b.protocol, b.qps)
        for pa, pb in zip(a.wire_paths, b.wire_paths, strict=True):
            assert (pa is None) == (pb is None)
            if pa is not None:
                assert np.array_equal(pa.links, pb.links) and np.array_equal(pa.ptr, pb.ptr)
                assert np.array_equal(pa.weight, pb.weight)
    # the seeds route differently (else the test would not tell the routes apart)
    assert any(not np.array_equal(x.links, y.links) for x, y in
               zip(cached[0].wire_paths, cached[1].wire_paths, strict=True) if x is not None)
