"""Ring all-reduce as packets: NCCL-style chunked pipelined steps, and a windowed mode that
simulates steps until the per-step time is stable and extrapolates the rest.

A ring of n ranks runs S = 2(n-1) steps; in each step every rank sends one piece (its share
/ n) to the next rank. A piece travels as ``chunks`` flows (NCCL's slots); chunk j of step s
leaves rank r once chunk j of step s-1 has arrived at r from rank r-1, so chunks pipeline
across steps. All chunks a rank sends to its neighbour on one ring share a QP (one DCQCN
state), as NCCL's connection does. Several rings (NCCL channels) run side by side.

Worked example, one ring of identical links (capacity C, delay d, no congestion control):
with one chunk per step each step waits for its whole piece, so ``T = S (w/C + d)`` for a
piece of w wire bytes; with m chunks per step and ``(m-1) w/m / C >= d`` the next step's
first chunk is ready before the link frees, so the link never idles: ``T = S w/C + d``.

Windowed: the steps of a ring repeat, so :func:`simulate_ring` simulates steps only until
each ring's per-step time is steady (:func:`steady_rate`: the last three per-step times agree
within ``tol``, or the mean over the window's second half agrees with its second quarter's,
for step times that repeat with a period; or, for step times DCQCN's cuts keep noisy, the
rings' mean step time is known within ``tol`` by batch means and shows no trend:
:func:`~hpnsim.packet.settle.batch_span`) and is not shorter than the busiest link of that
ring needs for one step's bytes (:func:`ring_floors`: a faster step means buffers are still
absorbing the excess, as behind an ECMP collision); ring g then ends at
``t_g + (S - k_g) dt_g`` and ``extrapolated`` says what share of the rings' steps was not
simulated. The packet run is one run that pauses to look (:class:`~hpnsim.packet.api.PacketSim`),
so its steps are exactly the full run's first steps. With ``slots`` a connection holds at
most that many chunks in flight (NCCL_STEPS, :func:`ring_flow_arrays`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.packet.api import Csr, PacketSim
from hpnsim.packet.params import PacketParams
from hpnsim.packet.result import PacketResult
from hpnsim.packet.settle import batch_span

__all__ = ["RingFlows", "RingRun", "link_step_times", "ring_floors", "ring_flow_arrays",
           "ring_flows", "shared_link_ends", "simulate_ring", "steady_rate", "steady_span",
           "step_floor", "NCCL_CHUNK_BYTES"]

#: NCCL's Simple protocol: NCCL_BUFFSIZE 4 MiB split into NCCL_STEPS = 8 slots (NCCL defaults)
NCCL_CHUNK_BYTES = 4 * 2**20 // 8


@dataclass
class RingRun:
    """Outcome of :func:`simulate_ring`.

    time : collective time (s), extrapolated when ``extrapolated > 0``.
    step_end : end of each simulated step (s), the latest chunk of that step to arrive.
    steps, steps_simulated : steps of the collective, and how many every ring completed in
        the packet run.
    extrapolated : share of the rings' steps not simulated, ``1 - sum_g k_g / (steps G)``.
    result : the packet run (up to where it stopped).
    stable : every ring's per-step time settled (or all its steps were simulated).
    ring_step_end : per ring, the end of each of its first ``steps_simulated`` steps (s).
    ring_time : per ring, when it ends its last step (s), extrapolated from its own steps
        (each connection at the ring's pace, bounded on the saturated links it shares:
        :func:`shared_link_ends`).
    """

    time: float
    step_end: np.ndarray
    steps: int
    steps_simulated: int
    extrapolated: float
    result: PacketResult
    stable: bool = True
    ring_step_end: np.ndarray | None = None
    ring_time: np.ndarray | None = None


@dataclass
class RingFlows:
    """The flows of ring steps as arrays (:func:`ring_flow_arrays`): ``paths`` and ``deps``
    as :class:`~hpnsim.packet.api.Csr` (every flow waits for at most one other), ``sizes``,
    ``qp`` and ``step`` per flow."""

    paths: Csr
    sizes: np.ndarray
    deps: Csr
    qp: np.ndarray
    step: np.ndarray


def _legs(ring) -> list[tuple]:
    return [tuple(np.asarray(leg, dtype=np.int64) for leg in x) if isinstance(x, tuple)
            else (np.asarray(x, dtype=np.int64),) for x in ring]


def ring_flow_arrays(rings: list[list], piece: float, steps: int, chunks: int,
                     slots: int | None = None) -> RingFlows:
    """The flows of :func:`ring_flows` built as arrays, in the same order with the same
    dependencies and QPs, without a Python object per flow (a 448-rank ring has millions).

    ``slots``: at most this many chunks in flight per connection (NCCL_STEPS: a chunk is one
    slot of the receiver's buffer, 512 KiB of NCCL's 4 MiB): chunk k (counted over the
    steps) from rank r also waits until rank r+1 has consumed chunk k - slots, i.e. sent it
    on to r+2 in the next step (its arrival there), or, where that consumer is in the same
    step (a piece of more than ``slots`` chunks), until chunk k - slots has arrived at r+1;
    None: no bound (each chunk waits for its data only).

    >>> fl = ring_flow_arrays([[([3], [0]), [1]]], 2.0, 2, 1)
    >>> fl.paths.ids.tolist(), fl.deps.ptr.tolist(), fl.deps.ids.tolist(), fl.qp.tolist()
    ([3, 0, 1, 3, 0, 1], [0, 0, 1, 1, 2, 3, 4], [0, 2, 3, 1], [0, 1, 2, 0, 1, 2])

    Three ranks, one chunk per step, two slots: step 2's chunk from rank 0 (flow 6) also
    waits until rank 1 has forwarded step 0's chunk (flow 4, step 1 from rank 1). With one
    slot, step 1's chunk from rank 0 (flow 3) waits until step 0's chunk has arrived at rank 1
    (flow 0: its consumer is in step 1 itself).

    >>> fl = ring_flow_arrays([[[0], [1], [2]]], 3.0, 3, 1, slots=2)
    >>> fl.deps.ids[fl.deps.ptr[6]:fl.deps.ptr[7]].tolist()
    [5, 4]
    >>> fl = ring_flow_arrays([[[0], [1], [2]]], 3.0, 3, 1, slots=1)
    >>> fl.deps.ids[fl.deps.ptr[3]:fl.deps.ptr[4]].tolist()
    [2, 0]
    """
    if slots is not None and slots < 1:
        raise InputError("slots", f"must be >= 1 (or None: unbounded), got {slots}")
    parts = []      # per ring: leg ids, legs, lengths, data deps, has one, qp, step, slot deps
    base = qp_base = 0
    for ring in rings:
        legs = _legs(ring)
        n = len(legs)
        n_legs = np.array([len(x) for x in legs], dtype=np.int64)
        first_leg = np.concatenate([[0], np.cumsum(n_legs)])     # of rank r, flat
        flat = [leg for x in legs for leg in x]
        lens = np.array([leg.size for leg in flat], dtype=np.int64)
        # one step: entries (rank, chunk, leg) in that order
        per_rank = n_legs * chunks
        rank = np.repeat(np.arange(n), per_rank)
        within = np.arange(per_rank.sum()) - np.repeat(np.cumsum(per_rank) - per_rank, per_rank)
        j, leg = within // n_legs[rank], within % n_legs[rank]
        width = int(per_rank.sum())
        prev = (rank - 1) % n                      # the chunk's sender one step before
        # position (in a step) of the last leg of chunk j from rank r-1
        before = chunks * first_leg[prev] + j * n_legs[prev] + n_legs[prev] - 1
        pid = first_leg[rank] + leg
        s = np.arange(steps)[:, None]
        idx = base + s * width + np.arange(width)[None, :]
        dep = np.where(leg[None, :] > 0, idx - 1, base + (s - 1) * width + before[None, :])
        has = (leg[None, :] > 0) | (s > 0)
        # the slot: chunk k = s chunks + j of this connection reuses the slot of chunk
        # k - slots, freed when rank r+1 has forwarded that chunk (its step s' + 1 flow)
        k_old = s * chunks + j[None, :] - (slots if slots else 0)
        s_old, j_old = k_old // chunks, k_old % chunks
        nxt = (rank + 1) % n
        consumer = (base + (s_old + 1) * width + chunks * first_leg[nxt][None, :]
                    + j_old * n_legs[nxt][None, :] + n_legs[nxt][None, :] - 1)
        # a consumer in this same step could close a cycle around the ring: then the slot
        # is free once chunk k - slots has arrived (at most ``slots`` chunks in the network)
        arrived = (base + s_old * width + chunks * first_leg[rank][None, :]
                   + j_old * n_legs[rank][None, :] + n_legs[rank][None, :] - 1)
        slot = (slots is not None) & (leg[None, :] == 0) & (k_old >= 0)
        dep2 = np.where(slot, np.where(s_old + 1 < s, consumer, arrived), -1)
        parts.append((np.broadcast_to(pid, (steps, width)).ravel(), flat, lens,
                      dep.ravel(), has.ravel(), qp_base + np.tile(pid, steps),
                      np.repeat(np.arange(steps), width), dep2.ravel()))
        base += steps * width
        qp_base += int(first_leg[-1])
    path_lens = np.concatenate([lens[pid] for pid, _, lens, *_ in parts])
    links = np.concatenate([np.concatenate(flat)[_gather(pid, lens)]
                            for pid, flat, lens, *_ in parts])
    first = np.concatenate([np.where(p[4], p[3], -1) for p in parts])
    second = np.concatenate([p[7] for p in parts])
    pair = np.stack([first, second], axis=1)              # per flow: data, then slot
    keep = pair >= 0
    deps = Csr(np.concatenate([[0], np.cumsum(keep.sum(axis=1))]).astype(np.int64),
               pair[keep].astype(np.int64))
    paths = Csr(np.concatenate([[0], np.cumsum(path_lens)]).astype(np.int64),
                links.astype(np.int64))
    return RingFlows(paths, np.full(base, piece / chunks), deps,
                     np.concatenate([p[5] for p in parts]).astype(np.int64),
                     np.concatenate([p[6] for p in parts]))


def _gather(pid: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Positions in the concatenated legs of each entry's leg ``pid``, one after another."""
    start = np.concatenate([[0], np.cumsum(lens)])[pid]
    n = lens[pid]
    out = np.cumsum(n)
    return np.repeat(start - (out - n), n) + np.arange(out[-1] if out.size else 0)


