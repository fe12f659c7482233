"""DCQCN at the NIC: the reaction point (per-QP rate limiter) and its timers.

Per QP: current rate ``Rc``, target rate ``Rt``, ``alpha``, the timer stage ``T`` and the
byte-counter stage ``BC`` (Zhu et al., SIGCOMM'15, Fig. 7; as in ConnectX firmware and
SimAI's ns-3 "mlx" variant, alpha is updated on its own timer):

* CNP arrives: ``Rt <- Rc``, ``Rc <- max(Rmin, Rc (1 - alpha/2))``, ``T = BC = 0``, the
  increase timer restarts (at most one cut per ``rate_decrease_interval``); without
  ``clamp_target_rate`` (ConnectX default) ``Rt <- Rc`` only if the timer raised the rate
  since the last cut, so a burst of CNPs does not drag the target down with the rate;
* alpha timer (every ``alpha_interval``): ``alpha <- (1-g) alpha + g`` if a CNP came in the
  period, else ``alpha <- (1-g) alpha``;
* increase event (the timer every ``rp_timer`` bumps ``T``; every ``byte_counter`` bytes sent
  bumps ``BC``): fast recovery while ``max(T, BC) < F``; hyper increase ``Rt += R_HAI`` once
  ``min(T, BC) > F``; else additive ``Rt += R_AI``; then ``Rc <- (Rt + Rc)/2`` (capped at
  line rate).

>>> import numpy as np
>>> from hpnsim.packet.kinds import Cfg, Qp
>>> qf = np.zeros((1, len(Qp)))
>>> qf[0, Qp.RC] = qf[0, Qp.RT] = qf[0, Qp.LINE] = 100.0; qf[0, Qp.ALPHA] = 1.0
>>> cfg = np.zeros(len(Cfg)); cfg[Cfg.FAST_STEPS] = 5; cfg[Cfg.CLAMP] = 1
>>> cut(qf, 0, 0.0, cfg), float(qf[0, Qp.RC])      # alpha = 1 halves the rate
(True, 50.0)
>>> increase(qf, 0, cfg); float(qf[0, Qp.RC])      # fast recovery: half way back to Rt
75.0
"""

from __future__ import annotations

from numba import njit

from hpnsim.packet import heap
from hpnsim.packet.kinds import Cfg, Event, Qp

RC, RT, ALPHA, LAST_CUT, BYTES, INC_DUE, LINE = (int(Qp.RC), int(Qp.RT), int(Qp.ALPHA),
                                                 int(Qp.LAST_CUT), int(Qp.BYTES),
                                                 int(Qp.INC_DUE), int(Qp.LINE))
T_STAGE, BC_STAGE, CNP_SEEN, CC_ON = (int(Qp.T_STAGE), int(Qp.BC_STAGE), int(Qp.CNP_SEEN),
                                      int(Qp.CC_ON))
NEXT_TX, LAST_WIRE = int(Qp.NEXT_TX), int(Qp.LAST_WIRE)


@njit(cache=True, inline="always", _nrt=False)
def retime(qf, q, old):
    """The rate of QP ``q`` changed from ``old``: the gap after the packet it sent last is
    counted at the new rate, ``NEXT_TX += w / Rc - w / old`` (w: that packet's frame), so a
    rate raised while the limiter holds the QP lets its next packet go earlier, and a cut
    holds it longer (the ns-3 RDMA model's ``RdmaHw::ChangeRate``: alibaba-edu/
    High-Precision-Congestion-Control and aliyun/ns-3-alibabacloud, SimAI's backend,
    simulation/src/point-to-point/model/rdma-hw.cc)."""
    w = qf[q, LAST_WIRE]
    if w > 0 and qf[q, RC] != old:
        qf[q, NEXT_TX] += w / qf[q, RC] - w / old


