"""The HPN paper's collective experiments with the paper's setup (issue 18, part 1).

Setup (Qian et al., "Alibaba HPN", SIGCOMM'24, section 9 and Appendix A, as
shared/reference/congestion.md records it): hosts of 8 H800 GPUs (NVLink 400 GB/s
bidirectional) with 8 backend NICs of 2 x 200 Gb/s, NCCL 2.18.3.

- 448 GPUs (56 hosts, packed in host order: inside one HPN segment, across four DCN+ ToR
  pairs), 1 MiB to 4 GiB: all-reduce (the paper: "we employ NVLS in AllReduce"), all-gather
  (cannot use NVLS, bounded by NVSwitch) and Multi-AllReduce (one all-reduce per rail, the
  eight at once, all data over the inter-host network: ``rail_groups`` + ``run_together``).
  HPN 7.0 under its dual-plane routing against DCN+ (3-tier Clos, dual ToR, 16 hosts per ToR
  pair, 400G ToR-Agg links) under ECMP.
- Appendix A: 4 GB all-reduce over 32, 64, 128, 256 GPUs split evenly across two segments,
  HPN with dual plane (``hpn7``, ``hpn_dual_plane`` routing) against HPN with a single plane
  (``hpn7(dual_plane=False)``: every ToR on every Agg of the pod). On a single plane an Agg has
  two equal-cost ToRs toward a destination NIC (both ports share one IP), so its hash picks
  the ToR and hence the port: ``ecmp`` routing (the bond hash at the NIC, the ToR and Agg
  hashes) is what such a fabric does; ``hpn_dual_plane`` routing on the single plane is shown
  too (ports balanced, Aggs mapped per destination), to separate topology from hashing.

Parameters from their sources, none tuned to the paper's figures: NCCL's H800 parameters
(``NcclParams.for_gpu("h800")``: NVLink payload 20.6 of 25 GB/s per link, NVLS efficiency
0.85, RoCE framing at MTU 4096, one QP per connection). Algorithms as NCCL 2.18.3 chooses
them (:func:`nccl_2_18_algorithm`: hpnsim's ``auto`` candidates less its own ``hier``, which
NCCL does not have: all-gather ring only; all-reduce ring, tree, NVLS on one host, NVLS+tree
across hosts; the smallest closed-form time). Several connection-hash seeds per case.

Writes ``hpn_paper.json`` (``sweep``: one row per fabric, case, size and seed;
``appendix_a``: one entry per group size) and ``hpn_paper.csv`` (the sweep rows) into
``--out`` (default ``experiments/out/``), and prints the Markdown tables of
docs/experiments.md. About two minutes on 2 shared cores; ``--quick``: 4 GiB and 64 MiB, one
seed.

Usage: python experiments/hpn_paper.py [--out DIR] [--seeds 3] [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

from hpnsim.collectives.closed_form.model import GroupShape, auto_candidates, model_time
from hpnsim.collectives.nccl.params import PROTOCOLS, NcclParams
from hpnsim.collectives.planning.concurrent import Together, rail_groups, run_together, slowest
from hpnsim.errors import InputError
from hpnsim.fabrics import dcn_plus, hpn7

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hpn_vs_clos_collectives import two_segment_gpus  # noqa: E402

GIB = 2**30
SIZES = tuple(float(2**k) for k in range(20, 33, 2))      # 1 MiB .. 4 GiB, factor 4
GPUS_448 = 448
APPENDIX_GPUS = (32, 64, 128, 256)
APPENDIX_SIZE = 4e9                                          # the paper's "4 GB"
#: fabric -> (builder, routing); the paper's two systems
SYSTEMS = {"HPN": (lambda: hpn7(segments=2), "hpn_dual_plane"),
           "DCN+": (lambda: dcn_plus(pods=1), "ecmp")}
#: Appendix A variants -> (builder, routing)
PLANES = {"dual plane": (lambda: hpn7(segments=2), "hpn_dual_plane"),
          "single plane, ECMP": (lambda: hpn7(segments=2, dual_plane=False), "ecmp"),
          "single plane, HPN routing": (lambda: hpn7(segments=2, dual_plane=False),
                                        "hpn_dual_plane")}
NCCL = NcclParams.for_gpu("h800")


def nccl_2_18_algorithm(fabric, op: str, gpus, size: float, nccl=NCCL) -> tuple[str, str]:
    """(algorithm, protocol) NCCL 2.18.3 would weigh on this group, with the smallest
    closed-form time: hpnsim's ``auto`` candidates (which follow 2.18.3's rules) without
    hpnsim's own pipelined ``hier``.

    >>> f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> nccl_2_18_algorithm(f, "allreduce", range(32), 4 * GIB)
    ('nvlstree', 'simple')
    >>> nccl_2_18_algorithm(f, "allgather", range(32), 4 * GIB)
    ('ring', 'simple')
    """
    shape = GroupShape.from_fabric(fabric, np.asarray(list(gpus)), nccl=nccl)
    candidates = [a for a in auto_candidates(op, shape) if a != "hier"]
    best = min((model_time(op, a, p, shape, size, nccl=nccl), i, a, p)
               for i, a in enumerate(candidates) for p in PROTOCOLS)
    return best[2], best[3]


def run_case(fabric, routing: str, case: str, size: float, seed: int) -> dict:
    """One case at one size: busbw of the slowest collective (GB/s) and what it ran."""
    gpus = np.arange(GPUS_448)
    op = "allgather" if case == "all-gather" else "allreduce"
    groups = rail_groups(gpus, fabric.gpus_per_host) if case == "Multi-AllReduce" else [gpus]
    algo, protocol = nccl_2_18_algorithm(fabric, op, groups[0], size)
    results = run_together(fabric, [Together(op, g.tolist(), size,
                                             {"algo": algo, "protocol": protocol})
                                    for g in groups], routing=routing, seed=seed, nccl=NCCL)
    worst = slowest(results)
    return {"algo": algo, "protocol": protocol, "busbw_GBps": worst.busbw / 1e9,
            "time_ms": worst.time * 1e3, "bottleneck": _kind(worst.bottleneck),
            "collectives": len(groups)}


def _kind(link: str) -> str:
    """A link's kind from its name: nvlink (GPU-NVSwitch), nic (NIC-ToR), tor-agg, agg-tor."""
    a, _, b = link.partition("->")
    if "nvswitch" in link:
        return "nvlink"
    if "nic" in a or "nic" in b:
        return "nic-tor" if "nic" in a else "tor-nic"
    return f"{a.rsplit('/', 1)[-1].split('-')[0]}->{b.rsplit('/', 1)[-1].split('-')[0]}"