def ring_flows(rings: list[list], piece: float, steps: int, chunks: int):
    """Flows of ``steps`` ring steps: ``(paths, sizes, deps, qp, step)``.

    ``rings[g][r]`` is the path (link ids) from rank r to rank r+1 of ring g, or a tuple of
    paths (legs) that each chunk crosses one after the other as separate flows (a PXN relay:
    an NVLink hop to the GPU next to the right NIC, then the network); the next step waits
    for the last leg. Flow order is (ring, step, rank, chunk, leg); each leg of a rank has
    its own QP. (Lists per flow; :func:`ring_flow_arrays` builds the same as arrays.)

    >>> paths, sizes, deps, qp, step = ring_flows([[[0], [1], [2]]], 3.0, 2, 1)
    >>> [p[0] for p in paths], deps[3:], qp.tolist()
    ([0, 1, 2, 0, 1, 2], [[2], [0], [1]], [0, 1, 2, 0, 1, 2])
    >>> paths, sizes, deps, qp, step = ring_flows([[([3], [0]), [1]]], 2.0, 2, 1)
    >>> [p[0] for p in paths], deps, qp.tolist()
    ([3, 0, 1, 3, 0, 1], [[], [0], [], [2], [3], [1]], [0, 1, 2, 0, 1, 2])
    """
    fl = ring_flow_arrays(rings, piece, steps, chunks)
    return fl.paths.lists(), fl.sizes, fl.deps.lists(), fl.qp, fl.step


