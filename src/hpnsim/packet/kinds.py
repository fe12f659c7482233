"""Integer constants of the packet engine: event kinds, packet-record fields, state columns.

Everything here is an :class:`~enum.IntEnum` (or a plain int), so numba compiles the names
to constants: no string tags reach the event loop.

>>> int(Event.TX_DONE), Event(1).name
(0, 'ARRIVE')
"""

from __future__ import annotations

from enum import IntEnum

#: priority classes (PFC has 8, IEEE 802.1Qbb)
N_PRIO = 8


class Event(IntEnum):
    """What a pending event does when it fires (id: the link, flow, QP or port it concerns)."""

    TX_DONE = 0      # link id: its serializer finished the packet it was sending
    ARRIVE = 1       # link id: the head of its in-flight FIFO reaches the far end
    LINK_WAKE = 2    # link id: a paced flow on this NIC port may send again
    FLOW_START = 3   # flow id: its start time has come (its predecessors may still hold it)
    CNP_ARRIVE = 4   # QP id: a congestion notification reaches the sender
    ALPHA_TIMER = 5  # QP id: DCQCN alpha update period ends
    INC_TIMER = 6    # QP id: DCQCN rate-increase timer fires
    PAUSE_ON = 7     # link * N_PRIO + priority: an XOFF frame reaches the link's sender
    PAUSE_OFF = 8    # link * N_PRIO + priority: an XON frame reaches the link's sender
    SAMPLE = 9       # 0: record the queues of the watched ports


class Pkt(IntEnum):
    """Columns of the integer packet pool ``pk[n, 5]``."""

    FLOW = 0   # flow id
    HOP = 1    # index of the link it is on, within its flow's path
    SIZE = 2   # wire bytes (payload + headers)
    FLAGS = 3  # bit 0: ECN congestion experienced
    NEXT = 4   # next packet in the same FIFO (queue, in-flight list or free list), -1 ends


ECN_CE = 1


class Qp(IntEnum):
    """Columns of the float QP state ``qf[n_qps, 9]`` (DCQCN reaction and notification point)."""

    RC = 0          # current rate, bytes/s
    RT = 1          # target rate, bytes/s
    ALPHA = 2       # DCQCN alpha
    NEXT_TX = 3     # earliest time the rate limiter lets the next packet go
    LAST_CNP = 4    # when the receiver last sent a CNP for this QP (notification point)
    LAST_CUT = 5    # when the rate was last cut
    BYTES = 6       # bytes sent since the byte counter last fired
    INC_DUE = 7     # when the pending rate-increase timer event is due
    LINE = 8        # line rate of the QP's NIC port, bytes/s


class QpInt(IntEnum):
    """Columns of the integer QP state ``qi[n_qps, 4]``."""

    TIMER_STAGE = 0  # rate-increase timer expiries since the last cut (DCQCN's T)
    BYTE_STAGE = 1   # byte-counter expiries since the last cut (DCQCN's BC)
    CNP_SEEN = 2     # a CNP arrived during the current alpha period
    CC_ON = 3        # its timers run (from the first CNP on)


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


class LinkStat(IntEnum):
    """Columns of the per-link float statistics ``ls[n_links, 9]``."""

    Q_MAX = 0           # largest egress occupancy, bytes
    Q_AREA = 1          # integral of occupancy over time, byte-seconds
    Q_LAST = 2          # time of the last occupancy change
    PAUSED_TIME = 3     # time its sender spent paused (any priority), s
    FIRST_XOFF = 4      # when the far end first sent XOFF toward it (inf: never)
    FIRST_PAUSED = 5    # when its sender first stopped on a pause (inf: never)
    HEADROOM_MAX = 6    # most PFC headroom its traffic held at the far end, bytes
    TX_BYTES = 7        # bytes it carried
    PAUSE_SINCE = 8     # when its current pause began (scratch)


class LinkCount(IntEnum):
    """Columns of the per-link integer counters ``lc[n_links, 5]``."""

    PACKETS = 0   # packets admitted to its egress queue at a switch
    MARKS = 1     # of them, ECN-marked
    DROPS = 2     # packets dropped at its egress (buffer full)
    XOFF = 3      # pause frames its far end sent toward its sender
    PAUSED_PRIO = 4  # priorities paused now (scratch)
