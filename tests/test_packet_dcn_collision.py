"""An ECMP collision on DCN+ against a hand-worked two-flow case: two NICs of one ToR pair
send to one NIC, and the ECMP hash (seed 4) puts both flows on the same ToR -> NIC port.

Hand-worked, with the packets' own rates left alone (no congestion control, no PFC, an
unlimited buffer) and ECN as a step at K (Kmin = Kmax = K, Pmax = 1: a packet is marked when
the port's queue exceeds K on its arrival): both senders' k-th frames reach the ToR together,
one frame time ``tau`` apart, and the port sends one frame per ``tau``, so the k-th pair finds
about k frames queued. The queue peaks near N frames when the senders stop (N frames each);
the pairs k = 0 .. N-1 with k > K / w are marked: ``2 (N - 1 - K / w)``. Frames of each sender and the
port's departures fall on the same instants, so which comes first is decided by the heap's
insertion order: the counts hold to a frame or two.
"""

from __future__ import annotations

import numpy as np
import pytest

from hpnsim.fabrics import dcn_plus
from hpnsim.packet import PacketParams
from hpnsim.packet.adapter import network_legs, simulate_paths
from hpnsim.routing import route

W = 4096 + 62                                  # a data frame: MTU payload and RoCEv2 headers


@pytest.fixture(scope="module")
def collided():
    f = dcn_plus(pods=1)
    paths = route(f, [0, 8], [16, 16], "ecmp", seed=4)     # hosts 0 and 1 -> host 2, rail 0
    legs = network_legs(f, paths)
    assert legs[0][-1] == legs[1][-1] and [len(x) for x in legs] == [2, 2]
    return f, paths, int(legs[0][-1])


def test_collided_port_queue_and_marks_match_the_hand_worked_two_flow_case(collided):
    f, paths, port = collided
    n, k = 256, 100                                        # frames per sender, K in frames
    p = PacketParams(cc=False, pfc=False, buffer_bytes=np.inf, kmin_bytes=k * W,
                     kmax_bytes=k * W, pmax=1.0)
    r = simulate_paths(f, paths, n * 4096.0, params=p)
    assert abs(r.q_max[port] / W - n) <= 1
    assert abs(int(r.marks[port]) - 2 * (n - 1 - k)) <= 2
    assert int(r.marks.sum()) == int(r.marks[port])          # nowhere else
    # the port runs at its line rate throughout: 2N frames, framing on the wire
    tau = (W + p.framing_bytes) / f.link_capacity[port]
    assert float(r.finish.max()) == pytest.approx(2 * n * tau, rel=0.03)


def test_below_the_threshold_nothing_is_marked(collided):
    f, paths, port = collided
    n = 64                                                 # the queue peaks near 64 frames
    p = PacketParams(cc=False, pfc=False, buffer_bytes=np.inf, kmin_bytes=66 * W,
                     kmax_bytes=66 * W, pmax=1.0)
    r = simulate_paths(f, paths, n * 4096.0, params=p)
    assert int(r.marks.sum()) == 0 and r.q_max[port] <= 66 * W
