"""What the dual- over single-plane gain and a dead NIC port's cost depend on (issue 30, item 4).

Part 1, Appendix A's gain (setup of experiments/hpn_paper.py: 4 GB all-reduce over 32-256
H800 GPUs split across two segments, NCCL 2.18.3's algorithm choice, flow engine): the gain of
HPN's dual plane over the single plane under ECMP, as each mechanism the gain rests on is
varied: the number of QPs per connection (``NCCL_IB_QPS_PER_CONNECTION``, each QP its own UDP
source port and so its own hash), the hash functions and seeds of the ToR and Agg tiers
(defaults: CRC32 low and high halves with per-switch seeds; ``polarized``: the same CRC32 low
half at both tiers and one seed for every switch, so the tiers' choices correlate), the
NIC's bond hash (default XOR fold; ``bond crc16``), and the hash seed of the connections
(three seeds per case).

Part 2, a dead NIC port under the non-stacked dual ToR (setup of experiments/failure_lag.py:
LLaMA-7B TP8 x DP32 on one HPN segment of 32 hosts, GPU 17's port 0 down from 1 s on, the
driver's LAG ``balanced``): the throughput the job keeps once routing has moved the
connections (its last iteration's), as what
the iteration overlaps varies: the global batch (compute per iteration against the same
gradient all-reduce) and whether the gradient buckets reduce behind the backward pass
(``overlap_grad_reduce``).

Writes ``plane_gain_and_port_loss.json`` into ``--out`` (default experiments/out/) and prints
tables. Nothing here is fitted to the paper's figures; they are printed beside the results.

Usage: python experiments/plane_gain_and_port_loss.py [--out DIR] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hpn_paper import NCCL, PLANES, nccl_2_18_algorithm  # noqa: E402
from hpn_vs_clos_collectives import two_segment_gpus  # noqa: E402

from hpnsim.collectives.planning.concurrent import Together, run_together  # noqa: E402
from hpnsim.fabrics import hpn7  # noqa: E402
from hpnsim.faults.events import parse_fault  # noqa: E402
from hpnsim.faults.runner import JobPlan, simulate_with_faults  # noqa: E402
from hpnsim.training.job import TrainJob  # noqa: E402

SIZE = 4e9
GPUS = (32, 64, 128, 256)
#: hashing variants of the single plane: name -> routing options
HASHING = {"defaults": {},
           "polarized": {"hash_tor": "crc32_lo", "hash_agg": "crc32_lo", "seed_mode": "same"},
           "bond crc16": {"hash_nic": "crc16"}}
#: down from 1 s for longer than the run: every iteration after the reroute runs degraded
FAULT = "link:gpu17.port0@1s+1000s"


def _busbw(fabric, routing, gpus, algo, protocol, qps, options, seed) -> float:
    (r,) = run_together(fabric, [Together("allreduce", gpus.tolist(), SIZE,
                                          {"algo": algo, "protocol": protocol, "qps": qps,
                                           "routing_options": options})],
                        routing=routing, seed=seed, nccl=NCCL)
    return r.busbw / 1e9


def plane_gain(seeds: int, qps_values, sizes, progress=print) -> list[dict]:
    """Dual over single-plane-ECMP gain per (GPUs, QPs, hashing variant), seed means."""
    dual_fabric, dual_routing = PLANES["dual plane"][0](), PLANES["dual plane"][1]
    single_fabric, single_routing = (PLANES["single plane, ECMP"][0](),
                                     PLANES["single plane, ECMP"][1])
    rows = []
    for n in sizes:
        gpus = two_segment_gpus(dual_fabric, n)
        algo, protocol = nccl_2_18_algorithm(dual_fabric, "allreduce", gpus, SIZE)
        for qps in qps_values:
            dual = np.mean([_busbw(dual_fabric, dual_routing, gpus, algo, protocol, qps, {}, s)
                            for s in range(seeds)])
            for name, options in HASHING.items():
                single = [_busbw(single_fabric, single_routing, gpus, algo, protocol, qps,
                                 options, s) for s in range(seeds)]
                row = {"gpus": n, "algo": algo, "qps": qps, "hashing": name,
                       "dual_GBps": float(dual), "single_GBps": float(np.mean(single)),
                       "single_range": [float(min(single)), float(max(single))],
                       "gain": float(dual / np.mean(single) - 1)}
                rows.append(row)
                progress(f"gain {n:4d} GPUs qps {qps} {name:9s} dual {dual:6.1f} single "
                         f"{np.mean(single):6.1f} GB/s -> {100 * row['gain']:+.1f}%")
    return rows


def port_loss(iterations: int, batches, progress=print) -> list[dict]:
    """Throughput kept with one NIC port down, per (global batch, overlap_grad_reduce)."""
    fabric = hpn7(segments=1, hosts_per_segment=32, backup_hosts=0, dual_tor="nonstacked")
    rows = []
    for batch in batches:
        for overlap in (True, False):
            job = TrainJob("llama-7b", tp=8, dp=32, global_batch=batch,
                           overlap_grad_reduce=overlap)
            plan = JobPlan("llama-7b", job, np.arange(256), iterations=iterations)
            [t] = simulate_with_faults(fabric, [plan], [parse_fault(FAULT)],
                                       routing="hpn_dual_plane",
                                       routing_options={"lag": "balanced"})
            last = t.rows[-1]["samples_per_s"]
            row = {"global_batch": batch, "overlap_grad_reduce": overlap,
                   "nominal_s": float(t.nominal), "kept": float(last * t.nominal / batch)}
            rows.append(row)
            progress(f"port down: batch {batch:5d} overlap {overlap!s:5s} iteration "
                     f"{t.nominal:.3f} s, keeps {100 * row['kept']:.1f}%")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "out"))
    parser.add_argument("--quick", action="store_true",
                        help="32 and 256 GPUs, one seed, QPs 1 and 4; batches 256 and 1024")
    args = parser.parse_args()
    start = time.process_time()
    if args.quick:
        gains = plane_gain(1, (1, 4), (32, 256))
        losses = port_loss(6, (256, 1024))
    else:
        gains = plane_gain(3, (1, 2, 4), GPUS)
        losses = port_loss(8, (256, 512, 1024))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "plane_gain_and_port_loss.json"
    path.write_text(json.dumps({"size": SIZE, "fault": FAULT, "plane_gain": gains,
                                "port_loss": losses,
                                "published": {"gain": [0.50, 0.64], "port_loss": 0.0625},
                                "cpu_s": time.process_time() - start}, indent=1))
    print(f"wrote {path} ({time.process_time() - start:.0f} s CPU)")


if __name__ == "__main__":
    main()
