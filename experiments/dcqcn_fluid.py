"""DCQCN on one bottleneck against the CoNEXT'16 fluid model: the table of docs/packet.md.

Setup: tests/test_packet_dcqcn.py's (the DCQCN paper's parameters, 1 KB payloads, N flows
from their own NICs over 1 us links into one switch port; N = 2, 4, 8 at 40 Gb/s, 16, 32, 64
at 100 Gb/s), ``--t-end`` simulated (0.2 s), statistics over the last two thirds (the run is
deterministic, so the counters of a second run to ``t_end / 3`` are those of the start-up).

Per N: flow rates over the fair share; the fluid model's p* and q* (solved by bisection in
the test) and its own queue, integrated with the setup's feedback delay (4 us plus q*/C);
p_eff, the marking probability the flows' CNP rate implies through the model's
``cnp_rate = (1 - (1 - p)^(tau Rc)) / tau``; the switch's mark fraction; p_np, the same rate
balance solved with DCQCN's own notification and reaction point instead of the model's
per-mark approximations (below), and its CNP rate read as p_eff is; the mean queue, its standard deviation, the share of time
empty and above Kmax.

p_np: marks independent with probability p per packet; the NP sends a CNP at the first mark
at least tau after its last CNP, so CNPs are a renewal process with gaps X = tau + Exp(p Rc)
and rate lam = 1 / (tau + 1/(p Rc)); alpha moves toward 1 in a tau' period that saw a CNP,
so alpha* = P(a CNP in tau') = lam (tau + (1 - exp(-p Rc (tau' - tau))) / (p Rc)); the timer
restarts at each cut and fires at T, 2T, ... until the next CNP, the F-th and later firings
being additive increases. Balance (the model's dRc/dt = dRt/dt = 0 with these rates):
Rc alpha* lam = R_AI (AI firings/s) (timer firings/s) / lam. The byte counter (10 MB) fires
too rarely to matter here.

Also: the feedback delay up to which the integrated fluid model settles at q*, per N.

Usage: python experiments/dcqcn_fluid.py [--t-end 0.2]   (about a minute of CPU)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_packet_dcqcn import (  # noqa: E402
    LINE,
    PARAMS,
    WIRE,
    _bottleneck,
    _q_star,
    fluid_fixed_point,
    fluid_queue,
    red,
)

CASES = ((2, 40), (4, 40), (8, 40), (16, 100), (32, 100), (64, 100))


def protocol_fixed_point(n: int, capacity: float, p=PARAMS) -> float:
    """p of the rate balance with DCQCN's own NP and RP (module docstring)."""
    rc = capacity / LINE / n
    tau, taup, timer_s, f = p.cnp_interval_s, p.alpha_interval_s, p.rp_timer_s, \
        p.fast_recovery_steps
    rai = p.rate_ai_bytes_s / WIRE
    firing = np.arange(1, 5000) * timer_s - tau          # k-th firing, after the holdoff

    def excess_increase(prob):
        mu = prob * rc
        lam = 1 / (tau + 1 / mu)
        alpha = lam * (tau + -np.expm1(-mu * (taup - tau)) / mu)
        survive = np.exp(-mu * np.maximum(firing, 0.0))   # no CNP before the k-th firing
        timer, ai = lam * survive.sum(), lam * survive[f - 1:].sum()
        return rai * ai * timer / lam - rc * alpha * lam

    lo, hi = 1e-7, 0.5
    for _ in range(200):
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if excess_increase(mid) > 0 else (lo, mid)
    return float(np.sqrt(lo * hi))


def settles(n: int, capacity: float, delay: float) -> bool:
    """Whether the integrated fluid model settles at q* (last quarter of 0.2 s within 2%)."""
    q_star = _q_star(fluid_fixed_point(n, capacity=capacity))
    q = fluid_queue(n, capacity, delay, t_end=0.2)[150_000:]
    return abs(q.mean() / q_star - 1) < 0.02 and q.std() < 0.02 * q_star


def critical_delay(n: int, capacity: float, lo: float = 1e-6, hi: float = 400e-6) -> float:
    """The feedback delay (s) past which the fluid model stops settling, by bisection to 5%
    (inf: it settles at ``hi`` too; 0: not even at ``lo``)."""
    if settles(n, capacity, hi):
        return float("inf")
    if not settles(n, capacity, lo):
        return 0.0
    while hi / lo > 1.05:
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if settles(n, capacity, mid) else (lo, mid)
    return float(np.sqrt(lo * hi))


