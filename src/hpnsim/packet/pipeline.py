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
doubling K until the per-chunk time is stable (the last three intervals of the window's
first half within 1% and none under the busiest link's time per chunk: the window's last
chunks drain, as the whole run's do), then ``T = t_K + (N - K) dt``, as
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

from hpnsim.packet.api import simulate_flows
from hpnsim.packet.params import PacketParams
from hpnsim.packet.result import PacketResult

__all__ = ["Hop", "PipelineFlows", "PipelineRun", "pipeline_flows", "simulate_pipeline"]

#: per-chunk intervals that must agree, and how closely, for a window to count as steady
STEADY_INTERVALS = 3
STEADY_TOLERANCE = 0.01


@dataclass
class Hop:
    """One connection of a pipeline: ``legs[m]`` the legs (link-id arrays crossed one after
    another) of packet member m, ``weight[m]`` its bytes per chunk byte; ``needs`` and
    ``consumers`` as the module docstring says (indices of other hops)."""

    legs: list
    weight: np.ndarray
    needs: tuple = ()
    consumers: tuple = ()


@dataclass
class PipelineFlows:
    """Flows and waits of ``n_chunks`` chunks of a pipeline (:func:`pipeline_flows`):
    ``done[h, c]`` the node where chunk c of hop h has arrived; ``qp`` per flow."""

    paths: list
    sizes: np.ndarray
    qp: np.ndarray
    waits: np.ndarray
    deps: list
    done: np.ndarray
    packet_hops: float
    link_bytes: dict = field(default_factory=dict)

    @property
    def n_flows(self) -> int:
        """Flows (the nodes before the waits)."""
        return len(self.paths)


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


def pipeline_flows(hops: list[Hop], chunks, slots: int, mtu: float = 4096.0) -> PipelineFlows:
    """Flows, waits and dependencies of chunks ``chunks`` (bytes of each) through ``hops``.

    Examples
    --------
    A two-hop chain of two one-link hops, three chunks, two slots: chunk 2 of the first hop
    waits for its own chunk 1 (order: its QP) and for chunk 0 of the second hop (the slot).

    >>> a = Hop([([0],)], np.ones(1), (), (1,)); b = Hop([([1],)], np.ones(1), (0,), ())
    >>> fl = pipeline_flows([a, b], [8.0, 8.0, 8.0], slots=2)
    >>> fl.n_flows, fl.deps[4], fl.done[:, 2].tolist(), fl.qp.tolist()
    (6, [1], [4, 5], [0, 1, 0, 1, 0, 1])
    """
    chunks = np.asarray(chunks, dtype=np.float64)
    order = _order(hops)
    n_hops, n_chunks = len(hops), chunks.size
    qp_base = np.concatenate([[0], np.cumsum([sum(len(leg) for leg in h.legs) for h in hops])])
    paths, sizes, qps, flow_deps = [], [], [], []
    waits, wait_deps = [], []
    done = np.zeros((n_hops, n_chunks), dtype=np.int64)
    hops_count = 0.0
    load: dict = {}

    def wait(deps) -> int:                        # wait ids count down from -1 until renumbered
        waits.append(0.0)
        wait_deps.append(deps)
        return -len(waits)

    for c in range(n_chunks):
        for h in order:
            hop = hops[h]
            deps = [int(done[n, c]) for n in hop.needs]
            if c >= slots:
                deps += [int(done[m, c - slots]) for m in hop.consumers]
            if len(hop.legs) > 1 and len(deps) > 1:
                deps = [wait(deps)]
            ends, q = [], int(qp_base[h])
            for member, legs in enumerate(hop.legs):
                size = float(chunks[c] * hop.weight[member])
                behind = deps
                for leg in legs:
                    leg = np.asarray(leg, dtype=np.int64)
                    paths.append(leg)
                    sizes.append(size)
                    qps.append(q)
                    flow_deps.append(list(behind))
                    behind = [len(paths) - 1]
                    q += 1
                    hops_count += float(np.ceil(size / mtu)) * leg.size
                    if c == 0:
                        for k in leg.tolist():
                            load[k] = load.get(k, 0.0) + size
                ends.append(behind[0])
            done[h, c] = ends[0] if len(ends) == 1 else wait(ends)
    n = len(paths)

    def node(x: int) -> int:
        return x if x >= 0 else n + (-1 - x)

    done = np.vectorize(node, otypes=[np.int64])(done) if done.size else done
    deps = [[node(x) for x in d] for d in flow_deps + wait_deps]
    return PipelineFlows(paths, np.asarray(sizes, dtype=np.float64),
                         np.asarray(qps, dtype=np.int64), np.asarray(waits, dtype=np.float64),
                         deps, done, hops_count, load)


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
    """Per-chunk intervals of the window's first half: its last chunks drain (channels that
    share a link finish one by one and the rest speed up), so they do not show the rate."""
    return np.diff(ends[:ends.size // 2 + 1])


def _steady(ends: np.ndarray, floor: float) -> bool:
    d = _head(ends)
    if d.size < STEADY_INTERVALS:
        return False
    d = d[-STEADY_INTERVALS:]
    return bool(d.min() >= (1 - STEADY_TOLERANCE) * floor
                and d.max() - d.min() <= STEADY_TOLERANCE * d.max())


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
    window : simulate ``first_window`` chunks, doubling until the per-chunk time is stable
        (or all chunks, or the next doubling would pass ``max_packets`` packet hops), and
        extrapolate; False simulates every chunk.
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
    while True:
        full = k == n_all
        chunks = np.full(k, float(chunk))
        if full:
            chunks[-1] = size - chunk * (n_all - 1)
        fl = pipeline_flows(hops, chunks, slots, p.mtu_bytes)
        res = simulate_flows(cap, delay, fl.paths, fl.sizes, np.zeros(fl.n_flows + fl.waits.size),
                             p, qp=fl.qp, deps=fl.deps, waits=fl.waits, **options)
        ends = np.asarray(res.finish, dtype=np.float64)[fl.done].max(axis=0)
        floor = max((b / cap[k_] for k_, b in fl.link_bytes.items() if cap[k_] > 0),
                    default=0.0)
        stable = full or _steady(ends, floor)
        if stable or 2 * fl.packet_hops > max_packets:
            break
        k = min(n_all, 2 * k)
    if full:
        return PipelineRun(float(ends[-1]), n_exact, k, 0.0, True, ends, res, fl)
    head = _head(ends)
    dt = float(head[-1])
    if not stable:
        dt = max(dt, float(head.mean()), floor)
    return PipelineRun(float(ends[-1] + (n_exact - k) * dt), n_exact, k, (n_exact - k) / n_exact,
                       stable, ends, res, fl)
