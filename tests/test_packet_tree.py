"""Chunked tree pipelines in the packet engine (hpnsim.packet.pipeline,
hpnsim.collectives.packet.tree): against pipelined closed forms derived by hand, against
the whole-step task graph when there is one chunk, and against the flow engine on HPN."""

import numpy as np
import pytest

from hpnsim.engine import TaskGraph
from hpnsim.packet import PacketParams
from hpnsim.packet.graph import simulate_graph
from hpnsim.packet.pipeline import Hop, simulate_pipeline

#: no congestion control, ECN, PFC, buffer limit, headers or framing: payload bytes only
PLAIN = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=np.inf, header_bytes=0,
                     framing_bytes=0)
C, D, MTU = 10e9, 1e-6, 4096.0


def _chain(depth: int) -> list[Hop]:
    """A chain of depth + 1 ranks, rank 0 the leaf, rank ``depth`` the root; up hop e
    (rank e -> e+1) on link e, down hop e (rank e+1 -> e) on link depth + e."""
    one = np.ones(1)
    ups = [Hop([([e],)], one, (e - 1,) if e else (),
               (e + 1,) if e + 1 < depth else (2 * depth - 1,)) for e in range(depth)]
    downs = [Hop([([depth + e],)], one, (depth - 1,) if e == depth - 1 else (depth + e + 1,),
                 (depth + e - 1,) if e else ()) for e in range(depth)]
    return ups + downs


@pytest.mark.parametrize("window", [False, True])
def test_chain_is_fill_plus_chunks_times_chunk_time(window):
    """Every hop on its own link at rate C: chunk c leaves the leaf at c tau and every hop
    adds tau + d (store and forward of a whole chunk), so the last of N chunks arrives after
    (N + 2L - 1) tau + 2L d (fill 2L - 1 chunk times, then one chunk per tau)."""
    depth, n, chunk = 3, 96, 16 * MTU
    tau = chunk / C
    run = simulate_pipeline(np.full(2 * depth, C), D, _chain(depth), n * chunk, chunk,
                            slots=8, params=PLAIN, switch_of=np.full(2 * depth, -1),
                            window=window)
    expected = (n + 2 * depth - 1) * tau + 2 * depth * D
    assert run.time == pytest.approx(expected, rel=0.01)
    if window:
        assert run.stable and 0 < run.extrapolated < 1 and run.chunks_simulated < n
    else:
        assert run.time == pytest.approx(expected, rel=1e-9)


def test_one_chunk_is_the_whole_step_graph():
    """With the chunk the whole size, the pipeline is a chain of whole-step transfers, each
    after the previous: the task graph of those steps run as packets gives the same time."""
    depth, size = 3, 40 * MTU
    run = simulate_pipeline(np.full(2 * depth, C), D, _chain(depth), size, size, slots=8,
                            params=PLAIN, switch_of=np.full(2 * depth, -1), window=False)
    g = TaskGraph()
    prev = []
    for link in [0, 1, 2, 5, 4, 3]:                 # up the chain, then down
        prev = [g.add_transfer_paths([[link]], size, deps=prev)]
    task, ptr, links, weight = g.member_paths()
    legs = [(links[ptr[i]:ptr[i + 1]],) for i in range(task.size)]
    whole = simulate_graph(np.full(6, C), D, g.arrays(6), task, legs, weight, params=PLAIN,
                           switch_of=np.full(6, -1))
    assert run.time == pytest.approx(whole.makespan, rel=1e-9)
    assert run.time == pytest.approx(2 * depth * (size / C + D), rel=1e-9)


