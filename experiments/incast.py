"""Incast at the last hop: N senders into one NIC port, through the packet engine (issue 18).

Setup: one HPN 7.0 segment (published: 128 hosts, 8 NICs of 2 x 200 Gb/s per host, 51.2T
ToRs), routed with ``hpn_dual_plane`` and forced onto port 0 so that every sender's flow ends
on the same ToR -> NIC port: the GPU of rail 0 on hosts 1..N each send ``SIZE`` bytes to the
GPU of rail 0 on host 0, all starting at once (the many-to-one of a parameter-server step,
a pipeline's gather, an all-to-all's worst receiver). Senders and receiver sit under the
same ToR (one rail), so the only congested hop is the ToR's downlink to the receiver.

Swept: N (2..32), DCQCN with the engine's default ConnectX firmware parameters, with SimAI's
shipped set, or off (PFC on in all three: a lossless RoCE fabric), the ToR's shared
buffer (8 MB .. 128 MB: SimAI's 32 MB default; 51.2T chips carry 100-160 MB by secondary
sources), and one lossy row per N (PFC off, no DCQCN: drops, recovered by go-back-N: a
NACK when a later packet arrives, the 1.07 s retransmission timeout when the tail was lost). Parameters otherwise the packet engine's
defaults (ConnectX DCQCN, SimAI's 400G ECN thresholds; docs/packet.md), none tuned.

Per run: completion time of the last sender against the ideal ``N S w / (C m)`` (the port
busy from the first to the last byte; w/m the wire bytes per payload byte), the last hop's
largest and mean queue, its ECN marks, the CNPs, PFC pauses sent and time paused on the
senders' ports and at the ToR's ingress, drops.

Writes ``incast.json`` and ``incast_queue.png`` (the last hop's queue over time, N = 16,
with and without DCQCN) into ``--out`` (default ``experiments/out/``) and prints the Markdown
table of docs/experiments.md. About a minute on 2 shared cores (``--quick``: N = 4, 16).

Usage: python experiments/incast.py [--out DIR] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from hpnsim.fabrics import hpn7
from hpnsim.packet import PacketParams, preset, simulate_paths
from hpnsim.routing import route

SIZE = 8 * 2**20                 # bytes per sender
SENDERS = (2, 4, 8, 16, 32)
BUFFERS_MB = (8, 32, 128)
#: DCQCN settings: the engine's default (ConnectX firmware), SimAI's shipped set, none
DCQCN = {"connectx": PacketParams(), "simai": preset("simai"), "off": PacketParams(cc=False)}


def incast(fabric, n: int, params: PacketParams, *, watch_queue: bool = False) -> dict:
    """One N-to-1 incast on ``fabric``: the figures of the module docstring."""
    gpus_per_host = fabric.gpus_per_host
    src = np.arange(1, n + 1) * gpus_per_host          # rail 0 of hosts 1..N
    dst = np.zeros(n, dtype=np.int64)                  # rail 0 of host 0
    paths = route(fabric, src, dst, "hpn_dual_plane", port=0)
    tier = np.asarray(fabric.node_tier)
    flows = [np.asarray(paths.links[paths.ptr[i]:paths.ptr[i + 1]]) for i in range(n)]
    last = int(next(k for k in flows[0][::-1] if tier[fabric.link_src[k]] >= 1))  # ToR->NIC
    first = [int(next(k for k in f if tier[fabric.link_dst[k]] >= 1)) for f in flows]
    cap = float(fabric.link_capacity[last])
    wire = (params.mtu_bytes + params.header_bytes + params.framing_bytes) / params.mtu_bytes
    ideal = n * SIZE * wire / cap
    start = time.perf_counter()
    r = simulate_paths(fabric, paths, SIZE, params=params, watch=[last] if watch_queue else (),
                       sample_interval=max(ideal / 2000, 1e-8), max_samples=20_000)
    out = {
        "senders": n, "cc": params.cc, "pfc": params.pfc, "buffer_MB": params.buffer_bytes / 1e6,
        "finish_ms": float(r.makespan) * 1e3 if np.isfinite(r.makespan) else None,
        "ideal_ms": ideal * 1e3, "slowdown": float(r.makespan / ideal),
        "q_max_MB": float(r.q_max[last]) / 1e6, "q_mean_MB": float(r.q_mean[last]) / 1e6,
        "marks": int(r.marks[last]), "cnps": int(r.cnps.sum()),
        "pauses": int(r.pauses.sum()), "senders_paused_ms": float(r.paused_time[first].sum()
                                                                   / n * 1e3),
        "drops": int(r.drops.sum()), "unfinished": int(np.isinf(r.finish).sum()),
        "rewinds": int(r.rewinds.sum()), "timeouts": int(r.timeouts.sum()),
        "resent_MB": float(r.resent.sum()) / 1e6,
        "events": int(r.events), "wall_s": round(time.perf_counter() - start, 2),
        "port": fabric.link_name(last)}
    if watch_queue:
        out["queue"] = {"time": r.sample_times.tolist(), "bytes": r.samples[:, 0].tolist()}
    return out


def sweep(senders, buffers, progress=print) -> list[dict]:
    fabric = hpn7(segments=1)
    rows = []
    for n in senders:
        for name, base in DCQCN.items():
            for mb in buffers:
                p = base.replace(buffer_bytes=mb * 1e6)
                rows.append({"dcqcn": name, **incast(fabric, n, p,
                                                     watch_queue=(n == 16 and mb == 32))})
                progress(_line(rows[-1]))
        lossy = PacketParams(cc=False, pfc=False, buffer_bytes=32e6)
        rows.append({"dcqcn": "off", **incast(fabric, n, lossy)})
        progress(_line(rows[-1]))
    return rows


def _line(row: dict) -> str:
    finish = f"{row['finish_ms']:.3f}" if row["finish_ms"] is not None else "never"
    return (f"N={row['senders']:2d} dcqcn={row['dcqcn']:8s} pfc={row['pfc']!s:5} buffer "
            f"{row['buffer_MB']:5.0f} MB: finish {finish} ms (ideal {row['ideal_ms']:.3f}), "
            f"q_max {row['q_max_MB']:.2f} MB, marks {row['marks']}, pauses {row['pauses']}, "
            f"drops {row['drops']}")


def markdown(rows: list[dict]) -> str:
    head = ("| N | DCQCN | PFC | buffer MB | finish ms | ideal ms | slowdown | last-hop q max MB "
            "| q mean MB | ECN marks | CNPs | PFC pauses | sender paused ms (mean) | drops "
            "| go-back-N rewinds / timeouts | resent MB |")
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        finish = f"{r['finish_ms']:.2f}" if r["finish_ms"] is not None else \
            f"never ({r['unfinished']} flows)"
        slowdown = f"{r['slowdown']:.2f}" if r["finish_ms"] is not None else "-"
        lines.append(f"| {r['senders']} | {r['dcqcn']} | "
                     f"{'on' if r['pfc'] else 'off'} | {r['buffer_MB']:.0f} | {finish} | "
                     f"{r['ideal_ms']:.2f} | {slowdown} | {r['q_max_MB']:.2f} | "
                     f"{r['q_mean_MB']:.2f} | {r['marks']} | {r['cnps']} | {r['pauses']} | "
                     f"{r['senders_paused_ms']:.2f} | {r['drops']} | "
                     f"{r['rewinds']} / {r['timeouts']} | {r['resent_MB']:.1f} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    from hpnsim.report.canvas import save
    from hpnsim.report.packet import queue_figure

    traced = [r for r in rows if "queue" in r]
    longest = max(traced, key=lambda r: len(r["queue"]["time"]))["queue"]["time"]
    # a run's samples stop when its last flow finishes: its queue is empty from then on
    queue = {"ports": [f"N={r['senders']}, DCQCN {r['dcqcn']}" for r in traced],
             "time": longest,
             "bytes": [r["queue"]["bytes"] + [0.0] * (len(longest) - len(r["queue"]["bytes"]))
                       for r in traced]}
    fig = queue_figure(queue, "Incast: the ToR's queue toward the receiver (32 MB buffer, "
                              "PFC on)")
    save(fig, path, dpi=150)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = sweep((4, 16) if args.quick else SENDERS, (32,) if args.quick else BUFFERS_MB)
    (out / "incast.json").write_text(json.dumps(
        {"size_per_sender": SIZE, "rows": [{k: v for k, v in r.items() if k != "queue"}
                                           for r in rows]}, indent=1))
    plot(rows, out / "incast_queue.png")
    print(markdown(rows))


if __name__ == "__main__":
    main()
