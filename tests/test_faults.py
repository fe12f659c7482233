"""Faults: closed forms for failover on a ring all-reduce, single-ToR stall, flapping,
recovery, job restart from checkpoints, and bad-fault errors."""

from __future__ import annotations

import numpy as np
import pytest
from fault_rings import ring

from hpnsim.collectives import PROTOCOL_EFFICIENCY
from hpnsim.errors import InputError
from hpnsim.fabrics import FabricState, hpn7
from hpnsim.faults.events import parse_fault
from hpnsim.faults.failover import FailoverPolicy
from hpnsim.faults.runner import JobPlan, RecoveryPolicy, simulate_with_faults
from hpnsim.training.job import TrainJob

HOSTS = [0, 8, 16, 24]          # rail 0 of 4 hosts: a ring over hosts, one ToR hop
PORT = 200e9 / 8                # bytes/s of one 200G NIC port


def small(mode):
    return hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2, dual_tor=mode)


def ring_through(fabric, size, faults, routing, policy=FailoverPolicy()):
    """Ring all-reduce over HOSTS through ``faults`` (see fault_rings.ring)."""
    return ring(fabric, HOSTS, size, faults, routing, policy)


def test_nonstacked_lost_port_halves_the_ring_bandwidth_term():
    # Two rings (one per NIC port/plane) each carry S/2 at one port's rate B:
    # T(S) = alpha + 2 (N-1)/N * (S/2) / (B * eff). Losing port 0 of host 1 moves its
    # plane-0 ring onto port 1, which both rings then share (B/2 each; a coupled ring goes at
    # its slowest member): the bandwidth term doubles, alpha is unchanged.
    f = small("nonstacked")
    n, eff = len(HOSTS), PROTOCOL_EFFICIENCY["simple"]
    fault = [parse_fault("link:gpu8.port0@0+1000s")]
    s1, s2 = 64e6, 128e6
    ok = [ring_through(f, s, [], "hpn_dual_plane") for s in (s1, s2)]
    bad = [ring_through(f, s, fault, "hpn_dual_plane",
                        FailoverPolicy(convergence_delay=0.0)) for s in (s1, s2)]
    slope_ok = (ok[1] - ok[0]) / (s2 - s1)
    assert slope_ok == pytest.approx(2 * (n - 1) / n / 2 / (PORT * eff), rel=1e-9)
    assert (bad[1] - bad[0]) / (s2 - s1) == pytest.approx(2 * slope_ok, rel=1e-9)
    alpha = ok[0] - slope_ok * s1
    assert bad[0] == pytest.approx(alpha + 2 * slope_ok * s1, rel=1e-9)


def test_nonstacked_failover_mid_collective_keeps_the_surviving_port_busy():
    # Fault at t_f, with R = T_ok - t_f of each ring left (in full-rate time). Host 1's
    # plane-0 ring stalls for the convergence delay d while the plane-1 ring keeps port 1
    # busy; after failover both rings share port 1, which must carry both rings' remaining
    # bytes: 2R of port time from t_f with no idle moment (d <= R), so T = t_f + 2R.
    f = small("nonstacked")
    size, d = 512e6, 0.002
    t_ok = ring_through(f, size, [], "hpn_dual_plane")
    t_f = t_ok / 2
    fault = [parse_fault(f"link:gpu8.port0@{t_f}s+1000s")]
    t = ring_through(f, size, fault, "hpn_dual_plane", FailoverPolicy(convergence_delay=d))
    assert d <= t_ok - t_f
    assert t == pytest.approx(t_f + 2 * (t_ok - t_f), rel=1e-9)


def test_single_tor_stalls_the_ring_for_the_repair_time():
    # single ToR: no other way; the coupled ring stops while the link is down: T = T_ok + D.
    f = small("single")
    size, repair = 512e6, 0.05
    t_ok = ring_through(f, size, [], "ecmp")
    fault = [parse_fault(f"link:gpu8.port0@{t_ok / 2}s+{repair}s")]
    assert ring_through(f, size, fault, "ecmp") == pytest.approx(t_ok + repair, rel=1e-9)


