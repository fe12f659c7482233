"""DCN+ as a RoCE Clos under its own load (issue 30, item 3): what sets the time of the HPN
paper's 448-GPU collectives on DCN+ (ECMP collisions, DCQCN rate cuts, PFC pauses,
head-of-line blocking), with the packet engine's counters beside the flow engine, and where
DCQCN's rate cuts are absorbed when the ECN thresholds are lowered.

Part A, the paper's scale (``experiments/hpn_paper.py``'s setup: 448 H800 GPUs, NCCL's H800
parameters, DCN+ ``dcn_plus(pods=1)`` under ECMP, HPN 7.0 ``hpn7(segments=2)`` under its
dual-plane routing, seed 0): the Multi-AllReduce (8 rail rings together, Simple) and the
all-gather ring at 1 GiB, both engines; on DCN+ the Multi-AllReduce also without NCCL's slot
bound (``slots`` None: a sender may run any number of chunks ahead of its receiver) to see
whether consecutive ring steps pile up at a collided port.

Part B, the ECN thresholds: a 32-GPU ring all-reduce of 256 MiB on a small DCN+ with 1:1
200G ToR uplinks (``dcn_plus(segments=2, hosts_per_segment=2, tor_uplinks=2,
aggs_per_pod=2, uplink_speed="200G")``, ECMP seed 1: the hash stacks ring flows on uplinks),
ECN at Kmin = Kmax = 5 MB against Kmin 300 KB / Kmax 600 KB (Pmax 0.2), under ConnectX's
DCQCN (byte counter 32,767 B, rate-increase timer 300 us), the same with the DCQCN paper's
10 MB byte counter (recovery by the timer alone), and no congestion control. Per run: network
time against the flow engine's, ECN marks, CNPs, PFC pauses, the lowest QP rate at the end.

Part C, what the engine may lack for part B's comparison with operators' reports, one
mechanism at a time on part B's ring at both thresholds: where the switch marks (enqueue,
the engine before; dequeue, switch ASICs) and ConnectX's fast-recovery count F (5, the
engine before; 1, the firmware default), each alone and together. Part D, traffic with
slack: ring all-reduces of 4-64 MiB on part B's fabric (NCCL's 512 KiB chunks, 8 slots),
both engines, at both thresholds, the engine before against the defaults now.

Writes ``dcn_congestion.json`` into ``--out`` (default ``experiments/out/``) and prints the
Markdown tables of docs/experiments.md. Several minutes on 2 shared cores; ``--quick``: part B
only.

Usage: python experiments/dcn_congestion.py [--out DIR] [--quick] [--part a|b|c|d|both]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hpn_paper import GPUS_448, NCCL, SYSTEMS  # noqa: E402

from hpnsim.collectives import run_collective  # noqa: E402
from hpnsim.collectives.packet.run import (  # noqa: E402
    PacketRun,
    run_collective_packet,
    run_together_packet,
)
from hpnsim.collectives.planning.concurrent import Together, rail_groups, run_together, slowest  # noqa: E402,E501
from hpnsim.fabrics import dcn_plus  # noqa: E402
from hpnsim.packet import PacketParams  # noqa: E402

GIB = 2**30


def _port_kind(name: str) -> str:
    a, b = name.split("->")[:2]
    kind = lambda x: "nic" if "nic" in x else "tor" if "tor" in x else "agg" if "agg" in x \
        else "core" if "core" in x else "gpu"                                  # noqa: E731
    return f"{kind(a)}-{kind(b)}"


def _packet_row(r) -> dict:
    top = r.ports[0] if r.ports else {"port": "-", "q_max": 0.0, "marks": 0, "pauses": 0}
    return {"busbw": r.busbw / 1e9, "network_ms": r.network_time * 1e3,
            "steps": f"{r.steps_simulated}/{r.steps:g}", "stable": bool(r.stable),
            "ecn_marks": int(r.ecn_marks), "cnps": int(r.cnps), "pfc_pauses": int(r.pfc_pauses),
            "paused_ms": r.paused_time * 1e3, "fullest_port": top["port"],
            "fullest_kind": _port_kind(top["port"]) if "->" in top["port"] else "-",
            "q_max_MB": top["q_max"] / 1e6, "bottleneck": r.bottleneck, "events": r.events}


def part_a(progress=print) -> list[dict]:
    rows = []
    groups = [g.tolist() for g in rail_groups(np.arange(GPUS_448), 8)]
    for system, (build, routing) in SYSTEMS.items():
        fabric = build()
        options = dict(algo="ring", routing=routing, seed=0, nccl=NCCL)
        flow = slowest(run_together(fabric, [Together("allreduce", g, GIB, {"algo": "ring"})
                                             for g in groups], routing=routing, seed=0,
                                    nccl=NCCL))
        for slots in ((8, None) if system == "DCN+" else (8,)):
            start = time.process_time()
            r = run_together_packet(fabric, "allreduce", groups, GIB,
                                    run=PacketRun(max_packets=1e9, slots=slots, max_watch=8),
                                    **options)
            rows.append({"case": "Multi-AllReduce (ring)", "system": system, "slots": slots,
                         "flow_busbw": flow.busbw / 1e9, "flow_bottleneck": flow.bottleneck,
                         "collisions": flow.hash_collisions, **_packet_row(r),
                         "cpu_s": round(time.process_time() - start, 1)})
            progress(rows[-1])
        flow = run_collective(fabric, "allgather", range(GPUS_448), GIB, **options)
        start = time.process_time()
        r = run_collective_packet(fabric, "allgather", range(GPUS_448), GIB,
                                  run=PacketRun(max_packets=1e9, max_watch=8), **options)
        rows.append({"case": "all-gather (ring)", "system": system, "slots": 8,
                     "flow_busbw": flow.busbw / 1e9, "flow_bottleneck": flow.bottleneck,
                     "collisions": flow.hash_collisions, **_packet_row(r),
                     "cpu_s": round(time.process_time() - start, 1)})
        progress(rows[-1])
    return rows


#: part B: ECN thresholds (Kmin, Kmax) and DCQCN variants
ECN = {"5 MB": (5e6, 5e6), "300/600 KB": (300e3, 600e3)}
DCQCN = {"ConnectX (byte counter 32 KB)": {},
         "ConnectX, byte counter 10 MB (timer recovery)": {"byte_counter_bytes": 10e6},
         "no CC (PFC only)": {"cc": False}}


def part_b(progress=print) -> list[dict]:
    """256 MiB at both ECN thresholds under each DCQCN variant (:func:`_rows`)."""
    return _rows((2**28,), DCQCN, progress)


#: part C: what the engine may lack, one mechanism at a time (issue 30 item 3): where the
#: switch marks (PacketParams.ecn_mark_at) and ConnectX's fast-recovery count F
#: (fast_recovery_steps); "engine before" is the engine of the part-B re-measurement
MECHANISMS = {
    "engine before (enqueue marking, F = 5)": {"ecn_mark_at": "enqueue",
                                               "fast_recovery_steps": 5},
    "dequeue marking, F = 5": {"ecn_mark_at": "dequeue", "fast_recovery_steps": 5},
    "enqueue marking, F = 1": {"ecn_mark_at": "enqueue", "fast_recovery_steps": 1},
    "dequeue marking, F = 1 (defaults now)": {},
    "defaults now, byte counter 10 MB (timer recovery)": {"byte_counter_bytes": 10e6},
    "no CC (PFC only)": {"cc": False},
}
#: part D: mid-size all-reduces (NCCL's 512 KiB chunks, 8 slots), both engines
SWEEP_MIB = (4, 8, 16, 32, 64)
SWEEP = {"engine before (enqueue marking, F = 5)": MECHANISMS[
             "engine before (enqueue marking, F = 5)"],
         "defaults now (dequeue marking, F = 1)": {}}


def _part_b_fabric():
    return dcn_plus(segments=2, hosts_per_segment=2, tor_uplinks=2, aggs_per_pod=2,
                    uplink_speed="200G")


def _rows(sizes, variants, progress) -> list[dict]:
    f, gpus, rows = _part_b_fabric(), range(32), []
    for size in sizes:
        flow = run_collective(f, "allreduce", gpus, size, algo="ring", seed=1)
        for ecn, (kmin, kmax) in ECN.items():
            for name, extra in variants.items():
                params = PacketParams(kmin_bytes=kmin, kmax_bytes=kmax, **extra)
                start = time.process_time()
                r = run_collective_packet(f, "allreduce", gpus, size, algo="ring", seed=1,
                                          run=PacketRun(params=params, max_packets=1e9))
                rows.append({"size_MiB": size / 2**20, "ecn": ecn, "dcqcn": name,
                             "flow_network_ms": (flow.time - r.nccl_latency) * 1e3,
                             "flow_bottleneck": flow.bottleneck, **_packet_row(r),
                             "cpu_s": round(time.process_time() - start, 1)})
                progress(rows[-1])
    return rows


def part_c(progress=print) -> list[dict]:
    """Part B's 256 MiB ring at both thresholds, one mechanism at a time."""
    return _rows([2**28], MECHANISMS, progress)


