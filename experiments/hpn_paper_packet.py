"""The HPN paper's collective cases with both engines (issue 18, part 2): the flow engine
(max-min) and the packet engine (queues, ECN, PFC, DCQCN) on the same schedule and paths.

Setup as ``experiments/hpn_paper.py`` (H800 hosts, NCCL's H800 parameters, HPN 7.0 with
dual-plane routing against DCN+ with ECMP), with what the packet engine can run: NCCL rings.

- 448 GPUs, all-gather (NCCL 2.18.3 runs it as a ring) at 64 MiB, 1 GiB and 4 GiB, and
  all-reduce with the ring forced (the paper ran NVLS, which the packet engine does not
  model: the ring shows the network's behaviour under the paper's traffic volume).
- Appendix A: 4 GB ring all-reduce over 32..256 GPUs split across two segments, dual plane
  against single plane with ECMP.
- Multi-AllReduce: one ring all-reduce per rail (56 ranks each), the eight at once in one
  packet run (:func:`~hpnsim.collectives.packet.run.run_together_packet`), at 64 MiB and
  1 GiB (4 GiB is beyond the packet budget); the paper's NCCL chose tree for these sizes
  (docs/experiments.md), the packet engine runs rings.

The packet engine runs windowed (whole ring steps until the per-step time settles, the rest
extrapolated; ``extrapolated`` says how much); where the per-step time does not settle
(queues still growing behind an ECMP collision) the window stops at the ``--max-packets``
budget and the row says ``unsettled``. Packet parameters are the engine's defaults
(ConnectX DCQCN, SimAI's 400G ECN and PFC settings), and SimAI's shipped set for
comparison; none tuned to the paper. One connection-hash seed (0).

Writes ``hpn_paper_packet.json`` into ``--out`` and prints the Markdown table of
docs/experiments.md. ``--quick``: 64 MiB only and two Appendix A sizes.

Usage: python experiments/hpn_paper_packet.py [--out DIR] [--quick] [--max-packets 3e7]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hpn_paper import GPUS_448, NCCL, PLANES, SYSTEMS, _kind  # noqa: E402
from hpn_vs_clos_collectives import two_segment_gpus  # noqa: E402

from hpnsim.collectives import run_collective  # noqa: E402
from hpnsim.collectives.packet.run import (  # noqa: E402
    PacketRun,
    run_collective_packet,
    run_together_packet,
)
from hpnsim.collectives.planning.concurrent import Together, rail_groups, run_together, slowest  # noqa: E402,E501
from hpnsim.packet import PacketParams, preset  # noqa: E402

PARAMS = {"connectx": PacketParams(), "simai": preset("simai")}


def both(fabric, routing: str, op: str, gpus, size: float, max_packets: float,
         rails: bool = False) -> dict:
    """One case with the flow engine and the packet engine under each parameter set
    (``rails``: one collective per rail of ``gpus``, all together)."""
    options = dict(algo="ring", protocol="simple", routing=routing, seed=0, nccl=NCCL)
    start = time.perf_counter()
    if rails:
        groups = [g.tolist() for g in rail_groups(np.asarray(list(gpus)), 8)]
        flow = slowest(run_together(fabric, [Together(op, g, size, {"algo": "ring",
                                                                    "protocol": "simple"})
                                             for g in groups], routing=routing, seed=0,
                                    nccl=NCCL))
    else:
        flow = run_collective(fabric, op, gpus, size, **options)
    row = {"flow_busbw": flow.busbw / 1e9, "flow_bottleneck": _kind(flow.bottleneck),
           "hash_collisions": flow.hash_collisions, "flow_s": round(time.perf_counter() - start,
                                                                    2)}
    for name, params in PARAMS.items():
        start = time.perf_counter()
        run = PacketRun(params=params, max_packets=max_packets, max_watch=8)
        pkt = (run_together_packet(fabric, op, groups, size, run=run, **options) if rails
               else run_collective_packet(fabric, op, gpus, size, run=run, **options))
        row[name] = {"busbw": pkt.busbw / 1e9, "steps": pkt.steps,
                     "steps_simulated": pkt.steps_simulated, "extrapolated": pkt.extrapolated,
                     "stable": pkt.stable, "ecn_marks": pkt.ecn_marks, "cnps": pkt.cnps,
                     "pfc_pauses": pkt.pfc_pauses, "paused_ms": pkt.paused_time * 1e3,
                     "q_max_MB": max((p["q_max"] for p in pkt.ports), default=0) / 1e6,
                     "bottleneck": _kind(pkt.bottleneck), "events": pkt.events,
                     "seconds": round(time.perf_counter() - start, 2)}
    return row


def run(quick: bool, max_packets: float, progress=print) -> list[dict]:
    rows = []
    sizes = (2.0**26,) if quick else (2.0**26, 2.0**30, 2.0**32)
    for system, (build, routing) in SYSTEMS.items():
        fabric = build()
        for op, label in (("allgather", "all-gather"), ("allreduce", "all-reduce (ring)")):
            for size in (sizes if op == "allgather" else sizes[-1:]):
                row = {"case": label, "system": system, "n_gpus": GPUS_448, "size": size,
                       **both(fabric, routing, op, range(GPUS_448), size, max_packets)}
                rows.append(row)
                progress(_line(row))
        for size in sizes[:2]:
            row = {"case": "Multi-AllReduce (ring)", "system": system, "n_gpus": GPUS_448,
                   "size": size, **both(fabric, routing, "allreduce", range(GPUS_448), size,
                                        max_packets, rails=True)}
            rows.append(row)
            progress(_line(row))
    for n in ((32, 128) if quick else (32, 64, 128, 256)):
        for variant in ("dual plane", "single plane, ECMP"):
            build, routing = PLANES[variant]
            fabric = build()
            gpus = two_segment_gpus(fabric, n).tolist()
            row = {"case": "Appendix A all-reduce (ring)", "system": f"HPN {variant}",
                   "n_gpus": n, "size": 4e9,
                   **both(fabric, routing, "allreduce", gpus, 4e9, max_packets)}
            rows.append(row)
            progress(_line(row))
    return rows


def _cell(p: dict) -> str:
    settled = f"{100 * p['extrapolated']:.0f}% extrap." if p["stable"] else \
        f"unsettled, {p['steps_simulated']}/{p['steps']} steps"
    return f"{p['busbw']:.1f} ({settled})"


def _line(row: dict) -> str:
    return (f"{row['case']:28s} {row['system']:24s} {row['n_gpus']:4d} GPUs "
            f"{row['size'] / 2**20:8.0f} MiB: flow {row['flow_busbw']:6.1f}, packet connectx "
            f"{_cell(row['connectx'])}, simai {_cell(row['simai'])}")


def markdown(rows: list[dict]) -> str:
    lines = ["| case | system | GPUs | size | flow busbw | packet busbw, ConnectX DCQCN | "
             "packet busbw, SimAI set | marks / CNPs / PFC pauses (ConnectX) | max queue MB | "
             "collisions | bottleneck (flow / packet) |", "|" + "---|" * 11]
    for r in rows:
        c = r["connectx"]
        size = f"{r['size'] / 2**30:g} GiB" if r["size"] >= 2**30 else \
            f"{r['size'] / 2**20:g} MiB"
        if r["size"] == 4e9:
            size = "4 GB"
        lines.append(f"| {r['case']} | {r['system']} | {r['n_gpus']} | {size} | "
                     f"{r['flow_busbw']:.1f} | {_cell(c)} | {_cell(r['simai'])} | "
                     f"{c['ecn_marks']} / {c['cnps']} / {c['pfc_pauses']} | "
                     f"{c['q_max_MB']:.2f} | {r['hash_collisions']} | "
                     f"{r['flow_bottleneck']} / {c['bottleneck']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/out")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--max-packets", type=float, default=3e7)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = run(args.quick, args.max_packets)
    (out / "hpn_paper_packet.json").write_text(json.dumps(
        {"seconds": round(time.perf_counter() - start, 1), "rows": rows}, indent=1))
    print(markdown(rows))


if __name__ == "__main__":
    main()