def sweep(sizes, seeds: int, progress=print) -> list[dict]:
    rows = []
    for system, (build, routing) in SYSTEMS.items():
        fabric = build()
        for case in ("all-reduce", "all-gather", "Multi-AllReduce"):
            for size in sizes:
                for seed in range(seeds):
                    start = time.perf_counter()
                    row = {"system": system, "routing": routing, "case": case, "size": size,
                           "seed": seed, **run_case(fabric, routing, case, size, seed)}
                    row["wall_s"] = round(time.perf_counter() - start, 3)
                    rows.append(row)
                    progress(f"{system:5s} {case:16s} {size / GIB:8.4f} GiB seed {seed}: "
                             f"{row['algo']}/{row['protocol']} busbw "
                             f"{row['busbw_GBps']:6.1f} GB/s ({row['bottleneck']})")
    return rows


def appendix_a(seeds: int, progress=print) -> list[dict]:
    """Dual vs single plane, 4 GB all-reduce across two segments, per group size: busbw
    seed means and ranges per variant; gain = dual / single-plane ECMP - 1. Also with the
    ring forced (``ring`` keys), NCCL's choice for a 4 GB buffer before NVLS."""
    built = {name: (build(), routing) for name, (build, routing) in PLANES.items()}
    out = []
    for n in APPENDIX_GPUS:
        entry = {"n_gpus": n, "size": APPENDIX_SIZE}
        for name, (fabric, routing) in built.items():
            gpus = two_segment_gpus(fabric, n)
            for forced in (None, "ring"):
                algo, protocol = (nccl_2_18_algorithm(fabric, "allreduce", gpus, APPENDIX_SIZE)
                                  if forced is None else ("ring", "simple"))
                bw = []
                for seed in range(seeds):
                    (r,) = run_together(fabric, [Together("allreduce", gpus.tolist(),
                                                          APPENDIX_SIZE,
                                                          {"algo": algo,
                                                           "protocol": protocol})],
                                        routing=routing, seed=seed, nccl=NCCL)
                    bw.append(r.busbw / 1e9)
                key = name if forced is None else f"{name}, ring"
                entry[key] = {"algo": algo, "busbw_GBps": float(np.mean(bw)),
                              "range": [float(min(bw)), float(max(bw))],
                              "bottleneck": _kind(r.bottleneck)}
                progress(f"appendix A {n:4d} GPUs {key:32s} {algo:9s} "
                         f"{np.mean(bw):6.1f} GB/s [{min(bw):.1f}, {max(bw):.1f}]")
        dual, single = entry["dual plane"], entry["single plane, ECMP"]
        entry["gain"] = dual["busbw_GBps"] / single["busbw_GBps"] - 1
        entry["gain ring"] = (entry["dual plane, ring"]["busbw_GBps"]
                              / entry["single plane, ECMP, ring"]["busbw_GBps"] - 1)
        entry["published"] = [0.50, 0.64]
        out.append(entry)
    return out


