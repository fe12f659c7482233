"""Where a switch marks (``ecn_mark_at``): a hand-worked queue, its marks and its first CNP.

One sender pushes N one-packet flows (each its own QP, so a CNP cuts nothing that is still
sending) back to back at C into a switch whose egress runs at C / sqrt(2): w = 1000-B frames
(no headers, no framing), tau = w / C = 1 us, every link 1 us long. The egress serializes
a packet in sqrt(2) tau (irrational, so no arrival ever ties with a departure).

* Packet i reaches the switch at ``t_i = (i + 1) tau + d``; the egress is busy from t_0 on
  (arrivals are faster), so packet m starts leaving at ``s_m = (1 + m sqrt 2) tau + d``.
* *Enqueue* (the bytes ahead of an arriving packet): the packets that started leaving
  before t_i are those with ``m < i / sqrt 2``, so packet i (i >= 1) finds
  ``i - ceil(i / sqrt 2)`` packets waiting.
* *Dequeue* (the bytes a departing packet leaves behind): by s_m the packets with
  ``i < m sqrt 2`` have arrived, so packet m (m >= 1) leaves
  ``min(N, ceil(m sqrt 2)) - (m + 1)`` packets behind (packet 0: none).

With N = 20 and a step at K = 3.5 packets (Kmin = Kmax, so "above K" means 4 packets or
more): enqueue marks i = 14..19 (14 - ceil(9.90) = 4 first reaches 4); dequeue marks
m = 10..15 (ceil(14.14) - 11 = 4 first; m = 15 leaves 20 - 16 = 4, m = 16 leaves 3). The
first marked packet reaches the receiver at ``s_m + sqrt 2 tau + d`` and its CNP the sender
after the fixed feedback trip (no reverse links): 2 us of propagation plus the 78-B CNP's
serialization on both links, ``78 (1 + sqrt 2) / C``. Dequeue marking's first CNP comes
``s_14 - s_10 = 4 sqrt 2 tau`` earlier: the drain time of the 4 packets the enqueue mark
waits behind.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.packet import PacketParams, simulate_flows
from hpnsim.packet.kinds import MarkPoint

W, C, D = 1000.0, 1e9, 1e-6
TAU, ROOT2 = W / C, math.sqrt(2)


def run(mark, n=20, kmin=3.5 * W, kmax=3.5 * W, pmax=1.0, seed=0):
    p = PacketParams(header_bytes=0, framing_bytes=0, kmin_bytes=kmin, kmax_bytes=kmax,
                     pmax=pmax, ecn_mark_at=mark, cnp_interval_s=0.0, seed=seed)
    return simulate_flows([C, C / ROOT2], D, [[0, 1]] * n, W, params=p, switch_of=[-1, 0])


def queue_seen(mark: str, n: int) -> np.ndarray:
    """Packets waiting at the egress when each packet is tested (module docstring)."""
    k = np.arange(n)
    if mark == "enqueue":
        return np.where(k > 0, k - np.ceil(k / ROOT2), 0.0)
    return np.where(k > 0, np.minimum(n, np.ceil(k * ROOT2)) - (k + 1), 0.0)


def s(m: int) -> float:
    """When packet m starts leaving the switch."""
    return (1 + m * ROOT2) * TAU + D


@pytest.mark.parametrize("mark, marked", [("enqueue", range(14, 20)),
                                          ("dequeue", range(10, 16))])
def test_a_step_marks_the_hand_worked_packets_and_the_first_cnp_returns_on_time(mark,
                                                                                 marked):
    r = run(mark)
    assert np.flatnonzero(r.cnps).tolist() == list(marked)     # one CNP per marked packet
    assert int(r.marks[1]) == 6 and int(r.marks[0]) == 0      # a NIC port never marks
    first = marked[0]
    feedback = 2 * D + 78 * (1 + ROOT2) / C
    assert r.first_cnp[first] == pytest.approx(s(first) + ROOT2 * TAU + D + feedback,
                                               abs=1e-12)


def test_dequeue_marking_shortens_the_first_feedback_by_the_queue_it_leaves():
    enq, deq = run("enqueue"), run("dequeue")
    t_enq = float(np.min(enq.first_cnp))
    t_deq = float(np.min(deq.first_cnp))
    assert t_enq - t_deq == pytest.approx(4 * ROOT2 * TAU, abs=1e-12)
    assert enq.makespan == deq.makespan                 # no congestion control acted on data


@pytest.mark.parametrize("mark", ["enqueue", "dequeue"])
@pytest.mark.parametrize("k", [10, 50, 90])
def test_a_step_marks_exactly_the_packets_that_see_more_than_k(mark, k):
    # 400 packets build a queue to 116 packets and drain it; the step sits half a packet
    # above k so the count is #{tested queue > k packets}
    n = 400
    r = run(mark, n=n, kmin=(k + 0.5) * W, kmax=(k + 0.5) * W)
    assert int(r.marks[1]) == int(np.sum(queue_seen(mark, n) > k + 0.5))


@pytest.mark.parametrize("mark", ["enqueue", "dequeue"])
def test_red_between_kmin_and_kmax_marks_as_the_formula_says(mark):
    # RED: p(q) = 0 up to Kmin, Pmax (q - Kmin) / (Kmax - Kmin) up to Kmax, 1 above. The
    # marks are a sum of independent coin flips with these p over the hand-worked queue
    # levels: their count lies within 4 standard deviations of sum p (seed 0)
    n, kmin, kmax, pmax = 1000, 20 * W, 100 * W, 0.5
    q = queue_seen(mark, n) * W
    prob = np.where(q <= kmin, 0.0, np.where(q > kmax, 1.0, pmax * (q - kmin) / (kmax - kmin)))
    mean, sd = prob.sum(), math.sqrt(float(np.sum(prob * (1 - prob))))
    assert sd > 5                                     # the band holds enough coin flips
    marks = int(run(mark, n=n, kmin=kmin, kmax=kmax, pmax=pmax).marks[1])
    assert abs(marks - mean) < 4 * sd


def test_the_mark_point_is_a_typed_choice_with_dequeue_by_default():
    assert PacketParams().ecn_mark_at is MarkPoint.DEQUEUE
    assert PacketParams(ecn_mark_at="Enqueue").ecn_mark_at is MarkPoint.ENQUEUE
    with pytest.raises(InputError, match="ecn_mark_at"):
        PacketParams(ecn_mark_at="egress")


def test_connectx_fast_recovery_count_is_the_firmware_default():
    # RPG_THRESHOLD 1 (params.py names the device dumps); the DCQCN paper's F stays 5
    from hpnsim.packet import preset
    assert PacketParams().fast_recovery_steps == 1
    assert preset("dcqcn_paper").fast_recovery_steps == 5
