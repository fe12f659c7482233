"""`PacketResult`: what a packet run returns, as flat arrays (one entry per flow or link)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PacketResult:
    """Per-flow times, per-port queue and PFC statistics, samples, and run counters.

    Attributes
    ----------
    finish : float64 (n_flows,): when the flow's last byte reached its receiver (inf: not
        finished by the end time, or its QP gave up after ``retry_count`` timeouts, or a
        packet was dropped with ``retransmit`` off).
    received : bytes delivered in sequence per flow.
    cnps : CNPs its receiver sent per flow.
    resent, rewinds, timeouts, discards : per flow, payload bytes sent again by go-back-N,
        its rewinds (on a NACK or a timeout), its retransmission timeouts, and the packets its
        receiver discarded (out of sequence or duplicate).
    first_cnp : per flow, when the first CNP for it reached its sender (inf: none).
    packets, marks, drops : per link, packets admitted to its egress queue at a switch, of
        them ECN-marked, and packets dropped there.
    pauses : per link, XOFF frames its far end sent toward its sender.
    paused_time : per link, seconds its sender spent paused (any priority).
    first_xoff, first_paused : per link, when the first XOFF left the far end and when it
        stopped the sender (inf: never).
    headroom_max : per link, most PFC headroom bytes its traffic held at the far end.
    tx_bytes : per link, bytes carried.
    q_max, q_mean : per link, largest and time-averaged egress occupancy (bytes).
    q_pct : per link, occupancy percentiles ``pct`` (columns), exact to a 9% bin.
    sample_times, samples : sample times and egress occupancy of the watched links.
    flow_samples : bytes received by the watched flows at the sample times.
    events, end_time : events processed and simulated time reached.
    qp_rate, qp_alpha : per QP id (``qp`` of the run; the waits' QP after them), DCQCN's
        current rate Rc (bytes/s) and alpha when the run ended.
    """

    finish: np.ndarray
    received: np.ndarray
    cnps: np.ndarray
    packets: np.ndarray
    marks: np.ndarray
    drops: np.ndarray
    pauses: np.ndarray
    paused_time: np.ndarray
    first_xoff: np.ndarray
    first_paused: np.ndarray
    headroom_max: np.ndarray
    tx_bytes: np.ndarray
    q_max: np.ndarray
    q_mean: np.ndarray
    q_pct: np.ndarray
    resent: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rewinds: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    timeouts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    discards: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    first_cnp: np.ndarray = field(default_factory=lambda: np.zeros(0))
    qp_rate: np.ndarray = field(default_factory=lambda: np.zeros(0))
    qp_alpha: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pct: tuple = (50.0, 90.0, 99.0)
    sample_times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    samples: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    flow_samples: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    events: int = 0
    end_time: float = 0.0
    params: dict = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        """Latest finish time (inf if a flow did not finish)."""
        return float(self.finish.max()) if self.finish.size else 0.0

    def transport_counters(self) -> dict:
        """The RC transport's run totals: go-back-N rewinds, payload bytes sent again, the
        retransmission timeouts, and the packets receivers discarded (out of sequence or
        duplicate). A lossless run reports zeros.

        >>> from hpnsim.packet import simulate_flows
        >>> simulate_flows([1e9, 1e9], 1e-6, [[0, 1]], 4096, switch_of=[-1, 0]).transport_counters()
        {'rewinds': 0, 'resent_bytes': 0.0, 'timeouts': 0, 'discards': 0}
        """
        return {"rewinds": int(self.rewinds.sum()), "resent_bytes": float(self.resent.sum()),
                "timeouts": int(self.timeouts.sum()), "discards": int(self.discards.sum())}

    def summary(self) -> dict:
        """Totals for printing: events, makespan, marks, CNPs, pauses, drops, worst queue.

        >>> from hpnsim.packet import simulate_flows
        >>> r = simulate_flows([1e9, 1e9], 1e-6, [[0, 1]], 4096, switch_of=[-1, 0])
        >>> r.summary()["events"], r.summary()["drops"]
        (6, 0)
        """
        return {"events": self.events, "end_time": self.end_time, "makespan": self.makespan,
                "ecn_marks": int(self.marks.sum()), "cnps": int(self.cnps.sum()),
                "pfc_pauses": int(self.pauses.sum()), "drops": int(self.drops.sum()),
                **self.transport_counters(), "q_max": float(self.q_max.max(initial=0.0))}
