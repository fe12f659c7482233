"""`simulate_flows`: the packet engine on flat arrays, and `simulate_paths` on a Fabric.

>>> r = simulate_flows([1e9, 1e9], [1e-6, 1e-6], [[0, 1]], [4096], switch_of=[-1, 0],
...                    params=PacketParams(header_bytes=0, framing_bytes=0))
>>> round(float(r.finish[0]) * 1e6, 3)       # 2 x (4096 B / 1 GB/s + 1 us)
10.192
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.packet import core, heap, pool
from hpnsim.packet.kinds import N_PRIO, PQ_WIDTH, Cfg, Ff, Fi, Lf, Lk, Ms, Pf, Pq, Qp, QpI
from hpnsim.packet.params import PacketParams, params_dict
from hpnsim.packet.result import PacketResult
from hpnsim.packet.stats import N_BINS, percentiles

__all__ = ["Csr", "PacketSim", "simulate_flows", "config_vector"]


@dataclass(frozen=True)
class Csr:
    """Lists of ids as two arrays: list ``i`` is ``ids[ptr[i]:ptr[i + 1]]``. The form in
    which :func:`simulate_flows` takes ``paths`` (link ids) and ``deps`` (predecessor ids)
    without a Python list per flow.

    >>> c = Csr.of([[3, 4], [], [5]])
    >>> c.ptr.tolist(), c.ids.tolist(), len(c), c.row(0), c.lists()
    ([0, 2, 2, 3], [3, 4, 5], 3, [3, 4], [[3, 4], [], [5]])
    """

    ptr: np.ndarray
    ids: np.ndarray

    @classmethod
    def of(cls, lists) -> Csr:
        """From a sequence of id lists."""
        lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64,
                          count=int(lengths.sum()))
        return cls(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), ids)

    @property
    def links(self) -> np.ndarray:
        """``ids``, under the name a path set's link ids go by."""
        return self.ids

    def __len__(self) -> int:
        return self.ptr.size - 1

    def row(self, i: int) -> list[int]:
        """List ``i``."""
        return self.ids[self.ptr[i]:self.ptr[i + 1]].tolist()

    def lists(self) -> list[list[int]]:
        """Every list, as Python lists."""
        return [self.row(i) for i in range(len(self))]


def config_vector(p: PacketParams, sample_dt: float, t_end: float) -> np.ndarray:
    """The kernel's float configuration (:class:`~hpnsim.packet.kinds.Cfg`) from params.

    >>> float(config_vector(PacketParams(), 1e-6, 1.0)[Cfg.KMIN])
    800000.0
    """
    c = np.zeros(len(Cfg))
    values = {Cfg.MTU: p.mtu_bytes, Cfg.HEADER: p.header_bytes, Cfg.CC: p.cc, Cfg.G: p.g,
              Cfg.ALPHA_DT: p.alpha_interval_s, Cfg.DECREASE_DT: p.rate_decrease_interval_s,
              Cfg.RP_TIMER: p.rp_timer_s, Cfg.BYTE_COUNTER: p.byte_counter_bytes,
              Cfg.FAST_STEPS: p.fast_recovery_steps, Cfg.R_AI: p.rate_ai_bytes_s,
              Cfg.R_HAI: p.rate_hai_bytes_s, Cfg.R_MIN: p.min_rate_bytes_s,
              Cfg.CNP_DT: p.cnp_interval_s, Cfg.ECN: p.ecn, Cfg.KMIN: p.kmin_bytes,
              Cfg.KMAX: p.kmax_bytes, Cfg.PMAX: p.pmax, Cfg.PFC: p.pfc,
              Cfg.PFC_ALPHA: p.pfc_alpha, Cfg.PFC_XOFF: p.pfc_xoff_bytes,
              Cfg.PFC_RESUME: p.pfc_resume_bytes, Cfg.EGRESS_ALPHA: p.egress_alpha,
              Cfg.SAMPLE_DT: sample_dt, Cfg.T_END: t_end,
              Cfg.CLAMP: p.clamp_target_rate, Cfg.CNP_PRIO: p.cnp_priority,
              Cfg.CNP_BYTES: p.cnp_bytes, Cfg.ACK_BYTES: p.ack_bytes,
              Cfg.RETRANSMIT: p.retransmit, Cfg.RTO: p.rto_s, Cfg.RETRY: p.retry_count,
              Cfg.MARK_AT: p.ecn_mark_at.code}
    for k, v in values.items():
        c[k] = float(v)
    return c


