"""Persistent QPs in task graphs run as packets (hpnsim.packet.graph, QpScope): a
connection's later transfer inherits the DCQCN rate its earlier one was cut to, against the
store-and-forward time by hand at that rate; a fresh QP starts at line rate; without
congestion control sharing a QP changes nothing but the order of one connection's
concurrent transfers, whose finish times are derived by hand."""

import numpy as np
import pytest

from hpnsim.engine import TaskGraph
from hpnsim.errors import InputError
from hpnsim.packet import PacketParams
from hpnsim.packet.graph import QpScope, simulate_graph

W, C, D = 4096.0, 10e9, 1e-6           # payload bytes per packet, link rate, link delay

#: no headers or framing (hand sums); DCQCN frozen after its first cut: one cut per QP
#: (decrease interval 1 s), alpha stays at its initial 1 (alpha period 1 s), no increase
#: (timer 1 s, byte counter never reached); marks once more than 3 packets are queued
FROZEN = PacketParams(header_bytes=0, framing_bytes=0, pfc=False, buffer_bytes=np.inf,
                      kmin_bytes=3 * W, kmax_bytes=3 * W, pmax=1.0, alpha_interval_s=1.0,
                      rate_decrease_interval_s=1.0, rp_timer_s=1.0, byte_counter_bytes=1e18)


def _members(graph):
    task, ptr, links, weight = graph.member_paths()
    return task, [(links[ptr[i]:ptr[i + 1]],) for i in range(task.size)], weight


def _congest_then_send(qps: QpScope, n2: int = 16):
    """Links 0, 1: two NIC ports into switch egress 2. Transfer 1: both NICs send 64
    packets at once (2:1 at link 2: the queue passes 3 packets, both senders are marked and
    cut). Transfer 2, after it: NIC 0 alone sends ``n2`` packets on the same route."""
    g = TaskGraph()
    first = g.add_transfer_paths([[0, 2], [1, 2]], 64 * W)
    second = g.add_transfer_paths([[0, 2]], n2 * W, deps=[first])
    run = simulate_graph([C] * 3, D, g.arrays(3), *_members(g), params=FROZEN,
                         switch_of=[-1, -1, 0], qps=qps)
    return run, first, second


def test_a_connections_next_transfer_starts_at_the_rate_its_last_one_was_cut_to():
    """One CNP at alpha 1 halves the rate (DCQCN: Rc (1 - alpha/2)); frozen, NIC 0's QP
    keeps C/2 into transfer 2: its n packets leave 2w/C apart (the rate limiter), the last
    arrives after (n-1) 2w/C + w/C + d + w/C + d = 2n w/C + 2d. The engine's own per-QP
    state says the same rate."""
    n = 16
    run, first, second = _congest_then_send(QpScope.CONNECTION, n)
    fl, res = run.flows, run.result
    assert fl.qp.tolist() == [0, 1, 0]              # transfer 2 on transfer 1's NIC-0 QP
    assert res.cnps[:2].min() >= 1 and res.cnps[2] == 0
    assert res.qp_rate[0] == pytest.approx(C / 2, rel=1e-12)
    assert run.start[second] == pytest.approx(run.finish[first], rel=1e-12)
    took = run.finish[second] - run.start[second]
    assert took == pytest.approx(n * W / res.qp_rate[0] + W / C + 2 * D - W / C, rel=1e-9)
    assert took == pytest.approx(2 * n * W / C + 2 * D, rel=1e-9)


def test_a_fresh_qp_starts_the_next_transfer_at_line_rate():
    """QpScope.FLOW: transfer 2 has a QP of its own at line rate, nothing queues, so its n
    packets pipeline over the two links: (n + 1) w/C + 2d; its QP is never cut."""
    n = 16
    run, first, second = _congest_then_send(QpScope.FLOW, n)
    assert run.flows.qp.tolist() == [0, 1, 2]
    assert run.result.qp_rate[2] == C and run.result.qp_rate[0] == pytest.approx(C / 2)
    took = run.finish[second] - run.start[second]
    assert took == pytest.approx((n + 1) * W / C + 2 * D, rel=1e-9)


