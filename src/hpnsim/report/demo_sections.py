"""The demo's later parts in the HTML report and on the terminal: busbw by size, linearity,
the link failure and the shared cluster (``demo.json`` keys ``busbw_by_size``, ``scaling``,
``failure``, ``cluster``; a demo.json without them renders without these sections)."""

from __future__ import annotations

from hpnsim.units import format_time


def _gpu(cfg: dict) -> str:
    hosts = {(h["nvlink_bandwidth"], h["nic_bandwidth"]) for h in cfg.get("hosts", {}).values()}
    gpu = str(cfg.get("gpu", "")).upper()
    if len(hosts) == 1:
        nvlink, nic = hosts.pop()
        gpu += f" (NVLink {nvlink / 1e9:g} GB/s, NIC {8 * nic / 1e9:g} Gb/s per GPU)"
    return gpu


def _find(rows: list[dict], gpu, fabric: str, routing: str) -> dict | None:
    return next((r for r in rows if r.get("host_gpu") == gpu and r["fabric"] == fabric
                 and r["routing"] == routing), None)


def _link(row: dict) -> str:
    from hpnsim.report.figures import LINK_WORDS

    kind = row.get("bottleneck_kind") or "-"
    word = LINK_WORDS.get(kind, kind).replace(" (in host)", "")
    return f"{word} {100 * row['bottleneck_utilization']:.0f}% busy"


def _hosts(cfg: dict, gpu) -> str:
    """``H800 hosts (NVLink 400 GB/s, NIC 400 Gb/s per GPU)`` from the demo's config."""
    h = cfg.get("host_generations", {}).get(gpu) or next(iter(cfg.get("hosts", {}).values()),
                                                         None)
    name = f"{str(gpu or cfg.get('gpu', '')).upper()} hosts"
    if not h:
        return name
    return (f"{name} (NVLink {h['nvlink_bandwidth'] / 1e9:g} GB/s, NIC "
            f"{8 * h['nic_bandwidth'] / 1e9:g} Gb/s per GPU)")


