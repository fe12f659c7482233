"""Integer constants of the packet engine: event kinds, packet-record fields, state columns.

Everything here is an :class:`~enum.IntEnum` (or a plain int), so numba compiles the names
to constants: no string tags reach the event loop.

>>> int(Event.TX_DONE), Event(1).name
(0, 'ARRIVE')
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

#: priority classes (PFC has 8, IEEE 802.1Qbb)
N_PRIO = 8


class Event(IntEnum):
    """What a pending event does when it fires (id: the link, flow, QP or port it concerns)."""

    TX_DONE = 0      # link id: its serializer finished the packet it was sending
    ARRIVE = 1       # link id: the head of its in-flight FIFO reaches the far end
    LINK_WAKE = 2    # link id: a paced flow on this NIC port may send again
    FLOW_START = 3   # flow id: its start time has come (its predecessors may still hold it)
    CNP_ARRIVE = 4   # flow id: a CNP reaches its sender (no reverse path: fixed delay)
    ALPHA_TIMER = 5  # QP id: DCQCN alpha update period ends
    INC_TIMER = 6    # QP id: DCQCN rate-increase timer fires
    PAUSE_ON = 7     # link * N_PRIO + priority: an XOFF frame reaches the link's sender
    PAUSE_OFF = 8    # link * N_PRIO + priority: an XON frame reaches the link's sender
    SAMPLE = 9       # 0: record the queues of the watched ports
    WAIT_DONE = 10   # flow id: a wait (a flow without links) has run its duration
    NACK_ARRIVE = 11  # flow id: a NACK reaches the sender (no reverse path: fixed delay)
    RTO = 12          # flow id: its retransmission timer fires


class Pkt(IntEnum):
    """Columns of the integer packet pool ``pk[n, 16]`` (int32; a record is one 64-byte
    cache line, its arrival time a float64 in slots 10-11: :mod:`hpnsim.packet.pool`)."""

    FLOW = 0   # flow id
    HOP = 1    # index of the link it is on, within its path (path_links[BASE:END])
    SIZE = 2   # frame bytes (payload + headers; preamble and gap are charged on the wire)
    FLAGS = 3  # ECN_CE, CNP, NACK bits
    NEXT = 4   # next packet in the same FIFO (queue, in-flight list or free list), -1 ends
    PSN = 5    # packet sequence number in its flow (a NACK: the PSN it asks for)
    PRIO = 6   # priority class it is queued in
    BASE = 7   # its path: path_links[BASE:END] (the flow's path, or its reverse for control)
    END = 8


class MarkPoint(StrEnum):
    """Where a switch's RED/ECN test reads the egress queue (``PacketParams.ecn_mark_at``;
    the kernel reads :attr:`code`).

    ``ENQUEUE``: when a packet joins the queue, against the bytes ahead of it (the engine
    before issue 30: the marked packet then waits through that queue before it carries the
    news). ``DEQUEUE``: when a packet leaves, against the bytes it leaves behind, so the
    news leaves with the packet at the head, one queue drain earlier.

    >>> MarkPoint("dequeue").code, MarkPoint.ENQUEUE.code
    (1, 0)
    """

    ENQUEUE = "enqueue"
    DEQUEUE = "dequeue"

    @property
    def code(self) -> int:
        """The value ``Cfg.MARK_AT`` holds for the kernel."""
        return MARK_DEQUEUE if self is MarkPoint.DEQUEUE else MARK_ENQUEUE


MARK_ENQUEUE, MARK_DEQUEUE = 0, 1      # Cfg.MARK_AT in the kernel


ECN_CE = 1   # FLAGS bits: congestion experienced (set by a switch)
CNP = 2      # a congestion notification packet, receiver -> sender
NACK = 4     # a NAK (PSN sequence error), receiver -> sender
CONTROL = CNP | NACK


class Qp(IntEnum):
    """Columns of the float QP state ``qf[n_qps, 15]`` (DCQCN reaction and notification
    point; counters are stored as floats so one array holds a QP). What every packet sent
    reads comes first (one cache line of the padded row: :func:`~hpnsim.packet.pool.rows`)."""

    RC = 0          # current rate, bytes/s
    NEXT_TX = 1     # earliest time the rate limiter lets the next packet go
    LAST_WIRE = 2   # frame bytes of the packet it sent last (its rate limiter's gap)
    CC_ON = 3       # 1 while its timers run (from the first CNP on)
    BYTES = 4       # bytes sent since the byte counter last fired
    LEFT = 5        # its flows not finished yet
    LINE = 6        # line rate of the QP's NIC port, bytes/s
    RT = 7          # target rate, bytes/s
    ALPHA = 8       # DCQCN alpha
    LAST_CNP = 9    # when the receiver last sent a CNP for this QP (notification point)
    LAST_CUT = 10   # when the rate was last cut
    INC_DUE = 11    # when the pending rate-increase timer event is due
    T_STAGE = 12    # rate-increase timer expiries since the last cut (DCQCN's T)
    BC_STAGE = 13   # byte-counter expiries since the last cut (DCQCN's BC)
    CNP_SEEN = 14   # 1 if a CNP arrived during the current alpha period


class QpI(IntEnum):
    """Columns of the integer QP state ``qi[n_qps, 4]`` (int32): a QP sends its flows one after
    another (as a QP executes its work requests in order); its NIC port takes turns over the
    QPs that have a flow to send."""

    HEAD = 0       # queue of its active flows (head, tail)
    TAIL = 1
    RR_NEXT = 2    # next QP in its NIC port's round-robin list
    PORT = 3       # its NIC port (the first link of its flows; -1: none)


class Lk(IntEnum):
    """Columns of the integer link state ``lk[n_links, 13]`` (int32). ``QUEUED`` and
    ``PAUSED`` together say which egress queues may send (``QUEUED & ~PAUSED``) from the
    line the link's other columns share: :func:`hpnsim.packet.link.start_next` reads no
    per-priority row to find its next packet."""

    BUSY = 0        # packet being serialized, -1 if idle
    PIPE_HEAD = 1   # in-flight FIFO (head, tail)
    PIPE_TAIL = 2
    RR_HEAD = 3     # round-robin list of the QPs this NIC port serves (head, tail, length)
    RR_TAIL = 4
    RR_LEN = 5
    BUF = 6         # switch whose buffer holds its egress queue, -1 for a NIC/GPU
    PAUSED = 7      # priorities paused now: bit p for priority p
    PACKETS = 8     # packets admitted to its egress queue at a switch
    MARKS = 9       # of them, ECN-marked
    DROPS = 10      # packets dropped at its egress (buffer full)
    XOFF = 11       # pause frames its far end sent toward its sender
    QUEUED = 12     # priorities with packets in their egress queue: bit p for priority p


class Lf(IntEnum):
    """Columns of the float link state and statistics ``lf[n_links, 15]``: what a packet
    sent or queued touches first (one cache line of the padded row)."""

    CAP = 0             # bytes/s
    DELAY = 1           # propagation, s
    FRAMING = 2         # line bytes per frame beyond the frame (preamble, SFD, gap), bytes
    WAKE_AT = 3         # pending LINK_WAKE time (inf: none)
    QTOT = 4            # egress occupancy now, bytes
    Q_AREA = 5          # integral of occupancy over time, byte-seconds
    Q_LAST = 6          # time of the last occupancy change
    TX_BYTES = 7        # bytes it carried
    Q_MAX = 8           # largest egress occupancy, bytes
    HEADROOM = 9        # PFC headroom its traffic may hold at the far end, bytes
    HEADROOM_MAX = 10   # most PFC headroom its traffic held at the far end, bytes
    PAUSED_TIME = 11    # time its sender spent paused (any priority), s
    FIRST_XOFF = 12     # when the far end first sent XOFF toward it (inf: never)
    FIRST_PAUSED = 13   # when its sender first stopped on a pause (inf: never)
    PAUSE_SINCE = 14    # when its current pause began


class Pq(IntEnum):
    """Columns of the integer state per (link, priority) ``pq[n_links * N_PRIO, 3]``
    (int32; whether a pause holds the priority is bit ``prio`` of ``Lk.PAUSED``)."""

    HEAD = 0     # egress FIFO (head, tail)
    TAIL = 1
    XOFF = 2     # 1 while the far end has XOFF out for this ingress priority


#: int32 per ``pq`` row: the 3 columns of :class:`Pq` in 16 bytes, so no row straddles a
#: cache line (a link's 8 rows are two lines)
PQ_WIDTH = 4


class Pf(IntEnum):
    """Columns of the float state per (link, priority) ``pf[n_links * N_PRIO, 3]``."""

    BYTES = 0   # egress queue bytes
    ING = 1     # shared-buffer bytes that came in over this link (at its far-end switch)
    HDRM = 2    # headroom bytes that came in over this link


class Fi(IntEnum):
    """Columns of the integer flow state ``fi[n_flows, 22]`` (int32): what a packet sent or
    delivered reads first (one cache line of the padded row)."""

    QP = 0
    PRIO = 1
    NEXT = 2       # next flow in its QP's queue
    PATH0 = 3      # its links are path_links[PATH0:PATH1]
    PATH1 = 4
    NEXT_PSN = 5   # sender: PSN of the next packet it sends
    EXPECT = 6     # receiver: PSN it expects next
    RTO_MARK = 7   # EXPECT when the retransmission timer was armed
    NACKED = 8     # receiver: 1 once it sent a NACK for EXPECT (one per sequence error)
    CNPS = 9       # CNPs its receiver sent
    PENDING = 10   # predecessors not finished
    RELEASED = 11  # its start time has passed
    SUCC0 = 12     # its successors are succ[SUCC0:SUCC1]
    SUCC1 = 13
    RPATH0 = 14    # its reverse path (control packets) path_links[RPATH0:RPATH1]; empty:
    RPATH1 = 15    # control packets take the fixed delay FB_CONST + size * FB_PER_BYTE
    NACK_PSN = 16  # the PSN of a NACK on its fixed-delay way (no reverse path)
    LAST_REWIND = 17  # sender: PSN of its last go-back-N rewind (-1: none)
    REWINDS = 18   # go-back-N rewinds (NACK or timeout)
    TIMEOUTS = 19  # retransmission timeouts (consecutive ones in RETRIES)
    RETRIES = 20
    DISCARDS = 21  # packets its receiver discarded (out of sequence or duplicate)


class Ff(IntEnum):
    """Columns of the float flow state ``ff[n_flows, 10]`` (what every packet touches first)."""

    SIZE = 0       # bytes (a wait: its duration, s)
    SENT = 1       # payload bytes handed to the NIC port (rewound by go-back-N)
    RECV = 2       # payload bytes delivered in sequence
    PACKET = 3     # payload bytes per packet (the MTU unless the flow has its own)
    RTO_DUE = 4    # when its pending retransmission timer fires
    FINISH = 5     # when the last byte was delivered (inf until then)
    FB_CONST = 6   # fixed-delay control trip (no reverse path): FB_CONST + bytes * FB_PER_BYTE
    FB_PER_BYTE = 7
    RESENT = 8     # payload bytes sent again after go-back-N rewinds
    FIRST_CNP = 9  # when the first CNP for it reached its sender (inf: none)


class Ms(IntEnum):
    """Entries of the integer scalars ``ms``: heap and pool bookkeeping, finished flows."""

    HEAP_N = 0
    HEAP_SEQ = 1
    FREE_HEAD = 2
    FREE_N = 3
    N_DONE = 4
    EVENTS = 5      # events processed
    SAMPLES = 6     # samples taken
    RESERVE = 7     # free heap slots one event may need (16 + most successors of a flow
                    # + every flow: the first loss arms all pending retransmission timers)
    LOSSES = 8      # packets dropped so far (retransmission timers run once one is lost)


class Cfg(IntEnum):
    """Entries of the float configuration vector the kernel reads (from PacketParams)."""

    MTU = 0
    HEADER = 1
    CC = 2
    G = 3
    ALPHA_DT = 4
    DECREASE_DT = 5
    RP_TIMER = 6
    BYTE_COUNTER = 7
    FAST_STEPS = 8
    R_AI = 9
    R_HAI = 10
    R_MIN = 11
    CNP_DT = 12
    ECN = 13
    KMIN = 14
    KMAX = 15
    PMAX = 16
    PFC = 17
    PFC_ALPHA = 18
    PFC_XOFF = 19
    PFC_RESUME = 20
    EGRESS_ALPHA = 21
    SAMPLE_DT = 22
    T_END = 23
    CLAMP = 24
    CNP_PRIO = 25
    CNP_BYTES = 26
    ACK_BYTES = 27
    RETRANSMIT = 28
    RTO = 29
    RETRY = 30
    MARK_AT = 31     # MarkPoint.code: MARK_ENQUEUE or MARK_DEQUEUE
