"""Faults per ToR design and per tier: the stacked pair (LACP failover, a data-plane failure
taking the pair down with its probability), ToR, Agg and core-link faults, and two jobs
sharing one fault. Every expected time is a closed form written here."""

from __future__ import annotations

import numpy as np
import pytest
from fault_rings import ring

from hpnsim.collectives import PROTOCOL_EFFICIENCY
from hpnsim.fabrics import hpn7
from hpnsim.fabrics.fabric import LinkKind
from hpnsim.faults.events import parse_fault
from hpnsim.faults.failover import FailoverPolicy, fault_changes
from hpnsim.faults.runner import JobPlan, RecoveryPolicy, simulate_with_faults
from hpnsim.training.job import TrainJob

RAIL0 = [0, 8, 16, 24]          # GPU 0 of hosts 0..3: a ring over hosts, rail 0
UPLINK = 400e9 / 8              # bytes/s of a 400G ToR uplink (and a single-ToR bonded NIC)


def small(mode, **options):
    base = dict(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2, dual_tor=mode)
    return hpn7(**{**base, **options})


def slope(fabric, gpus, faults, routing, policy=FailoverPolicy(), seed=0, sizes=(64e6, 128e6)):
    """(bandwidth term per byte, alpha) of the ring's time from two sizes."""
    t = [ring(fabric, gpus, s, faults, routing, policy, seed) for s in sizes]
    per_byte = (t[1] - t[0]) / (sizes[1] - sizes[0])
    return per_byte, t[0] - per_byte * sizes[0]


def test_stacked_link_failure_fails_over_after_the_lacp_delay():
    # As non-stacked, but the detection is LACP's (d = lacp_delay), not BGP's: the host's
    # plane-0 ring stalls d while the plane-1 ring keeps port 1 busy, then both share port 1,
    # which carries 2R of port time from t_f with no idle moment: T = t_f + 2R (d <= R).
    # The convergence delay is set far longer than the collective, so a wrong delay shows.
    f = small("stacked")
    size, d = 512e6, 0.002
    t_ok = ring(f, RAIL0, size, [], "hpn_dual_plane")
    t_f = t_ok / 2
    policy = FailoverPolicy(convergence_delay=10 * t_ok, lacp_delay=d)
    t = ring(f, RAIL0, size, [parse_fault(f"link:gpu8.port0@{t_f}s+1000s")],
             "hpn_dual_plane", policy)
    assert d <= t_ok - t_f
    assert t == pytest.approx(t_f + 2 * (t_ok - t_f), rel=1e-9)


def _pair_down(fabric, p, seed):
    """Did the stacked data-plane failure of tor-r0-p0 take its sibling down too?"""
    tor, sibling = fabric.find_node("pod0/seg0/tor-r0-p0"), fabric.find_node("pod0/seg0/tor-r0-p1")
    [change, *_] = fault_changes(fabric, [parse_fault("tor_dataplane:pod0/seg0/tor-r0-p0@1s+1s")],
                                 FailoverPolicy(pair_down_probability=p, seed=seed))
    src, dst = fabric.link_src[change.links], fabric.link_dst[change.links]
    # a link of the sibling other than the pair's peer link
    sibling_own = ((src == sibling) | (dst == sibling)) & (src != tor) & (dst != tor)
    return bool(sibling_own.any()), bool(((src == tor) | (dst == tor)).any())


def test_stacked_dataplane_failure_takes_the_pair_down_with_its_probability():
    f = small("stacked")
    assert all(_pair_down(f, 1.0, s) == (True, True) for s in range(5))
    assert all(_pair_down(f, 0.0, s) == (False, True) for s in range(5))
    draws = [_pair_down(f, 0.5, s)[0] for s in range(400)]
    assert draws == [_pair_down(f, 0.5, s)[0] for s in range(400)]       # seeded
    # Bernoulli(1/2) over 400 seeds: within 4 standard errors (4 * sqrt(.25 / 400) = 0.1)
    assert abs(np.mean(draws) - 0.5) <= 0.1
    down, kept = draws.index(True), draws.index(False)
    # both outcomes on a ring over the rail-0 hosts, failure at t_f for D:
    size, d, repair = 512e6, 0.002, 0.05
    t_ok = ring(f, RAIL0, size, [], "hpn_dual_plane")
    t_f = t_ok / 2
    fault = [parse_fault(f"tor_dataplane:pod0/seg0/tor-r0-p0@{t_f}s+{repair}s")]
    # the pair went dark: every host of the rail is cut off, the ring stops for D
    t = ring(f, RAIL0, size, fault, "hpn_dual_plane",
             FailoverPolicy(lacp_delay=d, pair_down_probability=0.5, seed=down))
    assert t == pytest.approx(t_ok + repair, rel=1e-9)
    # the pair isolated the failed ToR: every host loses port 0 after d, both rings share
    # port 1 (t_f + 2R as a lost link, for every host at once); D > 2R so no repair first
    assert repair > 2 * (t_ok - t_f)
    t = ring(f, RAIL0, size, fault, "hpn_dual_plane",
             FailoverPolicy(lacp_delay=d, pair_down_probability=0.5, seed=kept))
    assert t == pytest.approx(t_f + 2 * (t_ok - t_f), rel=1e-9)