def _csr(paths):
    if hasattr(paths, "ptr"):
        if np.any(np.asarray(getattr(paths, "weight", 1.0)) != 1.0):
            raise InputError("paths", "the packet engine needs one path per flow (no spraying)")
        return np.asarray(paths.ptr, dtype=np.int64), np.asarray(paths.links, dtype=np.int64)
    lengths = [len(p) for p in paths]
    ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    links = np.concatenate([np.asarray(p, dtype=np.int64) for p in paths]) if paths else \
        np.zeros(0, dtype=np.int64)
    return ptr, links.astype(np.int64)


def _reverse_paths(reverse, ptr, links, link_buf, n_links: int):
    """Each flow's reverse path (the reverse of its links, last first) appended to the
    link-id array, as ``(links, rptr0, rptr1)``; an empty range where ``reverse`` is None or
    a link has no reverse (-1): its control packets then take the fixed delay."""
    n = ptr.size - 1
    if reverse is None:
        return links, ptr[1:].copy(), ptr[1:].copy()
    rev = np.asarray(reverse, dtype=np.int64)
    if rev.shape != (n_links,) or rev.max(initial=-1) >= n_links:
        raise InputError("reverse", f"needs one link id (or -1) per link ({n_links})")
    ok = np.logical_and.reduceat(rev[links] >= 0, ptr[:-1]) if n else np.zeros(0, bool)
    first = rev[links[ptr[1:] - 1]]                  # the receiver's end of the last link
    if np.any(ok & (link_buf[np.maximum(first, 0)] >= 0)):
        raise InputError("reverse", "a reverse path must start at the receiver's NIC port "
                                    "(a link without switch buffer)")
    lengths = np.where(ok, np.diff(ptr), 0)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    # positions of each kept flow's links, last first
    pos = np.repeat(ptr[1:] - 1, lengths) - (np.arange(starts[-1]) - np.repeat(starts[:-1],
                                                                              lengths))
    rptr = links.size + starts
    return np.concatenate([links, rev[links[pos]]]).astype(np.int64), rptr[:-1], rptr[1:]


def _deps_csr(deps: Csr | None, n: int):
    """Successor lists (CSR, each in increasing id) and predecessor counts of ``deps``."""
    if deps is None:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), \
            np.zeros(n, dtype=np.int64)
    n_pred = np.diff(deps.ptr)
    of = np.repeat(np.arange(n, dtype=np.int64), n_pred)      # the entry's waiting node
    order = np.argsort(deps.ids, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(deps.ids, minlength=n))])
    return ptr.astype(np.int64), of[order], n_pred.astype(np.int64)