def measure(n: int, gbps: float, t_end: float) -> dict:
    """The figures of one row (module docstring)."""
    cap = gbps * 1e9 / 8
    r, start = _bottleneck(n, cap, t_end), _bottleneck(n, cap, t_end / 3)
    late = r.sample_times >= t_end / 3
    got, st = r.flow_samples[late], r.sample_times[late]
    rate = (got[-1] - got[0]) / (st[-1] - st[0]) / (cap / n * PARAMS.mtu_bytes / LINE)
    p_star = fluid_fixed_point(n, capacity=cap)
    q_star = _q_star(p_star)
    rc, tau = cap / LINE / n, PARAMS.cnp_interval_s
    cnp_rate = (r.cnps - start.cnps) / (t_end - t_end / 3)

    def as_model(rate):                  # the p whose CNP rate the model says is ``rate``
        return 1 - (1 - tau * rate) ** (1 / (tau * rc))

    p_eff = float(np.mean(as_model(cnp_rate)))
    p_np = protocol_fixed_point(n, cap)
    p_np_cnps = 1 / (tau + 1 / (p_np * rc))             # the NP's CNP rate at p_np
    q = r.samples[late, 0]
    fluid = fluid_queue(n, cap, 4e-6 + min(q_star, PARAMS.kmax_bytes) / cap, 0.1)[50_000:]
    return {"n": n, "gbps": gbps, "rate_min": float(rate.min()), "rate_max": float(rate.max()),
            "p_star": p_star, "p_np": p_np, "p_np_cnps": float(as_model(p_np_cnps)), "p_eff": p_eff,
            "marks": float((r.marks[n] - start.marks[n]) / (r.packets[n] - start.packets[n])),
            "red_of_queue": float(red(q).mean()), "q_star": q_star,
            "fluid_mean": float(fluid.mean()), "fluid_std": float(fluid.std()),
            "q_mean": float(q.mean()), "q_std": float(q.std()),
            "empty": float(np.mean(q <= 0)), "above_kmax": float(np.mean(q > PARAMS.kmax_bytes))}


def row(m: dict) -> str:
    """One Markdown row of the docs table."""
    def rel(x, ref):
        return f"{x:.2e} ({x / ref - 1:+.0%})"
    return (f"| {m['n']} | {m['gbps']}G | {m['rate_min']:.3f}-{m['rate_max']:.3f} | "
            f"{m['p_star']:.2e} | {rel(m['p_np'], m['p_star'])}; "
            f"CNPs {m['p_np_cnps'] / m['p_star'] - 1:+.0%} | {rel(m['p_eff'], m['p_star'])} | "
            f"{rel(m['marks'], m['p_star'])} | {m['q_star'] / 1e3:.1f} | "
            f"{m['fluid_mean'] / 1e3:.1f} ± {m['fluid_std'] / 1e3:.1f} | "
            f"{m['q_mean'] / 1e3:.1f} ({m['q_mean'] / m['q_star'] - 1:+.0%}) | "
            f"{m['q_std'] / 1e3:.1f} | {m['empty']:.3f} | {m['above_kmax']:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--t-end", type=float, default=0.2)
    args = parser.parse_args()
    print("Critical feedback delay of the fluid model (bisection; the setup's delay: 4 us + "
          "q*/C):")
    for n, gbps in CASES:
        cap = gbps * 1e9 / 8
        q_star = _q_star(fluid_fixed_point(n, capacity=cap))
        print(f"  N = {n} at {gbps}G: settles up to {critical_delay(n, cap) * 1e6:.0f} us; "
              f"the setup's {(4e-6 + min(q_star, PARAMS.kmax_bytes) / cap) * 1e6:.1f} us",
              flush=True)
    print()
    print("| N | link | rate / fair share | p* (model) | p_np (protocol) | p_eff (CNPs) | "
          "mark fraction | q* KB | fluid queue KB | mean queue KB | queue std KB | "
          "time empty | time > Kmax |")
    print("|" + "---|" * 13)
    for n, gbps in CASES:
        print(row(measure(n, gbps, args.t_end)), flush=True)


if __name__ == "__main__":
    main()