def _ring_link_ids(rings: list[list]) -> list[np.ndarray]:
    return [np.concatenate([leg for x in _legs(ring) for leg in x]) for ring in rings]


def link_step_times(capacity, rings: list[list], piece: float, chunks: int,
                    params: PacketParams, framed=None) -> np.ndarray:
    """Per link, the seconds one step of every ring keeps it busy: the wire bytes the step
    puts on it (payload, a header per packet and, on ``framed`` links, the Ethernet framing
    per frame: preamble and gap, as the kernel sends them) over its capacity. ``framed``:
    per link, or True (None: every link, the kernel's default) or False (no framing).

    Two rings share link 2 (4 KiB pieces, 1 GB/s): two packets of 4096 + 62 B, plus 20 B
    of framing each where framed.

    >>> rings = [[[0, 2]], [[1, 2]]]
    >>> link_step_times(np.full(3, 1e9), rings, 4096.0, 1, PacketParams(), framed=False)
    array([4.158e-06, 4.158e-06, 8.316e-06])
    >>> link_step_times(np.full(3, 1e9), rings, 4096.0, 1, PacketParams())
    array([4.178e-06, 4.178e-06, 8.356e-06])
    """
    capacity = np.asarray(capacity, dtype=np.float64)
    chunk = piece / chunks
    framing = np.where(np.broadcast_to(True if framed is None else framed, capacity.shape),
                       float(params.framing_bytes), 0.0)
    wire = chunks * (chunk + np.ceil(chunk / params.mtu_bytes) * (params.header_bytes + framing))
    crossings = np.zeros(capacity.size)
    for x in _ring_link_ids(rings):
        np.add.at(crossings, x, 1.0)
    return crossings * wire / capacity