def test_slots_bound_chunks_ahead_of_the_consumer():
    """A fast hop feeding a hop 4x slower: with 8 slots, chunk c (c >= 8) of the fast hop
    leaves when the slow hop has delivered chunk c - 8 and its own chunk c - 1 is
    serialized (one QP), and arrives tau + d later; past the first chunks the slot binds."""
    chunk, n = 8 * MTU, 40
    a = Hop([([0],)], np.ones(1), (), (1,))
    b = Hop([([1],)], np.ones(1), (0,), ())
    run = simulate_pipeline([C, C / 4], D, [a, b], n * chunk, chunk, slots=8, params=PLAIN,
                            switch_of=[-1, -1], window=False)
    done = np.asarray(run.result.finish)[run.flows.done]
    c = np.arange(8, n)
    leave = np.maximum(done[1, c - 8], done[0, c - 1] - D)
    assert done[0, c] == pytest.approx(leave + chunk / C + D, rel=1e-9)
    assert np.all(done[1, c - 8][4:] > done[0, c - 1][4:] - D)      # the slot decides


def test_binary_tree_through_shared_nic_links():
    """Root 0 and children 1, 2 on a star: rank i sends on link i (to the switch) and
    receives on link 3 + i (unbuffered switch, no limit). The root's receive link carries
    both children's chunks (2 tau per chunk) and its send link both down chunks, so by hand
    T = p + 2d + 2 N tau (up: the first packet p = MTU/C crosses a child's link, then the
    root's link is busy) + 2 tau + d + p + d (the last down pair, its last packet)."""
    n, chunk = 80, 16 * MTU
    tau, p = chunk / C, MTU / C
    ups = [Hop([([i, 3],)], np.ones(1), (), (2, 3)) for i in (1, 2)]
    downs = [Hop([([0, 3 + i],)], np.ones(1), (0, 1), ()) for i in (1, 2)]
    run = simulate_pipeline(np.full(6, C), D, ups + downs, n * chunk, chunk, slots=8,
                            params=PLAIN, switch_of=np.full(6, -1), window=False)
    assert run.time == pytest.approx((2 * n + 2) * tau + 2 * p + 4 * D, rel=0.01)


@pytest.mark.parametrize("algo", ["tree", "nvlstree"])
def test_chunked_tree_on_hpn_against_the_flow_engine(algo):
    """256 MiB over two HPN hosts (16 GPUs), no CC/ECN/PFC. The flow engine runs every edge
    of a stage at once (a pipeline without fill); the chunked pipeline pays a fill of at most
    (2 depth - 1) chunk steps of N per channel, so packets / flow lies in [0.99, 1 +
    (2 depth - 1) / N] (depth: 7 NVLink + 1 network hops for tree; for NVLS-tree the NVLS
    reduction, 1 network hop and the multicast)."""
    from hpnsim.collectives import run_collective
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    from hpnsim.collectives.planning.options import CollectiveOptions
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    o = CollectiveOptions(algo=algo, protocol="simple", routing="hpn_dual_plane")
    size = 2**28
    from hpnsim.collectives.planning.plan import plan_collective

    # the flow engine's time less the NVLS-tree fill it adds in closed form (RoutedSchedule.fill)
    flow = run_collective(f, "allreduce", range(16), size, o).time - \
        plan_collective(f, "allreduce", range(16), size, o).fill
    quiet = PacketParams(cc=False, ecn=False, pfc=False)
    r = run_collective_packet(f, "allreduce", range(16), size, o, PacketRun(params=quiet))
    depth = 8 if algo == "tree" else 3
    assert r.algo == algo and r.drops == 0 and r.stable
    assert 0.99 <= r.time / flow <= 1 + (2 * depth - 1) / r.steps


def test_window_extrapolates_what_every_chunk_gives():
    """NVLS-tree over two HPN hosts at 1 GiB (32 chunks per planned stage: NCCL's 256 KiB,
    4 of its 128 streams to a stage): the windowed run simulates part of the chunks and
    extrapolates t_K + (N - K) dt; every chunk simulated gives the same time within 1%."""
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    from hpnsim.collectives.planning.options import CollectiveOptions
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    o = CollectiveOptions(algo="nvlstree", protocol="simple", routing="hpn_dual_plane")
    quiet = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=np.inf)
    runs = [run_collective_packet(f, "allreduce", range(16), 2**30, o,
                                  PacketRun(params=quiet, window=w)) for w in (True, False)]
    assert runs[0].stable and runs[0].extrapolated >= 0.5 and runs[1].extrapolated == 0
    assert runs[0].steps_simulated < runs[1].steps_simulated == runs[1].steps == 32
    assert runs[0].network_time == pytest.approx(runs[1].network_time, rel=0.01)


