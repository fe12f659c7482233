"""Task graphs through the packet engine (hpnsim.packet.graph): waits, gates and member
flows against store-and-forward by hand, and against the flow engine's max-min result on
the same graph where FIFO queues share as max-min does."""

import numpy as np
import pytest

from hpnsim.engine import TaskGraph, simulate
from hpnsim.errors import InputError
from hpnsim.packet import PacketParams
from hpnsim.packet.graph import graph_flows, simulate_graph

#: congestion control, ECN and PFC off, no buffer limit, no headers: packets move bytes only
PLAIN = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=np.inf, header_bytes=0,
                     framing_bytes=0)        # payload bytes only on the wire: hand sums


def _members(graph):
    task, ptr, links, weight = graph.member_paths()
    return task, [(links[ptr[i]:ptr[i + 1]],) for i in range(task.size)], weight


def _run(graph, capacity, delay, switch_of, params=PLAIN):
    return simulate_graph(capacity, delay, graph.arrays(len(capacity)), *_members(graph),
                          params=params, switch_of=switch_of)


def test_compute_flow_compute_chain_is_store_and_forward_by_hand():
    """compute 3 us -> (1 us latency) 5 packets over a 10 GB/s then a 5 GB/s link ->
    compute 2 us: the first packet arrives after w/C0 + d0 + w/C1 + d1, the other four
    follow w/C1 apart (the slower link is the pipeline's pace)."""
    w, c0, c1, d0, d1 = 4096.0, 10e9, 5e9, 1e-6, 2e-6
    g = TaskGraph()
    a = g.add_delay(3e-6, name="fwd")
    b = g.add_transfer_paths([[0, 1]], 5 * w, deps=[a], latency=1e-6)
    c = g.add_delay(2e-6, deps=[b], name="bwd")
    run = _run(g, [c0, c1], [d0, d1], [-1, 0])
    arrive = 3e-6 + 1e-6 + (w / c0 + d0 + w / c1 + d1) + 4 * w / c1
    assert run.start[[a, b, c]] == pytest.approx([0.0, 3e-6, arrive], rel=1e-12)
    assert run.finish[[a, b, c]] == pytest.approx([3e-6, arrive, arrive + 2e-6], rel=1e-12)
    assert run.result.received[0] == 5 * w


def test_release_times_and_a_join_of_several_predecessors():
    """A wait released at 10 us starts then, not at 0; a compute after two transfers starts
    when the later one ends (one packet each: w/C + d per hop)."""
    w, c, d = 4096.0, 1e9, 1e-6
    g = TaskGraph()
    x = g.add_transfers([[0, 2], [1, 3, 4]], w)
    late = g.add_delay(1e-6, release=10e-6)
    y = g.add_delay(1e-6, deps=[*x.tolist(), late])
    run = _run(g, [c] * 5, d, [-1, -1, 0, 1, 2])
    one_hop = w / c + d
    assert run.finish[x].tolist() == pytest.approx([2 * one_hop, 3 * one_hop], rel=1e-12)
    assert run.start[late] == 10e-6
    assert run.start[y] == pytest.approx(max(3 * one_hop, 11e-6), rel=1e-12)


def test_long_flows_in_a_graph_take_the_flow_engines_time_within_one_percent():
    """compute 1 ms; then a coupled transfer of two members and a plain transfer share the
    receiver's port (three equal flows into one FIFO: C/3 each, as max-min); a compute after
    both; then one transfer alone. Every task's start and finish within 1% of
    hpnsim.engine.simulate on the same graph (propagation and one packet's pipeline,
    microseconds, are what the packet engine adds)."""
    cap = np.full(5, 12.5e9)
    g = TaskGraph()
    a = g.add_delay(1e-3)
    t1 = g.add_transfer_paths([[0, 3], [1, 3]], 8e6, deps=[a], latency=5e-6)
    t2, = g.add_transfers([[2, 3]], 8e6, deps=[a]).tolist()
    b = g.add_delay(0.5e-3, deps=[t1, t2])
    t3 = g.add_transfer_paths([[0, 4]], 16e6, deps=[b], latency=10e-6)
    flow = simulate(g, cap)
    packet = _run(g, cap, 1e-6, [-1, -1, -1, 0, 0])
    # the port is busy from 1 ms until its 24 MB are through (t2 starts alone, 5 us early)
    assert flow.finish[t3] == pytest.approx(1e-3 + 24e6 / 12.5e9 + 0.5e-3 + 10e-6
                                            + 16e6 / 12.5e9, rel=1e-9)
    assert packet.finish == pytest.approx(flow.finish, rel=0.01)
    assert packet.start == pytest.approx(flow.start, rel=0.01)
    assert packet.makespan > flow.finish.max()         # packets add propagation, never less


