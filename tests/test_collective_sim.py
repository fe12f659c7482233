"""Simulated collectives on real fabrics against their closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from hpnsim.collectives import (
    alpha_beta_time,
    busbw_factor,
    compile_collective,
    hierarchical_time,
    hop_latencies,
    run_collective,
)
from hpnsim.engine import TaskGraph, simulate
from hpnsim.errors import InputError
from hpnsim.fabrics import LinkKind, fat_tree, hpn7
from hpnsim.units import parse_bandwidth

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


@pytest.mark.parametrize("op, algo", [
    ("allreduce", "ring"), ("allgather", "ring"), ("reducescatter", "ring"),
    ("allreduce", "tree"), ("allreduce", "hd"), ("allgather", "hd"), ("reducescatter", "hd"),
    ("broadcast", "ring"), ("reduce", "ring"), ("alltoall", "direct"), ("sendrecv", "direct"),
])
def test_non_blocking_fabric_matches_alpha_beta_exactly(tree16, op, algo):
    size, n = 2.0**30, 16
    r = run_collective(tree16, op, range(n), size, algo=algo, protocol="simple",
                       routing="spray")
    base, _, net = hop_latencies(algo, "simple")
    # every hop crosses the network: alpha = NCCL's network hop latency, plus base once
    assert r.time == pytest.approx(base + alpha_beta_time(op, algo, n, size, net, NIC),
                                   rel=1e-9)
    assert r.busbw == pytest.approx(size / r.time * busbw_factor(op, n))


def test_ring_allreduce_busbw_tends_to_link_bandwidth(tree16):
    small = run_collective(tree16, "allreduce", range(16), 2.0**20, algo="ring",
                           protocol="simple", routing="spray")
    large = run_collective(tree16, "allreduce", range(16), 2.0**32, algo="ring",
                           protocol="simple", routing="spray")
    assert small.busbw < 0.5 * NIC  # latency-bound
    assert large.busbw == pytest.approx(NIC, rel=3e-3)
    expected = 2 * 15 / 16 * 2.0**32 / NIC  # 2(n-1)/n S/B ...
    assert large.time - expected == pytest.approx(8.4e-6 + 30 * 14e-6)  # ... + latency terms


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
    assert np.allclose(lb[kind == LinkKind.ACCESS], 2 * (hosts - 1) / hosts * size / k / 2)
    assert lb[kind == LinkKind.UPLINK].sum() == 0  # same rail, one segment: ToR hop only
    base, nv_hop, net_hop = hop_latencies("hier", "simple")
    expect = base + hierarchical_time("allreduce", k, hosts, size, alpha_intra=nv_hop,
                                      bw_intra=NVLINK, alpha_inter=net_hop, bw_inter=NIC)
    assert r.time == pytest.approx(expect, rel=1e-9)
    assert r.hash_collisions == 0


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


def test_auto_chooses_by_size(segment):
    small = run_collective(segment, "allreduce", range(32), 4096)
    large = run_collective(segment, "allreduce", range(32), 2.0**30)
    assert (small.algo, small.protocol) == ("tree", "ll")
    assert (large.algo, large.protocol) == ("hier", "simple")


def test_bad_input(segment):
    with pytest.raises(InputError, match="gpus"):
        run_collective(segment, "allreduce", range(33), 1e6)
    with pytest.raises(InputError, match="policy|routing"):
        run_collective(segment, "allreduce", range(8), 1e6, routing="magic")
    with pytest.raises(InputError, match="size"):
        run_collective(segment, "allreduce", range(8), 0)