def allreduce_verdicts(demo: dict) -> dict:
    """Per host generation of the demo's all-reduce, what decides it, from the rows alone:
    ``{gpu: (short, line)}``, a panel title and the one-line takeaway.

    HPN under its dual-plane routing is compared with DCN+ under ECMP (each fabric as
    deployed). Both bars NVLink-bound: the limit is inside the host, and HPN's deficit is
    the ring's NVLink sends per GPU (its rail-optimized ring relays the cross-rail hop over
    NVLink, PXN). Otherwise the network decides: each bar's busiest link and DCN+'s ECMP
    hash collisions are named, and HPN under ECMP says how much of the gap is routing.

    Examples
    --------
    >>> row = {"host_gpu": "h800", "busbw": 131.1, "bottleneck_kind": "nvlink",
    ...        "bottleneck_utilization": 0.86, "hash_collisions": 0,
    ...        "nvlink_sends_per_gpu": 16.0, "ring_channels": 16}
    >>> rows = [{**row, "fabric": "hpn7", "routing": "hpn_dual_plane"},
    ...         {**row, "fabric": "dcn_plus", "routing": "ecmp", "busbw": 147.0,
    ...          "hash_collisions": 2063, "nvlink_sends_per_gpu": 14.0}]
    >>> short, line = allreduce_verdicts({"config": {}, "allreduce": rows})["h800"]
    >>> print(line)
    H800 hosts: NVLink-bound on both fabrics (HPN NVLink 86% busy, DCN+ NVLink 86% busy), so routing has no say: HPN dual-plane 131.1 vs DCN+ ECMP 147.0 GB/s (-10.8%), because HPN's rail-optimized ring relays each host's cross-rail hop over NVLink (PXN): 16 vs 14 NVLink sends per GPU over 16 ring channels (14/16 = 0.875).
    """
    rows = demo.get("allreduce") or []
    out = {}
    for gpu in dict.fromkeys(r.get("host_gpu") for r in rows):
        hpn, dcn = _find(rows, gpu, "hpn7", "hpn_dual_plane"), _find(rows, gpu, "dcn_plus",
                                                                       "ecmp")
        if not (hpn and dcn):
            continue
        name = f"{str(gpu or demo['config'].get('gpu', '')).upper()} hosts"
        if hpn.get("nvlink_bandwidth"):
            name += f" (NVLink {hpn['nvlink_bandwidth'] / 1e9:g} GB/s)"
        gain = f"{100 * (hpn['busbw'] / dcn['busbw'] - 1):+.1f}%"
        versus = (f"HPN dual-plane {hpn['busbw']:.1f} vs DCN+ ECMP {dcn['busbw']:.1f} GB/s "
                  f"({gain})")
        if hpn["bottleneck_kind"] == dcn["bottleneck_kind"] == "nvlink":
            short = "NVLink-bound on both fabrics: routing has no say"
            line = (f"{name}: NVLink-bound on both fabrics (HPN {_link(hpn)}, DCN+ "
                    f"{_link(dcn)}), so routing has no say: {versus}")
            sends = (hpn.get("nvlink_sends_per_gpu"), dcn.get("nvlink_sends_per_gpu"))
            if None not in sends and sends[0] > sends[1]:
                c = hpn["ring_channels"]
                line += (", because HPN's rail-optimized ring relays each host's cross-rail "
                         f"hop over NVLink (PXN): {sends[0]:g} vs {sends[1]:g} NVLink sends "
                         f"per GPU over {c} ring channels ({sends[1]:g}/{sends[0]:g} = "
                         f"{sends[1] / sends[0]:.3f})")
                short += (f"; HPN's PXN relay: {sends[0]:g} vs {sends[1]:g} NVLink sends "
                          "per GPU")
            out[gpu] = (short, line + ".")
            continue
        short = "the network decides"
        line = (f"{name}: the network decides: {versus}; DCN+ is bound by its {_link(dcn)} "
                f"({dcn['hash_collisions']:,} ECMP hash collisions), HPN by its {_link(hpn)} "
                f"({hpn['hash_collisions']:,} collisions)")
        ecmp = _find(rows, gpu, "hpn7", "ecmp")
        if ecmp:
            same = abs(ecmp["busbw"] / dcn["busbw"] - 1) < 0.005
            line += (f"; HPN under ECMP: {ecmp['busbw']:.1f} GB/s"
                     + (", DCN+'s figure: the gain is routing, not topology" if same else ""))
            short += (f": ECMP collisions bound DCN+ (and HPN under ECMP), dual-plane "
                      f"routing {gain}")
        out[gpu] = (short, line + ".")
    return out


def allreduce_section(demo: dict):
    """The all-reduce by fabric and routing, one panel per host generation, its table."""
    from hpnsim.report.figures import allreduce_subtitle, busbw_figure, generations_busbw_figure
    from hpnsim.report.report_sections import Figure, Table

    rows = demo.get("allreduce") or []
    if not rows:
        return None
    cfg = demo["config"]
    title = (f"{cfg['allreduce_size'] / 2**30:g} GiB {cfg['allreduce_algo']} all-reduce over "
             f"the same {cfg['allreduce_gpus']:,} GPUs: bus bandwidth by fabric and routing")
    verdicts = allreduce_verdicts(demo)
    if any(r.get("host_gpu") for r in rows):
        panels = {g: f"{_hosts(cfg, g)}:\n{verdicts[g][0]}" if g in verdicts
                  else _hosts(cfg, g) for g in dict.fromkeys(r.get("host_gpu") for r in rows)}
        fig = generations_busbw_figure(rows, title, panels)
    else:   # a demo.json from before host generations
        fig = busbw_figure(rows, title, allreduce_subtitle(cfg, rows))
    table = Table(["fabric", "routing", "hosts", "time", "busbw (GB/s)", "hash collisions",
                   "busiest link (busy)", "NVLink sends per GPU"],
                  [[a["fabric"], a["routing"], str(a.get("host_gpu") or cfg.get("gpu", "")).upper(),
                    format_time(a["time"]), f"{a['busbw']:.1f}",
                    str(a["hash_collisions"]), _link(a),
                    "-" if a.get("nvlink_sends_per_gpu") is None
                    else f"{a['nvlink_sends_per_gpu']:g} of {a['ring_channels']}"]
                   for a in rows],
                  " ".join(line for _, line in verdicts.values()))
    return ("allreduce", "All-reduce by fabric and routing", [
        Figure(fig, "allreduce_busbw", "Each bar names its busiest link; hatched bars are "
               "bound inside the host (NVLink), where routing has no say. Same GPUs, NICs "
               "and ring in both panels; only the hosts' NVLink differs."), table])


