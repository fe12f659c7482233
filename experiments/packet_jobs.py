"""A small training job through both engines, on HPN and on DCN+ (issue 18, part 2):
the iteration's task graph under max-min sharing (flow engine) and as packets (queues, ECN,
PFC, DCQCN), on the same placement, routing and NCCL schedule.

Setup: BERT-large (catalog), data parallel over 32 GPUs = 4 H800 hosts in 2 segments
(hosts 0-1 in segment 0, 2-3 in segment 1), global batch 128, bf16, every other option the
default (gradient buckets overlapped with the backward, NCCL's H800 parameters, ``algo:
auto``). Fabrics of the same shape: HPN 7.0 (``hpn7``, 2 segments of 2 hosts, dual-plane
routing) and DCN+ (``dcn_plus``, 2 segments of 2 hosts, 2 ToR uplinks of 200G per ToR, 2
Aggs per pod: 1:1, as docs/packet.md's collision example) with ECMP, hash seed 0. Packet
parameters: the engine's defaults (ConnectX DCQCN, SimAI's 400G ECN, PFC), SimAI's shipped
set, and congestion control, ECN and PFC off with an unlimited buffer (what is left is FIFO
queueing). Nothing is tuned.

Prints the Markdown table of docs/packet.md ("A training job as packets") and writes
``packet_jobs.json`` into ``--out``.

Usage: python experiments/packet_jobs.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

FABRICS = {
    "HPN (hpn7, dual plane)": ({"template": "hpn7", "segments": 2, "hosts_per_segment": 2,
                                "backup_hosts": 0}, "hpn_dual_plane"),
    "DCN+ (1:1 ToR uplinks, ECMP)": ({"template": "dcn_plus", "segments": 2,
                                      "hosts_per_segment": 2, "tor_uplinks": 2,
                                      "aggs_per_pod": 2, "uplink_speed": "200G"}, "ecmp"),
}
JOB = {"model": "bert-large", "dp": 32, "global_batch": 128, "gpu": "h800"}


def _params_file(folder: Path, name: str, text: str) -> str:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def main() -> None:
    from hpnsim.scenario.runner import run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/out")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    params = Path(tempfile.mkdtemp(prefix="packet_jobs_"))     # the parameter files
    engines = {
        "flow (max-min)": None,
        "packets: no CC, ECN, PFC; unlimited buffer": {
            "kind": "packet", "max_packets": 1e8, "params": _params_file(
                params, "packet_plain", "cc: false\necn: false\npfc: false\nbuffer_bytes: .inf\n")},
        "packets: SimAI's DCQCN set + PFC": {
            "kind": "packet", "max_packets": 1e8,
            "params": _params_file(params, "packet_simai", "preset: simai\n")},
        "packets: defaults (ConnectX DCQCN + PFC)": {"kind": "packet", "max_packets": 1e8},
    }
    rows = []
    for fabric_name, (fabric, routing) in FABRICS.items():
        for engine_name, engine in engines.items():
            scenario = {"fabric": fabric, "routing": routing, "seed": 0, "jobs": [JOB]}
            if engine is not None:
                scenario["engine"] = engine
            t0, c0 = time.perf_counter(), time.process_time()
            result = run(scenario)
            it = result.jobs[0].iterations[0]
            p = result.packet or {}
            rows.append({
                "fabric": fabric_name, "engine": engine_name,
                "iteration_ms": it.iteration_time * 1e3,
                "exposed_dp_ms": it.exposed_comm["dp"] * 1e3,
                "events": p.get("events"), "ecn_marks": p.get("ecn_marks"),
                "cnps": p.get("cnps"), "pfc_pauses": p.get("pfc_pauses"),
                "drops": p.get("drops"),
                "q_max_kb": max((x["q_max"] for x in p.get("ports", [])), default=0) / 1e3,
                "fullest_port": (p.get("ports") or [{"port": "-"}])[0]["port"],
                "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0})
            print(rows[-1], flush=True)
    (out / "packet_jobs.json").write_text(json.dumps(rows, indent=1))
    flows = {r["fabric"]: r["iteration_ms"] for r in rows if r["events"] is None}
    print("\n| fabric | engine | iteration ms | vs flow | exposed DP ms | ECN marks | CNPs | "
          "PFC pauses | drops | fullest queue KB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        flow = r["events"] is None
        counts = ["-"] * 5 if flow else [f"{r[k]:,}" for k in ("ecn_marks", "cnps",
                                                              "pfc_pauses", "drops")] + [
            f"{r['q_max_kb']:.0f}"]
        print(f"| {r['fabric']} | {r['engine']} | {r['iteration_ms']:.2f} | "
              f"{r['iteration_ms'] / flows[r['fabric']]:.3f} | {r['exposed_dp_ms']:.2f} | "
              + " | ".join(counts) + " |")
    events = [(r["events"], r["cpu_s"]) for r in rows if r["events"]]
    rate = np.array([e / c for e, c in events])
    print(f"\nevents/s on CPU time (whole run: compile, flow engine, packets): "
          f"{rate.min() / 1e6:.1f}-{rate.max() / 1e6:.1f} M")


if __name__ == "__main__":
    main()
