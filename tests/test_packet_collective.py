"""Collectives through the packet engine (``--engine packet``): the same schedule and paths
as the flow engine, checked against closed forms and against the flow engine where no queue
builds; what an ECMP collision costs, by mechanism; the CLI's refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.collectives import run_collective
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
from hpnsim.fabrics import build_fabric, hpn7
from hpnsim.packet import PacketParams

# line bytes per packet beyond its payload: the RoCEv2 frame's headers plus preamble, SFD
# and gap (82 B, what NCCL's network_efficiency counts)
HEADER = PacketParams().header_bytes + PacketParams().framing_bytes
MTU = PacketParams().mtu_bytes


def nccl_latency(flow_result, fabric, op, gpus, size, **options) -> float:
    """The flow engine's NCCL latency terms of a ring (base + per NVLink and network hop),
    which the packet engine does not add."""
    from hpnsim.collectives.planning.plan import plan_collective

    plan = plan_collective(fabric, op, gpus, size, algo="ring", **options)
    base, nvlink, net = NcclParams().latencies("ring", plan.protocol)
    stage = plan.schedule.stages[0]
    return base + stage.intra_steps * nvlink + stage.inter_steps * net


def test_nvlink_bound_hpn_ring_matches_the_flow_engine_and_the_closed_form():
    # 2 hosts, 16 channels (8 rails x 2 ports): each GPU's NVLink carries one 1 MiB piece
    # per channel per step (ring hop or PXN relay) at 200 GB/s x 0.824 (NCCL's Hopper NVLink
    # efficiency): 16 MiB per step, 30 steps
    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    size, gpus = 2**28, range(16)
    flow = run_collective(f, "allreduce", gpus, size, algo="ring", routing="hpn_dual_plane")
    pkt = run_collective_packet(f, "allreduce", gpus, size, algo="ring",
                                routing="hpn_dual_plane")
    closed = 30 * 16 * (size / 16 / 16) / (200e9 * 0.824)
    flow_net = flow.time - nccl_latency(flow, f, "allreduce", list(gpus), size,
                                        routing="hpn_dual_plane")
    assert flow_net == pytest.approx(closed, rel=0.005)
    assert pkt.network_time == pytest.approx(closed, rel=0.02)   # + chunk pipeline fill
    assert pkt.network_time == pytest.approx(flow_net, rel=0.02)
    assert pkt.time - pkt.network_time == pytest.approx(flow.time - flow_net)
    assert pkt.busbw == pytest.approx(size / pkt.time * 2 * 15 / 16)
    assert (pkt.ecn_marks, pkt.cnps, pkt.pfc_pauses, pkt.drops) == (0, 0, 0, 0)
    assert pkt.extrapolated > 0.5 and pkt.stable


def test_network_bound_rail_ring_matches_the_flow_engine_with_the_same_framing():
    # one GPU per host on rail 0 of 4 hosts: every hop crosses the network from a 200G port;
    # 2 channels (one per NIC port), 6 steps of piece = size / 2 / 4
    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    size, gpus = 2**27, [0, 8, 16, 24]
    flow = run_collective(f, "allreduce", gpus, size, algo="ring", routing="hpn_dual_plane")
    pkt = run_collective_packet(f, "allreduce", gpus, size, algo="ring",
                                routing="hpn_dual_plane", run=PacketRun(window=False))
    piece = size / 2 / 4
    flow_closed = 6 * piece / NcclParams().network_efficiency / 25e9
    pkt_closed = 6 * piece * (MTU + HEADER) / MTU / 25e9
    flow_net = flow.time - nccl_latency(flow, f, "allreduce", gpus, size,
                                        routing="hpn_dual_plane")
    assert flow_net == pytest.approx(flow_closed, rel=0.005)
    assert pkt.network_time == pytest.approx(pkt_closed, rel=0.01)
    # both engines put 82 B per 4096-B packet on the wire (frame headers, preamble, gap)
    assert pkt_closed == pytest.approx(flow_closed, rel=1e-12)
    assert pkt.network_time / flow_net == pytest.approx(1.0, rel=0.01)
    assert pkt.time / flow.time == pytest.approx(1.0, rel=0.01)
    assert pkt.steps_simulated == pkt.steps == 6 and pkt.extrapolated == 0.0


@pytest.fixture(scope="module")
def dcn():
    # a DCN+ with 1:1 ToR uplinks (200G, like the ports) so that an ECMP collision on an
    # uplink is a real bottleneck; 16 GPUs in two segments, 16 channels
    f = build_fabric("dcn_plus", {"segments": 2, "hosts_per_segment": 2, "tor_uplinks": 2,
                                  "aggs_per_pod": 2, "uplink_speed": "200G"})
    return f, list(range(8)) + list(range(16, 24))


def _collided(dcn, size, params):
    f, gpus = dcn
    flow = run_collective(f, "allreduce", gpus, size, algo="ring", seed=1)
    pkt = run_collective_packet(f, "allreduce", gpus, size, algo="ring", seed=1,
                                run=PacketRun(params=params))
    return flow, pkt, flow.time - pkt.nccl_latency


def test_ecmp_collision_without_cc_pfc_or_buffer_limit_costs_what_max_min_says(dcn):
    f, _ = dcn
    ideal = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=np.inf)
    flow, pkt, flow_net = _collided(dcn, 2**28, ideal)
    assert flow.hash_collisions > 0 and flow.max_link_flows >= 6
    # the collided uplink carries its flows' bytes at line rate in both engines
    k = int(np.argmax(flow.link_bytes / f.link_capacity))
    assert flow.link_bytes[k] / f.link_capacity[k] == pytest.approx(flow_net, rel=0.01)
    assert pkt.nccl_latency == pytest.approx(nccl_latency(flow, f, "allreduce", dcn[1],
                                                          2**28, seed=1))
    assert pkt.time == pytest.approx(flow.time, rel=0.02)
    assert pkt.bottleneck == flow.bottleneck
    assert pkt.ports[0]["port"] == flow.bottleneck     # the fullest queue is the collision's
    assert (pkt.pfc_pauses, pkt.ecn_marks, pkt.drops) == (0, 0, 0)
    assert pkt.steps_simulated == pkt.steps          # queues grow: no steady window


def test_ecmp_collision_costs_more_with_pfc_and_more_again_with_dcqcn(dcn):
    size = 2**26
    ideal = _collided(dcn, size, PacketParams(cc=False, ecn=False, pfc=False,
                                              buffer_bytes=np.inf))[1]
    # SimAI's 32 MB switch buffer: a 51.2T chip's 151 MiB (the default) absorbs this
    # collision's queue below the XOFF threshold at 64 MiB
    small = 32 * 2**20
    flow, pfc, flow_net = _collided(dcn, size, PacketParams(cc=False, ecn=False,
                                                            buffer_bytes=small))
    dcqcn = _collided(dcn, size, PacketParams(buffer_bytes=small))[1]
    # PFC alone: pauses spread back from the collided uplink and stall flows behind them
    assert pfc.pfc_pauses > 0 and pfc.paused_time > 0 and pfc.drops == 0
    assert pfc.time > 1.02 * ideal.time and pfc.network_time > flow_net
    # DCQCN on top: the collided queues cross Kmin, marks lead to CNPs and rate cuts; the
    # cuts that take a flow below its share of the collided uplink cost time beyond PFC's
    # (the two uplinks of ToR p1 both carry collided flows: either may hold the fullest queue)
    assert dcqcn.ecn_marks > 0 and dcqcn.cnps > 0 and dcqcn.drops == 0
    assert flow.bottleneck in [p["port"] for p in dcqcn.ports[:2]]
    assert dcqcn.ports[0]["marks"] > 0
    assert dcqcn.time > pfc.time
    # but not by multiples: a QP's rate limiter applies a raised rate at once (the gap after
    # its last packet is re-counted at the new rate), so a QP cut to the floor does not sit
    # out that packet's gap at the floor rate (milliseconds at 1 Mb/s) once it recovers;
    # measured 1.08 x PFC's time (it was 15 x before the limiter re-counted its gap)
    assert dcqcn.time < 1.5 * pfc.time


def invoke(*args):
    small = ["collective", "--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "2",
             "--backup-hosts", "0"]
    return CliRunner().invoke(app, [*small, *args])


def test_cli_packet_json_carries_busbw_and_port_counters(tmp_path):
    csv = tmp_path / "c.csv"
    result = invoke("--gpus", "16", "--sizes", "16M", "--algo", "ring", "--engine", "packet",
                    "--routing", "hpn_dual_plane", "--json", "--csv", str(csv))
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["engine"] == "packet" and row["algo"] == "ring"
    p = row["packet"]
    assert p["steps"] == 30 and 0 < p["steps_simulated"] <= 30
    assert p["extrapolated"] == pytest.approx(1 - p["steps_simulated"] / 30)
    assert {"q_max", "q_mean", "q_p99", "marks", "pauses", "paused_time"} <= set(p["ports"][0])
    assert row["busbw"] == pytest.approx(row["algbw"] * 30 / 16)
    header = csv.read_text().splitlines()[0].split(",")
    assert {"ecn_marks", "pfc_pauses", "extrapolated"} <= set(header)
    assert not any(h.startswith("packet") for h in header)    # no queue series in a table


def test_cli_show_params_names_sources_and_the_users_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("preset: simai\nkmin_bytes: 100000\n")
    result = invoke("--engine", "packet", "--packet-params", str(path), "--show-params",
                    "--json")
    assert result.exit_code == 0, result.output
    params = json.loads(result.output)
    assert params["kmin_bytes"] == {"value": 100000, "source": "set by the user"}
    assert "SimAI" in params["rp_timer_s"]["source"] and params["rp_timer_s"]["value"] == 9e-4


@pytest.mark.parametrize("args, message", [
    (["--engine", "packe"], "error: --engine: must be flow or packet, got 'packe'"),
    (["--no-window"], "error: --no-window: sets the packet engine; add --engine packet"),
    (["--engine", "packet", "--per-rail", "--algo", "tree", "--sizes", "1M"], "error: --algo: "
     "collectives run together as packets are rings; got tree: use --algo ring or --engine "
     "flow"),
    (["--engine", "packet", "--per-rail", "--op", "alltoall", "--sizes", "1M"], "error: --op: "
     "collectives run together as packets are rings of allreduce, allgather, reducescatter; "
     "got alltoall"),
    (["--engine", "packet", "--algo", "ring", "--sizes", "1M,1G", "--max-packets", "1e5"],
     "error: --max-packets: the run would simulate ~2.36e+06 packet hops, over the limit "
     "1e+05: raise --max-packets"),
    (["--engine", "packet", "--algo", "tree", "--sizes", "1M,1G", "--max-packets", "1e5"],
     "error: --max-packets: the chunked tree allreduce would simulate ~7.86e+06 packet hops, "
     "over the limit 1e+05: raise --max-packets"),
    (["--engine", "packet", "--per-rail", "--sizes", "1M,1G", "--max-packets", "5e6"],
     "error: --max-packets: the run would simulate ~8.39e+06 packet hops (8 collectives "
     "together), over the limit 5e+06"),
    (["--engine", "packet", "--packet-params", "/nonexistent.yaml"], "error: --packet-params: "
     "cannot read /nonexistent.yaml"),
    (["--engine", "packet", "--watch", "nope", "--sizes", "1M"], "error: --watch: no link "
     "named 'nope'"),
])
def test_cli_refuses_what_the_packet_engine_cannot_run(args, message):
    result = invoke("--gpus", "16", *args)
    assert result.exit_code == 2
    assert result.output.strip().startswith(message), result.output
    assert len(result.output.strip().splitlines()) == 1


def test_scenario_with_faults_refuses_the_packet_engine():
    from hpnsim.errors import InputError
    from hpnsim.scenario.spec import parse_scenario

    with pytest.raises(InputError, match="engine: faults and cluster traces run on the flow "
                                         "engine only"):
        parse_scenario({"jobs": [{"model": "llama3-8b", "tp": 8, "iterations": 2}],
                        "faults": [{"kind": "link", "target": "gpu0.port0", "at": 1,
                                    "duration": 1}],
                        "engine": "packet"})
    s = parse_scenario({"collectives": [{"gpus": 4}], "engine": {"kind": "packet",
                                                                 "window": False}})
    assert s.engine.kind == "packet" and not s.engine.window



def test_fractional_flow_sizes_finish():
    # LL128 wire bytes (payload / 0.92) are fractional; packet records hold whole bytes, so
    # a size rounds up: 101 B + 62 B header + 20 B framing over two 1 GB/s links of 1 us
    from hpnsim.packet import simulate_flows

    r = simulate_flows([1e9, 1e9], 1e-6, [[0, 1]], [100.5], switch_of=[-1, 0])
    assert r.finish[0] == pytest.approx(2 * (183 / 1e9 + 1e-6))


def test_cli_writes_the_queue_figure_and_perfetto_counters(tmp_path):
    png, trace = tmp_path / "q.png", tmp_path / "q.json"
    result = invoke("--gpus", "16", "--sizes", "16M", "--algo", "ring", "--engine", "packet",
                    "--queue-plot", str(png), "--queue-trace", str(trace), "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    queue = row["packet"]["queue"]
    events = json.loads(trace.read_text())["traceEvents"]
    counters = [e for e in events if e["ph"] == "C"]
    assert png.stat().st_size > 0 and len(queue["ports"]) == 2
    assert len(counters) == 2 * len(queue["time"])
    assert max(e["args"]["KB"] for e in counters) == pytest.approx(
        max(max(b) for b in queue["bytes"]) / 1e3)


def test_a_down_nic_port_halves_the_rail_ring_in_both_engines():
    # rail 1 of 4 hosts, 2 channels (one per NIC port); GPU 17's port 0 down (non-stacked
    # dual ToR): routing moves its channel to port 1, which then sends two pieces per step
    from hpnsim.fabrics import FabricState

    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    gpus, size = [1, 9, 17, 25], 2**27
    state = FabricState(f).set_down([f.gpu_access_link[17, 0]])
    run = PacketRun(window=False)
    healthy = run_collective_packet(f, "allreduce", gpus, size, algo="ring",
                                    routing="hpn_dual_plane", run=run)
    down = run_collective_packet(f, "allreduce", gpus, size, algo="ring",
                                 routing="hpn_dual_plane", run=run, state=state)
    flow = run_collective(f, "allreduce", gpus, size, algo="ring", routing="hpn_dual_plane",
                          state=state)
    piece = size / 2 / 4 * (MTU + HEADER) / MTU
    assert healthy.network_time == pytest.approx(6 * piece / 25e9, rel=0.01)
    assert down.network_time == pytest.approx(6 * 2 * piece / 25e9, rel=0.01)
    assert down.bottleneck == flow.bottleneck == f.link_name(int(f.gpu_access_link[17, 1]))
    assert down.time == pytest.approx(flow.time, rel=0.01)
    assert (down.ecn_marks, down.pfc_pauses, down.drops) == (0, 0, 0)


def test_train_with_faults_refuses_the_packet_engine_in_one_line():
    result = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--engine", "packet",
                                      "--fault", "link:gpu0.port0@1s+1s"])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: --engine: faults run on the flow engine only (a "
                                     "failure re-routes and re-plans collectives mid-run); "
                                     "drop --fault or --engine packet")


def test_multi_allreduce_rails_together_halve_on_dcn_where_the_bond_hash_collides():
    # the HPN paper's Multi-AllReduce on 8 hosts: one ring all-reduce per rail (8 ranks,
    # 2 channels), all at once. HPN: every channel on its own 200G port; DCN+ (ECMP, bond
    # hash at the NIC, ECMP at the ToR toward a NIC's two ports): some NIC sends or receives
    # both channels of its rail ring on one port, and the ring runs at that port's half; the
    # ring's chunk dependencies pace the senders, so no switch queue forms
    from hpnsim.collectives.packet.run import run_together_packet
    from hpnsim.collectives.planning.concurrent import rail_groups
    from hpnsim.fabrics import dcn_plus

    groups = [g.tolist() for g in rail_groups(range(64), 8)]
    size = 2**27
    step = size / 2 / 8 * (MTU + HEADER) / MTU / 25e9            # one piece at a port
    hpn = run_together_packet(hpn7(segments=1, hosts_per_segment=8, backup_hosts=0),
                              "allreduce", groups, size, algo="ring", protocol="simple",
                              routing="hpn_dual_plane", run=PacketRun(window=False))
    dcn = run_together_packet(dcn_plus(segments=1, hosts_per_segment=8), "allreduce", groups,
                              size, algo="ring", protocol="simple", routing="ecmp",
                              run=PacketRun(window=False))
    assert hpn.network_time == pytest.approx(14 * step, rel=0.01)
    assert dcn.network_time == pytest.approx(14 * 2 * step, rel=0.01)
    assert hpn.hash_collisions == 0 < dcn.hash_collisions
    assert "nic" in dcn.bottleneck                        # an access link carries both
    assert (dcn.ecn_marks, dcn.pfc_pauses, dcn.drops) == (0, 0, 0)