#: packet-hop budget of a 448-GPU packet point: enough for the DCN+ 4 GiB NVLS-tree's window,
#: which does not settle at 32 chunks a stage, to double to its whole pipeline (4.1e8 hops),
#: so every point settles or runs in full (docs/experiments.md)
PACKET_BUDGET = 5e8


def packet_case(fabric, routing: str, case: str, size: float,
                max_packets: float = PACKET_BUDGET) -> dict:
    """One 448-GPU case through the packet engine (seed 0), beside the flow engine on the same
    schedule: all-gather as NCCL 2.18.3's ring (its protocol), all-reduce as its NVLS-tree
    (Simple) pipeline where NCCL picks it, the Multi-AllReduce as 8 rail rings in one packet
    run (NCCL 2.18.3 picks tree below 4 GiB; the packet engine runs collectives together as
    rings). Windowed: ``extrapolated`` is the share of steps (chunks) not simulated. A point
    the packet engine refuses before any work (its estimate over ``max_packets``) keeps the
    flow engine's figure and the refusal (``refused``)."""
    from hpnsim.collectives import run_collective
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet, run_together_packet

    gpus = np.arange(GPUS_448)
    op = "allgather" if case == "all-gather" else "allreduce"
    run = PacketRun(max_packets=max_packets, max_watch=8)
    start = time.process_time()
    if case == "Multi-AllReduce":
        groups = [g.tolist() for g in rail_groups(gpus, fabric.gpus_per_host)]
        options = {"algo": "ring", "protocol": "simple"}
        flow = slowest(run_together(fabric, [Together(op, g, size, options) for g in groups],
                                    routing=routing, seed=0, nccl=NCCL))
        packets = partial(run_together_packet, fabric, op, groups, size, run=run,
                          routing=routing, seed=0, nccl=NCCL, **options)
    else:
        algo, protocol = nccl_2_18_algorithm(fabric, op, gpus, size)
        options = {"algo": algo, "protocol": protocol, "routing": routing, "seed": 0,
                   "nccl": NCCL}
        flow = run_collective(fabric, op, gpus, size, **options)
        packets = partial(run_collective_packet, fabric, op, gpus, size, run=run, **options)
    try:
        pkt = packets()
    except InputError as refused:
        return {"algo": f"{flow.algo}/{flow.protocol}", "flow_busbw": flow.busbw / 1e9,
                "flow_bottleneck": _kind(flow.bottleneck), "refused": str(refused),
                "cpu_s": round(time.process_time() - start, 1)}
    top = pkt.ports[0] if pkt.ports else {"port": "", "q_max": 0.0}
    return {"algo": f"{pkt.algo}/{pkt.protocol}", "flow_busbw": flow.busbw / 1e9,
            "packet_busbw": pkt.busbw / 1e9, "flow_bottleneck": _kind(flow.bottleneck),
            "packet_bottleneck": _kind(pkt.bottleneck), "extrapolated": pkt.extrapolated,
            "stable": bool(pkt.stable), "ecn_marks": int(pkt.ecn_marks), "cnps": int(pkt.cnps),
            "pfc_pauses": int(pkt.pfc_pauses), "q_max_MB": top["q_max"] / 1e6,
            "fullest_port": _kind(top["port"]) if top["port"] else "-",
            "events": int(pkt.events), "rail_copies": int(pkt.rail_copies),
            "cpu_s": round(time.process_time() - start, 1)}


