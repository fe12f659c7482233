"""Ring all-reduce in the packet engine: pipelined chunk timing by hand, the windowed
steady-state mode against the full run, and the HPN fabric adapter."""

from __future__ import annotations

import numpy as np
import pytest

from hpnsim.benchmarks.packet import fabric_rings
from hpnsim.packet import PacketParams
from hpnsim.packet.adapter import fabric_links
from hpnsim.packet.ring import ring_flows, simulate_ring

P = PacketParams(cc=False, header_bytes=0)
C, D, N = 10e9, 2e-6, 4                       # a ring of 4 NICs on direct 80 Gb/s links
RING = [[[r] for r in range(N)]]
LINE = 1 + P.framing_bytes / P.mtu_bytes      # line bytes per payload byte (whole packets)


def test_unchunked_steps_wait_for_the_whole_piece():
    # one chunk per step: a step starts when the previous piece has fully arrived
    piece = 64 * 4096
    run = simulate_ring(np.full(N, C), D, RING, N * piece, chunk_bytes=piece, params=P,
                        switch_of=[-1] * N, window=False)
    steps = 2 * (N - 1)
    assert run.steps == steps and run.extrapolated == 0.0
    assert run.time == pytest.approx(steps * (piece * LINE / C + D), rel=1e-9)


def test_chunked_steps_pipeline_and_keep_the_link_busy():
    # m chunks: the next step's first chunk is ready (chunk/C + D after it left) before the
    # link has sent the rest of the piece ((m-1) chunk/C >= D), so the link never idles
    piece, m = 64 * 4096, 8
    assert (m - 1) * piece / m / C >= D
    run = simulate_ring(np.full(N, C), D, RING, N * piece, chunk_bytes=piece / m, params=P,
                        switch_of=[-1] * N, window=False)
    assert run.time == pytest.approx(2 * (N - 1) * piece * LINE / C + D, rel=1e-9)
    np.testing.assert_allclose(np.diff(run.step_end), piece * LINE / C, rtol=1e-9)


def test_ring_flow_dependencies_follow_the_data():
    paths, sizes, deps, qp, step = ring_flows(RING, 8.0, 3, 2)
    # flow (step s, rank r, chunk j) waits for (step s-1, rank r-1, chunk j)
    index = {(s, r, j): (s * N + r) * 2 + j for s in range(3) for r in range(N) for j in range(2)}
    assert deps[index[2, 0, 1]] == [index[1, N - 1, 1]]
    assert deps[index[1, 2, 0]] == [index[0, 1, 0]]
    assert sizes.tolist() == [4.0] * len(paths) and qp[index[2, 3, 1]] == 3


def test_windowed_ring_on_an_hpn_segment_matches_the_full_run():
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)
    rings = fabric_rings(f, range(16), 2)
    kw = dict(**fabric_links(f), histograms=False)
    size = 2 * 16 * 2**20 / 8                       # 2 channels x 16 ranks x 256 KiB pieces
    full = simulate_ring(f.link_capacity, f.link_latency, rings, size, window=False, **kw)
    fast = simulate_ring(f.link_capacity, f.link_latency, rings, size, **kw)
    assert fast.steps_simulated < fast.steps and fast.extrapolated > 0.5
    assert fast.time == pytest.approx(full.time, rel=0.01)
    assert full.result.drops.sum() == 0
    # each ring crosses the network from one NIC port per host: per step, a piece at the
    # port's rate bounds the step from below
    d = PacketParams()                              # the run used the defaults
    piece_wire = size / 2 / 16 * (1 + (d.header_bytes + d.framing_bytes) / d.mtu_bytes)
    port = f.link_capacity[f.gpu_access_link[0, 0]]
    assert np.diff(full.step_end).min() >= piece_wire / port * (1 - 1e-9)


def test_uncongested_hpn_ring_steps_take_one_piece_at_the_nic_port_rate():
    # 8 channels, one per rail: each channel's ring leaves each host from its own NIC port,
    # so no two rings share a network link and a step is one piece at the port's rate
    from hpnsim.fabrics import hpn7

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)
    rings = fabric_rings(f, range(16), 8)
    size = 8 * 16 * 2**20 / 4                            # 256 KiB pieces
    run = simulate_ring(f.link_capacity, f.link_latency, rings, size, window=False,
                        histograms=False, **fabric_links(f))
    d = PacketParams()
    piece_wire = size / 8 / 16 * (1 + (d.header_bytes + d.framing_bytes) / d.mtu_bytes)
    port = f.link_capacity[f.gpu_access_link[0, 0]]
    np.testing.assert_allclose(np.diff(run.step_end), piece_wire / port, rtol=1e-6)
    assert run.result.marks.sum() == 0 and run.result.pauses.sum() == 0


