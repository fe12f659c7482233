"""The sections of the HTML report, from a run's ``results.json`` or the demo's ``demo.json``.

A section is ``(anchor, heading, parts)``; a part is a :class:`Table` or a :class:`Figure`
(a matplotlib figure with the file stem it is saved under and a caption). Only sections
whose data exists are made: no placeholders. Nothing here writes HTML (see
:mod:`hpnsim.report.html`), so every user string stays raw until the page escapes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from hpnsim.report.report_figures import breakdown_figure, busbw_size_figure
from hpnsim.report.report_input import link_kind
from hpnsim.units import format_time


@dataclass
class Table:
    """A table: ``headers`` and ``rows`` of plain strings (escaped when written)."""

    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Figure:
    """A matplotlib figure, the file stem it is saved under, and what it shows."""

    fig: Any
    stem: str
    caption: str


def fabric_section(reports: list[dict], fallback: dict | None = None):
    """Fabric overview: one column per fabric report (switches, links, BOM when present), or
    the run's fabric summary (template, GPUs, hosts, links, options) without one."""
    from hpnsim.report.tables import fabric_rows, merge_labels

    if reports:
        rows = [dict(fabric_rows(r)) for r in reports]
        labels = merge_labels([list(r) for r in rows])
        table = Table([""] + [r["template"] for r in reports],
                      [[label] + [r.get(label, "-") for r in rows] for label in labels],
                      "The fabric as the template built it: every tier it builds counts in "
                      "switches, cost and power, however few GPUs a small fabric has.")
    elif fallback:
        options = ", ".join(f"{k}={v}" for k, v in (fallback.get("options") or {}).items())
        table = Table(["", fallback.get("template", "")],
                      [["GPUs", f"{fallback.get('gpus', 0):,}"],
                       ["hosts", f"{fallback.get('hosts', 0):,}"],
                       ["links (directed, incl. in-host)", f"{fallback.get('links', 0):,}"],
                       ["options", options or "-"]],
                      "Add `report_fabric: true` to the scenario for switch counts and the "
                      "bill of materials.")
    else:
        return None
    return ("fabric", "Fabric overview", [table])


def _nvlink(run: dict) -> str:
    nvlink = (run.get("fabric", {}).get("options") or {}).get("nvlink")
    return f"NVLink {nvlink}" if nvlink else ""


def _job_shape(job: dict) -> str:
    shape = " x ".join(f"{k.upper()}{job[k]}" for k in ("tp", "pp", "dp") if k in job)
    return shape + (f" EP{job['ep']}" if job.get("ep", 1) > 1 else "")


def _parts(iterations: list[dict]) -> dict[str, float]:
    """Mean of each part of an iteration over ``iterations`` (``IterationResult.to_dict``)."""
    n = len(iterations)
    parts = {"compute": sum(it["compute_time"] for it in iterations) / n,
             "bubble": sum(it["bubble"] for it in iterations) / n,
             "optimizer": sum(it["optimizer_time"] for it in iterations) / n}
    for dim in ("tp", "pp", "dp", "ep"):
        parts[dim] = sum(it["exposed_comm"].get(dim, 0.0) for it in iterations) / n
    return parts


def _held(gpus: set, nvlink: str, routing: str, fabric: str) -> str:
    gpu = ", ".join(sorted(g.upper() for g in gpus if g))
    pieces = [p for p in (f"GPU {gpu}" if gpu else "", nvlink,
                          f"routing {routing}" if routing else "", fabric) if p]
    return "Held fixed: " + ", ".join(pieces) + "."