def appendix_a_packet(gpu_counts, seeds: int, max_packets: float = 3e8,
                      progress=print) -> list[dict]:
    """Appendix A through the packet engine: dual plane against single plane under ECMP, a 4 GB
    all-reduce as NCCL 2.18.3 runs it (NVLS-tree, Simple: its chunk pipeline, windowed), one
    packet run per connection-hash seed beside the flow engine on the same schedule; gain =
    seed-mean busbw of dual / single − 1, per engine."""
    from hpnsim.collectives import run_collective
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet

    built = {name: (PLANES[name][0](), PLANES[name][1])
             for name in ("dual plane", "single plane, ECMP")}
    out = []
    for n in gpu_counts:
        entry = {"n_gpus": int(n), "size": APPENDIX_SIZE}
        for name, (fabric, routing) in built.items():
            gpus = two_segment_gpus(fabric, n)
            algo, protocol = nccl_2_18_algorithm(fabric, "allreduce", gpus, APPENDIX_SIZE)
            runs = []
            for seed in range(seeds):
                start = time.process_time()
                options = {"algo": algo, "protocol": protocol, "routing": routing,
                           "seed": seed, "nccl": NCCL}
                flow = run_collective(fabric, "allreduce", gpus, APPENDIX_SIZE, **options)
                pkt = run_collective_packet(fabric, "allreduce", gpus, APPENDIX_SIZE,
                                            run=PacketRun(max_packets=max_packets), **options)
                runs.append({"seed": seed, "flow_busbw": flow.busbw / 1e9,
                             "packet_busbw": pkt.busbw / 1e9,
                             "extrapolated": pkt.extrapolated, "stable": bool(pkt.stable),
                             "ecn_marks": int(pkt.ecn_marks), "cnps": int(pkt.cnps),
                             "pfc_pauses": int(pkt.pfc_pauses),
                             "cpu_s": round(time.process_time() - start, 1)})
                progress(f"appendix A packet {n:4d} GPUs {name:20s} seed {seed}: flow "
                         f"{runs[-1]['flow_busbw']:6.1f}, packet {runs[-1]['packet_busbw']:6.1f} "
                         f"GB/s ({runs[-1]['cpu_s']} s CPU)")
            entry[name] = {"algo": f"{algo}/{protocol}", "runs": runs,
                           **{f"{e}_busbw": float(np.mean([r[f"{e}_busbw"] for r in runs]))
                              for e in ("flow", "packet")}}
        dual, single = entry["dual plane"], entry["single plane, ECMP"]
        entry["gain"] = {e: dual[f"{e}_busbw"] / single[f"{e}_busbw"] - 1
                         for e in ("flow", "packet")}
        entry["published"] = [0.50, 0.64]
        out.append(entry)
    return out


def appendix_a_packet_markdown(table: list[dict]) -> str:
    """docs/experiments.md's Appendix A table through both engines."""
    out = ["| GPUs | dual plane, flow / packet | single plane ECMP, flow / packet (per seed) | "
           "marks / pauses, single plane (per seed) | gain flow | gain packet | published |",
           "|---|---|---|---|---|---|---|"]
    for e in table:
        d, s = e["dual plane"], e["single plane, ECMP"]
        per_seed = ", ".join(f"{r['packet_busbw']:.1f}" for r in s["runs"])
        counters = ", ".join(f"{r['ecn_marks']:,} / {r['pfc_pauses']:,}" for r in s["runs"])
        out.append(f"| {e['n_gpus']} | {d['flow_busbw']:.1f} / {d['packet_busbw']:.1f} | "
                   f"{s['flow_busbw']:.1f} / {s['packet_busbw']:.1f} ({per_seed}) | "
                   f"{counters} | {e['gain']['flow']:+.1%} | {e['gain']['packet']:+.1%} | "
                   f"+50% to +64% |")
    return "\n".join(out)