def test_graph_flows_gate_member_legs_and_join():
    """Each transfer: a gate wait (its latency), one flow per leg chained, a zero wait
    joining several members; a delay is one wait; a zero-byte member moves nothing."""
    g = TaskGraph()
    a = g.add_delay(1.0)
    g.add_transfer_paths([[0], [1], [2]], 10.0, deps=[a], latency=0.5)
    arrays = g.arrays(3)
    fl = graph_flows(arrays, [1, 1, 1], [([0],), ([1], [2]), ([2],)], [1.0, 1.0, 0.0])
    assert fl.n_flows == 3                                 # member 0, member 1's two legs
    assert fl.waits.tolist() == [1.0, 0.5, 0.0]            # compute, gate, join
    gate, join = fl.gate[1], fl.done[1]
    assert fl.deps[0] == [gate] and fl.deps[1] == [gate] and fl.deps[2] == [1]
    assert fl.deps[join] == [0, 2] and fl.deps[gate] == [fl.done[0]]


def test_refusals_name_what_the_packet_engine_cannot_run():
    g = TaskGraph()
    g.add_transfer([0], 1.0, 1e3)                          # no member paths
    with pytest.raises(InputError, match="graph: transfer task 0 has no member paths"):
        graph_flows(g.arrays(1), [], [], [])
    g = TaskGraph()
    g.add_transfers([[0], [0]], 1e3, priority=[0, 1])
    with pytest.raises(InputError, match="priority: the packet engine runs a graph in one"):
        _run(g, [1e9], 1e-6, [-1])


# --- collectives the ring path does not cover, through their compiled graph --------------

NO_CC = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=np.inf)


@pytest.fixture(scope="module")
def two_hosts():
    from hpnsim.fabrics import hpn7

    return hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)


def test_alltoall_across_two_hosts_takes_its_port_time(two_hosts):
    """Two GPUs of one rail on two hosts: each sends half its 64 MiB buffer to the other
    from its 200G port (25 GB/s), every 4096 B packet with 62 B of headers and 20 B of
    preamble and gap on the wire: the network time is that by hand within 1%, and the flow
    engine's time (NCCL's efficiency counts the same 82 B per packet) within 1%."""
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    from hpnsim.collectives.planning.run import run_collective

    size = 2**26
    pkt = run_collective_packet(two_hosts, "alltoall", [0, 8], size, protocol="simple",
                                run=PacketRun(params=NO_CC))
    flow = run_collective(two_hosts, "alltoall", [0, 8], size, protocol="simple")
    assert pkt.algo == "direct" and pkt.engine == "packet" and pkt.extrapolated == 0
    assert pkt.network_time == pytest.approx(size / 2 * 4178 / 4096 / 25e9, rel=0.01)
    net = pkt.nccl_latency
    assert (pkt.time - net) / (flow.time - net) == pytest.approx(1.0, rel=0.01)
    assert pkt.bottleneck == flow.bottleneck and pkt.drops == 0


@pytest.mark.parametrize("algo, gpus, routing", [("nvls", 8, "ecmp"), ("tree", 16, "ecmp"),
                                                 ("nvlstree", 16, "hpn_dual_plane")])
def test_tree_and_nvls_collectives_take_the_flow_engines_time_without_congestion(
        two_hosts, algo, gpus, routing):
    """Without congestion control, PFC or a buffer limit, and NVLink-bound (no two flows
    meet in a switch queue), the whole-step flows of tree, NVLS (GPU->NVSwitch and back as
    concurrent one-link flows) and NVLS-tree take the flow engine's max-min time within 1%
    and name the same busiest link. (Tree and NVLS-tree run as their graph here; under
    --engine packet they run chunked: tests/test_packet_tree.py.)"""
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.collectives.packet.graph import run_collective_graph_packet
    from hpnsim.collectives.packet.run import PacketRun
    from hpnsim.collectives.planning.plan import plan_collective
    from hpnsim.collectives.planning.run import run_collective

    kw = dict(algo=algo, protocol="simple", routing=routing, nccl=NcclParams.for_gpu("h800"))
    flow = run_collective(two_hosts, "allreduce", range(gpus), 2**26, **kw)
    plan = plan_collective(two_hosts, "allreduce", range(gpus), 2**26, **kw)
    pkt = run_collective_graph_packet(two_hosts, plan, 2**26, routing, PacketRun(params=NO_CC))
    assert pkt.algo == flow.algo == algo
    # (the whole-step graph has no chunk pipeline, so without the NVLS-tree fill the flow
    # engine adds in closed form: RoutedSchedule.fill, 0 for the others)
    assert pkt.time == pytest.approx(flow.time - plan.fill, rel=0.01)
    assert pkt.bottleneck.split("->")[1] == flow.bottleneck.split("->")[1]
    assert pkt.ecn_marks == pkt.pfc_pauses == pkt.drops == 0