def test_uncongested_ring_takes_what_the_flow_engine_says_plus_headers():
    # "two engines, one program": the same chunk flows, paths and dependencies in
    # hpnsim.engine (max-min, no packets, no latency), sizes grown by the RoCEv2 header per
    # packet, agree with the packet run within 1% when nothing is congested. (Differences:
    # per-hop latency in the packet run; the flow engine shares a port among concurrent
    # chunks where a QP sends them in order.)
    from hpnsim.engine import TaskGraph, simulate
    from hpnsim.fabrics import hpn7
    from hpnsim.packet.ring import NCCL_CHUNK_BYTES

    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)
    rings = fabric_rings(f, range(16), 2)
    size = 2 * 16 * 2**20                                 # 1 MiB pieces, 2 chunks each
    run = simulate_ring(f.link_capacity, f.link_latency, rings, size, window=False,
                        histograms=False, **fabric_links(f))
    d = PacketParams()
    piece = size / 2 / 16
    paths, sizes, deps, _, _ = ring_flows(rings, piece, 30, int(np.ceil(piece / NCCL_CHUNK_BYTES)))
    graph, ids = TaskGraph(), []
    for path, chunk, before in zip(paths, sizes, deps, strict=True):
        ids.append(graph.add_transfer(path, 1.0, chunk * (1 + (d.header_bytes + d.framing_bytes)
                                                          / d.mtu_bytes),
                                      deps=[ids[g] for g in before]))
    flow = simulate(graph, f.link_capacity)
    assert run.time == pytest.approx(flow.makespan, rel=0.01)


def test_a_periodic_ring_window_settles_on_block_means_within_1pct_of_the_full_run():
    # The 448-GPU runs' windowing on a case small enough to run whole: 32 H800 GPUs (4 hosts
    # in 2 HPN segments), ring all-reduce of 128 MiB with LL128, 16 channels, PXN. Its step
    # time repeats with period 8 (each host's 7 NVLink hops and one network hop: the late
    # chunks go around the ring one rank per step), so three step intervals never agree
    # within 1% and the window used to double to the end; block means of whole periods do.
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    from hpnsim.fabrics import hpn7
    from hpnsim.packet.ring import steady_rate

    f = hpn7(segments=2, hosts_per_segment=2, backup_hosts=0)
    kw = dict(algo="ring", protocol="ll128", routing="hpn_dual_plane",
              nccl=NcclParams.for_gpu("h800"))
    full = run_collective_packet(f, "allreduce", range(32), 2**27, run=PacketRun(window=False),
                                 **kw)
    fast = run_collective_packet(f, "allreduce", range(32), 2**27, run=PacketRun(), **kw)
    assert full.steps_simulated == full.steps == 62
    assert fast.stable and fast.steps_simulated < fast.steps and fast.extrapolated > 0.4
    assert fast.network_time == pytest.approx(full.network_time, rel=0.01)
    # the full run's step times swing by more than 1% (so the three-interval test alone
    # never settles), while the mean over whole periods of 8 steps is flat
    d = np.diff(full.ring_step_end.max(axis=0))
    assert np.ptp(d[-3:]) > 0.05 * d[-1]
    blocks = d[6:54].reshape(-1, 8).mean(axis=1)
    assert np.ptp(blocks) < 0.01 * blocks.mean()
    ends = full.ring_step_end.max(axis=0)
    assert steady_rate(ends[:32], 0.0) == pytest.approx((ends[31] - ends[15]) / 16)


def test_nccl_slots_bound_a_connections_data_queued_behind_a_slow_hop():
    # rank 0 -> 1 crosses a switch whose egress to rank 1 runs at a quarter of the NIC's
    # rate; rank 0's pieces are 8 chunks of 64 KiB. Without a bound every chunk leaves at
    # the NIC's rate and piles up in front of the slow egress: of the 16 chunks of 2 steps,
    # 4 x faster in than out, 3/4 wait (12 chunks, measured 12.0); with 2 slots a chunk
    # waits until the one 2 before it has arrived, so at most 2 chunks are queued.
    p = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=np.inf, header_bytes=0,
                     framing_bytes=0)
    cap = np.array([4e9, 1e9, 4e9, 4e9])
    ring = [[[0, 1], [2], [3]]]
    chunk = 64 * 1024.0
    runs = {slots: simulate_ring(cap, 1e-7, ring, 3 * 8 * chunk, chunk_bytes=chunk, params=p,
                                 switch_of=[-1, 0, -1, -1], window=False, steps=2,
                                 slots=slots)
            for slots in (None, 2)}
    assert runs[None].result.q_max[1] >= 11 * chunk
    assert runs[2].result.q_max[1] <= 2 * chunk + p.mtu_bytes
    # the slow egress is busy either way: the step time is its 8 chunks at 1 GB/s
    for run in runs.values():
        assert np.diff(run.step_end)[0] == pytest.approx(8 * chunk / 1e9, rel=0.02)
