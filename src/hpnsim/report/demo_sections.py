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


def demo_extra_sections(demo: dict) -> list:
    """The sections of the later parts that ``demo`` has data for."""
    sections = (size_section(demo), scaling_section(demo), failure_section(demo),
                cluster_section(demo))
    return [s for s in sections if s]


def print_demo_extras(result, console) -> None:
    """The later parts on the terminal: a line per busbw curve, linearity, failure, cluster."""
    if result.busbw_by_size:
        console.print("4. All-reduce busbw by size (GB/s; * = busiest link NVLink)",
                      style="bold")
        curves = dict.fromkeys((r["fabric"], r["routing"]) for r in result.busbw_by_size)
        for key in curves:
            pts = [r for r in result.busbw_by_size if (r["fabric"], r["routing"]) == key]
            cells = "  ".join(f"{r['size'] / 2**20:g}M {r['busbw']:.1f}"
                              + ("*" if r["bottleneck_kind"] == "nvlink" else "")
                              for r in pts)
            console.print(f"  {key[0]:9s} {key[1]:15s} {cells}", highlight=False)
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
