"""Chunked pipelines as packets: data cut into chunks that move hop by hop, each chunk
leaving a hop once the chunks it is made from have arrived (NCCL's tree and NVLS-tree
protocol), with a bounded number of chunks in flight per connection.

A :class:`Hop` is one connection (a tree edge in one direction, an NVLS reduction or
multicast at one host): its packet members (QP paths, or one flow per link for NVLS), the
hops whose chunk c must be done before its chunk c leaves (``needs``: the children's chunks
for a reduction, the parent's for a broadcast), and the hops that consume what it delivers
(``consumers``): its chunk c also waits until they are done with chunk ``c - slots``, the
receive slot it reuses (NCCL_STEPS slots per connection). Chunk c of a hop is one flow per
member leg; all chunks of a member leg share one QP, so they leave in order with one DCQCN
state, as NCCL keeps its QPs.

:func:`simulate_pipeline` runs the chunks; in the windowed mode it runs the first K chunks,
doubling K until the per-chunk time of the window's first half is stable (its last three
intervals within 1%, or, over 16 chunks or more, the mean interval of its second half within
1% of its second quarter's, for per-chunk times that repeat with a period; and not under
the busiest link's time per chunk: the window's last chunks drain, as the whole run's do),
then ``T = t_K + (N - K) dt``, as
:func:`hpnsim.packet.ring.simulate_ring` does for ring steps: the drain of the K chunks
stands for the drain of all N.

>>> import numpy as np
>>> from hpnsim.packet import PacketParams
>>> p = PacketParams(header_bytes=0, framing_bytes=0, cc=False, ecn=False, pfc=False)
>>> up = Hop(legs=[([0],)], weight=np.ones(1), needs=(), consumers=(1,))
>>> down = Hop(legs=[([1],)], weight=np.ones(1), needs=(0,), consumers=())
>>> run = simulate_pipeline([1e9, 1e9], 1e-6, [up, down], 4 * 4096.0, 4096.0, slots=8,
...                         params=p, switch_of=[-1, -1], window=False)
>>> round(run.time * 1e6, 3)        # (4 chunks + 1) x 4.096 us + 2 x 1 us
22.48
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.packet.api import Csr, simulate_flows
from hpnsim.packet.params import PacketParams
from hpnsim.packet.result import PacketResult

__all__ = ["Hop", "PipelineFlows", "PipelineRun", "pipeline_depth", "pipeline_flows",
           "simulate_pipeline"]

#: how closely the per-chunk intervals (or block means) must agree for a window to be steady
STEADY_TOLERANCE = 0.01


@dataclass
class Hop:
    """One connection of a pipeline: ``legs[m]`` the legs (link-id arrays crossed one after
    another) of packet member m, ``weight[m]`` its bytes per chunk byte; ``needs`` and
    ``consumers`` as the module docstring says (indices of other hops); ``packet`` the
    payload bytes per packet of its flows (None: the parameters' MTU)."""

    legs: list
    weight: np.ndarray
    needs: tuple = ()
    consumers: tuple = ()
    packet: float | None = None


@dataclass
class PipelineFlows:
    """Flows and waits of ``n_chunks`` chunks of a pipeline (:func:`pipeline_flows`):
    ``paths`` (link ids per flow) and ``deps`` (per flow, then wait, the nodes it waits for)
    as :class:`~hpnsim.packet.api.Csr`; ``done[h, c]`` the node where chunk c of hop h has
    arrived; ``qp`` and ``packet`` (payload bytes per packet) per flow; ``link_bytes`` the
    bytes one chunk puts on each link."""

    paths: Csr
    sizes: np.ndarray
    qp: np.ndarray
    waits: np.ndarray
    deps: Csr
    done: np.ndarray
    packet_hops: float
    link_bytes: dict = field(default_factory=dict)
    packet: np.ndarray | None = None

    @property
    def n_flows(self) -> int:
        """Flows (the nodes before the waits)."""
        return len(self.paths)

    def dep_list(self, node: int) -> list[int]:
        """The nodes ``node`` waits for."""
        return self.deps.row(node)

    def path(self, flow: int) -> list[int]:
        """The link ids of ``flow``."""
        return self.paths.row(flow)


def _order(hops: list[Hop]) -> list[int]:
    """Hops so that every hop follows those it needs (a cycle is a programming error)."""
    order, state = [], [0] * len(hops)

    def visit(h: int) -> None:
        if state[h] == 2:
            return
        if state[h] == 1:
            raise ValueError(f"pipeline hops need each other in a cycle (hop {h})")
        state[h] = 1
        for n in hops[h].needs:
            visit(int(n))
        state[h] = 2
        order.append(h)

    for h in range(len(hops)):
        visit(h)
    return order


def pipeline_depth(hops: list[Hop]) -> int:
    """Hops along the longest chain of ``needs``: the stages a chunk walks, so the chunks the
    pipeline takes to fill.

    >>> a = Hop([([0],)], np.ones(1)); b = Hop([([1],)], np.ones(1), (0,))
    >>> pipeline_depth([a, b, Hop([([2],)], np.ones(1), (0, 1))])
    3
    """
    depth = [0] * len(hops)
    for h in _order(hops):
        depth[h] = 1 + max((depth[n] for n in hops[h].needs), default=0)
    return max(depth, default=0)


def _template(hops: list[Hop], order: list[int], bound: bool) -> tuple:
    """One chunk's flows and waits in local ids, in the order :func:`pipeline_flows` numbers
    them: per flow its links, weight and QP; per node (flows, then waits) its dependency
    refs ``(kind, id)`` (0: flow ``id`` of the same chunk, 1: wait ``id`` of the same chunk,
    2: the arrival of hop ``id`` ``slots`` chunks before, when ``bound``); per hop the ref
    of its arrival."""
    qp0 = np.concatenate([[0], np.cumsum([sum(len(leg) for leg in h.legs) for h in hops])])
    legs, weight, qps, packet, flow_refs, wait_refs = [], [], [], [], [], []
    done: list = [None] * len(hops)
    for h in order:
        hop = hops[h]
        deps = [done[n] for n in hop.needs] + ([(2, int(m)) for m in hop.consumers]
                                               if bound else [])
        if len(hop.legs) > 1 and len(deps) > 1:
            wait_refs.append(deps)
            deps = [(1, len(wait_refs) - 1)]
        ends, q = [], int(qp0[h])
        for member, member_legs in enumerate(hop.legs):
            behind = deps
            for leg in member_legs:
                legs.append(np.asarray(leg, dtype=np.int64))
                weight.append(float(hop.weight[member]))
                qps.append(q)
                packet.append(np.nan if hop.packet is None else float(hop.packet))
                flow_refs.append(behind)
                behind = [(0, len(legs) - 1)]
                q += 1
            ends.append(behind[0])
        if len(ends) == 1:
            done[h] = ends[0]
        else:
            wait_refs.append(ends)
            done[h] = (1, len(wait_refs) - 1)
    return legs, np.asarray(weight), np.asarray(qps, dtype=np.int64), flow_refs, wait_refs, \
        done, np.asarray(packet, dtype=np.float64)


def _refs(lists: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ref lists as (counts per node, kinds, ids)."""
    counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    flat = [r for x in lists for r in x]
    kinds = np.fromiter((r[0] for r in flat), dtype=np.int64, count=len(flat))
    ids = np.fromiter((r[1] for r in flat), dtype=np.int64, count=len(flat))
    return counts, kinds, ids


def pipeline_flows(hops: list[Hop], chunks, slots: int, mtu: float = 4096.0) -> PipelineFlows:
    """Flows, waits and dependencies of chunks ``chunks`` (bytes of each) through ``hops``.

    Flows are numbered chunk by chunk (within a chunk: hops in dependency order, members,
    legs), then the waits chunk by chunk. Every chunk has the same flows; the chunks from
    ``slots`` on also wait for their slots, so one chunk of each kind is built in Python
    and the rest as arrays.

    Examples
    --------
    A two-hop chain of two one-link hops, three chunks, two slots: chunk 2 of the first hop
    waits for its own chunk 1 (order: its QP) and for chunk 0 of the second hop (the slot).

    >>> a = Hop([([0],)], np.ones(1), (), (1,)); b = Hop([([1],)], np.ones(1), (0,), ())
    >>> fl = pipeline_flows([a, b], [8.0, 8.0, 8.0], slots=2)
    >>> fl.n_flows, fl.dep_list(4), fl.done[:, 2].tolist(), fl.qp.tolist()
    (6, [1], [4, 5], [0, 1, 0, 1, 0, 1])
    """
    chunks = np.asarray(chunks, dtype=np.float64)
    order = _order(hops)
    n_hops, k = len(hops), chunks.size
    kinds = [_template(hops, order, bound) for bound in (False, True)]
    legs, weight, qp = kinds[0][:3]
    f = len(legs)
    n = f * k
    bound = np.arange(k) >= slots                       # chunks that wait for their slots
    n_wait = np.array([len(kinds[b][4]) for b in (0, 1)])[bound.astype(np.int64)]
    wait_base = n + np.concatenate([[0], np.cumsum(n_wait)])[:-1]
    flow_base = f * np.arange(k)
    done = np.zeros((n_hops, k), dtype=np.int64)
    for b in (0, 1):
        cs = np.flatnonzero(bound == b)
        ref = kinds[b][5]
        kind = np.array([r[0] for r in ref], dtype=np.int64)
        rid = np.array([r[1] for r in ref], dtype=np.int64)
        done[:, cs] = np.where(kind[:, None] == 0, flow_base[cs][None, :],
                               wait_base[cs][None, :]) + rid[:, None]
    counts, ids, node_of = [], [], []
    for part in (3, 4):                                  # flows, then waits
        for b in (0, 1):
            cs = np.flatnonzero(bound == b)
            if not cs.size:
                continue
            cnt, kind, rid = _refs(kinds[b][part])
            slot = kind == 2
            target = np.where(kind == 0, flow_base[cs][:, None], wait_base[cs][:, None]) \
                + rid[None, :]
            if slot.any():
                target[:, slot] = done[rid[slot][None, :], cs[:, None] - slots]
            counts.append(np.tile(cnt, cs.size))
            ids.append(target.ravel())
            node_of.append(cs)
    counts = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    deps = Csr(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
               np.concatenate(ids).astype(np.int64) if ids else np.zeros(0, dtype=np.int64))
    lens = np.array([leg.size for leg in legs], dtype=np.int64)
    flat = np.concatenate(legs) if legs else np.zeros(0, dtype=np.int64)
    paths = Csr(np.concatenate([[0], np.cumsum(np.tile(lens, k))]).astype(np.int64),
                np.tile(flat, k))
    packet = np.where(np.isnan(kinds[0][6]), float(mtu), kinds[0][6])
    sizes = (chunks[:, None] * weight[None, :]).ravel()
    hops_count = float((np.ceil(sizes / np.tile(packet, k)) * np.tile(lens, k)).sum())
    load: dict = {}
    if k:
        per_link = np.bincount(flat, weights=np.repeat(chunks[0] * weight, lens))
        used = np.unique(flat)
        load = {int(x): float(per_link[x]) for x in used}
    return PipelineFlows(paths, sizes, np.tile(qp, k), np.zeros(int(n_wait.sum())), deps,
                         done, hops_count, load, np.tile(packet, k))


@dataclass
class PipelineRun:
    """Outcome of :func:`simulate_pipeline`: ``time`` (the last chunk's arrival, measured or
    extrapolated), chunks in all and simulated, the share of chunks extrapolated, whether
    the window settled, per-chunk arrival times ``chunk_end`` of the simulated chunks, the
    packet run and its flows."""

    time: float
    n_chunks: float
    chunks_simulated: int
    extrapolated: float
    stable: bool
    chunk_end: np.ndarray
    result: PacketResult
    flows: PipelineFlows


def _head(ends: np.ndarray) -> np.ndarray:
    """Arrivals of the window's first half: its last chunks drain (channels that share a
    link finish one by one and the rest speed up), so they do not show the rate."""
    return ends[:ends.size // 2 + 1]


def _rate(ends: np.ndarray, floor: float) -> float | None:
    """The per-chunk time of the window's first half once settled
    (:func:`~hpnsim.packet.ring.steady_rate`: the last three intervals agree, or, over at
    least 16 chunks, the mean interval of the second half agrees with that of the second
    quarter), never under the busiest link's time per chunk ``floor``; else None."""
    from hpnsim.packet.ring import steady_rate

    return steady_rate(_head(ends), floor, STEADY_TOLERANCE)


def simulate_pipeline(capacity, delay, hops: list[Hop], size: float, chunk: float,
                      slots: int, params: PacketParams | None = None, *, window: bool = True,
                      first_window: int = 16, max_packets: float = np.inf,
                      **options) -> PipelineRun:
    """Run ``size`` bytes through ``hops`` in chunks of ``chunk`` bytes (the last one
    smaller), at most ``slots`` chunks ahead of each hop's consumers.

    Parameters
    ----------
    capacity, delay : per link, bytes/s and seconds (as :func:`~hpnsim.packet.simulate_flows`).
    hops : list of Hop
    size, chunk : bytes the pipeline carries and bytes per chunk (per unit hop weight).
    slots : chunks in flight per connection (NCCL_STEPS when a chunk is one step).
    params : PacketParams (default: the ``connectx`` set).
    window : simulate ``first_window`` chunks (doubled until the window's first half holds
        :func:`pipeline_depth` chunks: a shorter head is all fill), doubling until the
        per-chunk time is stable (or all chunks, or the next doubling would pass
        ``max_packets`` packet hops), and extrapolate; False simulates every chunk.
    **options : of :func:`~hpnsim.packet.simulate_flows` (``switch_of``, ``reverse``, ...).

    Returns
    -------
    PipelineRun

    Examples
    --------
    See the module docstring.
    """
    p = (params or PacketParams()).validate()
    cap = np.asarray(capacity, dtype=np.float64)
    n_exact = size / chunk
    n_all = int(np.ceil(n_exact - 1e-9))
    k = n_all if not window else min(n_all, first_window)
    while k < n_all and k // 2 < pipeline_depth(hops):     # a head of fill only: skip it
        k = min(n_all, 2 * k)
    while True:
        full = k == n_all
        chunks = np.full(k, float(chunk))
        if full:
            chunks[-1] = size - chunk * (n_all - 1)
        fl = pipeline_flows(hops, chunks, slots, p.mtu_bytes)
        res = simulate_flows(cap, delay, fl.paths, fl.sizes, np.zeros(fl.n_flows + fl.waits.size),
                             p, qp=fl.qp, deps=fl.deps, waits=fl.waits, packet_bytes=fl.packet,
                             **options)
        ends = np.asarray(res.finish, dtype=np.float64)[fl.done].max(axis=0)
        floor = max((b / cap[k_] for k_, b in fl.link_bytes.items() if cap[k_] > 0),
                    default=0.0)
        rate = None if full else _rate(ends, floor)
        stable = full or rate is not None
        if stable or 2 * fl.packet_hops > max_packets:
            break
        k = min(n_all, 2 * k)
    if full:
        return PipelineRun(float(ends[-1]), n_exact, k, 0.0, True, ends, res, fl)
    head = np.diff(_head(ends))
    dt = rate if stable else max(float(head[-1]), float(head.mean()), floor)
    return PipelineRun(float(ends[-1] + (n_exact - k) * dt), n_exact, k, (n_exact - k) / n_exact,
                       stable, ends, res, fl)
