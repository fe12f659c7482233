"""One training iteration: where its time goes (the parts of
:data:`~hpnsim.report.style.PARTS`), as rich tables (``hpnsim train``, the demo), as the
stacked breakdown chart, and as the report sections of a run's jobs (with each job's
Gantt chart) and of the demo's iteration per fabric."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace
from typing import Any

from hpnsim.report.canvas import subplots
from hpnsim.report.section import Figure, Table
from hpnsim.report.style import (
    EXPOSED,
    FABRIC_NAMES,
    PART_COLORS,
    PART_LABELS,
    PARTS,
    held_line,
    job_shape,
    plain,
    run_nvlink,
)
from hpnsim.units import format_bytes, format_time

__all__ = ["CLASS_LABELS", "breakdown_figure", "class_means", "demo_iteration_section",
           "iteration_table", "job_sections", "part_means", "print_iteration", "training_table"]

#: what a reader calls each operation class of compute (``IterationResult.compute_by_class``)
CLASS_LABELS = {"gemm": "GEMM", "attention": "attention", "memory": "memory-bound",
                "gaps": "between kernels", "contention": "beside communication"}


def class_means(iterations: list[dict]) -> dict[str, float]:
    """Mean compute seconds per operation class over ``iterations``
    (``IterationResult.to_dict``); empty when they carry no split (AICB workloads).

    >>> class_means([{"compute_by_class": {"gemm": 1.0, "attention": 0.2, "memory": 0.1}},
    ...              {"compute_by_class": {"gemm": 3.0, "attention": 0.2, "memory": 0.1}}])
    {'gemm': 2.0, 'attention': 0.2, 'memory': 0.1, 'gaps': 0.0, 'contention': 0.0}
    """
    if not iterations or not all(it.get("compute_by_class") for it in iterations):
        return {}
    return {k: sum(it["compute_by_class"].get(k, 0.0) for it in iterations) / len(iterations)
            for k in CLASS_LABELS}


def part_time(iteration: dict, part: str) -> float:
    """Seconds of one part of :data:`~hpnsim.report.style.PARTS` in an
    ``IterationResult.to_dict()``.

    >>> part_time({"compute_time": 1.0, "exposed_comm": {"tp": 0.5}}, "tp")
    0.5
    """
    if part in EXPOSED:
        return iteration["exposed_comm"].get(part, 0.0)
    if part == "straggler":
        return iteration.get("straggler_time", 0.0)
    return iteration[{"compute": "compute_time", "bubble": "bubble",
                      "optimizer": "optimizer_time"}[part]]


def part_means(iterations: list[dict]) -> dict[str, float]:
    """Mean of each part of an iteration over ``iterations`` (``IterationResult.to_dict``).

    >>> it = {"compute_time": 1.0, "bubble": 0.2, "optimizer_time": 0.0,
    ...       "exposed_comm": {"tp": 0.5}}
    >>> part_means([it, it])["tp"], list(part_means([it]))[:2]
    (0.5, ['compute', 'tp'])
    """
    n = len(iterations)
    return {part: sum(part_time(it, part) for it in iterations) / n for part in PARTS}


def breakdown_figure(rows: list[dict], title: str, held: str):
    """One stacked horizontal bar per row: where an iteration's time goes.

    ``rows`` hold ``label``, ``parts`` (seconds per :data:`~hpnsim.report.style.PARTS` key;
    they sum to the iteration time) and ``iterations`` (how many were averaged). Each bar
    ends with its total and names its largest part, what bounds it; the time axis starts at
    zero; the legend sits below the axes; ``held`` (what every bar shares) is the subtitle.

    Examples
    --------
    >>> rows = [{"label": "a", "iterations": 1,
    ...          "parts": {"compute": 1.0, "tp": 0.5, "bubble": 0.1}}]
    >>> fig = breakdown_figure(rows, "t", "H800")
    >>> float(fig.axes[0].get_xlim()[0]), [t.get_text() for t in fig.legends[0].get_texts()]
    (0.0, ['compute', 'exposed TP', 'pipeline bubble'])
    """
    fig, ax = subplots(figsize=(9, 0.6 * len(rows) + 2.4), layout="constrained")
    labels = [plain(r["label"]) for r in rows]
    left = [0.0] * len(rows)
    for key in PARTS:
        values = [float(r["parts"].get(key, 0.0)) for r in rows]
        if not any(values):
            continue
        ax.barh(range(len(rows)), values, left=left, color=PART_COLORS[key],
                label=PART_LABELS[key], height=0.6)
        left = [a + b for a, b in zip(left, values, strict=True)]
    top = max(left, default=1.0) or 1.0
    for i, (row, total) in enumerate(zip(rows, left, strict=True)):
        key, value = max(row["parts"].items(), key=lambda kv: kv[1])
        share = value / total if total else 0.0
        ax.text(total + 0.01 * top, i, f"{total:.3f} s; largest: {PART_LABELS[key]} "
                f"{100 * share:.0f}%", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), labels)
    ax.set_xlim(0, 1.45 * top)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per iteration (axis from 0; the parts add up to the iteration time)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    fig.suptitle(plain(title), fontsize=11)
    ax.set_title(textwrap.fill(plain(held), 120), fontsize=8, loc="left", color="#444444")
    fig.legend(loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    return fig


def training_table(rows: list[dict[str, Any]], title: str):
    """One column per fabric: iteration, compute, exposed communication, bubble, MFU."""
    from rich.table import Table as RichTable

    table = RichTable(title=title)
    table.add_column("part")
    for r in rows:
        table.add_column(r["fabric"], justify="right")
    table.add_row("iteration", *(format_time(r["iteration_time"]) for r in rows))
    for part in PARTS:
        if part in EXPOSED and not any(part_time(r, part) for r in rows):
            continue   # a dimension the job does not split
        name = f"exposed {part}" if part in EXPOSED else PART_LABELS[part]
        table.add_row(name, *(format_time(part_time(r, part)) for r in rows))
    table.add_row("MFU", *(f"{100 * r['mfu']:.1f}%" for r in rows))
    table.add_row("tokens/s", *(f"{r['tokens_per_second']:,.0f}" for r in rows))
    return table


def iteration_table(r):
    """One :class:`~hpnsim.training.IterationResult`: each part's time, share and bytes;
    compute split by operation class beneath it (indented rows, part of compute)."""
    from rich.table import Table as RichTable

    job = r.job
    shape = f"TP{job['tp']} x PP{job['pp']} x DP{job['dp']}"
    if job.get("ep", 1) > 1:
        shape += f" (EP{job['ep']})"
    if job.get("cp", 1) > 1:
        shape += f" x CP{job['cp']}"
    if job.get("zero"):
        shape += f", ZeRO-{job['zero']}"
    table = RichTable(title=f"{job['model']} {shape} "
                        f"({job['gpus']} GPUs, {job['micro_batches']} micro-batches)")
    table.add_column("part")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    table.add_column("bytes sent / iteration", justify="right")
    labels = {"dp": "exposed dp (FSDP gathers + reduce-scatters)" if job.get("zero") == 3
              else "exposed dp", "ep": "exposed ep (MoE all-to-all)"}
    classes = [(f"  {CLASS_LABELS[k]}", v, None) for k, v in r.compute_by_class.items()]
    rows = [("compute", r.compute_time, None), *classes,
            *((labels.get(k, f"exposed {k}"), v, r.comm_bytes.get(k))
              for k, v in r.exposed_comm.items()),
            ("pipeline bubble", r.bubble, None), ("optimizer", r.optimizer_time, None),
            ("slowest GPU (straggler)", r.straggler_time, None)]
    for name, value, sent in rows:
        table.add_row(name, format_time(value), f"{100 * value / r.iteration_time:.1f}%",
                      "" if sent is None else format_bytes(sent))
    table.add_row("iteration", format_time(r.iteration_time), "100%", "")
    return table


def print_iteration(r, console) -> None:
    """:func:`iteration_table`, then MFU, tokens/s, the TP all-reduce time and any notes."""
    console.print(iteration_table(r))
    def defined(x) -> bool:   # NaN: not defined for this run (an AICB file has no FLOPs)
        return x is not None and x == x

    parts = [f"MFU {100 * r.mfu:.1f}%" if defined(r.mfu) else "",
             f"{r.tokens_per_second:,.0f} tokens/s" if defined(r.tokens_per_second) else "",
             f"TP all-reduce {format_time(r.tp_allreduce_time)}"
             if defined(r.tp_allreduce_time) else "",
             f"EP all-to-all {format_time(r.ep_alltoall_time)}" if r.ep_alltoall_time else "",
             f"tasks {r.n_tasks}"]
    console.print("   ".join(p for p in parts if p))
    for note in r.notes:
        console.print(f"note: {note}")


def job_sections(run: dict) -> list:
    """Per-job results (table + breakdown) and each job's iteration timeline (Gantt)."""
    jobs = [j for j in run.get("jobs", []) if j.get("per_iteration")]
    if not jobs:
        return []
    fabric = run.get("fabric", {})
    routing = str(run.get("scenario", {}).get("routing", ""))
    where = f"{fabric.get('template', '')} ({fabric.get('gpus', 0):,} GPUs)"
    exposed = [k for k in EXPOSED if any(j.get(f"exposed_{k}") for j in jobs)]
    rows = []
    for j in jobs:
        alone, slowdown = j.get("alone_iteration_time"), j.get("slowdown")
        rows.append([j["job"], j["model"], job_shape(j["per_iteration"][-1]["job"]),
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
    held = held_line(gpus, run_nvlink(run), routing, f"fabric {where}")
    bars = [{"label": f"{j['job']} ({job_shape(j['per_iteration'][-1]['job'])})",
             "parts": part_means(j["per_iteration"]), "iterations": len(j["per_iteration"])}
            for j in jobs]
    breakdown = Figure(breakdown_figure(bars, "Where each job's iteration goes "
                                        "(mean over its simulated iterations)", held),
                       "iteration_breakdown",
                       "Stacked: compute, communication not hidden behind compute, pipeline "
                       "bubble, optimizer, waiting for the slowest GPU. The largest part "
                       "bounds the iteration.")
    sections = [("jobs", "Iteration results per job", [table, breakdown,
                                                        *_class_table(jobs)])]
    gantts = []
    for i, j in enumerate(jobs):
        last = j["per_iteration"][-1]
        if not last.get("timeline"):
            continue
        gantts.append(_gantt(i, j["job"], last, held))
    if gantts:
        sections.append(("timeline", "Iteration timeline", gantts))
    return sections


def _class_table(jobs: list[dict]) -> list:
    """Compute per operation class and the optimizer, per job (none without the split)."""
    rows = []
    for j in jobs:
        means = class_means(j["per_iteration"])
        if not means:
            continue
        compute = sum(means.values())
        optimizer = sum(it["optimizer_time"] for it in j["per_iteration"]) / len(
            j["per_iteration"])
        rows.append([j["job"], *(f"{format_time(v)} ({100 * v / compute:.0f}%)" if compute
                                 else format_time(v) for v in means.values()),
                     format_time(compute), format_time(optimizer),
                     str(j["per_iteration"][-1]["job"].get("dtype", ""))])
    if not rows:
        return []
    return [Table(["job", *(f"{v} compute" for v in CLASS_LABELS.values()), "compute",
                   "optimizer", "dtype"], rows,
                  "Where the compute goes, per GPU (mean over stages and iterations): GEMMs, "
                  "attention, memory-bound kernels (norms, activations, rotary, "
                  "residuals, casts, embedding, loss), the time between kernels (dispatch "
                  "gaps, a host slower than its kernels), from the per-operation compute model "
                  "(docs/compute.md); the shares are of compute.")]


def _gantt(index: int, name: str, iteration: dict, held: str) -> Figure:
    from hpnsim.report.gantt import gantt_figure

    job = iteration["job"]
    micro = f", {job['micro_batches']} micro-batches" if "micro_batches" in job else ""
    title = (f"{plain(name)}: {job.get('model', '')} {job_shape(job)}{micro} "
             f"({job.get('schedule') or 'default schedule'}), iteration "
             f"{iteration['iteration_time']:.3f} s\n{plain(held)}")
    fig = gantt_figure(SimpleNamespace(timeline=iteration["timeline"], job=job,
                                       iteration_time=iteration["iteration_time"]), title=title)
    return Figure(fig, f"timeline_job{index}",
                  f"{name}: its last simulated iteration, one row per pipeline stage; time "
                  "axis from 0. Long iterations show an overview (gaps are pipeline bubbles) "
                  "and zooms on the first and last micro-batches.")


def demo_iteration_section(demo: dict):
    """The demo's iteration on each fabric (``training``): the breakdown and its table."""
    if not demo["training"]:
        return None
    cfg = demo["config"]
    shape = f"TP{cfg['tp']} x PP{cfg['pp']} x DP{cfg['dp']}"
    bars = [{"label": FABRIC_NAMES.get(t["fabric"], t["fabric"]), "parts": part_means([t]),
             "iterations": 1} for t in demo["training"]]
    nvlinks = {h["nvlink_bandwidth"] for h in cfg.get("hosts", {}).values()}
    nvlink = f"NVLink {nvlinks.pop() / 1e9:g} GB/s" if len(nvlinks) == 1 else ""
    held = held_line({cfg.get("gpu", "")}, nvlink, "ecmp",
                     f"{cfg['model']} {shape}, the same GPUs on each fabric")
    shown = ("tp", "pp", "dp")
    rows = [[t["fabric"], format_time(t["iteration_time"]), format_time(t["compute_time"]),
             *(format_time(t["exposed_comm"].get(k, 0.0)) for k in shown),
             format_time(t["bubble"]), f"{100 * t['mfu']:.1f}%"] for t in demo["training"]]
    return ("iteration", f"{cfg['model']} {shape}: one iteration per fabric", [
        Figure(breakdown_figure(bars, f"{cfg['model']} {shape}: where the iteration goes",
                                held), "iteration_breakdown",
               "Stacked: compute, exposed communication, bubble, optimizer."),
        Table(["fabric", "iteration", "compute", *(PART_LABELS[k] for k in shown), "bubble",
               "MFU"], rows)])