def ring_floors(capacity, rings: list[list], piece: float, chunks: int,
                params: PacketParams) -> np.ndarray:
    """Per ring, the shortest its steady step can take: the wire bytes one step of every ring
    puts on each link (payload plus a header per packet) over the link's capacity, at the
    busiest link the ring crosses (:func:`link_step_times` without framing). A ring whose
    steps run faster than this is still filling buffers, not in steady state.

    Two rings of one link each, sharing link 2 (4 KiB pieces, 1 GB/s): each step puts two
    pieces on it; a third ring alone on link 3 needs one piece's time.

    >>> ring_floors(np.full(4, 1e9), [[[0, 2]], [[1, 2]], [[3]]], 4096.0, 1, PacketParams())
    array([8.316e-06, 8.316e-06, 4.158e-06])
    """
    per_link = link_step_times(capacity, rings, piece, chunks, params, framed=False)
    return np.array([float(per_link[x].max(initial=0.0)) for x in _ring_link_ids(rings)])


def step_floor(capacity, rings: list[list], piece: float, chunks: int,
               params: PacketParams) -> float:
    """The shortest a steady ring step can take, at the busiest link of all rings
    (:func:`ring_floors`' largest).

    >>> step_floor(np.full(3, 1e9), [[[0, 2], [1, 2]]], 4096.0, 1, PacketParams())
    8.316e-06
    """
    return float(ring_floors(capacity, rings, piece, chunks, params).max(initial=0.0))


#: a window of at least this many steps may settle on block means (:func:`steady_rate`)
BLOCK_WINDOW = 16


def steady_span(ends, floor: float, tol: float = 0.01) -> int | None:
    """Over how many of its last step intervals a window has settled
    (:func:`steady_rate`): 1 where its last three intervals agree, half the window where
    its block means agree; None where it has not settled.

    >>> ends = np.cumsum(np.tile([1.0, 1.0, 1.3, 0.7], 8))     # period 4, mean 1
    >>> steady_span(ends[:8], 0.9), steady_span(ends, 0.9), steady_span(np.arange(6.0), 0.5)
    (None, 16, 1)
    """
    ends = np.asarray(ends, dtype=np.float64)
    k = ends.size
    if k < 4:
        return None
    dt = np.diff(ends)
    if np.ptp(dt[-3:]) <= tol * dt[-1] and dt[-1] >= (1 - tol) * floor:
        return 1
    if k < BLOCK_WINDOW:
        return None
    half, quarter = k // 2, k // 4
    late = (ends[-1] - ends[-1 - half]) / half
    early = (ends[-1 - half] - ends[-1 - half - quarter]) / quarter
    if abs(late - early) <= tol * late and late >= (1 - tol) * floor:
        return half
    return None


def steady_rate(ends, floor: float, tol: float = 0.01) -> float | None:
    """The per-step time of a window whose steps have settled, else None.

    ``ends[s]`` is the end of step s. Settled, either: the last three step intervals agree
    within ``tol`` (their last is the rate); or, in a window of at least
    :data:`BLOCK_WINDOW` steps, the mean interval of its second half agrees within ``tol``
    with that of its second quarter (the second half's mean is the rate). The second test
    settles rings whose step time repeats with a period instead of staying flat: on hosts of
    8 GPUs, 7 NVLink hops and one network hop per host, the step time of a 16-host ring
    swings by 30% with period 8 (its late chunks travel around the ring one rank per step),
    so three intervals never agree, but blocks of whole periods do. Either way the rate must
    not be under ``floor`` (the busiest link's time per step, :func:`step_floor`), else
    buffers are still absorbing the excess. (:func:`steady_span` says over how many
    intervals.)

    >>> ends = np.cumsum(np.tile([1.0, 1.0, 1.3, 0.7], 8))     # period 4, mean 1
    >>> steady_rate(ends[:8], 0.9), steady_rate(ends, 0.9), steady_rate(ends, 1.2)
    (None, 1.0, None)
    """
    ends = np.asarray(ends, dtype=np.float64)
    span = steady_span(ends, floor, tol)
    return None if span is None else float((ends[-1] - ends[-1 - span]) / span)


