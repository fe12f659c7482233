"""Collective schedules and closed forms, checked by counting bytes (no fabric needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hpnsim.collectives import (
    GroupShape,
    alpha_beta_time,
    build_schedule,
    busbw_factor,
    choose_algorithm,
    hierarchical_time,
    model_time,
    nccl_time,
    tree_time,
)
from hpnsim.collectives.closed_form.model import auto_candidates
from hpnsim.collectives.schedules.tree import btree_parents, dtree_depth, dtree_load, dtree_parents
from hpnsim.errors import InputError


def sent_received(sch):
    """Payload bytes each GPU sends and receives over the whole schedule (relays excluded)."""
    sent, recv = {}, {}
    for s in sch.stages:
        for a, b in zip(s.src.tolist(), s.dst.tolist(), strict=True):
            sent[a] = sent.get(a, 0.0) + s.size
            recv[b] = recv.get(b, 0.0) + s.size
    return sent, recv


def test_busbw_factors_are_nccl_tests_definitions():
    assert busbw_factor("allreduce", 16) == pytest.approx(2 * 15 / 16)
    assert busbw_factor("reduce_scatter", 16) == pytest.approx(15 / 16)
    assert busbw_factor("alltoall", 4) == pytest.approx(0.75)
    assert busbw_factor("broadcast", 16) == busbw_factor("sendrecv", 2) == 1.0


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), gph=st.sampled_from([1, 2, 4, 8]), channels=st.integers(1, 4),
       op=st.sampled_from(["allreduce", "allgather", "reducescatter"]))
def test_ring_moves_the_textbook_bytes_per_rank(n, gph, channels, op):
    size = 1e6
    sch = build_schedule(op, range(n), size, "ring", gpus_per_host=gph, channels=channels)
    sent, recv = sent_received(sch)
    rounds = 2 if op == "allreduce" else 1
    expect = rounds * (n - 1) / n * size
    assert len(sch.stages) == channels
    for g in range(n):
        assert sent[g] == pytest.approx(expect) and recv[g] == pytest.approx(expect)
    assert sum(s.intra_steps + s.inter_steps for s in sch.stages) == channels * rounds * (n - 1)


def test_rail_aligned_ring_uses_one_rail_per_channel_across_hosts():
    gpus = np.arange(32)  # 4 hosts x 8 GPUs
    sch = build_schedule("allreduce", gpus, 8e6, "ring", gpus_per_host=8)
    assert len(sch.stages) == 8  # one channel per rail (one NIC port)
    for c, s in enumerate(sch.stages):
        cross = s.src // 8 != s.dst // 8
        assert cross.sum() == 4  # one hop per host boundary
        # the network hop starts at the relay, which sits on rail c like the destination
        relay = np.where(s.via >= 0, s.via, s.src)[cross]
        assert set((relay % 8).tolist()) == {c} and set((s.dst[cross] % 8).tolist()) == {c}
        # the slowest walk of 2(n-1) edges crosses all 4 boundaries twice (NCCL 2.18.3's
        # tuner: 2 nNodes; v2.29's: 2(nNodes-1))
        assert s.inter_steps == 2 * 4 and s.intra_steps == 2 * 31 - 8


def test_chain_broadcast_and_reduce_move_whole_buffer_once():
    # GPUs 5, 6, 7 on host 0 and 8 on host 1; root = rank 2 = GPU 7. The ring 5-6-7-8
    # opened at the root is the chain 7 -> 8 -> 5 -> 6: hops 7->8 and 8->5 cross hosts,
    # 5->6 is NVLink; every hop carries the whole buffer once, pipelined in one stage
    size = 4e6
    sch = build_schedule("broadcast", [5, 6, 7, 8], size, "ring", gpus_per_host=8, root=2)
    assert len(sch.stages) == 1 and sch.final == (0,)
    s = sch.stages[0]
    assert (s.src.tolist(), s.dst.tolist()) == ([7, 8, 5], [8, 5, 6])
    assert (s.size, s.intra_steps, s.inter_steps, s.coupled) == (size, 1, 2, True)
    assert sent_received(sch) == ({7: size, 8: size, 5: size}, {8: size, 5: size, 6: size})
    # reduce: the same chain reversed, ending at the root, which only receives
    red = build_schedule("reduce", [5, 6, 7, 8], size, "ring", gpus_per_host=8, root=2)
    assert len(red.stages) == 1 and red.final == (0,)
    r = red.stages[0]
    assert (r.src.tolist(), r.dst.tolist()) == ([8, 5, 6], [7, 8, 5])
    assert (r.size, r.intra_steps, r.inter_steps, r.coupled) == (size, 1, 2, True)
    assert sent_received(red) == ({8: size, 5: size, 6: size}, {7: size, 8: size, 5: size})


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 16, 31, 64])
def test_double_binary_tree_is_two_spanning_trees_with_per_rank_load_at_most_2s(n):
    for parent in dtree_parents(n):
        assert (parent < 0).sum() == 1
        node, hops = np.arange(n), 0
        while (parent[node] >= 0).any():  # every rank reaches the root
            node = np.where(parent[node] >= 0, parent[node], node)
            hops += 1
            assert hops <= n
        assert np.bincount(parent[parent >= 0], minlength=n).max() <= 2
    sch = build_schedule("allreduce", range(n), 1.0, "tree", gpus_per_host=1, channels=1)
    sent, recv = sent_received(sch)
    assert max(sent.values()) <= 2.0 + 1e-12 and max(recv.values()) <= 2.0 + 1e-12
    if n >= 4:  # interior in one tree, leaf in the other: the 2S/B of NCCL's ratio 0.5
        assert max(sent.values()) == pytest.approx(2.0)


def test_btree_matches_nccl_construction():
    # ncclGetBtree for 8 ranks: 0 -> 4; 4 -> 2, 6; 2 -> 1, 3; 6 -> 5, 7
    assert btree_parents(8).tolist() == [-1, 2, 4, 2, 0, 6, 4, 6]
    assert btree_parents(5).tolist() == [-1, 2, 4, 2, 0]


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 70))
def test_halving_doubling_bytes_match_rabenseifner(n):
    size = 1024.0
    sch = build_schedule("allreduce", range(n), size, "hd", gpus_per_host=1, channels=1)
    sent, _ = sent_received(sch)
    p = 1 << (n.bit_length() - 1)
    core = 2 * (p - 1) / p * size
    for g in range(p):
        extra = size if g < n - p else 0.0  # folding partner sends the result back
        assert sent[g] == pytest.approx(core + extra)
    for g in range(p, n):
        assert sent[g] == pytest.approx(size)
    assert len(sch.stages) == 2 * int(math.log2(p)) + (2 if n > p else 0)


def test_hierarchical_nvlink_and_rail_bytes_exactly():
    k, hosts, size = 8, 4, 64e6
    sch = build_schedule("allreduce", range(k * hosts), size, "hier", gpus_per_host=k)
    intra = sum(s.total_bytes for s in sch.stages if (s.src // k == s.dst // k).all())
    inter = sum(s.total_bytes for s in sch.stages if (s.src // k != s.dst // k).all())
    assert intra == pytest.approx(hosts * k * 2 * (k - 1) / k * size)
    assert inter == pytest.approx(k * hosts * 2 * (hosts - 1) / hosts * size / k)
    for s in sch.stages:  # every rail ring stays on its rail
        if (s.src // k != s.dst // k).all():
            assert (s.src % k == s.dst % k).all()
    # pipelined: every phase runs at once, none waits for another
    assert sch.final == tuple(range(len(sch.stages)))


def test_hierarchical_needs_uniform_hosts():
    with pytest.raises(InputError, match="same local GPUs"):
        build_schedule("allreduce", [0, 1, 8], 1e6, "hier", gpus_per_host=8)


def test_alltoall_sends_s_over_n_to_every_peer_with_pxn_relays():
    n, size = 16, 16e6
    sch = build_schedule("alltoall", range(n), size, "direct", gpus_per_host=8)
    pairs = sch.pair_bytes()
    assert len(pairs) == n * (n - 1) and set(pairs.values()) == {size / n}
    s = sch.stages[0]
    relayed = s.via >= 0
    assert (s.via[relayed] // 8 == s.src[relayed] // 8).all()
    assert (s.via[relayed] % 8 == s.dst[relayed] % 8).all()
    assert relayed.sum() == 2 * 8 * 7  # cross-host, cross-rail pairs


def test_sendrecv_and_send():
    sr = build_schedule("sendrecv", [0, 9], 1e6, "direct")
    assert sr.pair_bytes() == {(0, 9): 1e6, (9, 0): 1e6}
    assert build_schedule("send", [0, 9], 1e6, "direct").pair_bytes() == {(0, 9): 1e6}


@pytest.mark.parametrize("bad", [
    dict(op="allreduce", algo="direct"), dict(op="bogus", algo="ring"),
    dict(op="allreduce", algo="magic"), dict(op="allgather", algo="tree"),
])
def test_bad_names_are_input_errors(bad):
    with pytest.raises(InputError):
        build_schedule(bad["op"], range(4), 1e6, bad["algo"])


def test_bad_sizes_and_groups():
    for size in (0, -1, float("nan")):
        with pytest.raises(InputError, match="size"):
            build_schedule("allreduce", range(4), size, "ring")
    with pytest.raises(InputError, match="distinct"):
        build_schedule("allreduce", [1, 1], 1e6, "ring")


def test_alpha_beta_closed_forms():
    s, b, a = 8e9, 50e9, 2e-6
    assert alpha_beta_time("allreduce", "ring", 8, s, a, b) == pytest.approx(14 * a + 1.75 * s / b)
    assert alpha_beta_time("allgather", "ring", 8, s, a, b) == pytest.approx(7 * a + 0.875 * s / b)
    assert alpha_beta_time("allreduce", "tree", 8, s, a, b) == pytest.approx(6 * a + 2 * s / b)
    assert alpha_beta_time("allreduce", "hd", 6, s, a, b) == pytest.approx(
        4 * a + 1.5 * s / b + 2 * (a + s / b))
    t = hierarchical_time("allreduce", 8, 4, s, alpha_intra=0, bw_intra=200e9, alpha_inter=0,
                          bw_inter=50e9)
    assert t == pytest.approx(2 * (7 / 8 * s / 200e9 + 3 / 4 * s / 8 / 50e9))


def test_nccl_model_ring_bandwidth_term_and_latency():
    # at 0 latency the ring term is S / (busBw * n / nsteps)
    big = nccl_time("allreduce", "ring", "simple", 16, 2, 1e12, 50e9)
    assert big == pytest.approx(1e12 / (50e9 / 1.875) + 131.6e-6, rel=1e-9)
    small = nccl_time("allreduce", "ring", "ll", 16, 2, 1.0, 50e9)
    assert small == pytest.approx(6.6e-6 + 28 * 0.6e-6 + 2 * 2.7e-6, rel=1e-3)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 2000))
def test_both_trees_have_depth_ceil_log2_and_every_rank_at_most_4_edges(n):
    depths = []
    for parent in dtree_parents(n):
        node, hops = np.arange(n), 0
        while (parent[node] >= 0).any():
            node = np.where(parent[node] >= 0, parent[node], node)
            hops += 1
        depths.append(hops)
    assert depths == [math.ceil(math.log2(n))] * 2 == [dtree_depth(n)] * 2
    degree = np.zeros(n, dtype=int)
    for parent in dtree_parents(n):
        child = np.flatnonzero(parent >= 0)
        degree[child] += 1
        np.add.at(degree, parent[child], 1)
    # interior (3 edges) in at most one tree, so at most 3 + 1 edges over both
    assert degree.max() == dtree_load(n) == (4 if n >= 4 else n)


@settings(max_examples=40, deadline=None)
@given(hosts=st.integers(1, 20), k=st.sampled_from([1, 2, 4, 8]), per_rail=st.integers(1, 2))
def test_node_level_tree_chains_in_hosts_and_rail_aligned_network_hops(hosts, k, per_rail):
    n, size, channels = hosts * k, 1e6, k * per_rail
    assume(n >= 2)
    sch = build_schedule("allreduce", range(n), size, "tree", gpus_per_host=k,
                         channels=channels)
    assert len(sch.stages) == 2 * channels
    share = size / channels / 2
    nv_sent = np.zeros(n)
    for i, s in enumerate(sch.stages):
        c = i // 2
        assert s.size == share
        assert (s.intra_steps, s.inter_steps) == (2 * (k - 1), 2 * dtree_depth(hosts))
        net = s.src // k != s.dst // k
        # the network hops of channel c join the hosts' GPUs of rail c mod k, nothing else
        assert set((s.src[net] % k).tolist()) <= {c % k}
        assert set((s.dst[net] % k).tolist()) <= {c % k}
        assert net.sum() == 2 * (hosts - 1)  # a spanning tree over hosts, up and down
        # inside a host: a chain of its k GPUs, up and down
        assert (~net).sum() == 2 * hosts * (k - 1)
        np.add.at(nv_sent, s.src[~net], s.size)
        # every member pair appears both ways (reduce up, broadcast down)
        pairs = set(zip(s.src.tolist(), s.dst.tolist(), strict=True))
        assert all((b, a) in pairs for a, b in pairs)
    # each GPU sends 2(k-1)/k S over NVLink when the chain heads rotate over all GPUs
    assert np.allclose(nv_sent, 2 * (k - 1) / k * size)


def test_tree_on_mixed_hosts_chains_each_host():
    gpus = [0, 1, 2, 8, 16, 17]  # hosts of 3, 1 and 2 GPUs
    sch = build_schedule("allreduce", gpus, 6.0, "tree", gpus_per_host=8, channels=1)
    s = sch.stages[0]
    assert s.intra_steps == 2 * 2 and s.inter_steps == 2 * dtree_depth(3)
    assert sorted(sent_received(sch)[0]) == sorted(gpus)


def test_alpha_beta_tree_counts_edges_per_rank():
    b, s = 1e9, 1e9
    assert alpha_beta_time("allreduce", "tree", 2, s, 0.0, b) == pytest.approx(1.0)
    assert alpha_beta_time("allreduce", "tree", 3, s, 0.0, b) == pytest.approx(1.5)
    assert alpha_beta_time("allreduce", "tree", 64, s, 1e-6, b) == pytest.approx(12e-6 + 2.0)


H800 = dict(bw_intra=200e9, bw_inter=50e9, nic_ports=2)


def test_tree_closed_form_by_hand():
    # 16 hosts x 8 GPUs, 16 channels: NVLink 2(k-1)/k S/B_nv, network 4/2 S/(k B_nic)
    size = 8e9
    nv = tree_time(GroupShape(16, 8, **H800), size, channels=16, alpha_intra=0,
                   alpha_inter=0)
    assert nv == pytest.approx(2 * 7 / 8 * size / 200e9)
    fast = GroupShape(16, 8, 450e9, 50e9, 2)
    net = tree_time(fast, size, channels=16, alpha_intra=1e-6, alpha_inter=1e-5)
    assert net == pytest.approx(2 * 7 * 1e-6 + 2 * 4 * 1e-5 + 2 * size / (8 * 50e9))


@settings(max_examples=60, deadline=None)
@given(hosts=st.integers(1, 512), k=st.sampled_from([1, 2, 4, 8]),
       nv=st.sampled_from([200e9, 450e9]), size=st.floats(1.0, 2.0**33),
       uniform=st.booleans())
def test_auto_takes_the_fastest_predicted_algorithm_and_protocol(hosts, k, nv, size, uniform):
    shape = GroupShape(hosts, k, nv, 50e9, 2, uniform=uniform)
    algo, proto = choose_algorithm("allreduce", shape, size)
    candidates = auto_candidates("allreduce", shape)
    assert algo in candidates
    best = min(model_time("allreduce", a, p, shape, size) for a in candidates
               for p in ("ll", "ll128", "simple"))
    assert model_time("allreduce", algo, proto, shape, size) == best
    if not uniform or hosts == 1 or k == 1:
        assert "hier" not in candidates


def test_auto_on_many_hosts_and_on_few():
    many = GroupShape(256, 8, **H800)
    assert choose_algorithm("allreduce", many, 8 * 1024) == ("tree", "ll")
    # tree: 2 ceil(log2 H) network hops instead of the ring's 2(H-1)
    ring = model_time("allreduce", "ring", "simple", many, 2.0**32)
    tree = model_time("allreduce", "tree", "simple", many, 2.0**32)
    assert ring - tree > 2 * 254 * 14e-6 - 2 * 8 * 14e-6 - 1e-12
    # few hosts, network-bound (fast NVLink), large: the ring's (n-1)/n beats the tree's 1
    # ... and the pipelined hierarchical form beats both: it moves (H-1)/H·2S/k per NIC,
    # the ring 2(n-1)/n·S/k, with NVLink no longer in series
    few = GroupShape(4, 8, 450e9, 50e9, 2)
    assert choose_algorithm("allreduce", few, 2.0**32) == ("hier", "simple")
    assert choose_algorithm("allreduce", GroupShape(2, 8, **H800), 4096) == ("hier", "ll")
    assert choose_algorithm("allgather", GroupShape(2, 8, **H800), 4096)[0] in ("ring", "hier")
    assert choose_algorithm("alltoall", many, 2.0**20)[0] == "direct"