def test_nonstacked_tor_crash_moves_every_host_to_the_other_plane():
    # tor-r0-p0 gone: all four hosts lose port 0 of their rail-0 NIC; both rings (one per
    # plane, S/2 each) share port 1 at B/2: the bandwidth term 2(N-1)/N (S/2)/(B eff) doubles.
    f = small("nonstacked")
    n, eff, port = len(RAIL0), PROTOCOL_EFFICIENCY["simple"], 200e9 / 8
    ok, alpha_ok = slope(f, RAIL0, [], "hpn_dual_plane")
    bad, alpha = slope(f, RAIL0, [parse_fault("tor_crash:pod0/seg0/tor-r0-p0@0+1000s")],
                       "hpn_dual_plane", FailoverPolicy(convergence_delay=0.0))
    assert ok == pytest.approx(2 * (n - 1) / n / 2 / (port * eff), rel=1e-9)
    assert bad == pytest.approx(2 * ok, rel=1e-9)
    assert alpha == pytest.approx(alpha_ok, rel=1e-6)


def test_agg_failure_rehashes_over_the_remaining_agg():
    # Two segments of two hosts, single ToR (400G bonded NICs), 2 Aggs, one 400G uplink to
    # each. The ring 0 -> 16 -> 8 -> 24 -> 0 crosses segments twice each way: each ToR's
    # uplinks carry two ring members. With a hash seed that spreads them over both Aggs the
    # ring runs at U: bandwidth term 2(N-1)/N S/(U eff). With either Agg gone, ECMP rehashes
    # both onto the last Agg: U/2 each, and the term doubles; alpha is unchanged.
    f = small("single", segments=2, hosts_per_segment=2)
    gpus, n, eff = [0, 16, 8, 24], 4, PROTOCOL_EFFICIENCY["simple"]
    full = 2 * (n - 1) / n / (UPLINK * eff)
    seeds = [s for s in range(8) if slope(f, gpus, [], "ecmp", seed=s)[0] ==
             pytest.approx(full, rel=1e-9)]
    assert seeds, "some hash seed spreads the two members over the two Aggs"
    _, alpha_ok = slope(f, gpus, [], "ecmp", seed=seeds[0])
    for agg in ("pod0/agg-0", "pod0/agg-1"):
        per_byte, alpha = slope(f, gpus, [parse_fault(f"agg:{agg}@0+1000s")], "ecmp",
                                FailoverPolicy(convergence_delay=0.0), seed=seeds[0])
        # the last Agg's uplink, shared by both members, carries their RoCEv2 framing too
        # (NcclParams.network_efficiency = 4096 / 4178 at MTU 4096)
        assert per_byte == pytest.approx(2 * full * 4178 / 4096, rel=1e-9)
        assert alpha == pytest.approx(alpha_ok, rel=1e-6)


def test_core_link_failure_costs_the_ring_exactly_the_detection_delay():
    # Two pods of one segment; the ring 0 -> 8 -> 16 -> 24 crosses the core once each way, one
    # member per directed link. A core cable on a member's path stops the coupled ring for the
    # convergence delay d; the fixed core mapping then falls back to hashing over the other
    # core link, of the same capacity and unshared: T = T_ok + d. A cable off the path: T_ok.
    f = small("single", pods=2, hosts_per_segment=2, agg_core_uplinks=2)
    size, d = 512e6, 0.002
    t_ok = ring(f, RAIL0, size, [], "ecmp")
    extra = []
    for link in np.flatnonzero(f.link_kind == LinkKind.CORE)[::2]:
        fault = [parse_fault(f"core_link:{f.link_name(int(link))}@{t_ok / 2}s+1000s")]
        extra.append(ring(f, RAIL0, size, fault, "ecmp", FailoverPolicy(convergence_delay=d))
                     - t_ok)
    assert all(x == pytest.approx(0, abs=1e-12) or x == pytest.approx(d, rel=1e-6)
               for x in extra)
    assert any(x == pytest.approx(d, rel=1e-6) for x in extra)


def _two_jobs(iterations=3):
    job = TrainJob("llama3-8b", tp=8, dp=2, global_batch=8)
    return [JobPlan("a", job, np.arange(0, 16), iterations=iterations),
            JobPlan("b", job, np.arange(16, 32), iterations=iterations)]


def test_two_jobs_cut_off_by_one_single_tor_crash_both_restart_after_the_repair():
    # One ToR (rail 0) serves every host: both jobs are cut off at 0.5 s, time out 2 s later
    # (2.5 s), and, a switch needing repair rather than a spare host, resume at
    # max(2.5 + restart 3, repair 20.5) = 20.5 s. Lost work = 20.5 - last checkpoint (the
    # start, 0). Each then runs its 3 iterations on the healthy fabric: 20.5 + 3 T0.
    f = small("single")
    rec = RecoveryPolicy(timeout=2.0, restart_time=3.0)
    timelines = simulate_with_faults(f, _two_jobs(),
                                     [parse_fault("tor_crash:pod0/seg0/tor-r0@0.5s+20s")],
                                     recovery=rec)
    for t in timelines:
        [r] = t.restarts
        assert (r.failed_at, r.resumed_at, r.lost_work) == pytest.approx((2.5, 20.5, 20.5))
        assert t.finish == pytest.approx(20.5 + 3 * t.nominal, rel=1e-12)


def test_two_jobs_sharing_a_nonstacked_tor_crash_keep_running():
    # Non-stacked: the same crash costs each job half of its rail-0 NICs' bandwidth for the
    # repair, never a restart; iterations started after the repair run at the nominal time.
    f = small("nonstacked")
    timelines = simulate_with_faults(f, _two_jobs(4),
                                     [parse_fault("tor_crash:pod0/seg0/tor-r0-p0@0s+1.5s")],
                                     routing="hpn_dual_plane")
    for t in timelines:
        assert t.restarts == [] and len(t.rows) == 4
        assert t.rows[0]["iteration_time"] > t.nominal
        after = [r for r in t.rows if r["start"] >= 1.5]
        assert after and all(r["iteration_time"] == pytest.approx(t.nominal, rel=1e-12)
                             for r in after)