def test_flapping_link_under_dual_tor_costs_at_most_its_convergence_delays():
    # Each flap of down time u >= d costs d (stall until routes move) + (u - d)/2 (half rate);
    # with u < d routes never move and it costs u <= d. Never more than count * d + the
    # half-rate share, never less than the stalls.
    f = small("nonstacked")
    size, d = 2048e6, 0.004
    t_ok = ring_through(f, size, [], "hpn_dual_plane")
    u, period, count = 0.003, t_ok / 8, 3
    flap = [parse_fault(f"flap:gpu8.port0@{t_ok / 4}s+{u}s/{period}s*{count}")]
    extra = ring_through(f, size, flap, "hpn_dual_plane",
                         FailoverPolicy(convergence_delay=d)) - t_ok
    assert u < d and extra == pytest.approx(count * u, rel=1e-6)
    assert extra <= count * d
    u = 0.006
    flap = [parse_fault(f"flap:gpu8.port0@{t_ok / 4}s+{u}s/{period}s*{count}")]
    extra = ring_through(f, size, flap, "hpn_dual_plane",
                         FailoverPolicy(convergence_delay=d)) - t_ok
    assert extra == pytest.approx(count * (d + (u - d) / 2), rel=1e-6)


def test_routes_come_back_after_repair_and_no_cache_from_before_is_used():
    from hpnsim.collectives.planning.plan import plan_cache

    f = small("nonstacked")
    s = FabricState(f)
    before = s.fingerprint
    s.set_down(parse_links(f, "gpu8.port0")).set_up(parse_links(f, "gpu8.port0"))
    assert s.fingerprint == before
    job = JobPlan("j", TrainJob("llama3-8b", tp=8, dp=4, global_batch=16), np.arange(32),
                  iterations=5)
    fault = [parse_fault("link:gpu8.port0@0.2s+1s")]
    [a] = simulate_with_faults(f, [job], fault, routing="hpn_dual_plane")
    plan_cache(clear=True)
    plan_cache(enabled=False)
    try:
        [b] = simulate_with_faults(f, [job], fault, routing="hpn_dual_plane")
    finally:
        plan_cache(enabled=True)
    assert a.rows == b.rows
    # iterations that start after the repair run exactly as on the healthy fabric
    after = [r for r in a.rows if r["start"] >= 1.2]
    assert after and all(r["iteration_time"] == pytest.approx(a.nominal, rel=1e-12)
                         for r in after)


def parse_links(fabric, port):
    from hpnsim.faults.events import resolve_links

    return resolve_links(fabric, parse_fault(f"link:{port}@0+1"))


def test_single_tor_job_fails_past_the_timeout_and_restarts_from_the_checkpoint():
    # fault at 0.5 s for 20 s, timeout 2 s, restart 3 s, last checkpoint 10 s before the
    # start: fails at 2.5, resumes at 5.5 (a spare host), lost work = 0.5 + 2 + 3 + 10 = 15.5;
    # all 4 iterations are redone from the checkpoint on healthy hardware: 5.5 + 4 T0.
    f = small("single")
    job = JobPlan("j", TrainJob("llama3-8b", tp=8, dp=4, global_batch=16), np.arange(32),
                  iterations=4)
    rec = RecoveryPolicy(timeout=2.0, restart_time=3.0, checkpoint_age=10.0)
    [t] = simulate_with_faults(f, [job], [parse_fault("link:gpu8.port0@0.5s+20s")],
                               recovery=rec)
    [r] = t.restarts
    assert (r.failed_at, r.resumed_at, r.lost_work) == pytest.approx((2.5, 5.5, 15.5))
    assert t.finish == pytest.approx(5.5 + 4 * t.nominal, rel=1e-12)
    # a repair shorter than the timeout: a stall, no restart
    [t] = simulate_with_faults(f, [job], [parse_fault("link:gpu8.port0@0.5s+1s")],
                               recovery=rec)
    assert t.restarts == [] and t.finish <= 4 * t.nominal + 1.0 + 1e-9