def test_without_cc_a_shared_qp_serves_concurrent_transfers_in_order():
    """Two transfers of n packets each, ready at once on one connection (link 0, then the
    switch egress 1), no congestion control. Fresh QPs take turns at the NIC: packet i of
    the 2n leaves at i w/C and arrives at (i + 2) w/C + 2d, so they finish at 2n w/C + 2d
    and (2n + 1) w/C + 2d. One QP sends its work in order: the first finishes after its own
    n packets, (n + 1) w/C + 2d, the second as before. (NCCL posts one connection's work
    requests in order; the round robin is the model's old per-flow QPs.)"""
    n = 8
    g = TaskGraph()
    a = g.add_transfer_paths([[0, 1]], n * W)
    b = g.add_transfer_paths([[0, 1]], n * W)
    plain = PacketParams(cc=False, header_bytes=0, framing_bytes=0)
    ends = {}
    for scope in QpScope:
        run = simulate_graph([C, C], D, g.arrays(2), *_members(g), params=plain,
                             switch_of=[-1, 0], qps=scope)
        ends[scope] = np.sort(run.finish[[a, b]])
    assert ends[QpScope.FLOW] == pytest.approx(
        [2 * n * W / C + 2 * D, (2 * n + 1) * W / C + 2 * D], rel=1e-9)
    assert ends[QpScope.CONNECTION] == pytest.approx(
        [(n + 1) * W / C + 2 * D, (2 * n + 1) * W / C + 2 * D], rel=1e-9)


def test_without_cc_collectives_one_after_another_take_the_same_time_either_way():
    """An all-to-all, a hierarchical all-reduce and a tree all-reduce, one after another and
    twice, on two HPN hosts (ECMP, ECN and PFC on, DCQCN off): the second round reuses the
    first's QPs channel by channel, but no QP ever has two transfers ready at once, so every task starts
    and finishes when it did with a fresh QP per flow (to 1e-9)."""
    from hpnsim.collectives import compile_into
    from hpnsim.collectives.packet.graph import graph_members, task_channels
    from hpnsim.collectives.packet.ports import packet_capacity
    from hpnsim.fabrics import hpn7
    from hpnsim.packet.adapter import fabric_links

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    g = TaskGraph()
    c = None
    for _ in range(2):
        c = compile_into(g, f, "alltoall", range(16), 2**22, deps=c.final if c else ())
        c = compile_into(g, f, "allreduce", range(16), 2**24, algo="hier", deps=c.final)
        c = compile_into(g, f, "allreduce", range(16), 2**24, algo="tree", deps=c.final)
    params = PacketParams(cc=False)
    links = fabric_links(f)
    runs = {scope: simulate_graph(packet_capacity(f, c.nccl, params), f.link_latency,
                                  g.arrays(f.n_links), *graph_members(f, g), params=params,
                                  switch_of=links["switch_of"], reverse=links["reverse"],
                                  framed=links["framed"], qps=scope,
                                  channels=task_channels(g)) for scope in QpScope}
    shared, fresh = runs[QpScope.CONNECTION], runs[QpScope.FLOW]
    assert np.unique(shared.flows.qp).size < np.unique(fresh.flows.qp).size   # QPs reused
    np.testing.assert_allclose(shared.finish, fresh.finish, rtol=1e-9)
    np.testing.assert_allclose(shared.start, fresh.start, rtol=1e-9)


def test_channels_keep_connections_apart_and_tasks_without_one_get_fresh_qps():
    """Five transfers one after another over one route: the connection id each task was
    added with picks the QP: channel 0 of two transfers share a QP, channel 1 has its own;
    tasks added without one (-1) get fresh QPs each, whatever their names."""
    from hpnsim.collectives.packet.graph import task_channels
    from hpnsim.packet.graph import graph_flows

    g = TaskGraph()
    t = g.add_transfer_paths([[0, 1]], W, channel=0, name="dp0/allreduce/ring/ch0")
    for channel, name in ((1, ""), (0, "other"), (-1, "dp1/allreduce/ring/ch0"), (-1, "")):
        t = g.add_transfer_paths([[0, 1]], W, deps=[t], channel=channel, name=name)
    assert task_channels(g) == [0, 1, 0, None, None]
    fl = graph_flows(g.arrays(2), *_members(g), channels=task_channels(g))
    assert fl.qp.tolist() == [0, 1, 0, 2, 3]
    assert graph_flows(g.arrays(2), *_members(g)).qp.tolist() == [0] * 5   # one channel