def test_auto_runs_what_the_flow_engine_picks(two_hosts):
    """algo auto: the hierarchical all-reduce the flow engine picks on two hosts runs as its
    graph (not the ring), in the same time without congestion (1%)."""
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    from hpnsim.collectives.planning.run import run_collective

    flow = run_collective(two_hosts, "allreduce", range(16), 2**26, protocol="simple")
    pkt = run_collective_packet(two_hosts, "allreduce", range(16), 2**26, protocol="simple",
                                run=PacketRun(params=NO_CC))
    assert pkt.algo == flow.algo == "hier"
    assert pkt.time == pytest.approx(flow.time, rel=0.01)


def test_cli_runs_a_tree_as_packets(tmp_path):
    import json

    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    result = CliRunner().invoke(app, [
        "collective", "--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "2",
        "--backup-hosts", "0", "--gpus", "16", "--sizes", "4M", "--algo", "tree",
        "--engine", "packet", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["algo"] == "tree" and row["engine"] == "packet"
    assert row["packet"]["steps_simulated"] == row["packet"]["steps"]
    assert row["packet"]["events"] > 0 and row["busbw"] > 0


# --- training jobs (train --engine packet, run with engine: packet) ----------------------

TRAIN = ["train", "--model", "bert-large", "--dp", "16", "--global-batch", "64", "--fabric",
         "hpn7", "--segments", "1", "--hosts-per-segment", "2", "--backup-hosts", "0",
         "--routing", "hpn_dual_plane"]


def _train(*args):
    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    return CliRunner().invoke(app, [*TRAIN, *args])


def test_train_as_packets_on_a_collision_free_segment_takes_the_flow_engines_time():
    """BERT-large, DP 16 on two HPN hosts (dual-plane routing: no two flows share a switch
    queue): the iteration as packets takes the flow engine's time within 1% (the gradient
    all-reduce's whole-step flows run at their max-min rates), with no mark, pause or drop;
    the JSON carries the packet figures and the flow engine's time for the same graph."""
    import json

    flow = _train("--json")
    pkt = _train("--json", "--engine", "packet")
    assert flow.exit_code == 0 and pkt.exit_code == 0, pkt.output
    flow, pkt = json.loads(flow.stdout), json.loads(pkt.stdout)
    assert "packet" not in flow
    p = pkt["packet"]
    assert pkt["iteration_time"] == pytest.approx(flow["iteration_time"], rel=0.01)
    assert p["flow_makespan"] == pytest.approx(flow["iteration_time"], rel=1e-9)
    assert p["makespan"] == pytest.approx(pkt["iteration_time"], rel=1e-9)
    assert (p["ecn_marks"], p["pfc_pauses"], p["drops"]) == (0, 0, 0) and p["events"] > 0
    assert pkt["exposed_comm"]["dp"] == pytest.approx(flow["exposed_comm"]["dp"], rel=0.02)


@pytest.mark.parametrize("args, message", [
    (["--engine", "packe"], "error: --engine: must be flow or packet, got 'packe'"),
    (["--max-packets", "1e3"], "error: --max-packets: sets the packet engine; add --engine "
                               "packet"),
    (["--packet-params", "p.yaml"], "error: --packet-params: sets the packet engine; add "
                                    "--engine packet"),
    (["--engine", "packet", "--max-packets", "1e3"], "error: --max-packets: the jobs' "
     "iterations would simulate ~"),
    (["--engine", "packet", "--watch", "nope"], "error: --watch: no link named 'nope'"),
])
def test_train_refuses_packet_options_in_one_line(args, message):
    result = _train(*args)
    assert result.exit_code == 2
    assert result.output.strip().startswith(message), result.output
    assert len(result.output.strip().splitlines()) == 1
    if "1e3" in args and "packet" in args:
        assert result.output.strip().endswith("over the limit 1e+03: raise --max-packets")


def test_scenario_jobs_under_engine_packet_report_the_packet_run(tmp_path):
    from hpnsim.scenario.runner import run

    scenario = {"fabric": {"template": "hpn7", "segments": 1, "hosts_per_segment": 2,
                           "backup_hosts": 0}, "routing": "hpn_dual_plane",
                "jobs": [{"model": "bert-large", "dp": 16, "global_batch": 64}]}
    flow = run(scenario)
    pkt = run({**scenario, "engine": {"kind": "packet", "max_packets": 1e8}})
    assert flow.packet is None and "packet" not in flow.to_dict()
    assert pkt.jobs[0].iteration_time == pytest.approx(flow.jobs[0].iteration_time, rel=0.01)
    assert pkt.to_dict()["packet"]["flow_makespan"] == pytest.approx(flow.makespan, rel=1e-9)
    from hpnsim.report.packet import packet_sections

    (_, _, parts), = packet_sections(pkt.to_dict())          # the HTML report's section
    assert parts[0].rows[0][2] == f"{pkt.packet['events']:,}"
    with pytest.raises(InputError, match=r"engine.max_packets: the jobs' iterations would"):
        run({**scenario, "engine": {"kind": "packet", "max_packets": 10}})


def test_waits_in_the_kernel_release_their_successors_and_refuse_bad_durations():
    """simulate_flows with waits: flow 0 (one 4096 B packet over two 1 GB/s links of 1 us),
    then a 5 us wait, then flow 1: 10.192 + 5 + 10.192 us."""
    from hpnsim.packet import simulate_flows

    p = PacketParams(header_bytes=0, framing_bytes=0, cc=False, pfc=False)
    r = simulate_flows([1e9, 1e9], 1e-6, [[0, 1], [0, 1]], 4096, params=p, switch_of=[-1, 0],
                       waits=[5e-6], deps=[[], [2], [0]])
    assert r.finish.tolist() == pytest.approx([10.192e-6, 25.384e-6, 15.192e-6], rel=1e-12)
    with pytest.raises(InputError, match="waits: durations must be finite and >= 0"):
        simulate_flows([1e9], 1e-6, [[0]], 1.0, waits=[-1.0])
    with pytest.raises(InputError, match="deps: needs one list per flow"):
        simulate_flows([1e9], 1e-6, [[0]], 1.0, waits=[1.0], deps=[[]])


def test_nvls_tree_parent_port_queues_what_two_line_rate_senders_leave_behind():
    """NVLS-tree all-reduce over 4 HPN hosts (32 H800 GPUs, 64 MiB, dual plane): in a tree
    stage a parent's NIC port receives two children's whole-step flows of S = 2 MiB at once
    (wire S x 4158/4096). Two line-rate senders into one port of the same rate leave S
    queued when they stop: without CC, ECN and PFC the fullest port holds S (within two
    packets), it is a ToR port toward a tree parent's NIC, and the run takes the flow
    engine's time (1%), which shares the port evenly and shows no queue. With the default
    DCQCN and ECN (Kmin 800 KB < S) that queue is marked and the senders cut: marks and CNPs
    at that port, never faster than the plain run. (The whole-step graph, run directly:
    under --engine packet NVLS-tree runs chunked, tests/test_packet_tree.py.)"""
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.collectives.packet.graph import run_collective_graph_packet
    from hpnsim.collectives.packet.run import PacketRun
    from hpnsim.collectives.planning.plan import plan_collective
    from hpnsim.collectives.planning.run import run_collective
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    kw = dict(algo="nvlstree", protocol="simple", routing="hpn_dual_plane",
              nccl=NcclParams.for_gpu("h800"))
    plan = plan_collective(f, "allreduce", range(32), 2**26, **kw)

    def run_collective_packet(fabric, op, gpus, size, run=PacketRun(), **_):
        return run_collective_graph_packet(fabric, plan, size, "hpn_dual_plane", run)

    plain = run_collective_packet(f, "allreduce", range(32), 2**26,
                                  run=PacketRun(params=NO_CC), **kw)
    wire = 2**21 * 4158 / 4096
    top = plain.ports[0]
    assert wire <= top["q_max"] <= wire + 2 * 4158
    assert "->" in top["port"] and "/nic-" in top["port"].split("->")[1]
    # the whole-step graph has no chunk pipeline: the flow engine's time less the NVLS-tree
    # fill it adds in closed form (RoutedSchedule.fill)
    assert plain.time == pytest.approx(run_collective(f, "allreduce", range(32), 2**26,
                                                      **kw).time - plan.fill, rel=0.01)
    dcqcn = run_collective_packet(f, "allreduce", range(32), 2**26, **kw)
    # a dozen such ports hold S within a few packets of each other, so which of them the
    # run lists among its fullest depends on ties: every listed port toward a tree parent's
    # NIC that held more than Kmin is marked
    kmin = PacketParams().kmin_bytes
    held = [p for p in dcqcn.ports if p["q_max"] > kmin and "/nic-" in p["port"].split("->")[1]]
    assert held and all(p["marks"] > 0 for p in held) and dcqcn.cnps > 0
    assert dcqcn.time >= plain.time
