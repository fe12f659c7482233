"""NCCL realism: efficiencies move closed form and simulation alike, NVLS, the pipelined
hierarchical all-reduce, QPs against a balls-into-bins expectation, all-gather vs all-reduce.

Every expected value is written out here from the schedule's byte counts (no package sums).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpnsim.collectives import run_collective
from hpnsim.collectives.closed_form.model import GroupShape, model_time
from hpnsim.collectives.nccl.params import WIRE_RATE, NcclParams
from hpnsim.errors import InputError
from hpnsim.fabrics import LinkKind, fat_tree, hpn7

NIC = 50e9            # 2 x 200G per NIC
H100_NVLINK = 450e9   # per direction


@pytest.fixture(scope="module")
def tree16():
    return fat_tree(4)


@pytest.fixture(scope="module")
def h100_host():
    return hpn7(segments=1, hosts_per_segment=1, backup_hosts=0, nvlink="900GB/s")


@pytest.fixture(scope="module")
def two_hosts():
    return hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2, nvlink="900GB/s")


@pytest.mark.parametrize("term, value", [("eff_ll128", 0.8), ("network_efficiency", 0.9),
                                         ("pcie_efficiency", 0.5)])
def test_each_network_efficiency_moves_closed_form_and_simulation_by_its_factor(tree16, term,
                                                                                value):
    # ring all-reduce, n = 16 single-GPU hosts, spraying: NIC-bound (PCIe Gen5 x16 = 63 GB/s;
    # at pcie_efficiency 0.5 it binds at 31.5 GB/s instead of the NIC's 50)
    n, size, proto = 16, 2.0**30, "ll128"
    base = WIRE_RATE
    moved = base.replace(**{term: value})
    pcie = tree16.link_capacity[tree16.link_kind == LinkKind.PCIE].max()
    latency = 14e-6 + 30 * 4.0e-6      # tuning.cc ring LL128: base 14 us, 4 us per net hop
    data = 2 * (n - 1) / n * size
    for params in (base, moved):
        rate = min(NIC * params.network_efficiency, pcie * params.pcie_efficiency)
        expect = latency + data / (params.eff_ll128 * rate)
        r = run_collective(tree16, "allreduce", range(n), size, algo="ring", protocol=proto,
                           routing="spray", nccl=params)
        shape = GroupShape.from_fabric(tree16, range(n), nccl=params)
        assert r.time == pytest.approx(expect, rel=1e-9)
        assert model_time("allreduce", "ring", proto, shape, size, nccl=params) == \
            pytest.approx(expect, rel=1e-9)
    factor = {"eff_ll128": 0.92 / 0.8, "network_efficiency": 1 / 0.9,
              "pcie_efficiency": NIC / (pcie * 0.5)}[term]
    t0 = run_collective(tree16, "allreduce", range(n), size, algo="ring", protocol=proto,
                        routing="spray", nccl=base).time - latency
    t1 = run_collective(tree16, "allreduce", range(n), size, algo="ring", protocol=proto,
                        routing="spray", nccl=moved).time - latency
    assert t1 / t0 == pytest.approx(factor, rel=1e-9)


def test_nvlink_efficiency_moves_an_nvlink_bound_ring_by_its_factor(h100_host):
    k, size = 8, 2.0**32
    times = {}
    for eff in (1.0, 0.824):
        params = WIRE_RATE.replace(nvlink_efficiency=eff)
        r = run_collective(h100_host, "allreduce", range(k), size, algo="ring",
                           protocol="simple", nccl=params)
        # one host: 2(k-1) NVLink steps of 3.4 us after 8.4 us; 2(k-1)/k S per GPU
        expect = 8.4e-6 + 14 * 3.4e-6 + 2 * (k - 1) / k * size / (H100_NVLINK * eff)
        assert r.time == pytest.approx(expect, rel=1e-9)
        shape = GroupShape.from_fabric(h100_host, range(k), nccl=params)
        assert model_time("allreduce", "ring", "simple", shape, size) == \
            pytest.approx(expect, rel=1e-9)
        times[eff] = r.time - 8.4e-6 - 14 * 3.4e-6
    assert times[0.824] / times[1.0] == pytest.approx(1 / 0.824, rel=1e-9)
    # busbw with NCCL's NVLink efficiency: 0.824 x 450 = 370.8 GB/s at large sizes
    assert 2 * (k - 1) / k * size / (times[0.824] + 8.4e-6 + 14 * 3.4e-6) / 1e9 == \
        pytest.approx(370.8, rel=5e-3)   # minus 56 us of latency over 20 ms


def test_nvls_busbw_on_one_h100_host_equals_its_closed_form(h100_host):
    k, size = 8, 2.0**32
    nccl = NcclParams.for_gpu("h100")
    r = run_collective(h100_host, "allreduce", range(k), size, algo="nvls", nccl=nccl)
    # multimem load + store: per GPU out S + S/k, in S/k + S over NVLink at
    # 450 GB/s x 0.824 (NCCL NVLink) x 0.85 (tuning.cc nvlsEfficiency, Hopper); latency:
    # tuning.cc NVLS base 0 + 25 us NVLink
    rate = H100_NVLINK * (20.6 / 25) * 0.85
    expect = 25e-6 + size * (k + 1) / k / rate
    assert (r.algo, r.protocol) == ("nvls", "simple")
    assert r.time == pytest.approx(expect, rel=1e-9)
    busbw = 2 * (k - 1) / k * size / expect
    assert r.busbw == pytest.approx(busbw, rel=1e-9)
    assert busbw / 1e9 == pytest.approx(2 * 7 / 9 * 450 * 0.824 * 0.85, rel=3e-3)  # ~490
    # NVLS beats the ring on one host, and auto takes it for large buffers on H100
    ring = run_collective(h100_host, "allreduce", range(k), size, algo="ring", nccl=nccl)
    assert r.time < ring.time
    assert run_collective(h100_host, "allreduce", range(k), size, nccl=nccl).algo == "nvls"
    # ... but never on a GPU without NVLink SHARP (A100: NVSwitch 2 has none)
    assert run_collective(h100_host, "allreduce", range(k), size,
                          nccl=NcclParams.for_gpu("a100")).algo != "nvls"


def test_nvls_refuses_non_simple_protocols_and_several_hosts(two_hosts):
    with pytest.raises(InputError):
        run_collective(two_hosts, "allreduce", range(16), 2.0**20, algo="nvls")


def test_pipelined_hier_tends_to_the_slower_of_nvlink_and_network(two_hosts):
    k, hosts = 8, 2
    nv_rate = H100_NVLINK * (20.6 / 25)          # NVLink payload rate
    net_rate = NIC * 4096 / (4096 + 82)          # NIC payload rate (RoCEv2 at MTU 4096)
    for size in (2.0**30, 2.0**34):
        r = run_collective(two_hosts, "allreduce", range(k * hosts), size, algo="hier",
                           protocol="simple", routing="hpn_dual_plane")
        nvlink = 2 * (k - 1) / k * size / nv_rate           # RS + AG over NVLink
        network = 2 * (hosts - 1) / hosts * size / k / net_rate   # rail rings of S/k
        slower, harmonic = max(nvlink, network), nvlink + network
        assert slower <= r.time < slower * 1.001 + 1e-3
        assert r.time < 0.75 * harmonic     # not the sum of the phases
    # large: time -> the slower phase (busbw -> its rate), within latency
    assert r.time == pytest.approx(max(nvlink, network), abs=1e-4)   # + hop latencies


def _port_split_slowdown(q: int) -> float:
    """E[max(B, Q - B)] / (Q / 2) for B ~ Binomial(Q, 1/2): Q QPs hashed uniformly onto two
    ports, the ring runs at the rate of the busier port."""
    expectation = sum(math.comb(q, b) * max(b, q - b) for b in range(q + 1)) / 2**q
    return expectation / (q / 2)


@pytest.mark.parametrize("q", [1, 2, 4, 8])
def test_qps_hashed_onto_two_ports_slow_a_ring_as_balls_into_bins(q):
    # two hosts, one GPU each in the group (rail 0), one channel: one connection per
    # direction, Q QPs each hashed by the NIC bond onto its two 200G ports (ECMP). A port
    # carrying m of the Q QPs moves m/Q of the connection's bytes at 25 GB/s.
    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
             aggs_per_plane=2)
    size, seeds = 2.0**30, 300
    ideal = 2 * (2 - 1) / 2 * size / NIC          # both ports evenly used, wire rate
    ratios = []
    for seed in range(seeds):
        r = run_collective(f, "allreduce", [0, 8], size, algo="ring", protocol="simple",
                           routing="ecmp", channels=1, qps=q, seed=seed, nccl=WIRE_RATE)
        ratios.append((r.time - 8.4e-6 - 2 * 14e-6) / ideal)
    expected = _port_split_slowdown(q)
    # each run's slowdown is the worse direction's (two connections): max of two draws
    per_run = [max(b1, q - b1, b2, q - b2) / (q / 2) for b1 in range(q + 1)
               for b2 in range(q + 1)]
    weights = [math.comb(q, b1) * math.comb(q, b2) / 4**q for b1 in range(q + 1)
               for b2 in range(q + 1)]
    expected = float(np.dot(per_run, weights))
    std = math.sqrt(float(np.dot(weights, (np.array(per_run) - expected) ** 2)) / seeds)
    assert np.mean(ratios) == pytest.approx(expected, abs=4 * std + 1e-9)
    assert _port_split_slowdown(1) == 2.0 and _port_split_slowdown(8) < 1.35


def test_allgather_and_allreduce_differ_where_their_schedules_do(h100_host, two_hosts):
    k, size = 8, 2.0**32
    nccl = NcclParams.for_gpu("h100")
    rate = H100_NVLINK * (20.6 / 25) * 0.85
    # NVLS on one host: all-reduce loads each NVLink (k+1)/k S, all-gather (store only) S
    ar = run_collective(h100_host, "allreduce", range(k), size, algo="nvls", nccl=nccl)
    ag = run_collective(h100_host, "allgather", range(k), size, algo="nvls", nccl=nccl)
    assert ar.time == pytest.approx(25e-6 + (k + 1) / k * size / rate, rel=1e-9)
    assert ag.time == pytest.approx(25e-6 + size / rate, rel=1e-9)
    assert ar.busbw / ag.busbw == pytest.approx(2 * (k - 1) / (k + 1) / ((k - 1) / k),
                                                rel=1e-3)     # 25 us latency aside
    # pipelined hier across 2 hosts: all-gather runs the rail ring once, all-reduce twice
    nv_rate = H100_NVLINK * (20.6 / 25)
    net_rate = NIC * 4096 / (4096 + 82)
    big = 2.0**34
    ag = run_collective(two_hosts, "allgather", range(16), big, algo="hier",
                        protocol="simple", routing="hpn_dual_plane")
    ar = run_collective(two_hosts, "allreduce", range(16), big, algo="hier",
                        protocol="simple", routing="hpn_dual_plane")
    assert ag.time == pytest.approx(max(7 / 8 * big / nv_rate, 1 / 2 * big / 8 / net_rate),
                                    abs=1e-4)
    assert ar.time == pytest.approx(max(2 * 7 / 8 * big / nv_rate, big / 8 / net_rate),
                                    abs=1e-4)


def test_bad_nccl_parameters_are_input_errors():
    for bad in ({"eff_ll": 1.5}, {"nvlink_efficiency": -0.1}, {"qps_per_connection": 0},
                {"nope": 1}):
        with pytest.raises(InputError):
            NcclParams.from_dict(bad)
