"""The RC transport of the packet engine (issue 18): go-back-N after a drop, lossy incasts
that finish, and CNPs as packets on the reverse path in their own priority. Expected values
come from hand counts of the packets in each setup, not from the engine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.packet import PacketParams, simulate_flows

C = 50e9                       # 400 Gb/s
D = 0.5e-6


def _one_drop_setup(n_packets: int):
    # sender -> switch at r C, switch -> receiver at C: the switch queue grows by
    # (1 - 1/r) packet per arrival; a lossy buffer of (2m + 1/2) frames admits a packet while
    # the m' waiting ones satisfy (m' + 1) s <= B - m' s, i.e. m' <= m - 1
    r, m = 1.0110101, 4
    p = PacketParams(cc=False, ecn=False, pfc=False)
    s = p.mtu_bytes + p.header_bytes
    p = p.replace(buffer_bytes=(2 * m + 0.5) * s)
    cap = np.array([r * C, C, C, r * C])       # 0: NIC -> SW, 1: SW -> R, 2, 3 their reverse
    res = simulate_flows(cap, D, [[0, 1]], n_packets * p.mtu_bytes, params=p,
                         switch_of=[-1, 0, -1, 0], reverse=[3, 2, 1, 0])
    return res, p, r, m, s


def one_drop_by_hand(n: int, p: PacketParams, r: float, m: int, s: int) -> tuple[int, int]:
    """The dropped PSN and the packets the NIC had started when the NACK reached it, counted
    by hand for :func:`_one_drop_setup` (shared with tests/test_packet_report_transport.py)."""
    t1 = (s + p.framing_bytes) / (r * C)         # the NIC starts packet k at k t1
    t2 = (s + p.framing_bytes) / C               # the switch port serves one every t2
    # packet k reaches the switch at a_k = (k + 1) t1 + D; the port serves from a_0 without
    # a break, so by a_k it has started floor(k / r) + 1 packets and k - floor(k / r) - 1
    # wait: the first k with m waiting is dropped
    k = np.arange(n)
    assert np.min(np.abs(k / r - np.round(k / r))[1:]) > 1e-6     # no ties in the count
    waiting = k - np.floor(k / r) - 1
    drop = int(np.argmax(waiting >= m))
    assert waiting[drop] == m
    # packet drop+1 is admitted (the port started one more meanwhile) and is the drop-th
    # packet served: it reaches R at a_0 + (drop + 1) t2 + D; R's NACK (ack_bytes) crosses
    # R -> SW at C and SW -> sender at r C, both idle
    ack = p.ack_bytes + p.framing_bytes
    t_nack = (t1 + D) + (drop + 1) * t2 + D + (ack / C + D) + (ack / (r * C) + D)
    started = math.floor(t_nack / t1) + 1        # packets the NIC had begun by then
    assert drop + 1 < started < n                # it is still sending: go back mid-flow
    # after the drop the queue holds m - 1; the packets still to arrive (the originals after
    # the drop and the resent ones) are fewer than it takes to add one more waiting packet
    assert (started - drop - 1) + (n - drop) < 1 / (1 - 1 / r)
    return drop, started


def test_one_drop_costs_one_rewind_of_the_bytes_in_flight_after_it():
    n = 400
    res, p, r, m, s = _one_drop_setup(n)
    drop, started = one_drop_by_hand(n, p, r, m, s)
    resent = started - drop                      # the dropped one and those in flight after
    assert int(res.drops.sum()) == 1 and int(res.drops[1]) == 1
    assert int(res.rewinds[0]) == 1 and int(res.timeouts[0]) == 0
    assert res.resent[0] == resent * p.mtu_bytes
    assert int(res.discards[0]) == started - drop - 1   # originals after the gap
    assert res.received[0] == n * p.mtu_bytes and np.isfinite(res.finish[0])
    # every packet sent is delivered once, dropped or discarded
    sent = n + resent
    assert sent == n + int(res.drops.sum()) + int(res.discards[0])
    assert res.tx_bytes[0] == sent * s


def test_without_retransmission_a_drop_leaves_the_flow_unfinished():
    n = 400
    res, p, *_ = _one_drop_setup(n)
    cap = np.array([1.0110101 * C, C, C, 1.0110101 * C])
    off = simulate_flows(cap, D, [[0, 1]], n * p.mtu_bytes, params=p.replace(retransmit=False),
                         switch_of=[-1, 0, -1, 0], reverse=[3, 2, 1, 0])
    assert int(off.drops.sum()) == 1 and off.finish[0] == np.inf
    assert off.received[0] == (n - 1) * p.mtu_bytes and int(off.rewinds[0]) == 0


def _incast(n: int, size: float, params: PacketParams):
    # links 0..n-1: sender i -> switch, n: switch -> receiver; n+1..2n+1 their reverses
    cap = np.full(2 * (n + 1), C)
    reverse = np.concatenate([np.arange(n + 1, 2 * (n + 1)), np.arange(n + 1)])
    switch_of = [-1] * n + [0] + [0] * n + [-1]
    return simulate_flows(cap, D, [[i, n] for i in range(n)], size, params=params,
                          switch_of=switch_of, reverse=reverse)


def test_a_lossy_incast_finishes_and_conserves_its_packets():
    n, size = 4, 4 * 2**20
    p = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=200e3)
    res = _incast(n, size, p)
    s = p.mtu_bytes + p.header_bytes
    assert int(res.drops.sum()) > 0                       # the buffer overflows ...
    assert np.all(np.isfinite(res.finish))                # ... and every flow still ends
    assert np.all(res.received == size)                   # with exactly its bytes
    # each flow sent size / MTU packets plus its resent ones; each was delivered once,
    # dropped at the switch, or discarded by the receiver
    sent = (size + res.resent) / p.mtu_bytes
    assert np.all(sent == np.round(sent))
    assert sent.sum() == n * size / p.mtu_bytes + res.drops.sum() + res.discards.sum()
    np.testing.assert_array_equal(res.tx_bytes[:n], sent * s)
    assert np.all(res.rewinds >= 1)
    # a flow whose tail was dropped learns of it only from its timer (no later packet to
    # make a NACK): it finishes after one retransmission timeout
    timed_out = res.timeouts > 0
    assert np.all(res.finish[timed_out] > p.rto_s)


def test_a_qp_gives_up_after_retry_count_timeouts():
    # tail drops with a zero retry count: the first timeout ends the QP, as an RC QP moves
    # to the error state after retry_cnt retries
    p = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=200e3, retry_count=0)
    res = _incast(4, 4 * 2**20, p)
    gave_up = res.timeouts > 0
    assert gave_up.any()
    assert np.all(res.finish[gave_up] == np.inf)
    assert np.all(res.timeouts[gave_up] == 1)


def _cnp_run(cnp_priority: int, reverse: bool, cross: bool):
    # A (link 0) and Z (link 1) send into R over link 2 (2:1, marked from the first queued
    # packet: Kmin = Kmax = 1 B); R's CNPs go back R -> SW (link 3) and SW -> A (link 4).
    # With ``cross``, X and Y (links 5, 6) send a 2:1 incast to A over link 4, so the CNP
    # meets a queue there growing at C.
    p = PacketParams(pfc=False, buffer_bytes=np.inf, kmin_bytes=1.0, kmax_bytes=1.0,
                     cnp_priority=cnp_priority)
    cap = np.full(9, C)
    paths = [[0, 2], [1, 2]] + ([[5, 4], [6, 4]] if cross else [])
    rev = np.full(9, -1)            # X's and Y's CNPs take the fixed delay (no reverse)
    rev[[0, 4, 2, 3, 1, 7]] = [4, 0, 3, 2, 7, 1]
    switch_of = [-1, -1, 0, -1, 0, -1, -1, 0, -1]
    return simulate_flows(cap, D, paths, 8 * 2**20, params=p, switch_of=switch_of,
                          reverse=rev if reverse else None), p


def test_an_unqueued_cnp_takes_the_reverse_paths_delay_and_serializations():
    # over idle reverse links a CNP arrives exactly when the fixed-delay model says: each hop
    # adds its delay and one CNP frame plus framing at C; the marks and so the first CNP's
    # departure are the same in both runs (nothing else differs before it arrives)
    queued, p = _cnp_run(6, reverse=True, cross=False)
    fixed, _ = _cnp_run(6, reverse=False, cross=False)
    assert np.isfinite(queued.first_cnp[0])
    assert queued.first_cnp[0] == pytest.approx(fixed.first_cnp[0], rel=0, abs=1e-15)


def test_a_cnp_in_its_own_priority_overtakes_the_data_queued_on_its_way():
    idle, p = _cnp_run(6, reverse=True, cross=False)
    high, _ = _cnp_run(6, reverse=True, cross=True)
    low, _ = _cnp_run(p.data_priority, reverse=True, cross=True)
    frame = (p.mtu_bytes + p.header_bytes + p.framing_bytes) / C
    # priority 6: it waits at most for the data packet SW -> A is serializing
    assert 0 <= high.first_cnp[0] - idle.first_cnp[0] <= frame + 1e-15
    # priority 3: behind the whole 2:1 incast queue, which has grown at C since X's and Y's
    # first packets reached the switch at frame + D
    at_switch = idle.first_cnp[0] - ((p.cnp_bytes + p.framing_bytes) / C + D)
    queue_time = at_switch - (frame + D)
    assert low.first_cnp[0] - idle.first_cnp[0] == pytest.approx(queue_time, abs=2 * frame)


def test_reverse_paths_are_checked():
    p = PacketParams(cc=False)
    with pytest.raises(InputError, match="reverse"):
        simulate_flows(np.full(2, C), D, [[0, 1]], 4096, params=p, switch_of=[-1, 0],
                       reverse=[1, 1])     # would start at a switch-buffered link
    with pytest.raises(InputError, match="reverse"):
        simulate_flows(np.full(2, C), D, [[0, 1]], 4096, params=p, switch_of=[-1, 0],
                       reverse=[1])
