"""What a collective run through the packet engine returns: :class:`PacketCollectiveResult`
(:func:`hpnsim.collectives.packet.run.run_collective_packet`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.collectives.planning.run import CollectiveResult

__all__ = ["PACKET_ROW_FIELDS", "PacketCollectiveResult", "packet_collective_result"]

#: the packet columns of :meth:`PacketCollectiveResult.rows`
PACKET_ROW_FIELDS = ("engine", "network_time", "nccl_latency", "steps", "steps_simulated",
                     "extrapolated", "stable", "rail_copies", "events", "ecn_marks", "cnps", "pfc_pauses",
                     "paused_time", "drops", "rewinds", "resent_bytes", "timeouts",
                     "discards")


@dataclass
class PacketCollectiveResult(CollectiveResult):
    """:class:`~hpnsim.collectives.planning.run.CollectiveResult` of a packet run, plus what the
    fabric did. Queue and PFC figures are over the simulated steps (``steps_simulated`` of
    ``steps``); ``link_bytes`` are scaled to the whole collective.

    ``time`` is ``network_time`` (what the packets took) plus ``nccl_latency``: NCCL's
    software latency terms the flow engine charges too (base, per NVLink and per network
    step: :meth:`~hpnsim.collectives.nccl.params.NcclParams.latencies`), so that the two engines
    differ by what the network does, and nothing else.

    Attributes
    ----------
    network_time, nccl_latency : seconds (above).
    steps, steps_simulated, extrapolated, stable : the ring's steps, how many were simulated,
        the share extrapolated and whether the per-step time had settled.
    rail_copies : the rails one simulated rail stood for (1: every rail simulated;
        :mod:`~hpnsim.collectives.packet.rails`); counters and link bytes are all rails'.
    packets_estimated, events : packet hops estimated before the run; events processed.
    ecn_marks, cnps, pfc_pauses, paused_time, drops : totals over all ports and flows.
    rewinds, resent_bytes, timeouts, discards : the RC transport's totals over all flows
        (:meth:`hpnsim.packet.PacketResult.transport_counters`).
    ports : the ports with the fullest queues (name, link, q_max, q_mean, q_p99 in bytes,
        marks, pauses, paused_time in s).
    watch, sample_times, samples : watched link ids, sample times (s) and their queues
        (bytes, one column per watched link).
    params : the packet parameters in effect.
    ring_step_end : end (s) of each simulated step, per ring (one per channel and QP).
    ring_time : network time (s) of each ring, extrapolated from its own steps.
    """

    engine: str = "packet"
    network_time: float = 0.0
    nccl_latency: float = 0.0
    steps: int = 0
    steps_simulated: int = 0
    extrapolated: float = 0.0
    stable: bool = True
    packets_estimated: float = 0.0
    rail_copies: int = 1
    events: int = 0
    ecn_marks: int = 0
    cnps: int = 0
    pfc_pauses: int = 0
    paused_time: float = 0.0
    drops: int = 0
    rewinds: int = 0
    resent_bytes: float = 0.0
    timeouts: int = 0
    discards: int = 0
    ports: list = field(default_factory=list, repr=False)
    watch: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    sample_times: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    samples: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    params: dict = field(default_factory=dict, repr=False)
    watch_names: list = field(default_factory=list, repr=False)
    watch_chosen: bool = False
    ring_step_end: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    ring_time: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def to_dict(self) -> dict:
        """:meth:`CollectiveResult.to_dict` plus ``engine`` and a ``packet`` section."""
        out = super().to_dict()
        out["engine"] = self.engine
        out["packet"] = {
            "network_time": self.network_time, "nccl_latency": self.nccl_latency,
            "steps": self.steps, "steps_simulated": self.steps_simulated,
            "extrapolated": self.extrapolated, "stable": self.stable,
            "packets_estimated": self.packets_estimated, "rail_copies": self.rail_copies,
            "events": self.events,
            "ecn_marks": self.ecn_marks, "cnps": self.cnps, "pfc_pauses": self.pfc_pauses,
            "paused_time": self.paused_time, "drops": self.drops, "rewinds": self.rewinds,
            "resent_bytes": self.resent_bytes, "timeouts": self.timeouts,
            "discards": self.discards, "ports": self.ports,
            "queue": self.queue()}
        return out

    def rows(self) -> list[dict]:
        """:meth:`CollectiveResult.rows` plus the packet totals as flat columns
        (:data:`PACKET_ROW_FIELDS`)."""
        row, = super().rows()
        row.update({name: getattr(self, name) for name in PACKET_ROW_FIELDS})
        return [row]

    def queue(self, ports: int = 2, points: int = 1000) -> dict:
        """Queue over time at the watched ports: those the user chose (all of them), else
        the ``ports`` whose sampled queue rose highest; at most ``points`` samples each.
        ``{"ports": names, "time": seconds, "bytes": one list per port}``.

        >>> PacketCollectiveResult(*[None] * 14, link_bytes=None).queue()["ports"]
        []
        """
        if self.samples.size == 0:
            return {"ports": [], "time": [], "bytes": []}
        cols = np.arange(self.samples.shape[1])
        if not self.watch_chosen:
            peak = self.samples.max(axis=0)
            cols = np.sort(np.argsort(-peak, kind="stable")[:ports])
        stride = max(1, -(-self.samples.shape[0] // points))
        return {"ports": [self.watch_names[c] for c in cols],
                "time": self.sample_times[::stride].tolist(),
                "bytes": [self.samples[::stride, c].tolist() for c in cols]}


def packet_collective_result(fabric, res, *, op: str, size: float, time: float,
                             busy_time: float, link_bytes, capacity, switch_of, watch,
                             watch_chosen: bool, state=None, **fields) -> PacketCollectiveResult:
    """The :class:`PacketCollectiveResult` of a packet run (``res``, a
    :class:`~hpnsim.packet.PacketResult`), with what every collective path derives the same
    way: bandwidths, the busiest link (busy time at the packets' rates ``capacity`` over
    ``busy_time``, down links left out), the ten busiest links, port imbalance, the packet
    and transport counters, the fullest ports and the watched queues.

    Parameters
    ----------
    fabric : Fabric
    res : PacketResult
    op, size, time : the operation, its bytes and its time (s, NCCL latency included).
    busy_time : what the bottleneck's busy time is a share of (s).
    link_bytes : bytes per link over the whole collective.
    capacity : per link, the rate the packets ran it (bytes/s).
    switch_of, watch, watch_chosen : buffers per link; watched links; chosen by the user.
    state : FabricState, optional (down links; port imbalance).
    **fields
        The path's own fields: ``algo``, ``protocol``, ``routing``, ``n_gpus``,
        ``max_link_flows``, ``hash_collisions``, ``n_groups``, ``network_time``,
        ``nccl_latency``, ``steps``, ``steps_simulated``, ``extrapolated``, ``stable``,
        ``packets_estimated``.

    Returns
    -------
    PacketCollectiveResult

    Examples
    --------
    >>> from hpnsim.collectives.packet.run import run_collective_packet
    >>> from hpnsim.fabrics import hpn7
    >>> r = run_collective_packet(hpn7(segments=1, hosts_per_segment=2, backup_hosts=0),
    ...                           "allgather", range(16), 2**22)
    >>> r.bottleneck_utilization <= 1.0, r.busbw == r.algbw * 15 / 16
    (True, True)
    """
    from hpnsim.collectives.ops import busbw_factor
    from hpnsim.collectives.packet.ports import top_ports
    from hpnsim.routing.diagnostics import port_imbalance

    link_bytes = np.asarray(link_bytes, dtype=np.float64)
    live = np.asarray(fabric.link_capacity if state is None else state.capacity) > 0
    cap = np.where(live, capacity, 0.0)
    ratio = np.divide(link_bytes, cap, out=np.zeros_like(link_bytes), where=cap > 0)
    worst = int(np.argmax(ratio)) if ratio.size else -1
    top = np.argsort(-ratio, kind="stable")[:10]
    algbw = size / time if time > 0 else np.inf
    return PacketCollectiveResult(
        op=op, size=float(size), time=time, algbw=algbw,
        busbw=algbw * busbw_factor(op, fields["n_gpus"]),
        bottleneck=fabric.link_name(worst) if worst >= 0 and link_bytes[worst] > 0 else "-",
        bottleneck_utilization=float(ratio[worst] / busy_time) if worst >= 0
        and busy_time > 0 else 0.0,
        link_bytes=link_bytes,
        top_links=[(fabric.link_name(int(k)), float(link_bytes[k])) for k in top
                   if link_bytes[k] > 0],
        port_imbalance=port_imbalance(fabric, link_bytes, state=state),
        events=res.events, ecn_marks=int(res.marks.sum()), cnps=int(res.cnps.sum()),
        pfc_pauses=int(res.pauses.sum()), paused_time=float(res.paused_time.sum()),
        drops=int(res.drops.sum()), **res.transport_counters(),
        ports=top_ports(fabric, res, switch_of), watch=watch,
        sample_times=res.sample_times, samples=res.samples, params=res.params,
        watch_names=[fabric.link_name(int(k)) for k in watch], watch_chosen=bool(watch_chosen),
        **fields)
