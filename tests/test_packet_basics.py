"""Packet engine against hand derivations: store-and-forward latency, the 2:1 incast queue
ramp, PFC (lossless, pause timing, headroom bound) and max-min agreement without CC/PFC."""

from __future__ import annotations

import numpy as np
import pytest

from hpnsim.engine import run_flows
from hpnsim.packet import PacketParams, load_params, params_dict, preset, simulate_flows

GBPS = 1e9 / 8


def test_one_packet_store_and_forward_over_three_hops():
    cap = np.array([100, 40, 200]) * GBPS
    delay = np.array([1.0e-6, 2.0e-6, 0.5e-6])
    p = PacketParams()
    # one 1000-byte payload in a RoCEv2 frame, plus preamble, SFD and gap on every wire
    line = 1000 + p.header_bytes + p.framing_bytes
    r = simulate_flows(cap, delay, [[0, 1, 2]], [1000], params=p, switch_of=[-1, 0, 1])
    expected = sum(line / c + d for c, d in zip(cap, delay, strict=True))
    assert r.finish[0] == pytest.approx(expected, rel=1e-12)
    assert r.events == 2 + 3 * 2      # start, NIC port wake, then TX_DONE + ARRIVE per hop


def test_packet_train_pipelines_behind_the_slowest_hop():
    # n equal packets through FIFO stages: sum of one packet's services + (n-1) x the slowest
    cap = np.array([100, 40, 200]) * GBPS
    delay = np.full(3, 1e-6)
    p = PacketParams(header_bytes=0, mtu_bytes=4096)
    n = 7
    r = simulate_flows(cap, delay, [[0, 1, 2]], [n * 4096], params=p, switch_of=[-1, 0, 1])
    line = 4096 + p.framing_bytes                   # line bytes of one packet
    expected = sum(line / cap) + delay.sum() + (n - 1) * line / cap.min()
    assert r.finish[0] == pytest.approx(expected, rel=1e-12)
    assert r.q_max[1] > 0 and r.q_max[2] == 0     # packets wait at the 40G hop only


def _incast(n_senders, cap, delay, params, size, **kw):
    """n NIC links 0..n-1 into switch 0, which sends on link n to the receiver."""
    paths = [[i, n_senders] for i in range(n_senders)]
    switch_of = [-1] * n_senders + [0]
    return simulate_flows(np.full(n_senders + 1, cap), delay, paths, size, params=params,
                          switch_of=switch_of, **kw)


def test_incast_2_to_1_queue_grows_at_the_excess_rate_until_ecn_acts():
    cap, d = 50e9, 0.5e-6                              # 400 Gb/s, 100 m of fibre
    p = PacketParams()                                 # ConnectX + SimAI 400G ECN
    wire = p.mtu_bytes + p.header_bytes
    rate = cap * wire / (wire + p.framing_bytes)       # frame bytes/s a line-rate port moves
    dt = 0.25e-6
    r = _incast(2, cap, d, p, 64e6, watch=[2], sample_interval=dt, max_samples=4000)
    t0 = (wire + p.framing_bytes) / cap + d   # both first packets are at the switch
    # no packet can be marked before the queue passes Kmin, nor XOFF sent before a fifth of
    # the buffer (below): until t0 + Kmin/rate the queue rises at 2 rate - rate exactly (in
    # frame bytes: preamble and gap are not buffered)
    t_clean = t0 + p.kmin_bytes / rate
    t, q = r.sample_times, r.samples[:, 0]
    window = (t > t0 + 4 * wire / cap) & (t < t_clean)
    slope = np.polyfit(t[window], q[window], 1)[0]
    assert slope == pytest.approx(rate, rel=0.01)
    # sample-by-sample: within two packets of rate (t - t0) (one in service, one arriving)
    assert np.all(np.abs(q[window] - rate * (t[window] - t0)) <= 2 * wire)
    # then marks and CNPs act, and PFC caps what they do not: the queue stays under the
    # XOFF level of two equal ingresses, q_x = 2aS / (1 + 2a), plus both headrooms
    assert r.marks[2] > 0 and r.cnps.sum() > 0 and r.drops.sum() == 0
    headroom = p.headroom_bdp * 2 * d * cap + 2 * wire
    shared = p.buffer_bytes - 2 * headroom
    q_x = 2 * p.pfc_alpha * shared / (1 + 2 * p.pfc_alpha)
    assert r.q_max[2] <= q_x + 2 * headroom