def shared_link_ends(own, links: Csr, rate, busy, tol: float = 0.01) -> np.ndarray:
    """Connections' projected ends, bounded by the work left on the busy links they share.

    ``own[i]`` is connection i's end projected at its own pace (its end of its last simulated
    step plus the steps left at ``rate[i]`` each; ``rate[i]`` NaN: measured to the end, not
    projected), ``links`` the links it crosses (:class:`~hpnsim.packet.api.Csr`), ``busy[l]``
    the seconds one step keeps link l busy (:func:`link_step_times`). A link is *saturated*
    when two or more projected connections cross it and each steps within ``tol`` of its
    busy time: it carries their chunks back to back. A step end is a connection's latest
    chunk, and a connection whose chunks trail its partners' on a saturated link (queued
    behind theirs after a DCQCN cut) keeps that lag only while they are still sending: the
    link carries the same bytes at the same rate whoever they belong to, so when the partners
    finish (their lead), the trailing one has the link to itself and closes the gap. By work
    conservation the last of the m connections on the link ends when the link has carried
    what is left of all of them: each holds 1/m of its time per step, so its remaining busy
    time is the sum of ``(own_i - t) / m``, and the last one ends at the *mean* of their
    projected ends. A connection then ends no later than that mean (the latest such mean if
    it crosses several saturated links); elsewhere its own projection stands.

    Connections 0 and 1 share link 0 (1 s per step, both stepping at it): 1 trails by 2 s,
    0 leads, and the link is done with both at 11; 2 is alone on link 1. Stepping at 1.5 s,
    link 0 is not saturated (something else sets the pace) and nothing is bounded.

    >>> links = Csr.of([[0], [0], [1]])
    >>> shared_link_ends([10.0, 12.0, 13.0], links, [1.0, 1.0, 1.0], np.ones(2)).tolist()
    [10.0, 11.0, 13.0]
    >>> shared_link_ends([10.0, 12.0, 13.0], links, [1.5, 1.5, 1.5], np.ones(2)).tolist()
    [10.0, 12.0, 13.0]
    """
    own = np.asarray(own, dtype=np.float64)
    rate = np.asarray(rate, dtype=np.float64)
    busy = np.asarray(busy, dtype=np.float64)
    conn = np.repeat(np.arange(own.size), np.diff(links.ptr))
    link = np.asarray(links.ids, dtype=np.int64)
    projected = np.isfinite(rate[conn])
    conn, link = conn[projected], link[projected]
    count = np.bincount(link, minlength=busy.size)
    slowest = np.zeros(busy.size)
    np.maximum.at(slowest, link, rate[conn])
    saturated = (count >= 2) & (slowest <= (1 + tol) * busy)
    mean = np.bincount(link, weights=own[conn], minlength=busy.size) / np.maximum(count, 1)
    on = saturated[link]
    bound = np.full(own.size, -np.inf)
    np.maximum.at(bound, conn[on], mean[link[on]])
    return np.where(np.isfinite(bound), np.minimum(own, bound), own)


def _ring_ends(finish, starts, k_max: int, rings, chunks: int, k_ring, steps: int, pace,
               busy, tol: float) -> np.ndarray:
    """Per ring, the end of its last step: each connection (rank r to r+1) ends at its end
    of the ring's last simulated step plus the steps left at the ring's pace, bounded on the
    saturated links it shares (:func:`shared_link_ends`); the ring ends with its last."""
    own, paths, owner, rate = [], [], [], []
    for g, ring in enumerate(rings):
        legs = _legs(ring)
        kg = int(k_ring[g])
        per_rank = np.array([len(x) for x in legs], dtype=np.int64) * chunks
        first = starts[g * k_max + max(kg, 1) - 1]
        block = finish[first:first + int(per_rank.sum())]
        rank_end = np.maximum.reduceat(block, np.concatenate([[0], np.cumsum(per_rank)[:-1]]))
        if kg == 0:                             # no step completed: from the start
            rank_end = np.zeros(len(legs))
        left = steps - kg
        own.append(rank_end + (left * pace[g] if left else 0.0))
        rate.append(np.full(len(legs), pace[g] if left and kg else np.nan))
        paths.extend(np.concatenate(x) for x in legs)
        owner.append(np.full(len(legs), g))
    est = shared_link_ends(np.concatenate(own), Csr.of(paths), np.concatenate(rate), busy, tol)
    out = np.full(len(rings), -np.inf)
    np.maximum.at(out, np.concatenate(owner), est)
    return out


