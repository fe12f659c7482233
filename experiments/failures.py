"""The shape of HPN's failure study: a LLaMA-7B job on 256 GPUs through an access-link failure
and through a flapping link, with a single ToR per rail and with HPN's non-stacked dual ToR.

Job: LLaMA-7B, TP8 x DP32 (32 hosts, one HPN 7.0 segment), global batch 256. Faults on the
access link of GPU 17 port 0 (host 2, rail 1):
- ``link 20s``: down at 3 s, repaired 20 s later (shorter than the 120 s collective timeout);
- ``link 150s``: down at 3 s, repaired 150 s later (longer than the timeout: a single-ToR job
  fails and restarts on a spare host; lost work counted from a checkpoint at t = 0);
- ``flap``: down 2 s every 5 s, 4 times from 3 s.
Designs: ``single`` (one ToR per rail, the NIC's two ports bonded to it, ECMP routing) and
``nonstacked`` (HPN: port p to the ToR of plane p, dual-plane routing; /32 withdrawal after
the 0.3 s convergence delay). Failover, timeout and restart take the defaults of
:mod:`hpnsim.faults` (sources there and in docs/failures.md).

Writes ``failures.json`` (per scenario and design: nominal and worst samples/s, time lost
against the fault-free run, restarts, lost work, the full timeline) and ``failures.png``
(throughput over time, one panel per scenario) into ``--out`` (default experiments/out/).

Usage: python experiments/failures.py [--out DIR] [--iterations 70] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from hpnsim.fabrics import hpn7
from hpnsim.faults.events import parse_fault
from hpnsim.faults.runner import JobPlan, simulate_with_faults
from hpnsim.report.faults import plot_failure_study
from hpnsim.training.job import TrainJob

DESIGNS = {"single ToR": ("single", "ecmp"),
           "non-stacked dual ToR (HPN)": ("nonstacked", "hpn_dual_plane")}


def scenarios(quick: bool) -> dict[str, str]:
    if quick:
        return {"link down 1 s": "link:gpu17.port0@0.5s+1s",
                "flap": "flap:gpu17.port0@0.5s+0.4s/1s*2"}
    return {"link down 20 s (repaired before the 120 s timeout)": "link:gpu17.port0@3s+20s",
            "link down 150 s (repaired after the 120 s timeout)": "link:gpu17.port0@3s+150s",
            "link flapping: down 2 s every 5 s, 4 times": "flap:gpu17.port0@3s+2s/5s*4"}


def run_case(design: str, routing: str, fault: str, iterations: int) -> dict:
    fabric = hpn7(segments=1, hosts_per_segment=32, backup_hosts=0, dual_tor=design)
    job = TrainJob("llama-7b", tp=8, dp=32, global_batch=256)
    plan = JobPlan("llama-7b", job, np.arange(256), iterations=iterations)
    [t] = simulate_with_faults(fabric, [plan], [parse_fault(fault)], routing=routing)
    out = t.to_dict()
    rates = [r["samples_per_s"] for r in t.rows]
    out.update(design=design, routing=routing, fault=fault, iterations=iterations,
               finish=t.finish, time_lost=t.finish - iterations * t.nominal,
               # a restart trains nothing from the failure until the job runs again
               worst_samples_per_s=0.0 if t.restarts else min(rates))
    out["worst_share_of_nominal"] = out["worst_samples_per_s"] / out["nominal_samples_per_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="experiments/out")
    parser.add_argument("--iterations", type=int, default=70)
    parser.add_argument("--quick", action="store_true", help="small smoke run (10 iterations)")
    args = parser.parse_args()
    iterations = 10 if args.quick else args.iterations
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, panels = {}, {}
    for name, fault in scenarios(args.quick).items():
        results[name], panels[name] = {}, {}
        for label, (design, routing) in DESIGNS.items():
            start = time.perf_counter()
            case = run_case(design, routing, fault, iterations)
            results[name][label] = case
            panels[name][label] = case
            print(f"{name:52s} {label:28s} nominal {case['nominal_samples_per_s']:7.1f} "
                  f"samples/s, worst {case['worst_share_of_nominal']:6.1%}, time lost "
                  f"{case['time_lost']:7.2f} s, restarts {len(case['restarts'])}, lost work "
                  f"{case['lost_work']:6.1f} s  ({time.perf_counter() - start:.0f} s)",
                  flush=True)
    (out / "failures.json").write_text(json.dumps(results, indent=1))
    figure = plot_failure_study(panels, out / "failures.png",
                                title="LLaMA-7B, 256 GPUs (TP8 x DP32): one access link of "
                                      "GPU 17 fails")
    print(f"wrote {out / 'failures.json'} and {figure}")


if __name__ == "__main__":
    main()