def test_incast_2_to_1_without_cc_stops_at_the_pfc_threshold():
    # both ingresses hold q/2; dynamic XOFF when q/2 >= a (B - q): q_x = 2aB / (1 + 2a)
    cap, d = 50e9, 0.5e-6
    p = PacketParams(cc=False, ecn=False, buffer_bytes=4e6)
    wire = p.mtu_bytes + p.header_bytes
    r = _incast(2, cap, d, p, 8e6)
    headroom = p.headroom_bdp * 2 * d * cap + 2 * wire
    shared = p.buffer_bytes - 2 * headroom               # each ingress reserves its headroom
    a = p.pfc_alpha
    q_x = 2 * a * shared / (1 + 2 * a)
    line = wire + p.framing_bytes
    t0 = line / cap + d
    rate = cap * wire / line                             # frame bytes/s of a line-rate port
    assert r.first_xoff[0] == pytest.approx(t0 + q_x / rate, abs=3 * line / cap)
    assert r.first_xoff[1] == pytest.approx(t0 + q_x / rate, abs=3 * line / cap)
    assert q_x <= r.q_max[2] <= q_x + 2 * headroom
    assert r.drops.sum() == 0
    # each sender was paused, and the pair still drained the receiver link at line rate
    assert np.all(r.paused_time[:2] > 0)
    assert r.makespan == pytest.approx(2 * 8e6 * (1 + (p.header_bytes + p.framing_bytes)
                                                   / p.mtu_bytes) / cap, rel=0.01)


@pytest.mark.parametrize("pfc", [True, False])
def test_pfc_never_drops_and_the_pause_arrives_after_the_link_delay(pfc):
    cap, d = 25e9, 2e-6                                # 200 Gb/s, 400 m: a long pause trip
    p = PacketParams(cc=False, ecn=False, pfc=pfc, buffer_bytes=1.5e6)
    wire = p.mtu_bytes + p.header_bytes
    r = _incast(4, cap, d, p, 4e6)
    if not pfc:              # the same incast loses packets and needs go-back-N to finish
        assert r.drops[4] > 0 and np.all(r.rewinds > 0) and np.isfinite(r.makespan)
        no_resend = _incast(4, cap, d, p.replace(retransmit=False), 4e6)
        assert no_resend.drops[4] > 0 and np.isinf(no_resend.makespan)
        return
    assert r.drops.sum() == 0 and np.all(np.isfinite(r.finish))
    assert np.all(r.pauses[:4] > 0)
    # an XOFF leaves the switch and stops the NIC exactly one propagation delay later
    np.testing.assert_allclose(r.first_paused[:4] - r.first_xoff[:4], d, rtol=1e-9)
    # headroom use is bounded by what the link can carry in one round trip + 2 packets
    assert np.all(r.headroom_max[:4] <= 2 * d * cap + 2 * wire)
    assert np.all(r.headroom_max[:4] > 0)


def test_without_cc_and_pfc_and_with_infinite_buffers_long_flows_match_max_min():
    # group 1: 4 senders into one receiver link, all starting at 0 (FIFO at a line-rate
    # incast shares the bottleneck equally, as max-min does); group 2: one NIC with three
    # flows to three receivers, staggered (its round-robin over QPs is processor sharing).
    # A counter-case, where FIFO and max-min differ, is a parking lot: see docs/packet.md.
    cap = 12.5e9
    p = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=np.inf, header_bytes=0)
    mb = 2**20
    paths = [[0, 4], [1, 4], [2, 4], [3, 4], [5, 6], [5, 7], [5, 8]]
    sizes = np.array([2, 4, 6, 8, 3, 6, 9]) * mb
    starts = np.array([0, 0, 0, 0, 0, 0.2e-3, 0.4e-3])
    switch_of = [-1, -1, -1, -1, 0, -1, 1, 1, 1]
    delay = 1e-6
    r = simulate_flows(np.full(9, cap), delay, paths, sizes, starts, params=p, switch_of=switch_of)
    reference = run_flows(np.full(9, cap), paths, sizes, starts)
    # max-min has no propagation; each flow's last packet adds its path's delays
    hops = np.array([len(q) for q in paths])
    np.testing.assert_allclose(r.finish, reference + hops * delay, rtol=0.01)
    assert r.drops.sum() == 0 and r.marks.sum() == 0