def packet_sweep(sizes, progress=print, max_packets: float = PACKET_BUDGET) -> list[dict]:
    """:func:`packet_case` for every system, case and size."""
    rows = []
    for system, (build, routing) in SYSTEMS.items():
        fabric = build()
        for case in ("all-reduce", "all-gather", "Multi-AllReduce"):
            for size in sizes:
                row = {"system": system, "case": case, "size": size,
                       **packet_case(fabric, routing, case, size, max_packets)}
                rows.append(row)
                packet = (f"refused ({row['refused']})" if "refused" in row
                          else f"packet {row['packet_busbw']:6.1f} GB/s")
                progress(f"packet {system:5s} {case:16s} {_size_label(size)}: {row['algo']} "
                         f"flow {row['flow_busbw']:6.1f}, {packet} ({row['cpu_s']} s CPU)")
    return rows


def packet_markdown(rows: list[dict]) -> str:
    """The both-engines table of docs/experiments.md."""
    out = ["| case | system | size | algo | flow busbw | packet busbw | packet / flow − 1 | "
           "extrapolated | marks / CNPs / pauses | fullest port (MB) | bottleneck flow / "
           "packet | CPU s |", "|" + "---|" * 12]
    for r in rows:
        if "refused" in r:
            out.append(f"| {r['case']} | {r['system']} | {_size_label(r['size'])} | "
                       f"{r['algo']} | {r['flow_busbw']:.1f} | refused: {r['refused']} | - | "
                       f"- | - | - | {r['flow_bottleneck']} / - | {r['cpu_s']} |")
            continue
        settled = f"{r['extrapolated']:.0%}" + ("" if r["stable"] else " (unsettled)")
        out.append(f"| {r['case']} | {r['system']} | {_size_label(r['size'])} | {r['algo']} | "
                   f"{r['flow_busbw']:.1f} | {r['packet_busbw']:.1f} | "
                   f"{r['packet_busbw'] / r['flow_busbw'] - 1:+.1%} | {settled} | "
                   f"{r['ecn_marks']:,} / {r['cnps']:,} / {r['pfc_pauses']:,} | "
                   f"{r['fullest_port']} ({r['q_max_MB']:.2f}) | {r['flow_bottleneck']} / "
                   f"{r['packet_bottleneck']} | {r['cpu_s']} |")
    return "\n".join(out)


def _size_label(size: float) -> str:
    return f"{size / GIB:g} GiB" if size >= GIB else f"{size / 2**20:g} MiB"


