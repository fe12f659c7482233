"""The HPN paper's 448-GPU all-reduce with NVLS-tree (what NCCL 2.18.3 runs across H800
hosts with NVSwitch) in both engines: the flow engine's max-min stages against the packet
engine's chunked NVLS-tree pipeline (issue 18: collectives/packet/tree.py).

Setup as ``experiments/hpn_paper.py`` (448 H800 GPUs, 56 hosts, NCCL's H800 parameters,
HPN 7.0 with dual-plane routing against DCN+ with ECMP, connection-hash seed 0), protocol
Simple. Packet parameters: the engine's defaults (ConnectX DCQCN, SimAI's 400G ECN/PFC) and
a plain set (no CC, ECN or PFC, unlimited buffers) that isolates the pipeline from congestion control. The
packet engine simulates chunks until the per-chunk time is steady (or all of them) and
extrapolates the rest; ``extrapolated`` says how much.

Writes ``hpn_paper_tree_packet.json`` into ``--out`` and prints one line per case, with
the CPU seconds of each packet run and its events per CPU second.

Usage: python experiments/hpn_paper_tree_packet.py [--out DIR] [--sizes 64M,1G]
                                                   [--max-packets 2e8]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hpn_paper import GPUS_448, NCCL, SYSTEMS, _kind  # noqa: E402

from hpnsim.collectives import run_collective  # noqa: E402
from hpnsim.collectives.packet.run import PacketRun, run_collective_packet  # noqa: E402
from hpnsim.errors import InputError  # noqa: E402
from hpnsim.packet import PacketParams  # noqa: E402
from hpnsim.units import parse_size  # noqa: E402

PARAMS = {"plain": PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=float("inf")),
          "connectx": PacketParams()}


def case(fabric, routing: str, size: float, max_packets: float) -> dict:
    options = dict(algo="nvlstree", protocol="simple", routing=routing, seed=0, nccl=NCCL)
    flow = run_collective(fabric, "allreduce", range(GPUS_448), size, **options)
    row = {"flow_ms": flow.time * 1e3, "flow_busbw": flow.busbw / 1e9,
           "flow_bottleneck": _kind(flow.bottleneck)}
    for name, params in PARAMS.items():
        start = time.process_time()
        try:
            pkt = run_collective_packet(fabric, "allreduce", range(GPUS_448), size,
                                        run=PacketRun(params=params, max_packets=max_packets,
                                                      max_watch=8), **options)
        except InputError as e:                 # recorded, as the CLI would print it
            row[name] = {"refused": f"{e.field}: {e.message}"}
            continue
        cpu = time.process_time() - start
        row[name] = {"ms": pkt.time * 1e3, "busbw": pkt.busbw / 1e9, "chunks": pkt.steps,
                     "chunks_simulated": pkt.steps_simulated,
                     "extrapolated": pkt.extrapolated, "stable": pkt.stable,
                     "ecn_marks": pkt.ecn_marks, "cnps": pkt.cnps,
                     "pfc_pauses": pkt.pfc_pauses, "drops": pkt.drops,
                     "q_max_MB": max((p["q_max"] for p in pkt.ports), default=0) / 1e6,
                     "bottleneck": _kind(pkt.bottleneck), "events": pkt.events,
                     "cpu_s": round(cpu, 2), "events_per_cpu_s": pkt.events / cpu}
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="experiments/out")
    ap.add_argument("--sizes", default="64M")
    ap.add_argument("--max-packets", type=float, default=2e8)
    ap.add_argument("--systems", default="HPN,DCN+")
    a = ap.parse_args(argv)
    rows = []
    for system in a.systems.split(","):
        build, routing = SYSTEMS[system]
        fabric = build()
        for size in (parse_size(s) for s in a.sizes.split(",")):
            row = {"system": system, "n_gpus": GPUS_448, "size": size,
                   **case(fabric, routing, size, a.max_packets)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "hpn_paper_tree_packet.json"
    if path.exists():
        path = out / f"hpn_paper_tree_packet.{int(time.time())}.json"
    path.write_text(json.dumps(rows, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