def test_restart_goes_back_to_the_last_checkpoint_written():
    # checkpoint every 2 iterations (interval 2 T0), write w = 0.25 s; the fault comes 0.1 s
    # after the first checkpoint is written (2 T0 + w): fails 2 s later, resumes after 3 s:
    # lost work = 0.1 + 2 + 3 = 5.1, and the job redoes iterations 2.. from there.
    f = small("single")
    job = JobPlan("j", TrainJob("llama3-8b", tp=8, dp=4, global_batch=16), np.arange(32),
                  iterations=5)
    [t0] = simulate_with_faults(f, [job], [parse_fault("link:gpu8.port0@100s+1s")])
    T0, w = t0.nominal, 0.25
    rec = RecoveryPolicy(timeout=2.0, restart_time=3.0, checkpoint_interval=2 * T0,
                         checkpoint_write=w)
    at = 2 * T0 + w + 0.1
    [t] = simulate_with_faults(f, [job], [parse_fault(f"link:gpu8.port0@{at}s+60s")],
                               recovery=rec)
    [r] = t.restarts
    assert r.checkpoint_iteration == 2
    assert r.last_checkpoint == pytest.approx(2 * T0 + w, rel=1e-12)
    assert r.lost_work == pytest.approx(0.1 + 2.0 + 3.0, rel=1e-9)
    assert [row["iteration"] for row in t.rows if row["attempt"] == 1] == [2, 3, 4]


@pytest.mark.parametrize("text, field", [
    ("link:gpu999.port0@1s+1s", "--fault.target"),
    ("link:gpu1.port0@-1s+1s", "--fault"),
    ("link:gpu1.port0@1s+0s", "--fault.duration"),
    ("flap:gpu1.port0@1s+2s/1s*3", "--fault.period"),
    ("agg:pod0/seg0/tor-r1-p0@1s+1s", "--fault.target"),
    ("bogus:gpu1.port0@1s+1s", "--fault.kind"),
])
def test_bad_faults_name_the_field(text, field):
    with pytest.raises(InputError) as err:
        fault = parse_fault(text)
        from hpnsim.faults.events import resolve_links
        resolve_links(small("nonstacked"), fault)
    assert err.value.field == field


def test_cli_bad_fault_exits_2_with_one_line():
    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    out = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "4",
                                   "--fault", "link:gpu999.port0@1s+1s"])
    assert out.exit_code == 2
    lines = [x for x in out.output.splitlines() if x.strip()]
    assert lines == ["error: --fault: no GPU 999 (the fabric has 32), got 'gpu999.port0'"]


def test_scenario_fault_errors_by_yaml_path():
    from hpnsim.scenario.runner import run

    base = {"fabric": {"template": "hpn7", "segments": 1, "hosts_per_segment": 4,
                       "backup_hosts": 0},
            "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 4, "global_batch": 16}]}
    with pytest.raises(InputError) as err:
        run({**base, "faults": [{"kind": "link", "target": "gpu1.port0", "at": "-1s",
                                 "duration": "1s"}]})
    assert err.value.field == "faults[0].at"
    with pytest.raises(InputError) as err:
        run({**base, "faults": [{"kind": "tor_crash", "target": "pod0/seg0/tor-r9-p0",
                                 "at": 0, "duration": 1}]})
    assert err.value.field == "faults[0].target"


def test_reroute_replans_with_the_options_the_collective_was_compiled_with():
    # an H800 job's cross-host DP all-reduce runs NVLS+tree (its GPU's NCCL parameters);
    # re-planned with generic parameters it would be a different schedule ("hier", 18
    # stages instead of 33) and the rerouter could not map it onto the compiled tasks
    from hpnsim.fabrics import FabricState, hpn7
    from hpnsim.faults.reroute import Rerouter
    from hpnsim.training import TrainJob, build_iteration_graph

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    it = build_iteration_graph(TrainJob("llama3-8b", tp=1, dp=16, global_batch=16, gpu="h800"),
                               f, routing="hpn_dual_plane")
    records = [r for r in it.routes if r.op != "p2p"]
    assert {r.options.nccl.nvls for r in records} == {True}
    rerouter = Rerouter(f, it.graph)
    assert rerouter.changes(it.routes, it.routing, it.seed, None) == []
    l0 = int(f.gpu_access_link[0, 0])
    moved = rerouter.changes(it.routes, it.routing, it.seed, FabricState(f).set_down([l0, l0 ^ 1]))
    assert moved and all(l0 not in links and (l0 ^ 1) not in links for _, links, _ in moved)