@njit(cache=True, inline="always", _nrt=False)
def cut(qf, q, now, cfg):
    """Rate decrease on a CNP (unless one happened within the decrease interval)."""
    if now - qf[q, LAST_CUT] < cfg[Cfg.DECREASE_DT]:
        return False
    if cfg[Cfg.CLAMP] > 0 or qf[q, T_STAGE] > 0:
        qf[q, RT] = qf[q, RC]
    old = qf[q, RC]
    qf[q, RC] = max(cfg[Cfg.R_MIN], old * (1.0 - qf[q, ALPHA] / 2.0))
    retime(qf, q, old)
    qf[q, LAST_CUT] = now
    qf[q, BYTES] = 0.0
    qf[q, T_STAGE] = 0.0
    qf[q, BC_STAGE] = 0.0
    return True


@njit(cache=True, inline="always", _nrt=False)
def increase(qf, q, cfg):
    """One increase event: fast recovery, additive or hyper increase, then Rc halfway to Rt."""
    f_steps = cfg[Cfg.FAST_STEPS]
    t, bc = qf[q, T_STAGE], qf[q, BC_STAGE]
    if max(t, bc) < f_steps:
        pass
    elif min(t, bc) > f_steps:
        qf[q, RT] = min(qf[q, LINE], qf[q, RT] + cfg[Cfg.R_HAI])
    else:
        qf[q, RT] = min(qf[q, LINE], qf[q, RT] + cfg[Cfg.R_AI])
    old = qf[q, RC]
    qf[q, RC] = min(qf[q, LINE], (qf[q, RT] + old) / 2.0)
    retime(qf, q, old)


@njit(cache=True, inline="always", _nrt=False)
def on_cnp(qf, q, now, cfg, ht, hk, ms):
    """A CNP reached QP ``q``: cut the rate; start the alpha and increase timers if idle."""
    qf[q, CNP_SEEN] = 1.0
    if qf[q, CC_ON] == 0:
        qf[q, CC_ON] = 1.0
        heap.push(ht, hk, ms, now + cfg[Cfg.ALPHA_DT], q, Event.ALPHA_TIMER)
    if cut(qf, q, now, cfg):
        qf[q, INC_DUE] = now + cfg[Cfg.RP_TIMER]
        heap.push(ht, hk, ms, qf[q, INC_DUE], q, Event.INC_TIMER)


@njit(cache=True, inline="always", _nrt=False)
def on_alpha_timer(qf, q, now, cfg, ht, hk, ms, keep):
    """Alpha period ends: move alpha toward 1 if a CNP came, else decay; rearm if ``keep``."""
    g = cfg[Cfg.G]
    qf[q, ALPHA] = (1.0 - g) * qf[q, ALPHA] + g * qf[q, CNP_SEEN]
    qf[q, CNP_SEEN] = 0.0
    if keep:
        heap.push(ht, hk, ms, now + cfg[Cfg.ALPHA_DT], q, Event.ALPHA_TIMER)
    else:
        qf[q, CC_ON] = 0.0


@njit(cache=True, inline="always", _nrt=False)
def on_inc_timer(qf, q, now, cfg, ht, hk, ms, keep):
    """The rate-increase timer fires (ignored if a cut has rearmed it since)."""
    if now != qf[q, INC_DUE]:
        return
    qf[q, T_STAGE] += 1.0
    increase(qf, q, cfg)
    if keep:
        qf[q, INC_DUE] = now + cfg[Cfg.RP_TIMER]
        heap.push(ht, hk, ms, qf[q, INC_DUE], q, Event.INC_TIMER)


@njit(cache=True, inline="always", _nrt=False)
def on_sent(qf, q, nbytes, cfg):
    """Count bytes sent toward the byte counter (only while DCQCN is active on the QP)."""
    if qf[q, CC_ON] == 0:
        return
    qf[q, BYTES] += nbytes
    if qf[q, BYTES] >= cfg[Cfg.BYTE_COUNTER]:
        qf[q, BYTES] -= cfg[Cfg.BYTE_COUNTER]
        qf[q, BC_STAGE] += 1.0
        increase(qf, q, cfg)