def simulate_ring(capacity, delay, rings: list[list], size: float, *, chunk_bytes: float =
                  NCCL_CHUNK_BYTES, params: PacketParams | None = None, switch_of=None,
                  window: bool = True, tol: float = 0.01, first_window: int = 4,
                  steps: int | None = None, max_window: int | None = None,
                  slots: int | None = None, **options) -> RingRun:
    """All-reduce of ``size`` bytes per rank over ``rings`` (each carries ``size/len(rings)``).

    Parameters
    ----------
    capacity, delay, switch_of, params, options : as
        :func:`~hpnsim.packet.api.simulate_flows`.
    rings : ``rings[g][r]`` the link ids from rank r to rank r+1 of ring (channel) g; every
        ring has the same n ranks.
    chunk_bytes : pipelining unit: a piece of ``size / (len(rings) n)`` bytes moves as
        ``ceil(piece / chunk_bytes)`` chunks.
    window : windowed steady state (see below); False simulates all steps.
    steps : steps of the collective (default 2(n-1), an all-reduce; n-1 for an all-gather
        or a reduce-scatter, whose pieces are the same ``size / (len(rings) n)``).
    slots : chunks in flight per connection (:func:`ring_flow_arrays`; NCCL_STEPS = 8 as
        NCCL runs it), None: unbounded.
    max_window : the flows of at most this many steps are built and simulated (default:
        all); a ring whose per-step time has not settled by then is extrapolated at its
        last per-step time or its floor, whichever is longer (``RingRun.stable`` False).

    Windowed, the flows of ``max_window`` steps run as one packet run that stops now and
    then (:class:`~hpnsim.packet.api.PacketSim`), so what it has simulated is exactly the
    start of the full run. Each ring is judged on its own steps: when it has completed
    ``first_window``, then twice as many, ... steps, :func:`steady_rate` tests them against
    ``tol`` and the ring's floor (:func:`ring_floors`), and, where that fails, the batch
    means of their mean step end (:func:`~hpnsim.packet.settle.batch_span`: no trend, the
    pace known within ``tol`` at 95%; from 32 steps). Rings of one floor are judged
    together, on the latest of their step ends (a pace class); rings of different floors
    apart, because they need not run at one pace: behind an ECMP collision a ring runs at
    its collided link's share, a ring beside it at line rate, and the latest step end of
    both is under the collided ring's floor and never settles. Once every class has settled
    the run stops. The class's per-step time dt is the advance of its rings' mean step end
    over the steps it settled on (:func:`steady_span` or the batches' span), and no less
    than each ring's busiest
    link's time per step with framing (:func:`link_step_times`); each connection of ring g
    ends at ``t + (S - k) * dt`` (its end of the k steps its class completed, the steps left),
    no later than the mean of the connections on a saturated link it shares
    (:func:`shared_link_ends`: work conservation); ring g ends with its last connection and
    the collective with the last ring.

    Examples
    --------
    Four ranks on a ring of 1 GB/s links, 1 us each, 4 KiB pieces in one chunk:
    S = 6 steps of (4096 B / 1 GB/s + 1 us) (no headers, preamble or gap).

    >>> p = PacketParams(header_bytes=0, framing_bytes=0, cc=False)
    >>> run = simulate_ring(np.full(4, 1e9), 1e-6, [[[0], [1], [2], [3]]], 4 * 4096.0,
    ...                     chunk_bytes=4096, params=p, switch_of=[-1] * 4, window=False)
    >>> round(run.time * 1e6, 3), run.extrapolated
    (30.576, 0.0)
    """
    n = len(rings[0])
    if n < 2 or any(len(r) != n for r in rings):
        raise InputError("rings", "every ring needs the same number (>= 2) of ranks")
    steps = 2 * (n - 1) if steps is None else int(steps)
    if steps < 1:
        raise InputError("steps", f"must be >= 1, got {steps}")
    piece = size / len(rings) / n
    chunks = max(1, int(np.ceil(piece / chunk_bytes)))
    k_max = steps if max_window is None else max(2, min(steps, int(max_window)))
    k_max = k_max if window else steps
    floors = ring_floors(capacity, rings, piece, chunks, params or PacketParams())
    fl = ring_flow_arrays(rings, piece, k_max, chunks, slots)
    sim = PacketSim(capacity, delay, fl.paths, fl.sizes, params=params, qp=fl.qp,
                    deps=fl.deps, switch_of=switch_of, **options)
    # the flows come ring by ring, step by step: (ring, step) blocks in order
    width = np.array([sum(len(p) if isinstance(p, tuple) else 1 for p in ring) for ring in rings],
                     dtype=np.int64) * chunks
    starts = (np.repeat(np.concatenate([[0], np.cumsum(width * k_max)[:-1]]), k_max)
              + np.tile(np.arange(k_max), len(rings)) * np.repeat(width, k_max))
    # rings of one floor (the same busiest-link load) form a pace class, judged on the
    # latest of their step ends; rings of other floors are judged apart
    key = np.round(floors / max(float(floors.max(initial=0.0)), 1e-300) * 1e6)
    _, cls = np.unique(key, return_inverse=True)
    n_cls = int(cls.max()) + 1
    rate = np.full(n_cls, np.nan)                    # a settled class's per-step time
    check = np.full(n_cls, max(2, min(first_window, k_max)))
    quantum = float(floors.max(initial=0.0)) or 1e-6
    horizon = 0.0
    while True:
        # the next look-in: one quantum on, or, while nothing happens until the next event
        # (a retransmission timer, seconds away), the first quantum past it
        horizon += quantum * max(1.0, np.ceil((sim.next_time - horizon) / quantum))
        over = sim.advance(horizon if window else np.inf)
        ends = np.maximum.reduceat(sim.finish, starts).reshape(len(rings), k_max)
        done = np.cumprod(np.isfinite(ends), axis=1).sum(axis=1)    # completed steps
        k_cls = np.array([done[cls == c].min() for c in range(n_cls)])
        for c in np.flatnonzero((k_cls >= check) & np.isnan(rate) & (k_cls < steps)):
            own = ends[cls == c, :k_cls[c]]
            floor = float(floors[cls == c][0])
            centre = own.mean(axis=0)
            # settled on the latest end, or, where DCQCN's cuts keep it from agreeing with
            # itself, the rings' mean end is known within tol (batch means); either way the
            # pace is the mean end's advance over those steps (the latest is another ring
            # from step to step)
            span = steady_span(own.max(axis=0), floor, tol) or batch_span(centre, floor, tol)
            if span is not None:
                rate[c] = (centre[-1] - centre[-1 - span]) / span
            check[c] = 2 * check[c]
        if over or done.min() == k_max or not np.isnan(rate).any():
            break
    result = sim.result()
    k = int(done.min())
    # a steady step is no shorter than its busiest link needs, framing included
    busy = link_step_times(capacity, rings, piece, chunks, params or PacketParams(),
                           options.get("framed"))
    line = np.array([float(busy[x].max(initial=0.0)) for x in _ring_link_ids(rings)])
    pace = np.full(len(rings), np.nan)          # per ring: its per-step time past the window
    for g in range(len(rings)):
        c, kg = cls[g], int(k_cls[cls[g]])
        if kg == steps:                         # measured to the end
            continue
        r = rate[c]
        if np.isnan(r):                         # unsettled: its class's last interval
            series = ends[cls == c, :kg].max(axis=0)
            r = float(series[-1] - series[-2]) if kg >= 2 else (float(ends[g, 0]) if kg else 0.0)
        pace[g] = max(r, line[g])
    t_ring = _ring_ends(sim.finish, starts, k_max, rings, chunks, k_cls[cls], steps, pace,
                        busy, tol)
    settled = bool(np.all((k_cls == steps) | ~np.isnan(rate)))
    extrapolated = float(1 - k_cls[cls].sum() / (steps * len(rings)))
    step_end = ends[:, :k].max(axis=0) if k else np.zeros(0)
    return RingRun(float(t_ring.max()), step_end, steps, k, extrapolated, result, settled,
                   ring_step_end=ends[:, :k], ring_time=t_ring)
