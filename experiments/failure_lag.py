"""HPN's failure study under each way a bonded NIC puts its QPs on its ports (docs/failures.md).

Setup (as experiments/failures.py): one HPN 7.0 segment of 32 hosts, non-stacked dual ToR,
dual-plane routing, NCCL 2.18.3 defaults (one QP per connection, one ring channel per NIC
port); the access link of GPU 17's port 0 goes down. For each LAG mode
(:class:`hpnsim.routing.lag.LagMode`):

- the DP ring alone (rail 1 of the 32 hosts, 1 GiB all-reduce, ring, Simple) in the flow
  engine and the packet engine (windowed; ConnectX DCQCN, SimAI's ECN/PFC), healthy and
  with the port down;
- LLaMA-7B TP8 x DP32 (global batch 256) through the link going down 3 s in for 20 s: its
  nominal throughput and the throughput it keeps once routing has moved the connections.

Writes ``failure_lag.json`` into ``--out`` (default experiments/out/) and prints a table.

Usage: python experiments/failure_lag.py [--out DIR] [--iterations 40] [--no-packet]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from hpnsim.collectives.packet.run import run_collective_packet
from hpnsim.collectives.planning.run import run_collective
from hpnsim.fabrics import FabricState, hpn7
from hpnsim.faults.events import parse_fault
from hpnsim.faults.runner import JobPlan, simulate_with_faults
from hpnsim.routing.lag import LagMode
from hpnsim.training.job import TrainJob

GPU, PORT = 17, 0
FAULT = f"link:gpu{GPU}.port{PORT}@3s+20s"


def ring_case(fabric, mode: LagMode, packet: bool) -> dict:
    ring = list(range(GPU % 8, fabric.n_gpus, 8))          # the degraded GPU's rail
    link = int(fabric.gpu_access_link[GPU, PORT])
    down = FabricState(fabric).set_down([link, link ^ 1])
    kw = dict(algo="ring", protocol="simple", routing="hpn_dual_plane",
              routing_options={"lag": mode.value})
    out = {}
    for name, state in (("healthy", None), ("degraded", down)):
        out[f"flow_{name}"] = run_collective(fabric, "allreduce", ring, 2**30, state=state,
                                             **kw).busbw
        if packet:
            r = run_collective_packet(fabric, "allreduce", ring, 2**30, state=state, **kw)
            out[f"packet_{name}"] = r.busbw
            out[f"packet_{name}_marks_pauses_drops"] = [int(r.ecn_marks), int(r.pfc_pauses),
                                                         int(r.drops)]
    return out


def job_case(fabric, mode: LagMode, iterations: int) -> dict:
    job = TrainJob("llama-7b", tp=8, dp=32, global_batch=256)
    plan = JobPlan("llama-7b", job, np.arange(256), iterations=iterations)
    [t] = simulate_with_faults(fabric, [plan], [parse_fault(FAULT)], routing="hpn_dual_plane",
                               routing_options={"lag": mode.value})
    rates = [r["samples_per_s"] for r in t.rows]
    return {"nominal_samples_per_s": 256 / t.nominal, "last_samples_per_s": rates[-1],
            "worst_samples_per_s": min(rates), "kept": rates[-1] * t.nominal / 256}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "out"))
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--no-packet", action="store_true")
    args = parser.parse_args()
    fabric = hpn7(segments=1, hosts_per_segment=32, backup_hosts=0, dual_tor="nonstacked")
    results = {}
    for mode in LagMode:
        start = time.process_time()
        results[mode.value] = {"ring": ring_case(fabric, mode, not args.no_packet),
                               "job": job_case(fabric, mode, args.iterations),
                               "cpu_s": None}
        results[mode.value]["cpu_s"] = time.process_time() - start
        r, j = results[mode.value]["ring"], results[mode.value]["job"]
        print(f"{mode.value:15s} ring flow {r['flow_healthy'] / 1e9:6.2f} -> "
              f"{r['flow_degraded'] / 1e9:6.2f} GB/s"
              + (f", packet {r['packet_healthy'] / 1e9:6.2f} -> "
                 f"{r['packet_degraded'] / 1e9:6.2f} GB/s" if "packet_healthy" in r else "")
              + f"; job {j['nominal_samples_per_s']:.1f} samples/s nominal, keeps "
                f"{100 * j['kept']:.1f}% (worst {j['worst_samples_per_s']:.1f})", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "failure_lag.json"
    path.write_text(json.dumps({"fault": FAULT, "iterations": args.iterations,
                                "results": results}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