def test_params_presets_yaml_and_sources(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("preset: dcqcn_paper\nkmax_bytes: 400000\n")
    p = load_params(f)
    assert p.kmin_bytes == 5e3 and p.kmax_bytes == 4e5 and p.g == 1 / 256
    table = params_dict(p)
    assert table["kmax_bytes"]["source"] == "set by the user"
    assert "SIGCOMM'15" in table["g"]["source"]
    assert all(v["source"] for v in params_dict(preset("simai")).values())
    with pytest.raises(ValueError):
        load_params({"kmin": 1})


def test_old_parameter_name_control_bytes_is_read_as_cnp_bytes_with_a_deprecation(tmp_path):
    f = tmp_path / "old.yaml"
    f.write_text("preset: dcqcn_paper\ncontrol_bytes: 90\n")
    with pytest.warns(DeprecationWarning, match="control_bytes.*cnp_bytes"):
        p = load_params(f)
    assert p.cnp_bytes == 90 and p.kmin_bytes == 5e3
    assert params_dict(p)["cnp_bytes"] == {"value": 90, "source": "set by the user"}
    with pytest.raises(ValueError, match="control_bytes"):          # both names: refused
        load_params({"control_bytes": 90, "cnp_bytes": 78})


def test_the_cli_reads_the_old_parameter_name_with_a_note(tmp_path):
    import json

    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    f = tmp_path / "old.yaml"
    f.write_text("control_bytes: 64\n")
    with pytest.warns(DeprecationWarning):        # the run reads the file again
        result = CliRunner().invoke(app, ["collective", "--fabric", "hpn7", "--segments", "1",
                                          "--hosts-per-segment", "2", "--backup-hosts", "0",
                                          "--engine", "packet", "--packet-params", str(f),
                                          "--show-params", "--json"])
    assert result.exit_code == 0, result.output
    assert "note: packet parameter control_bytes is deprecated: it is now cnp_bytes" in \
        result.stderr
    assert json.loads(result.stdout)["cnp_bytes"] == {"value": 64, "source": "set by the user"}


def test_a_scenario_engine_reads_the_old_parameter_name(tmp_path):
    from hpnsim.scenario.engine import EngineSpec

    f = tmp_path / "old.yaml"
    f.write_text("control_bytes: 64\n")
    with pytest.warns(DeprecationWarning):
        spec = EngineSpec(kind="packet", params=str(f))
    with pytest.warns(DeprecationWarning):
        assert spec.packet_params().cnp_bytes == 64


def test_runs_are_deterministic_for_a_seed():
    p = PacketParams(pmax=0.5, kmin_bytes=10e3, kmax_bytes=50e3)
    a = _incast(3, 12.5e9, 1e-6, p, 2e6)
    b = _incast(3, 12.5e9, 1e-6, p, 2e6)
    c = _incast(3, 12.5e9, 1e-6, p.replace(seed=7), 2e6)
    assert np.array_equal(a.finish, b.finish) and a.marks[3] == b.marks[3]
    assert a.marks[3] != c.marks[3] or not np.array_equal(a.finish, c.finish)


def test_pfc_head_of_line_blocking_slows_a_victim_that_max_min_leaves_alone():
    # A -> S1 -X-> S2 -> R shares R with B and C (a 3:1 incast at S2); the victim V crosses
    # X too but goes to R2, which is idle. Max-min: A, B, C get C/3 at R, so X has 2C/3
    # left and V gets it. With PFC (no CC), S2 pauses X whenever A's bytes pile up, and at
    # S1 the X queue is one FIFO that A and V fill equally (their NICs are paused alike),
    # so V leaves S1 only as fast as A does: about C/3, half its max-min share.
    import scipy.sparse as sp

    from hpnsim.engine import maxmin_rates

    cap, d = 25e9, 1e-6
    # links: 0 A->S1, 1 V->S1, 2 X S1->S2, 3 B->S2, 4 C->S2, 5 S2->R, 6 S2->R2
    paths = [[0, 2, 5], [1, 2, 6], [3, 5], [4, 5]]
    switch_of = [-1, -1, 0, -1, -1, 1, 1]
    p = PacketParams(cc=False, ecn=False, buffer_bytes=2e6)
    t_end, dt = 2e-3, 10e-6
    r = simulate_flows(np.full(7, cap), d, paths, 1e9, params=p, switch_of=switch_of,
                       watch_flows=[0, 1, 2, 3], sample_interval=dt, t_end=t_end)
    steady = r.sample_times >= 0.5e-3
    got = r.flow_samples[steady]
    rate = (got[-1] - got[0]) / (r.sample_times[steady][-1] - r.sample_times[steady][0])
    rows = np.repeat(np.arange(4), [len(q) for q in paths])
    usage = sp.csr_matrix((np.ones(rows.size), (rows, np.concatenate(paths))), shape=(4, 7))
    fair = maxmin_rates(np.full(7, cap), usage)
    np.testing.assert_allclose(fair / cap, [1 / 3, 2 / 3, 1 / 3, 1 / 3])
    goodput = cap * p.mtu_bytes / (p.mtu_bytes + p.header_bytes + p.framing_bytes)  # R's link
    assert rate[1] < 0.5 * fair[1]                       # the victim lost half its share
    # ... and moves nearly in step with A (within 5% before preamble and gap were on the
    # wire, 6% since: the order in which S1 pauses its two ingresses shifts)
    assert rate[1] == pytest.approx(rate[0], rel=0.1)
    assert rate[0] + rate[2] + rate[3] == pytest.approx(goodput, rel=0.03)  # R stays full
    assert r.pauses[2] > 0 and r.paused_time[2] > 0.2 * t_end   # X was paused, often
    assert r.pauses[0] > 0 and r.pauses[1] > 0        # ... and S1 passed it on to A and V
    assert r.drops.sum() == 0


def test_dependencies_fan_out_and_the_pool_and_heap_grow_without_changing_results():
    # flow 0 (4 KiB over link 0) releases 300 flows that each start on their own NIC link
    # 1..300 into switch link 301: they start exactly when flow 0's last byte lands
    n = 300
    cap, d = 12.5e9, 1e-6
    p = PacketParams(cc=False, header_bytes=0)
    paths = [[0]] + [[1 + i, n + 1] for i in range(n)]
    deps = [[]] + [[0]] * n
    switch_of = [-1] * (n + 1) + [0]
    kw = dict(params=p, switch_of=switch_of, deps=deps)
    small = simulate_flows(np.full(n + 2, cap), d, paths, 4096, pool_size=2, **kw)
    large = simulate_flows(np.full(n + 2, cap), d, paths, 4096, pool_size=1 << 12, **kw)
    assert np.array_equal(small.finish, large.finish) and small.events == large.events
    line = 4096 + p.framing_bytes                        # line bytes per packet
    t0 = line / cap + d                                  # flow 0 delivered
    assert small.finish[0] == pytest.approx(t0, rel=1e-12)
    # the 300 packets meet at link n+1 and leave one per line/C: the last at t0 + 2 hops
    # of serialization and delay plus 299 packets queued behind the first
    assert small.makespan == pytest.approx(t0 + 2 * (line / cap + d) + (n - 1) * line / cap,
                                           rel=1e-12)


def test_queue_mean_and_percentiles_agree_with_a_finely_sampled_series():
    # the PFC-held 2:1 incast: the time-weighted mean and the histogram percentiles (9% bins)
    # against the queue sampled every 50 ns (many samples per packet time of 83 ns)
    cap, d = 50e9, 0.5e-6
    p = PacketParams(cc=False, ecn=False, buffer_bytes=4e6)
    dt = 50e-9
    r = _incast(2, cap, d, p, 4e6, watch=[2], sample_interval=dt, max_samples=10**6,
                pct=(50.0, 99.0))
    q = r.samples[:, 0]
    assert r.sample_times[-1] >= r.end_time - dt
    assert r.q_mean[2] == pytest.approx(q.mean(), rel=0.01)
    sampled = np.percentile(q, [50, 99])
    ratio = r.q_pct[2] / sampled
    assert np.all((ratio >= 1 - 1e-9) & (ratio <= 2 ** (1 / 8) + 1e-9))   # upper bin edge
    assert r.q_max[2] == pytest.approx(q.max(), abs=p.mtu_bytes + p.header_bytes)


@pytest.mark.parametrize("bad", [dict(sizes=-1.0), dict(starts=np.nan), dict(priority=8),
                                 dict(qp=[0, 0]), dict(deps=[[5], []]),
                                 dict(switch_of=[-1, 0]), dict(paths=[[0, 9], [1, 2]])])
def test_bad_input_names_the_field(bad):
    from hpnsim.errors import InputError

    args = dict(paths=[[0, 2], [1, 2]], sizes=1e3, starts=0.0)
    args.update({k: v for k, v in bad.items() if k in args})
    options = {k: v for k, v in bad.items() if k not in args}
    field = next(iter(bad))
    with pytest.raises(InputError, match=field):
        simulate_flows(np.full(3, 1e9), 1e-6, args["paths"], args["sizes"], args["starts"],
                       **options)