def job_sections(run: dict) -> list:
    """Per-job results (table + breakdown) and each job's iteration timeline (Gantt)."""
    jobs = [j for j in run.get("jobs", []) if j.get("per_iteration")]
    if not jobs:
        return []
    fabric = run.get("fabric", {})
    routing = str(run.get("scenario", {}).get("routing", ""))
    where = f"{fabric.get('template', '')} ({fabric.get('gpus', 0):,} GPUs)"
    exposed = [k for k in ("tp", "pp", "dp", "ep") if any(j.get(f"exposed_{k}") for j in jobs)]
    rows = []
    for j in jobs:
        alone, slowdown = j.get("alone_iteration_time"), j.get("slowdown")
        rows.append([j["job"], j["model"], _job_shape(j["per_iteration"][-1]["job"]),
                     f"{j['gpus']:,}", str(j["iterations"]), format_time(j["iteration_time"]),
                     "-" if alone is None else format_time(alone),
                     "-" if slowdown is None else f"{slowdown:.3f}x",
                     f"{100 * j['mfu']:.1f}%", f"{j['tokens_per_second']:,.0f}",
                     *(format_time(j[f"exposed_{k}"]) for k in exposed),
                     format_time(j["bubble"]), format_time(j["finish"])])
    table = Table(["job", "model", "parallelism", "GPUs", "iterations", "iteration", "alone",
                   "slowdown", "MFU", "tokens/s", *(f"exposed {k.upper()}" for k in exposed),
                   "bubble", "finish"], rows,
                  f"Makespan {format_time(run.get('makespan', 0.0))}. \"alone\": the same job "
                  "on the same GPUs with no other job; slowdown = iteration / alone.")
    gpus = {it["job"].get("gpu", "") for j in jobs for it in j["per_iteration"]}
    held = _held(gpus, _nvlink(run), routing, f"fabric {where}")
    bars = [{"label": f"{j['job']} ({_job_shape(j['per_iteration'][-1]['job'])})",
             "parts": _parts(j["per_iteration"]), "iterations": len(j["per_iteration"])}
            for j in jobs]
    breakdown = Figure(breakdown_figure(bars, "Where each job's iteration goes "
                                        "(mean over its simulated iterations)", held),
                       "iteration_breakdown",
                       "Stacked: compute, communication not hidden behind compute, pipeline "
                       "bubble, optimizer. The largest part bounds the iteration.")
    sections = [("jobs", "Iteration results per job", [table, breakdown])]
    gantts = []
    for i, j in enumerate(jobs):
        last = j["per_iteration"][-1]
        if not last.get("timeline"):
            continue
        gantts.append(_gantt(i, j["job"], last, held))
    if gantts:
        sections.append(("timeline", "Iteration timeline", gantts))
    return sections


def _gantt(index: int, name: str, iteration: dict, held: str) -> Figure:
    from hpnsim.report.gantt import gantt_figure
    from hpnsim.report.report_figures import plain

    job = iteration["job"]
    micro = f", {job['micro_batches']} micro-batches" if "micro_batches" in job else ""
    title = (f"{plain(name)}: {job.get('model', '')} {_job_shape(job)}{micro} "
             f"({job.get('schedule') or 'default schedule'}), iteration "
             f"{iteration['iteration_time']:.3f} s\n{plain(held)}")
    fig = gantt_figure(SimpleNamespace(timeline=iteration["timeline"], job=job,
                                       iteration_time=iteration["iteration_time"]), title=title)
    return Figure(fig, f"timeline_job{index}",
                  f"{name}: its last simulated iteration, one row per pipeline stage; time "
                  "axis from 0. Long iterations show an overview (gaps are pipeline bubbles) "
                  "and zooms on the first and last micro-batches.")