def part_d(progress=print) -> list[dict]:
    """Mid-size ring all-reduces on part B's fabric at both thresholds."""
    return _rows([m * 2**20 for m in SWEEP_MIB], SWEEP, progress)


def markdown_cd(rows: list[dict]) -> str:
    lines = ["| size | ECN Kmin/Kmax | DCQCN | flow ms | packet ms | vs flow | marks | CNPs | "
             "PFC pauses | paused ms | fullest port (kind, MB) |", "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['size_MiB']:g} MiB | {r['ecn']} | {r['dcqcn']} | "
                     f"{r['flow_network_ms']:.3f} | {r['network_ms']:.3f} | "
                     f"{r['network_ms'] / r['flow_network_ms']:.3f} | {r['ecn_marks']:,} | "
                     f"{r['cnps']:,} | {r['pfc_pauses']:,} | {r['paused_ms']:.2f} | "
                     f"{r['fullest_kind']}, {r['q_max_MB']:.2f} |")
    return "\n".join(lines)


def markdown(a: list[dict], b: list[dict]) -> str:
    lines = []
    if a:
        lines += ["| case | system | slots | flow busbw | packet busbw | steps | marks / CNPs / "
                  "pauses | paused ms | fullest port (kind, MB) | bottleneck flow / packet |",
                  "|" + "---|" * 10]
        for r in a:
            lines.append(f"| {r['case']} | {r['system']} | {r['slots'] or 'unbounded'} | "
                         f"{r['flow_busbw']:.1f} | {r['busbw']:.1f} | {r['steps']} | "
                         f"{r['ecn_marks']:,} / {r['cnps']:,} / {r['pfc_pauses']:,} | "
                         f"{r['paused_ms']:.2f} | {r['fullest_kind']}, {r['q_max_MB']:.2f} | "
                         f"{_port_kind(r['flow_bottleneck'])} / {_port_kind(r['bottleneck'])} |")
        lines.append("")
    lines += ["| ECN Kmin/Kmax | DCQCN | flow ms | packet ms | vs flow | marks | CNPs | PFC "
              "pauses | paused ms | fullest port (kind, MB) |", "|" + "---|" * 10]
    for r in b:
        lines.append(f"| {r['ecn']} | {r['dcqcn']} | {r['flow_network_ms']:.3f} | "
                     f"{r['network_ms']:.3f} | {r['network_ms'] / r['flow_network_ms']:.3f} | "
                     f"{r['ecn_marks']:,} | {r['cnps']:,} | {r['pfc_pauses']:,} | "
                     f"{r['paused_ms']:.2f} | {r['fullest_kind']}, {r['q_max_MB']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/out")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part", choices=("a", "b", "c", "d", "both"), default="both")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    show = lambda row: print(json.dumps(row, default=str), flush=True)     # noqa: E731
    if args.part in ("c", "d"):
        rows = (part_c if args.part == "c" else part_d)(show)
        (out / f"dcn_congestion_{args.part}.json").write_text(json.dumps(
            {"seconds": round(time.perf_counter() - start, 1), f"part_{args.part}": rows},
            indent=1, default=str))
        print(markdown_cd(rows))
        return
    b = part_b(show) if args.part != "a" else []
    a = part_a(show) if args.part != "b" and not args.quick else []
    name = "dcn_congestion.json" if args.part == "both" else f"dcn_congestion_{args.part}.json"
    (out / name).write_text(json.dumps(
        {"seconds": round(time.perf_counter() - start, 1), "part_a": a, "part_b": b},
        indent=1, default=str))
    print(markdown(a, b))


if __name__ == "__main__":
    main()