def _expected_channel(kind: int, lane: int, conn: int) -> int:
    return (kind << 40) | (lane << 20) | conn


def test_compiled_transfers_carry_the_connection_their_schedule_ran_on():
    """A 4-channel ring all-reduce and tree all-reduce on 16 GPUs and an all-to-all: the
    ring's transfers carry (RING, lane 0, NCCL channel c) for c = 0..3, the tree's (TREE,
    tree t, conn 2c + t) for both trees of every channel, each stage's task the one of its
    stage (kind, lane, conn as the schedule built it); the all-to-all's per-member flows and
    the barriers carry none (-1)."""
    from hpnsim.collectives import compile_into
    from hpnsim.collectives.schedules.schedule import ChannelKind
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    g = TaskGraph()
    ring = compile_into(g, f, "allreduce", range(16), 2**22, algo="ring", channels=4)
    tree = compile_into(g, f, "allreduce", range(16), 2**22, algo="tree", channels=4,
                        deps=ring.final)
    a2a = compile_into(g, f, "alltoall", range(16), 2**22, deps=tree.final)
    channel = np.asarray(g.channels)
    ring_ids = {int(channel[t]) for ts in ring.stage_tasks for t in ts}
    assert ring_ids == {_expected_channel(ChannelKind.RING, 0, c) for c in range(4)}
    tree_ids = sorted(int(channel[t]) for ts in tree.stage_tasks for t in ts)
    assert tree_ids == sorted(_expected_channel(ChannelKind.TREE, t, 2 * c + t)
                              for c in range(4) for t in range(2))
    for c in (ring, tree):
        for stage, tasks in zip(c.schedule.stages, c.stage_tasks, strict=True):
            assert channel[tasks].tolist() == [_expected_channel(stage.kind, stage.lane,
                                                                 stage.conn)]
    a2a_tasks = np.concatenate(a2a.stage_tasks)
    assert a2a_tasks.size > 1 and (channel[a2a_tasks] == -1).all()
    assert (channel[g.arrays(f.n_links).kind == 1] == -1).all()       # delays: none


def test_replayed_fragments_and_copied_iterations_keep_each_transfers_connection():
    """The training compiler's replay of a cached collective (a recorded GraphFragment,
    appended) carries the channels of the first compile task for task; a graph copied
    twice (append_chain, as iteration templates are) carries its channels in both copies,
    through arrays() frozen whole and grown."""
    from hpnsim.collectives import CollectiveOptions
    from hpnsim.fabrics import hpn7
    from hpnsim.training.comm import compile_groups

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    g, cache = TaskGraph(), {}
    options = CollectiveOptions(algo="tree", channels=2)
    done, _, _ = compile_groups(g, f, "allreduce", [list(range(16))], 2**22, options,
                                    name="dp", cache=cache)
    n = len(g)
    again, _, _ = compile_groups(g, f, "allreduce", [list(range(16))], 2**22, options,
                                 deps=[done], name="dp", cache=cache)
    n2 = len(g)
    _, _, _ = compile_groups(g, f, "allreduce", [list(range(16))], 2**22, options,
                                 deps=[again], name="dp", cache=cache)
    assert any(k[0] == "replay" for k in cache if isinstance(k, tuple))  # fragment used
    ch = g.channels
    assert sorted(c for c in ch[:n] if c >= 0) == sorted(
        _expected_channel(1, t, 2 * c + t) for c in range(2) for t in range(2))
    assert ch[n:n2] == ch[:n] and ch[n2:] == ch[:n]
    frozen = g.arrays(f.n_links)
    h = TaskGraph()
    h.append_chain(frozen, 2, chain=[len(g) - 1])
    assert h.arrays(f.n_links).channel.tolist() == ch * 2
    h.append_copy(frozen)                                     # grown from the last freeze
    assert h.arrays(f.n_links).channel.tolist() == ch * 3


@pytest.mark.parametrize("channel", [-2, 1.5, True, "ring/ch0"])
def test_a_bad_channel_is_refused_naming_the_field(channel):
    g = TaskGraph()
    with pytest.raises(InputError, match="channel"):
        g.add_transfer([0], 1.0, 1.0, channel=channel)
    with pytest.raises(InputError, match="channel"):
        g.add_transfers([[0]], 1.0, channel=channel)
    assert len(g) == 0