def collective_sections(run: dict) -> list:
    """Bus bandwidth against message size, one curve per collective, and their table."""
    runs = [c for c in run.get("collectives", []) if c.get("per_size")]
    if not runs:
        return []
    fabric = run.get("fabric", {})
    curves, rows, algos, routings = [], [], set(), set()
    for c in runs:
        sizes = sorted(c["per_size"], key=lambda r: r["size"])
        last = sizes[-1]
        bound = link_kind(last.get("bottleneck"))
        if bound and last.get("bottleneck_utilization") is not None:
            bound += f" {100 * last['bottleneck_utilization']:.0f}% busy"
        curves.append({"label": f"{c['name']}: {c['op']} on {c['n_gpus']:,} GPUs",
                       "sizes": [r["size"] for r in sizes], "busbw": [r["busbw"] for r in sizes],
                       "bound": f"busiest link {bound}" if bound else ""})
        algos |= {f"{r['algo']}/{r['protocol']}" for r in sizes}
        routings |= {r["routing"] for r in sizes}
        for r in sizes:
            rows.append([c["name"], r["op"], f"{r['n_gpus']:,}", f"{r['size']:,.0f}",
                         f"{r['time_us']:,.1f}", f"{r['algbw']:.2f}", f"{r['busbw']:.2f}",
                         r["algo"], r["protocol"], str(r.get("hash_collisions", "-")),
                         link_kind(r.get("bottleneck")) or str(r.get("bottleneck") or "-")])
    held = (f"Held fixed: fabric {fabric.get('template', '')} ({fabric.get('gpus', 0):,} "
            f"GPUs), {_nvlink(run) or 'NVLink: the template default'}, routing "
            f"{', '.join(sorted(routings))}; algorithm/protocol per size: "
            f"{', '.join(sorted(algos))}. Each size runs alone on an idle fabric.")
    fig = busbw_size_figure(curves, "Bus bandwidth against message size", held)
    table = Table(["collective", "op", "GPUs", "size (B)", "time (us)", "algbw (GB/s)",
                   "busbw (GB/s)", "algo", "proto", "hash collisions", "busiest link"], rows)
    return [("collectives", "Collectives", [Figure(
        fig, "collective_busbw", "Small sizes are latency-bound; large sizes approach the "
        "bandwidth of the busiest link named in the legend."), table])]


def run_sections(run: dict) -> list:
    """Every section a ``results.json`` has data for, in reading order."""
    sections = [fabric_section([run["fabric_report"]] if run.get("fabric_report") else [],
                               run.get("fabric"))]
    sections += job_sections(run) + collective_sections(run)
    if run.get("notes"):
        sections.append(("notes", "Notes", [Table(["note"], [[str(n)] for n in run["notes"]])]))
    return [s for s in sections if s]


def demo_sections(demo: dict) -> list:
    """The demo's sections: both fabrics' BOM and the iterations (the all-reduce by host
    generation and routing, and the later parts, are in :mod:`hpnsim.report.demo_sections`)."""
    from hpnsim.report.figures import FABRIC_NAMES

    cfg = demo["config"]
    sections = [fabric_section(demo["fabrics"])]
    if demo["training"]:
        shape = f"TP{cfg['tp']} x PP{cfg['pp']} x DP{cfg['dp']}"
        bars = [{"label": FABRIC_NAMES.get(t["fabric"], t["fabric"]), "parts": _parts([t]),
                 "iterations": 1} for t in demo["training"]]
        nvlinks = {h["nvlink_bandwidth"] for h in cfg.get("hosts", {}).values()}
        nvlink = f"NVLink {nvlinks.pop() / 1e9:g} GB/s" if len(nvlinks) == 1 else ""
        held = _held({cfg.get("gpu", "")}, nvlink, "ecmp", f"{cfg['model']} {shape}, the "
                     "same GPUs on each fabric")
        rows = [[t["fabric"], format_time(t["iteration_time"]), format_time(t["compute_time"]),
                 *(format_time(t["exposed_comm"].get(k, 0.0)) for k in ("tp", "pp", "dp")),
                 format_time(t["bubble"]), f"{100 * t['mfu']:.1f}%"] for t in demo["training"]]
        sections.append(("iteration", f"{cfg['model']} {shape}: one iteration per fabric", [
            Figure(breakdown_figure(bars, f"{cfg['model']} {shape}: where the iteration goes",
                                    held), "iteration_breakdown",
                   "Stacked: compute, exposed communication, bubble, optimizer."),
            Table(["fabric", "iteration", "compute", "exposed TP", "exposed PP", "exposed DP",
                   "bubble", "MFU"], rows)]))
    return [s for s in sections if s]
