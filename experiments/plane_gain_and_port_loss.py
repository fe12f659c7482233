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

Part 3, what the gain is made of (Appendix A's setup, QPs 1, default hashing): the single
plane's load ratio of the two ports into each NIC (the quantity of the paper's Fig. 13a, "3x"
on a production GPT-3 175B job) over the NICs, the busiest NIC port's utilization u on the
dual plane, and the busiest NIC port's utilization on the single plane. A NIC port can take at
most all of its NIC's bytes instead of half, so a single plane whose worst NIC hashes every
connection onto one port needs that port for 2u of the dual plane's time: the gain is then
2u / (that port's utilization) - 1, and the paper's +50-64% needs u near 0.75-0.82 on the
dual plane, whatever the hashes do.

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
from hpnsim.fabrics import LinkKind, NodeKind, hpn7  # noqa: E402
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


def _planes():
    """(fabric, routing) of the dual plane and of the single plane under ECMP."""
    return tuple((PLANES[name][0](), PLANES[name][1])
                 for name in ("dual plane", "single plane, ECMP"))


def _group(fabric, n: int):
    """Appendix A's ``n`` GPUs across two segments, and NCCL 2.18.3's algorithm for them."""
    gpus = two_segment_gpus(fabric, n)
    return (gpus, *nccl_2_18_algorithm(fabric, "allreduce", gpus, SIZE))


def plane_gain(seeds: int, qps_values, sizes, progress=print) -> list[dict]:
    """Dual over single-plane-ECMP gain per (GPUs, QPs, hashing variant), seed means."""
    (dual_fabric, dual_routing), (single_fabric, single_routing) = _planes()
    rows = []
    for n in sizes:
        gpus, algo, protocol = _group(dual_fabric, n)
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


def _run(fabric, routing, gpus, algo, protocol, seed):
    (r,) = run_together(fabric, [Together("allreduce", gpus.tolist(), SIZE,
                                          {"algo": algo, "protocol": protocol})],
                        routing=routing, seed=seed, nccl=NCCL)
    return r


def busiest(fabric, r, nic_ports: bool) -> float:
    """The busiest link's utilization over the collective's time, among NIC-ToR ports (both
    ways) or among switch-to-switch links."""
    nic = NodeKind.NIC
    ports = ((fabric.node_kind[fabric.link_src] == nic)
             | (fabric.node_kind[fabric.link_dst] == nic))
    switches = np.isin(fabric.link_kind, (LinkKind.UPLINK, LinkKind.CORE))
    mask = ports if nic_ports else switches & ~ports
    return float(np.max(r.link_bytes[mask] / (fabric.link_capacity[mask] * r.time)))


def gain_bound(seeds: int, sizes, progress=print) -> list[dict]:
    """Per GPU count (seed means): the single plane's port-load ratios into NICs (median and
    p90 over NICs, NICs with every connection on one port), the busiest NIC port's
    utilization on each plane, the gain, and ``two_u_minus_1``, the gain if the single
    plane's worst port took all its NIC's bytes and stayed busy throughout."""
    (dual_fabric, dual_routing), (single_fabric, single_routing) = _planes()
    rows = []
    for n in sizes:
        gpus, algo, protocol = _group(dual_fabric, n)
        dual = [_run(dual_fabric, dual_routing, gpus, algo, protocol, s) for s in range(seeds)]
        single = [_run(single_fabric, single_routing, gpus, algo, protocol, s)
                  for s in range(seeds)]
        u = float(np.mean([busiest(dual_fabric, r, True) for r in dual]))
        ratios = [r.port_imbalance["nic_receive"] for r in single]
        gain = float(np.mean([r.busbw for r in dual]) / np.mean([r.busbw for r in single]) - 1)
        row = {"gpus": n, "algo": algo, "dual_nic_port_utilization": u,
               "receive_ratio_p50": float(np.mean([x["p50"] for x in ratios])),
               "receive_ratio_p90": float(np.mean([x["p90"] for x in ratios])),
               "nics_all_on_one_port": float(np.mean([x["infinite"] for x in ratios])),
               "nics": int(ratios[0]["devices"]), "gain": gain,
               "two_u_minus_1": max(0.0, 2 * u - 1),
               "single_nic_port_utilization": float(np.mean([busiest(single_fabric, r, True)
                                                             for r in single])),
               "single_switch_link_utilization": float(np.mean(
                   [busiest(single_fabric, r, False) for r in single]))}
        rows.append(row)
        progress(f"bound {n:4d} GPUs: into-NIC port ratio p50 {row['receive_ratio_p50']:.2f} "
                 f"p90 {row['receive_ratio_p90']:.2f}, {row['nics_all_on_one_port']:.1f} of "
                 f"{row['nics']} NICs on one port; dual plane NIC ports at most "
                 f"{100 * u:.0f}% busy (2u - 1 = {100 * row['two_u_minus_1']:+.1f}%), gain "
                 f"{100 * gain:+.1f}%; single plane's busiest NIC port "
                 f"{100 * row['single_nic_port_utilization']:.0f}%, switch link "
                 f"{100 * row['single_switch_link_utilization']:.0f}%")
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
        bounds = gain_bound(1, (32, 256))
        losses = port_loss(6, (256, 1024))
    else:
        gains = plane_gain(3, (1, 2, 4), GPUS)
        bounds = gain_bound(3, GPUS)
        losses = port_loss(8, (256, 512, 1024))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "plane_gain_and_port_loss.json"
    path.write_text(json.dumps({"size": SIZE, "fault": FAULT, "plane_gain": gains,
                                "gain_bound": bounds, "port_loss": losses,
                                "published": {"gain": [0.50, 0.64], "port_loss": 0.0625},
                                "cpu_s": time.process_time() - start}, indent=1))
    print(f"wrote {path} ({time.process_time() - start:.0f} s CPU)")


if __name__ == "__main__":
    main()