def test_cli_runs_a_simple_tree_chunked():
    """`hpnsim collective --algo tree --protocol simple --engine packet`: 64 MiB over 16 GPUs
    is 32 channels (16 x 2 trees) of 2 MiB; NCCL's rule (depth 7 + 1 = 8) halves 512 KiB
    while 2 MiB / chunk < 64 (to 128 KiB) and < 32 (to 64 KiB): 32 chunks per channel."""
    import json

    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    result = CliRunner().invoke(app, [
        "collective", "--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "2",
        "--backup-hosts", "0", "--gpus", "16", "--sizes", "64M", "--algo", "tree",
        "--protocol", "simple", "--engine", "packet", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["algo"] == "tree" and row["packet"]["steps"] == 32
    assert row["packet"]["steps_simulated"] <= 32 and row["busbw"] > 0


def _reference_flows(hops, chunks, slots, mtu=4096.0):
    """pipeline_flows as a loop over chunks and hops, one flow at a time (the builder before
    it became arrays): the reference the array build must reproduce node for node."""
    from hpnsim.packet.pipeline import _order

    order = _order(hops)
    qp_base = np.concatenate([[0], np.cumsum([sum(len(leg) for leg in h.legs) for h in hops])])
    paths, sizes, qps, flow_deps, wait_deps = [], [], [], [], []
    done = np.zeros((len(hops), len(chunks)), dtype=np.int64)

    def wait(deps):
        wait_deps.append(deps)
        return -len(wait_deps)

    for c, chunk in enumerate(chunks):
        for h in order:
            hop = hops[h]
            deps = [int(done[n, c]) for n in hop.needs]
            if c >= slots:
                deps += [int(done[m, c - slots]) for m in hop.consumers]
            if len(hop.legs) > 1 and len(deps) > 1:
                deps = [wait(deps)]
            ends, q = [], int(qp_base[h])
            for member, legs in enumerate(hop.legs):
                behind = deps
                for leg in legs:
                    paths.append(list(np.asarray(leg).tolist()))
                    sizes.append(chunk * hop.weight[member])
                    qps.append(q)
                    flow_deps.append(list(behind))
                    behind = [len(paths) - 1]
                    q += 1
                ends.append(behind[0])
            done[h, c] = ends[0] if len(ends) == 1 else wait(ends)
    n = len(paths)
    node = np.vectorize(lambda x: x if x >= 0 else n + (-1 - x), otypes=[np.int64])
    deps = [[int(node(x)) for x in d] for d in flow_deps + wait_deps]
    return paths, np.asarray(sizes), np.asarray(qps), deps, node(done), len(wait_deps)


@pytest.mark.parametrize("algo", ["tree", "nvlstree"])
def test_pipeline_flows_as_arrays_match_the_loop(algo):
    """The flows of a 4-host tree and NVLS-tree (10 chunks, 3 slots: chunks before and after
    the slot bound, and a short last chunk) node for node as the loop builds them."""
    from hpnsim.collectives.packet.tree import tree_hops
    from hpnsim.collectives.planning.plan import plan_collective
    from hpnsim.fabrics import hpn7
    from hpnsim.packet.pipeline import pipeline_flows

    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    plan = plan_collective(f, "allreduce", range(32), 2**26, algo=algo, protocol="simple")
    hops = tree_hops(f, plan)
    chunks = np.r_[np.full(9, 65536.0), 1000.0]
    paths, sizes, qps, deps, done, n_waits = _reference_flows(hops, chunks, 3)
    fl = pipeline_flows(hops, chunks, 3)
    assert fl.n_flows == len(paths) and fl.waits.size == n_waits
    assert [fl.path(i) for i in range(fl.n_flows)] == paths
    assert [fl.dep_list(i) for i in range(len(deps))] == deps
    assert np.array_equal(fl.sizes, sizes) and np.array_equal(fl.qp, qps)
    assert np.array_equal(fl.done, done)


def test_window_settles_on_block_means():
    """A per-chunk time that alternates 1.0, 1.5 never has three equal intervals, but over
    64 chunks (a 33-arrival first half) the block means agree: the rate is their mean 1.25;
    under a floor above it the window is not steady."""
    from hpnsim.packet.pipeline import _rate

    ends = np.concatenate([[0.0], np.cumsum(np.tile([1.0, 1.5], 32))])
    assert _rate(ends, 1.0) == pytest.approx(1.25, rel=1e-12)
    assert _rate(ends[:17], 1.0) is None              # 9 arrivals: too few for blocks
    assert _rate(ends, 1.3) is None


def test_nvlstree_chunk_is_nccl_128_streams():
    """NVLS-tree on 8-GPU hosts: NCCL's chunk over 16 channels x 8 heads (the closed form's
    nvlstree_chunk, from computeColl), times the 4 streams each of the 32 planned stages
    (8 rails x 2 trees x 2 channels) stands for."""
    from hpnsim.collectives.closed_form.nvlstree import nvlstree_chunk
    from hpnsim.collectives.packet.tree import nvlstree_streams, tree_chunk
    from hpnsim.collectives.planning.plan import plan_collective
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    for size in (2**25, 2**28, 2**30, 2**32):
        plan = plan_collective(f, "allreduce", range(16), size, algo="nvlstree",
                               protocol="simple")
        stages = [s for s in plan.schedule.stages if s.switch is None]
        assert nvlstree_streams(plan) == 128 and len(stages) == 32
        assert tree_chunk(plan) == nvlstree_chunk(size, 128) * 4


def test_coarse_nvlink_packets_move_nvlstree_under_one_percent():
    """NVLS-tree over 4 HPN hosts, 256 MiB, ConnectX DCQCN: NVLink legs in 32 KiB packets
    (the NIC's time per packet) against 4 KiB ones: over 4x fewer events, the time within
    1%. Headers off: a 4 KiB packet pays the RoCE header on NVLink too, 1.5% of its bytes
    that the coarse packets pay an eighth of (NVLink's own framing is in its efficiency)."""
    from hpnsim.collectives.packet.run import PacketRun
    from hpnsim.collectives.packet.tree import run_tree_packet
    from hpnsim.collectives.planning.plan import plan_collective
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    plan = plan_collective(f, "allreduce", range(32), 2**28, algo="nvlstree",
                           protocol="simple", routing="hpn_dual_plane")
    run = PacketRun(params=PacketParams(header_bytes=0), window=False)
    coarse, fine = (run_tree_packet(f, plan, 2**28, "hpn_dual_plane", run, coarse_nvlink=c)
                    for c in (True, False))
    assert fine.events > 4 * coarse.events
    assert coarse.network_time == pytest.approx(fine.network_time, rel=0.01)


def test_window_on_four_hosts_within_one_percent_of_every_chunk():
    """NVLS-tree over 4 HPN hosts at 1 GiB (32 chunks a stage), ConnectX DCQCN, ECN, PFC:
    the window (16 chunks, extrapolated) within 1% of every chunk simulated."""
    from hpnsim.collectives.packet.run import PacketRun
    from hpnsim.collectives.packet.tree import run_tree_packet
    from hpnsim.collectives.planning.plan import plan_collective
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    plan = plan_collective(f, "allreduce", range(32), 2**30, algo="nvlstree",
                           protocol="simple", routing="hpn_dual_plane")
    win, full = (run_tree_packet(f, plan, 2**30, "hpn_dual_plane", PacketRun(window=w))
                 for w in (True, False))
    assert win.stable and win.extrapolated >= 0.5 and full.steps_simulated == full.steps == 32
    assert win.network_time == pytest.approx(full.network_time, rel=0.01)
