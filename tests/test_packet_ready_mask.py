"""The link's bit masks of queued and paused priorities (issue 30 item 5).

``start_next`` takes the next packet from the highest priority in ``Lk.QUEUED & ~Lk.PAUSED``
instead of scanning the link's 8 (queue, pause) rows. Checked on a PFC run with three
priorities on shared switch ports, stopped every 0.25 us: each mask against a brute-force
recomputation from the rest of the state (a queue's head; the far end's XOFF flag and the
pause frames still on their way), and the masks' choice against the scan they replaced.
"""

from __future__ import annotations

import numpy as np

from hpnsim.packet import PacketParams
from hpnsim.packet.api import PacketSim
from hpnsim.packet.heap import KIND_BITS
from hpnsim.packet.kinds import N_PRIO, Event, Lk, Ms, Pq
from hpnsim.packet.link import top_priority


def _sim():
    # six NIC ports into switch 0, its port 6 into switch 1, whose port 7 also takes two
    # NIC ports (8, 9): a 4:1 incast at port 7 that pauses port 6 per priority, without
    # congestion control, 2 MB of buffer; flows at priorities 1, 3 and 5
    cap = np.full(10, 50e9)
    paths = [[i, 6, 7] for i in range(6)] + [[8, 7], [9, 7]]
    return PacketSim(cap, 0.5e-6, paths, [3e6, 2e6, 1e6, 2.5e6, 1.5e6, 4e6, 3e6, 2e6],
                     [0, 1e-6, 2e-6, 0, 5e-6, 3e-6, 0, 1e-6],
                     params=PacketParams(cc=False, ecn=False, buffer_bytes=2e6),
                     switch_of=[-1] * 6 + [0, 1, -1, -1], priority=[1, 3, 5, 1, 3, 5, 3, 1])


def _scan(link, pq, paused):
    """The replaced scan: highest priority with a packet queued and no pause (-1: none)."""
    for pr in range(N_PRIO - 1, -1, -1):
        if pq[link * N_PRIO + pr, Pq.HEAD] >= 0 and not paused[link, pr]:
            return pr
    return -1


def test_queued_and_paused_masks_match_a_recomputation_through_a_pfc_run():
    sim = _sim()
    lk, pq = sim.state[0], sim.state[2]
    hk, ms = sim.state[21], sim.state[22]
    n_links = lk.shape[0]
    bits = 1 << np.arange(N_PRIO)
    stops = held_back = 0
    done, t = False, 0.0
    while not done:
        t += 0.25e-6
        done = sim.advance(t)
        stops += 1
        queued = pq[:, Pq.HEAD].reshape(n_links, N_PRIO) >= 0
        assert np.array_equal(lk[:, Lk.QUEUED], (queued * bits).sum(1))
        # paused: the far end's XOFF flag as of the last pause frame that arrived; each
        # frame still on its way will flip it (XOFF and XON alternate per priority)
        pending = hk[:ms[Ms.HEAP_N], 0]
        kind, ident = pending % KIND_BITS, pending // KIND_BITS
        frames = ident[(kind == Event.PAUSE_ON) | (kind == Event.PAUSE_OFF)]
        in_flight = np.bincount(frames, minlength=n_links * N_PRIO) % 2 == 1
        paused = ((pq[:, Pq.XOFF] == 1) ^ in_flight).reshape(n_links, N_PRIO)
        assert np.array_equal(lk[:, Lk.PAUSED], (paused * bits).sum(1))
        for link in range(n_links):
            ready = int(lk[link, Lk.QUEUED]) & ~int(lk[link, Lk.PAUSED])
            assert _scan(link, pq, paused) == (top_priority(ready) if ready else -1)
            # a paused queue above the one that is served: the case the scan skipped
            held_back += bool(ready) and \
                int(lk[link, Lk.QUEUED]) >> (top_priority(ready) + 1) != 0
    r = sim.result()
    assert np.all(np.isfinite(r.finish)) and r.drops.sum() == 0
    assert r.pauses[6] > 0 and r.paused_time[6] > 0         # the switch port was paused
    assert stops > 100 and held_back > 0


def test_top_priority_is_the_highest_set_bit():
    for mask in range(1, 1 << N_PRIO):
        assert top_priority(mask) == mask.bit_length() - 1
