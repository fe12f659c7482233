"""The switch: one shared buffer per switch, egress FIFOs per priority, ECN, PFC.

A link's egress queue sits in the buffer of the switch at its near end (``link_buf``; -1
for a NIC or a GPU: no limit, no marking). A packet that arrives over link ``i`` and waits
for link ``o`` is counted against ingress ``(i, prio)`` and egress ``(o, prio)``.

*Lossless* (PFC on): a packet goes into the shared pool while its ingress holds under the
PFC threshold (dynamic: ``pfc_alpha * free shared bytes``, or a static ``pfc_xoff_bytes``),
otherwise into that ingress's headroom; with neither it is dropped (counted: a correct
headroom never drops). A departure from an ingress empties its headroom bytes first. When an ingress holds headroom or reaches the threshold, XOFF goes
back over link ``i`` and stops its sender after ``delay[i]``; once the headroom is empty
and the ingress is ``pfc_resume`` under the threshold (or empty), XON does the same.

*Lossy* (PFC off): a packet is admitted while its egress queue is under
``egress_alpha * free shared bytes`` (Choudhury & Hahne's dynamic threshold), else dropped.

ECN: RED on the egress queue of the packet's priority: mark with probability 0 up to Kmin,
rising linearly to Pmax at Kmax, 1 above (:func:`mark_probability`). Where the queue is read
is ``Cfg.MARK_AT`` (:class:`~hpnsim.packet.kinds.MarkPoint`): at dequeue (the default, as
switch ASICs do), against the bytes a departing packet leaves behind; at enqueue, against the
bytes ahead of an arriving one (:func:`maybe_mark`).

>>> import numpy as np
>>> from hpnsim.packet.kinds import Cfg
>>> cfg = np.zeros(len(Cfg)); cfg[Cfg.KMIN], cfg[Cfg.KMAX], cfg[Cfg.PMAX] = 5e3, 200e3, 0.01
>>> [mark_probability(q, cfg) for q in (4e3, 102.5e3, 300e3)]
[0.0, 0.005, 1.0]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.packet import heap
from hpnsim.packet.kinds import ECN_CE, N_PRIO, Cfg, Event, Lf, Lk, Pf, Pkt, Pq

FIRST_XOFF, HEADROOM_MAX, DELAY = int(Lf.FIRST_XOFF), int(Lf.HEADROOM_MAX), int(Lf.DELAY)
XOFF_SENT, MARKS = int(Lk.XOFF), int(Lk.MARKS)
FLAGS = int(Pkt.FLAGS)
ING, HDRM, BYTES = int(Pf.ING), int(Pf.HDRM), int(Pf.BYTES)
XOFF_ON = int(Pq.XOFF)
USED, SHARED = 0, 1          # columns of sw[n_switches, 2]: shared bytes in use, pool size


@njit(cache=True, inline="always", _nrt=False)
def mark_probability(q, cfg):
    """RED marking probability at egress occupancy ``q`` bytes."""
    if q <= cfg[Cfg.KMIN]:
        return 0.0
    if q > cfg[Cfg.KMAX]:
        return 1.0
    return cfg[Cfg.PMAX] * (q - cfg[Cfg.KMIN]) / (cfg[Cfg.KMAX] - cfg[Cfg.KMIN])


@njit(cache=True, inline="always", _nrt=False)
def maybe_mark(p, link, q, pk, lk, cfg, rng):
    """RED at occupancy ``q`` bytes: set ECN-CE on packet ``p`` with
    :func:`mark_probability` and count the mark on ``link``."""
    prob = mark_probability(q, cfg)
    if prob > 0 and (prob >= 1 or uniform(rng) < prob):
        pk[p, FLAGS] |= ECN_CE
        lk[link, MARKS] += 1


@njit(cache=True, inline="always", _nrt=False)
def uniform(rng):
    """Next uniform in [0, 1) from a splitmix64 state ``rng[0]`` (uint64)."""
    rng[0] += np.uint64(0x9E3779B97F4A7C15)
    z = rng[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always", _nrt=False)
def pfc_threshold(b, sw, cfg):
    """Ingress bytes at which XOFF goes out, for switch ``b`` now."""
    if cfg[Cfg.PFC_XOFF] > 0:
        return cfg[Cfg.PFC_XOFF]
    return cfg[Cfg.PFC_ALPHA] * max(sw[b, SHARED] - sw[b, USED], 0.0)


@njit(cache=True, inline="always", _nrt=False)
def admit(b, k_in, k_out, size, sw, pf, headroom_in, cfg):
    """Admission of ``size`` bytes to switch ``b``: 0 shared pool, 1 headroom, -1 drop."""
    if cfg[Cfg.PFC] > 0:
        if pf[k_in, HDRM] <= 0 and pf[k_in, ING] + size <= pfc_threshold(b, sw, cfg) and \
                sw[b, USED] + size <= sw[b, SHARED]:
            pf[k_in, ING] += size
            sw[b, USED] += size
            return 0
        if pf[k_in, HDRM] + size <= headroom_in:
            pf[k_in, HDRM] += size
            return 1
        return -1
    free = sw[b, SHARED] - sw[b, USED]
    if size > free or pf[k_out, BYTES] + size > cfg[Cfg.EGRESS_ALPHA] * free:
        return -1
    pf[k_in, ING] += size
    sw[b, USED] += size
    return 0


@njit(cache=True, inline="always", _nrt=False)
def free_bytes(b, k_in, size, sw, pf):
    """A packet of ``size`` bytes from ingress ``k_in`` left switch ``b``: its ingress's
    headroom empties first, then its shared bytes (as ns-3's switch MMU does)."""
    from_hdrm = min(pf[k_in, HDRM], size)
    pf[k_in, HDRM] -= from_hdrm
    pf[k_in, ING] -= size - from_hdrm
    sw[b, USED] -= size - from_hdrm


@njit(cache=True, inline="always", _nrt=False)
def pfc_check(b, k_in, now, sw, pf, pq, lf, lk, ht, hk, ms, cfg):
    """Send XOFF or XON toward the sender of ingress ``k_in`` (= link * N_PRIO + prio)
    when its state calls for it; the frame arrives after the link's delay."""
    if cfg[Cfg.PFC] <= 0:
        return
    link = k_in // N_PRIO
    hdrm = pf[k_in, HDRM]
    if hdrm > lf[link, HEADROOM_MAX]:
        lf[link, HEADROOM_MAX] = hdrm
    if pq[k_in, XOFF_ON] == 0:
        if hdrm > 0 or pf[k_in, ING] >= pfc_threshold(b, sw, cfg):
            pq[k_in, XOFF_ON] = 1
            lk[link, XOFF_SENT] += 1
            if lf[link, FIRST_XOFF] == np.inf:
                lf[link, FIRST_XOFF] = now
            heap.push(ht, hk, ms, now + lf[link, DELAY], k_in, Event.PAUSE_ON)
    elif hdrm <= 0 and (pf[k_in, ING] <= 0 or
                        pf[k_in, ING] + cfg[Cfg.PFC_RESUME] <= pfc_threshold(b, sw, cfg)):
        pq[k_in, XOFF_ON] = 0
        heap.push(ht, hk, ms, now + lf[link, DELAY], k_in, Event.PAUSE_OFF)