def size_section(demo: dict):
    from hpnsim.report.figures import busbw_by_size_figure
    from hpnsim.report.report_sections import Figure, Table

    rows = demo.get("busbw_by_size") or []
    if not rows:
        return None
    cfg = demo["config"]
    held = (f"Held fixed: the same {cfg['allreduce_gpus']:,} GPUs on each fabric, "
            f"{_gpu(cfg)}, {cfg['allreduce_algo']} all-reduce; each size alone on an idle "
            "fabric.")
    table = Table(["fabric", "routing", "size (B)", "time", "busbw (GB/s)", "hash collisions",
                   "busiest link kind"],
                  [[r["fabric"], r["routing"], f"{r['size']:,.0f}", format_time(r["time"]),
                    f"{r['busbw']:.1f}", str(r["hash_collisions"]), r["bottleneck_kind"]]
                   for r in rows])
    return ("sizes", "All-reduce bus bandwidth by message size", [
        Figure(busbw_by_size_figure(rows, held), "busbw_by_size",
               "Small messages are latency-bound; large ones reach the bandwidth of the "
               "busiest link, named per point in the table."), table])


def scaling_section(demo: dict):
    from hpnsim.report.plots import linearity_figure
    from hpnsim.report.report_sections import Figure, Table
    from hpnsim.training.scaling import ScalingPoint, ScalingResult

    s = demo.get("scaling")
    if not s:
        return None
    result = ScalingResult(s["model"], s["tp"], s["pp"], s["micro_batches"],
                           [ScalingPoint(**p) for p in s["points"]])
    table = Table(["fabric", "routing", "GPUs", "DP", "iteration", "exposed DP",
                   "tokens/s", "MFU", "linearity"],
                  [[p["fabric"], p["routing"], f"{p['gpus']:,}", str(p["dp"]),
                    format_time(p["iteration_time"]), format_time(p["exposed_dp"]),
                    f"{p['tokens_per_second']:,.0f}", f"{100 * p['mfu']:.1f}%",
                    f"{p['linearity']:.4f}"] for p in s["points"]],
                  f"GPU {_gpu(demo['config'])}; each fabric sized for each job and under its "
                  "own routing. linearity = throughput / (GPUs / smallest GPUs x throughput "
                  "at the smallest size).")
    return ("scaling", f"{s['model']} weak scaling: linearity", [
        Figure(linearity_figure(result), "linearity",
               "Work per GPU fixed (TP, PP, micro-batches per pipeline); only DP grows, so "
               "what is lost is the network's doing."), table])


def failure_section(demo: dict):
    from hpnsim.report.figures import failure_figure
    from hpnsim.report.report_sections import Figure, Table

    f = demo.get("failure")
    if not f:
        return None
    held = (f"Held fixed: {f['model']} TP{f['tp']} x DP{f['dp']} on {f['gpus']} GPUs (one HPN "
            f"segment), GPU {str(demo['config'].get('gpu', '')).upper()}, {f['iterations']} "
            f"iterations, fault {f['fault']}. Single ToR: ECMP; dual ToR: dual-plane "
            "routing. Bound by the surviving port (dual ToR) or by the repair (single ToR).")
    table = Table(["ToR design", "routing", "nominal samples/s", "worst samples/s",
                   "time lost", "restarts"],
                  [[d["design"], d["routing"], f"{d['nominal_samples_per_s']:.1f}",
                    f"{d['worst_samples_per_s']:.1f}", format_time(d["time_lost"]),
                    str(len(d["restarts"]))] for d in f["designs"]],
                  "time lost = finish - iterations x the fault-free iteration time.")
    return ("failure", "One access link fails", [
        Figure(failure_figure(f, held), "failure_timeline",
               "Single ToR: the NIC's only ToR is gone, the job stalls until the repair. "
               "Dual ToR: the other port carries on at half the NIC bandwidth."), table])