def markdown(rows: list[dict], table_a: list[dict]) -> str:
    """The tables docs/experiments.md carries (seed means; algorithm as chosen)."""
    out = ["| case | size | HPN busbw | HPN algo | DCN+ busbw (min–max) | DCN+ algo | "
           "HPN / DCN+ − 1 | bottleneck HPN / DCN+ |", "|---|---|---|---|---|---|---|---|"]
    keys = dict.fromkeys((r["case"], r["size"]) for r in rows)
    for case, size in keys:
        sel = {s: [r for r in rows if (r["system"], r["case"], r["size"]) == (s, case, size)]
               for s in SYSTEMS}
        bw = {s: np.array([r["busbw_GBps"] for r in v]) for s, v in sel.items()}
        h, d = sel["HPN"][0], sel["DCN+"][0]
        spread = (f"{bw['DCN+'].mean():.1f} ({bw['DCN+'].min():.1f}–{bw['DCN+'].max():.1f})"
                  if np.ptp(bw["DCN+"]) > 0.05 else f"{bw['DCN+'].mean():.1f}")
        out.append(f"| {case} | {_size_label(size)} | {bw['HPN'].mean():.1f} | "
                   f"{h['algo']}/{h['protocol']} | {spread} | {d['algo']}/{d['protocol']} | "
                   f"{bw['HPN'].mean() / bw['DCN+'].mean() - 1:+.1%} | "
                   f"{h['bottleneck']} / {d['bottleneck']} |")
    out += ["", "| GPUs (2 segments) | dual plane | single plane, ECMP (min–max) | "
                "single plane, HPN routing | gain (dual / single ECMP − 1) | gain, ring forced "
                "| published |", "|---|---|---|---|---|---|---|"]
    for e in table_a:
        d, s, h = e["dual plane"], e["single plane, ECMP"], e["single plane, HPN routing"]
        out.append(f"| {e['n_gpus']} | {d['busbw_GBps']:.1f} ({d['algo']}) | "
                   f"{s['busbw_GBps']:.1f} ({s['range'][0]:.1f}–{s['range'][1]:.1f}) | "
                   f"{h['busbw_GBps']:.1f} | {e['gain']:+.1%} | {e['gain ring']:+.1%} | "
                   f"+50% to +64% |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/out", help="output directory")
    parser.add_argument("--seeds", type=int, default=3, help="connection-hash seeds per case")
    parser.add_argument("--quick", action="store_true", help="64 MiB and 4 GiB, one seed")
    parser.add_argument("--packet", default="", help="also run the 448-GPU cases through "
                        "the packet engine at these sizes (comma list, e.g. 256M,1G)")
    parser.add_argument("--packet-only", action="store_true", help="only the packet cases")
    parser.add_argument("--appendix-packet", default="", metavar="GPUS",
                        help="only Appendix A through both engines, for these GPU counts "
                        f"(comma list of {', '.join(map(str, APPENDIX_GPUS))})")
    parser.add_argument("--max-packets", type=float, default=PACKET_BUDGET,
                        help="packet-hop budget of each packet point (a point estimated "
                             "over it is refused before it runs and reported as such)")
    args = parser.parse_args()
    if not args.max_packets > 0:
        parser.error(f"--max-packets: must be > 0, got {args.max_packets:g}")
    if args.seeds < 1:
        parser.error("--seeds: must be >= 1")
    if args.appendix_packet:
        try:
            counts = [int(x) for x in args.appendix_packet.split(",") if x.strip()]
        except ValueError:
            counts = []
        if not counts or any(n not in APPENDIX_GPUS for n in counts):
            parser.error(f"--appendix-packet: a comma list of {', '.join(map(str, APPENDIX_GPUS))}, "
                         f"got {args.appendix_packet!r}")
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        start = time.process_time()
        table = appendix_a_packet(counts, args.seeds)
        (out / "hpn_paper_appendix_packet.json").write_text(json.dumps(
            {"cpu_s": round(time.process_time() - start, 1), "seeds": args.seeds,
             "appendix_a": table}, indent=1))
        print(appendix_a_packet_markdown(table))
        return
    seeds = 1 if args.quick else args.seeds
    sizes = (float(2**26), float(2**32)) if args.quick else SIZES
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    packet_sizes = [_bytes(x) for x in args.packet.split(",") if x.strip()]
    if args.packet_only:
        packet_rows = packet_sweep(packet_sizes, max_packets=args.max_packets)
        (out / "hpn_paper_engines.json").write_text(json.dumps(
            {"seconds": round(time.perf_counter() - start, 1), "rows": packet_rows}, indent=1))
        print(packet_markdown(packet_rows))
        return
    rows = sweep(sizes, seeds)
    table_a = appendix_a(seeds)
    packet_rows = (packet_sweep(packet_sizes, max_packets=args.max_packets) if packet_sizes
                   else [])
    seconds = time.perf_counter() - start
    (out / "hpn_paper.json").write_text(json.dumps(
        {"setup": {"gpu": "h800", "nccl": NCCL.to_dict(), "seeds": seeds,
                   "seconds": round(seconds, 1)},
         "sweep": rows, "appendix_a": table_a, "packet": packet_rows}, indent=1))
    with open(out / "hpn_paper.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\n{len(rows)} sweep runs and {len(APPENDIX_GPUS)} Appendix A cases in "
          f"{seconds:.0f} s\n")
    print(markdown(rows, table_a))
    if packet_rows:
        print("\n" + packet_markdown(packet_rows))


def _bytes(text: str) -> float:
    """``256M``, ``1G``, ``4096`` -> bytes (binary prefixes, as nccl-tests)."""
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return float(text[:-1] if scale > 1 else text) * scale


if __name__ == "__main__":
    main()