def simulate_flows(capacity, delay, paths, sizes, starts=None, params: PacketParams | None = None,
                   *, switch_of=None, reverse=None, framed=None, priority=None, qp=None,
                   deps=None, waits=(), watch=(),
                   watch_flows=(), sample_interval: float = 1e-6, max_samples: int = 100_000,
                   t_end: float = np.inf, pct=(50.0, 90.0, 99.0), histograms: bool = True,
                   pool_size: int = 1 << 14, packet_bytes=None
                   ) -> PacketResult:
    """Packet-level run of flows over links given as arrays.

    Parameters
    ----------
    capacity, delay : per link, bytes/s and seconds of propagation.
    paths : link ids per flow (a :class:`~hpnsim.routing.paths.Paths`, a :class:`Csr` or
        lists); the first link is the flow's NIC port: its QP's rate limiter feeds that link.
    sizes, starts : bytes (rounded up to whole bytes) and start time per flow (scalars
        broadcast).
    params : :class:`PacketParams` (default: the ``connectx`` set).
    switch_of : per link, the switch whose shared buffer holds the link's egress queue, or -1
        for a NIC/GPU (unbounded, no ECN, no PFC). Default: -1 for links that start a path,
        else each link its own one-port switch.
    reverse : per link, the link that carries traffic the other way (-1: none). Control
        packets (CNPs, NACKs) of a flow whose links all have one cross the reverse path, last
        link first, queued like any packet (CNPs in ``params.cnp_priority``, NACKs in the
        flow's); without it they arrive after the path's delay plus one serialization per
        hop, unqueued. The reverse path must start at an unbuffered link (the receiver's NIC).
    framed : per link, True where frames carry Ethernet's preamble, SFD and gap
        (``params.framing_bytes`` of line time per frame; default every link).
    priority : PFC priority per flow (default ``params.data_priority``); strict priority at
        every egress, higher first.
    qp : QP id per flow (flows of one QP share its DCQCN state; default: one QP per flow).
    deps : per flow (and wait), flows and waits that must finish before it starts (after its
        start time): lists, or a :class:`Csr`.
    waits : durations (s) of waits: nodes without links, ids ``n_flows ..`` after the flows,
        that finish their duration after they start (compute between transfers). With waits,
        ``starts`` and ``deps`` cover them too, and ``finish`` has their finish times.
    watch, watch_flows : links whose occupancy and flows whose received bytes are sampled
        every ``sample_interval`` (at most ``max_samples`` samples).
    t_end : stop at this time (unfinished flows keep ``finish = inf``).
    pct, histograms : queue percentiles to report (from per-link time histograms; off saves
        memory and time on large fabrics).
    pool_size : initial packet records (the pool doubles when it runs out).
    packet_bytes : payload bytes per packet, per flow (scalars broadcast; default
        ``params.mtu_bytes``): a coarser packet on links without buffers, congestion
        control or loss (NVLink) only coarsens how flows interleave there, for fewer events.

    Returns
    -------
    :class:`~hpnsim.packet.result.PacketResult`

    Examples
    --------
    Two 1 MB flows into one 100 Gb/s port, no congestion control: together they take
    the port's time for 2 MB plus headers (256 packets of 4096 B, 62 B of headers and 20 B
    of preamble and gap each), plus one packet's serialization and the two links' delays.
    The port receives at 2C and sends at C, so when the senders stop (after 256 packets
    each) about half of it waits: 257 frames of 4158 B.

    >>> p = PacketParams(cc=False)
    >>> r = simulate_flows([12.5e9] * 3, 1e-6, [[0, 2], [1, 2]], 2**20, params=p,
    ...                    switch_of=[-1, -1, 0])
    >>> expected = (2 * 256 + 1) * (4096 + 62 + 20) / 12.5e9 + 2e-6
    >>> bool(abs(r.makespan - expected) < 1e-12), int(r.drops.sum()), float(r.q_max[2] / 4158)
    (True, 0, 257.0)
    """
    sim = PacketSim(capacity, delay, paths, sizes, starts, params, switch_of=switch_of,
                    reverse=reverse, framed=framed, priority=priority, qp=qp, deps=deps,
                    waits=waits, watch=watch, watch_flows=watch_flows,
                    sample_interval=sample_interval, max_samples=max_samples, pct=pct,
                    histograms=histograms, pool_size=pool_size,
                    packet_bytes=packet_bytes)
    sim.advance(t_end)
    return sim.result()