def cluster_section(demo: dict):
    from hpnsim.report.figures import cluster_figure
    from hpnsim.report.report_sections import Figure, Table

    c = demo.get("cluster")
    if not c:
        return None
    fab = c["fabric"]
    held = (f"Held fixed: hpn7 with {fab['segments']} segments x {fab['hosts_per_segment']} "
            f"hosts ({fab['gpus']} GPUs), {fab['tor_uplinks']} uplink per ToR; jobs "
            + ", ".join(f"{j['name']} ({j['gpus']} GPUs, {j['iterations']} it.)"
                        for j in c["jobs"])
            + "; ECMP; placements given (each job spans both segments).")
    table = Table(["scheduler", "GPU utilization", "mean JCT", "mean slowdown", "makespan"],
                  [[r["scheduler"], f"{100 * r['gpu_utilization']:.2f}%",
                    format_time(r["mean_jct"]), f"{r['mean_slowdown']:.3f}x",
                    format_time(r["makespan"])] for r in c["runs"]],
                  "Utilization: computation finished over cluster GPUs x makespan (Crux's "
                  "metric).")
    return ("cluster", "A small shared cluster, with and without Crux", [
        Figure(cluster_figure(c, held), "cluster_utilization",
               "Between events the set of running jobs is fixed; their contention on the "
               "ToR uplinks is what the scheduler orders."), table])


def demo_report_sections(demo: dict) -> list:
    """Every section of the demo's report, in reading order: fabrics, the all-reduce by host
    generation, the iterations, then :func:`demo_extra_sections`."""
    from hpnsim.report.report_sections import demo_sections

    first, *rest = demo_sections(demo)
    return [s for s in (first, allreduce_section(demo), *rest) if s] + \
        demo_extra_sections(demo)


def demo_extra_sections(demo: dict) -> list:
    """The sections of the later parts that ``demo`` has data for."""
    sections = (size_section(demo), scaling_section(demo), failure_section(demo),
                cluster_section(demo))
    return [s for s in sections if s]


def print_takeaways(result, console) -> None:
    """The all-reduce's takeaway, one line per host generation (:func:`allreduce_verdicts`)."""
    verdicts = allreduce_verdicts(result.to_dict())
    if verdicts:
        console.print("Takeaway: HPN 7.0 vs DCN+ all-reduce, by host generation", style="bold")
        for _, line in verdicts.values():
            console.print(f"  {line}", highlight=False)


def print_demo_extras(result, console) -> None:
    """The later parts on the terminal: a line per busbw curve, linearity, failure, cluster."""
    if result.busbw_by_size:
        console.print("4. All-reduce busbw by size (GB/s; * = busiest link NVLink)",
                      style="bold")
        curves = dict.fromkeys((r.get("host_gpu") or "", r["fabric"], r["routing"])
                               for r in result.busbw_by_size)
        for key in curves:
            pts = [r for r in result.busbw_by_size
                   if (r.get("host_gpu") or "", r["fabric"], r["routing"]) == key]
            cells = "  ".join(f"{r['size'] / 2**20:g}M {r['busbw']:.1f}"
                              + ("*" if r["bottleneck_kind"] == "nvlink" else "")
                              for r in pts)
            console.print(f"  {key[0].upper():5s} {key[1]:9s} {key[2]:15s} {cells}",
                          highlight=False)
    if result.scaling:
        console.print("5. Linearity (DP grows, TP x PP fixed)", style="bold")
        for fabric in dict.fromkeys(p["fabric"] for p in result.scaling["points"]):
            pts = [p for p in result.scaling["points"] if p["fabric"] == fabric]
            console.print(f"  {fabric:9s} " + "  ".join(
                f"{p['gpus']:,} GPUs {p['linearity']:.4f}" for p in pts), highlight=False)
    if result.failure:
        f = result.failure
        console.print(f"6. {f['model']} on {f['gpus']} GPUs through {f['fault']}", style="bold")
        for d in f["designs"]:
            console.print(f"  {d['design']:28s} time lost {format_time(d['time_lost'])}, "
                          f"worst {d['worst_samples_per_s']:.1f} of "
                          f"{d['nominal_samples_per_s']:.1f} samples/s", highlight=False)
    if result.cluster:
        c = result.cluster
        console.print(f"7. Shared cluster: {len(c['jobs'])} jobs on {c['fabric']['gpus']} GPUs",
                      style="bold")
        for r in c["runs"]:
            console.print(f"  {r['scheduler']:5s} utilization {100 * r['gpu_utilization']:.2f}%"
                          f", mean JCT {format_time(r['mean_jct'])}", highlight=False)