class PacketSim:
    """A packet run that can stop and go on: :func:`simulate_flows` in pieces.

    Built with the arguments of :func:`simulate_flows` (less ``t_end``); :meth:`advance`
    processes the events up to a time and can be called again with a later one (the run is
    the same as one call to the last time); :attr:`finish` shows the flows' finish times so
    far; :meth:`result` closes the books (after it, the run cannot go on).

    >>> sim = PacketSim([1e9, 1e9], [1e-6, 1e-6], [[0, 1], [0, 1]], [4096, 4096],
    ...                 switch_of=[-1, 0], params=PacketParams(header_bytes=0, framing_bytes=0))
    >>> sim.advance(11e-6), [round(float(t) * 1e6, 3) for t in sim.finish]
    (False, [10.192, inf])
    >>> bool(11e-6 < sim.next_time < 14.288e-6)
    True
    >>> sim.advance(), round(float(sim.finish[1]) * 1e6, 3), sim.result().events > 0
    (True, 14.288, True)
    """

    def __init__(self, capacity, delay, paths, sizes, starts=None,
                 params: PacketParams | None = None, *, switch_of=None, reverse=None,
                 framed=None, priority=None, qp=None, deps=None, waits=(), watch=(),
                 watch_flows=(), sample_interval: float = 1e-6, max_samples: int = 100_000,
                 pct=(50.0, 90.0, 99.0), histograms: bool = True, pool_size: int = 1 << 14,
                 packet_bytes=None):
        p = (params or PacketParams()).validate()
        capacity = np.ascontiguousarray(capacity, dtype=np.float64)
        delay = np.ascontiguousarray(np.broadcast_to(np.asarray(delay, dtype=np.float64),
                                                     capacity.shape))
        n_links = capacity.size
        ptr, links = _csr(paths)
        n = ptr.size - 1
        if np.any(ptr[1:] <= ptr[:-1]):
            raise InputError("paths", "every flow needs at least one link")
        if links.size and (links.min() < 0 or links.max() >= n_links):
            raise InputError("paths", f"link ids must be in 0..{n_links - 1}")
        if np.any(capacity <= 0):
            raise InputError("capacity", "the packet engine needs every link's capacity > 0")
        waits = np.asarray(waits, dtype=np.float64).reshape(-1)
        total = n + waits.size                                 # flows, then waits
        if not (np.all(np.isfinite(waits)) and np.all(waits >= 0)):
            raise InputError("waits", "durations must be finite and >= 0")
        size = np.ascontiguousarray(np.broadcast_to(np.asarray(sizes, dtype=np.float64), (n,)))
        start = np.zeros(total) if starts is None else np.ascontiguousarray(
            np.broadcast_to(np.asarray(starts, dtype=np.float64), (total,)))
        prio = np.full(n, p.data_priority, dtype=np.int64) if priority is None else \
            np.ascontiguousarray(np.broadcast_to(np.asarray(priority, dtype=np.int64), (n,)))
        qp = np.arange(n, dtype=np.int64) if qp is None else np.asarray(qp, dtype=np.int64)
        if not (np.all(np.isfinite(size)) and np.all(size >= 0)):
            raise InputError("sizes", "must be finite and >= 0")
        size = np.ceil(size)          # packets carry whole bytes (their records are integers)
        packet = np.full(n, float(p.mtu_bytes)) if packet_bytes is None else \
            np.ceil(np.broadcast_to(np.asarray(packet_bytes, dtype=np.float64), (n,)))
        if not (np.all(np.isfinite(packet)) and np.all(packet >= 1)):
            raise InputError("packet_bytes", "must be finite and >= 1 byte")
        if not (np.all(np.isfinite(start)) and np.all(start >= 0)):
            raise InputError("starts", "must be finite and >= 0")
        if np.any((prio < 0) | (prio >= N_PRIO)):
            raise InputError("priority", f"must be 0..{N_PRIO - 1}")
        if switch_of is not None and np.shape(switch_of) != (n_links,):
            raise InputError("switch_of", f"needs one entry per link ({n_links})")
        if deps is not None:
            deps = deps if isinstance(deps, Csr) else Csr.of(deps)
            if len(deps) != total or (deps.ids.size and not (0 <= deps.ids.min()
                                                              and deps.ids.max() < total)):
                raise InputError("deps", f"needs one list per flow (and wait) of ids in "
                                         f"0..{total - 1}")
        first = links[ptr[:-1]]
        if qp.shape != (n,) or (n and qp.min() < 0):
            raise InputError("qp", "needs one QP id >= 0 per flow")
        port_of_qp = np.full(int(qp.max(initial=-1)) + 1, -1)
        port_of_qp[qp] = first
        if np.any(port_of_qp[qp] != first):
            raise InputError("qp", "the flows of a QP must leave on the same link (its NIC port)")
        if switch_of is None:
            switch_of = np.arange(n_links, dtype=np.int64)
            switch_of[first] = -1
        link_buf = np.ascontiguousarray(switch_of, dtype=np.int64)
        n_buf = int(link_buf.max(initial=-1)) + 1
        wire = max(p.mtu_bytes, float(packet.max(initial=0.0))) + p.header_bytes
        headroom = p.headroom_bdp * 2 * delay * capacity + 2 * wire
        buf_shared = np.full(n_buf, float(p.buffer_bytes))
        if p.pfc and n_buf:                      # reserve each ingress's headroom once per switch
            flow_of = np.repeat(np.arange(n), np.diff(ptr))
            inner = np.flatnonzero(flow_of[1:] == flow_of[:-1])
            pairs = np.unique(np.stack([links[inner], link_buf[links[inner + 1]]], 1), axis=0)
            pairs = pairs[pairs[:, 1] >= 0]
            np.subtract.at(buf_shared, pairs[:, 1], headroom[pairs[:, 0]])
            if np.any(buf_shared <= 0):
                worst = int(np.argmin(buf_shared))
                ports = int(np.sum(pairs[:, 1] == worst))
                need = float(p.buffer_bytes - buf_shared[worst])
                raise InputError("buffer_bytes", f"{p.buffer_bytes / 2**20:.3g} MiB is smaller "
                                 f"than the PFC headroom a switch's {ports} lossless ingress ports "
                                 f"reserve ({need / 2**20:.3g} MiB at headroom_bdp "
                                 f"{p.headroom_bdp:g}): raise buffer_bytes or lower headroom_bdp "
                                 f"in the packet parameters file")
        framing = np.full(n_links, float(p.framing_bytes)) if framed is None else \
            np.where(np.broadcast_to(np.asarray(framed, dtype=bool), (n_links,)),
                     float(p.framing_bytes), 0.0)
        fb_const = np.add.reduceat((delay + framing / capacity)[links], ptr[:-1]) if n else \
            np.zeros(0)
        fb_per_byte = np.add.reduceat(1.0 / capacity[links], ptr[:-1]) if n else np.zeros(0)
        links, rptr0, rptr1 = _reverse_paths(reverse, ptr, links, link_buf, n_links)
        if waits.size:           # waits: no links, one shared QP, their duration as size
            ptr = np.concatenate([ptr, np.full(waits.size, ptr[-1])])
            size = np.concatenate([size, waits])
            packet = np.concatenate([packet, np.full(waits.size, float(p.mtu_bytes))])
            prio = np.concatenate([prio, np.full(waits.size, p.data_priority, dtype=np.int64)])
            qp = np.concatenate([qp, np.full(waits.size, int(qp.max(initial=-1)) + 1)])
            fb_const = np.concatenate([fb_const, np.zeros(waits.size)])
            fb_per_byte = np.concatenate([fb_per_byte, np.zeros(waits.size)])
            rptr0 = np.concatenate([rptr0, np.full(waits.size, links.size)])
            rptr1 = np.concatenate([rptr1, np.full(waits.size, links.size)])
            first = np.concatenate([first, np.full(waits.size, first[0] if n else 0)])
            n = total
        succ_ptr, succ, n_pred = _deps_csr(deps, n)
        watch = np.asarray(watch, dtype=np.int64).reshape(-1)
        watch_flows = np.asarray(watch_flows, dtype=np.int64).reshape(-1)
        n_samples = int(max_samples) if watch.size + watch_flows.size else 0
        # --- initial state (columns: hpnsim.packet.kinds) --------------------------------------
        # int32 state in cache-line rows (pool.rows): at hundreds of GPUs the state the
        # kernel touches per event no longer fits the caches, so bytes per event are its cost
        lk = pool.rows(n_links, len(Lk), np.int32, -1)
        lk[:, [Lk.RR_LEN, Lk.PAUSED, Lk.PACKETS, Lk.MARKS, Lk.DROPS, Lk.XOFF, Lk.QUEUED]] = 0
        lk[:, Lk.BUF] = link_buf
        lf = pool.rows(n_links, len(Lf), np.float64)
        lf[:, Lf.CAP], lf[:, Lf.DELAY], lf[:, Lf.HEADROOM] = capacity, delay, headroom
        lf[:, Lf.FRAMING] = framing
        lf[:, [Lf.WAKE_AT, Lf.FIRST_XOFF, Lf.FIRST_PAUSED]] = np.inf
        # a link's priorities together, from a cache line
        pq = pool.rows(n_links, N_PRIO * PQ_WIDTH, np.int32).reshape(-1, PQ_WIDTH)
        pq[:, [Pq.HEAD, Pq.TAIL]] = -1
        pf = pool.rows(n_links, N_PRIO * len(Pf), np.float64).reshape(-1, len(Pf))
        fi = pool.rows(n, len(Fi), np.int32)
        fi[:, Fi.PRIO], fi[:, Fi.QP], fi[:, Fi.NEXT] = prio, qp, -1
        fi[:, Fi.PATH0], fi[:, Fi.PATH1], fi[:, Fi.PENDING] = ptr[:-1], ptr[1:], n_pred
        fi[:, Fi.SUCC0], fi[:, Fi.SUCC1] = succ_ptr[:-1], succ_ptr[1:]
        fi[:, Fi.RPATH0], fi[:, Fi.RPATH1], fi[:, Fi.LAST_REWIND] = rptr0, rptr1, -1
        ff = pool.rows(n, len(Ff), np.float64)
        ff[:, Ff.SIZE], ff[:, [Ff.FINISH, Ff.RTO_DUE, Ff.FIRST_CNP]] = size, np.inf
        ff[:, Ff.FB_CONST], ff[:, Ff.FB_PER_BYTE] = fb_const, fb_per_byte
        ff[:, Ff.PACKET] = packet
        n_qps = int(qp.max(initial=-1)) + 1
        qf = pool.rows(n_qps, len(Qp), np.float64)
        qp_line = np.zeros(n_qps)
        qp_line[qp[::-1]] = capacity[first[::-1]]           # the first flow of a QP sets it
        qf[:, Qp.RC] = qf[:, Qp.RT] = qf[:, Qp.LINE] = qp_line
        qf[:, Qp.ALPHA] = 1.0                               # DCQCN paper: alpha starts at 1
        qf[:, [Qp.LAST_CNP, Qp.LAST_CUT]] = -np.inf
        qf[:, Qp.LEFT] = np.bincount(qp, minlength=n_qps)
        qi = np.full((n_qps, len(QpI)), -1, dtype=np.int32)
        qi[:port_of_qp.size, QpI.PORT] = port_of_qp
        sw = np.stack([np.zeros(n_buf), buf_shared], axis=1)
        hist = np.zeros((n_links if histograms else 0, N_BINS))
        samples = np.zeros((n_samples, watch.size))
        flow_samples = np.zeros((n_samples, watch_flows.size))
        # a finish wakes every successor; the first loss arms every flow's retransmission timer
        reserve = 16 + int(np.diff(succ_ptr).max(initial=0)) + (n if p.retransmit else 0)
        ht, hk, ms = heap.new_heap(4 * n_links + 2 * n + 4 * n_qps + 2 * reserve)
        ms[Ms.RESERVE] = reserve
        pk, pt = pool.new_pool(int(pool_size), ms)
        rng = np.array([(int(p.seed) * 0x2545F4914F6CDD1D + 1) % 2**64], dtype=np.uint64)
        cfg = config_vector(p, sample_interval, np.inf)   # advance() sets the end
        core.start(fi, start, ht, hk, ms, n_samples > 0)
        self.p, self.reserve, self.n_samples = p, reserve, n_samples
        self.pct, self.histograms, self.sample_interval = pct, histograms, sample_interval
        if max(links.size, succ.size, n, n_qps) >= 2**31:
            raise InputError("paths", "the packet engine indexes flows, QPs and path links "
                                      "as 32-bit integers: at most 2**31 - 1 of each")
        links, succ = links.astype(np.int32), succ.astype(np.int32)
        self.state = [lk, lf, pq, pf, fi, ff, qf, qi, sw, links, succ, watch, watch_flows,
                      samples, flow_samples, hist, cfg, rng, pk, pt, ht, hk, ms]
        self.now, self.closed = 0.0, False

    @property
    def finish(self) -> np.ndarray:
        """Finish time per flow (and wait) so far (inf: not finished)."""
        return self.state[5][:, Ff.FINISH]

    @property
    def next_time(self) -> float:
        """When the next pending event happens (inf: none): nothing changes before it."""
        return float(self.state[20][0]) if self.state[22][Ms.HEAP_N] > 0 else np.inf

    @property
    def events(self) -> int:
        """Events processed so far."""
        return int(self.state[22][Ms.EVENTS])

    def advance(self, t_end: float = np.inf) -> bool:
        """Process the events up to ``t_end``; True once every flow has finished or no event
        is left (the run is over)."""
        if self.closed:
            raise RuntimeError('PacketSim.advance after result()')
        st = self.state
        st[16][Cfg.T_END] = t_end
        ms = st[22]
        while True:
            status, self.now = core.run(*st, self.now)
            if status == core.DONE:
                break
            while ms[Ms.HEAP_N] + self.reserve > st[20].shape[0]:
                st[20], st[21] = heap.grow(st[20], st[21])
            if ms[Ms.FREE_N] < 4:
                st[18], st[19] = pool.grow(st[18], st[19], ms)
        return bool(ms[Ms.HEAP_N] == 0 or ms[Ms.N_DONE] >= st[4].shape[0])

    def result(self) -> PacketResult:
        """The run so far as a :class:`~hpnsim.packet.result.PacketResult` (queues and pauses
        still open are charged to the last event's time)."""
        (lk, lf, pq, pf, fi, ff, qf, qi, sw, links, succ, watch, watch_flows, samples,
         flow_samples, hist, cfg, rng, pk, pt, ht, hk, ms) = self.state
        now, p, pct, histograms = self.now, self.p, self.pct, self.histograms
        sample_interval = self.sample_interval
        if not self.closed:
            core.close(lk, lf, hist, now)
            self.closed = True
        end, taken = float(now), int(ms[Ms.SAMPLES])
        return PacketResult(
            finish=ff[:, Ff.FINISH], received=ff[:, Ff.RECV], cnps=fi[:, Fi.CNPS].astype(np.int64),
            resent=ff[:, Ff.RESENT], rewinds=fi[:, Fi.REWINDS].astype(np.int64), timeouts=fi[:, Fi.TIMEOUTS].astype(np.int64),
            discards=fi[:, Fi.DISCARDS].astype(np.int64), first_cnp=ff[:, Ff.FIRST_CNP],
            qp_rate=qf[:, Qp.RC].copy(), qp_alpha=qf[:, Qp.ALPHA].copy(),
            packets=lk[:, Lk.PACKETS].astype(np.int64), marks=lk[:, Lk.MARKS].astype(np.int64), drops=lk[:, Lk.DROPS].astype(np.int64),
            pauses=lk[:, Lk.XOFF].astype(np.int64), paused_time=lf[:, Lf.PAUSED_TIME],
            first_xoff=lf[:, Lf.FIRST_XOFF], first_paused=lf[:, Lf.FIRST_PAUSED],
            headroom_max=lf[:, Lf.HEADROOM_MAX], tx_bytes=lf[:, Lf.TX_BYTES],
            q_max=lf[:, Lf.Q_MAX], q_mean=lf[:, Lf.Q_AREA] / end if end > 0 else np.zeros(lf.shape[0]),
            q_pct=percentiles(hist, pct) if histograms else np.zeros((lf.shape[0], 0)),
            pct=tuple(pct),
            sample_times=np.arange(taken) * sample_interval, samples=samples[:taken],
            flow_samples=flow_samples[:taken], events=int(ms[Ms.EVENTS]), end_time=end,
            params={k: v["value"] for k, v in params_dict(p).items()})
