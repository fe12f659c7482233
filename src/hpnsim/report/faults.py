"""Training through faults: the throughput timeline as a table and as a figure (``hpnsim
train`` with faults, the failure study), and the demo's link failure (figure and section)."""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import save, subplots
from hpnsim.report.section import Figure, Table
from hpnsim.report.style import FABRIC_COLORS
from hpnsim.units import format_time

__all__ = ["failure_figure", "failure_section", "fault_lines", "faults_section",
           "plot_failure_study", "plot_throughput_timeline", "print_fault_timeline",
           "throughput_figure", "throughput_steps", "timeline_table"]


def timeline_table(job):
    """A rich Table of a job's timeline (one row per completed iteration attempt).

    >>> from hpnsim.results import JobResult
    >>> j = JobResult("j", "m", [0], 0.0, 1.0, [], faults={"timeline": [
    ...     {"attempt": 0, "iteration": 0, "start": 0.0, "end": 1.0, "iteration_time": 1.0,
    ...      "samples_per_s": 8.0}], "windows": [], "restarts": [], "lost_work": 0.0,
    ...     "nominal_samples_per_s": 8.0})
    >>> timeline_table(j).row_count
    1
    """
    from rich.table import Table as RichTable

    table = RichTable(title=f"{job.name}: throughput through faults")
    for name in ("attempt", "iteration", "start (s)", "end (s)", "time (s)", "samples/s",
                 "of nominal"):
        table.add_column(name, justify="right")
    nominal = job.faults["nominal_samples_per_s"]
    for row in job.faults["timeline"]:
        table.add_row(str(row["attempt"]), str(row["iteration"]), f"{row['start']:.3f}",
                      f"{row['end']:.3f}", f"{row['iteration_time']:.4f}",
                      f"{row['samples_per_s']:.1f}", f"{row['samples_per_s'] / nominal:.1%}")
    return table


def _name_and_faults(job) -> tuple[str, dict | None]:
    """A job result's name and faults, from a :class:`~hpnsim.results.JobResult` or its
    JSON (``results.json``)."""
    if isinstance(job, dict):
        return job.get("name", job.get("job", "")), job.get("faults")
    return job.name, job.faults


def fault_lines(job) -> list[str]:
    """What the faults did to a job, a line each: every fault window, the worst throughput
    against nominal, the time lost, each reroute (when, how many transfers and flows moved,
    off which links onto which), each restart.

    >>> f = {"timeline": [{"start": 0.0, "end": 1.0, "samples_per_s": 8.0},
    ...                   {"start": 1.0, "end": 2.5, "samples_per_s": 5.0}],
    ...      "windows": [{"kind": "link", "target": "gpu1.port0", "start": 1.0, "end": 2.0}],
    ...      "restarts": [], "nominal_samples_per_s": 8.0, "time_lost": 0.5,
    ...      "moves": [{"time": 1.3, "transfers": 3, "flows": 24, "left": ["a->b"],
    ...                 "took": ["a->c"], "links_left": 1, "links_taken": 1}]}
    >>> for line in fault_lines({"name": "j", "faults": f}):
    ...     print(line)
    j: fault link gpu1.port0 down from 1 s to 2 s
    j: throughput at worst 5.0 of 8.0 samples/s (62.5% of nominal); time lost 0.5 s
    j: at 1.3 s 3 transfers (24 flows) moved off a->b onto a->c
    """
    name, faults = _name_and_faults(job)
    if not faults:
        return []
    out = [f"{name}: fault {w['kind']} {w['target']} down from {w['start']:g} s to "
           f"{w['end']:g} s" for w in faults["windows"]]
    nominal = faults["nominal_samples_per_s"]
    worst = min((r["samples_per_s"] for r in faults["timeline"]), default=0.0)
    if faults["restarts"] or faults.get("stalls"):
        worst = 0.0
    lost = faults.get("time_lost")
    out.append(f"{name}: throughput at worst {worst:.1f} of {nominal:.1f} samples/s "
               f"({worst / nominal:.1%} of nominal)"
               + ("" if lost is None else f"; time lost {lost:.4g} s"))
    def more(n: int, shown: int) -> str:
        return f" (+{n - shown} links)" if n > shown else ""

    for m in faults.get("moves", []):
        out.append(f"{name}: at {m['time']:g} s {m['transfers']:,} transfers "
                   f"({m['flows']:,} flows) moved off {', '.join(m['left']) or '-'}"
                   f"{more(m['links_left'], len(m['left']))} onto "
                   f"{', '.join(m['took']) or '-'}{more(m['links_taken'], len(m['took']))}")
    for r in faults["restarts"]:
        out.append(f"{name}: failed at {r['failed_at']:.3f} s, back to the checkpoint of "
                   f"iteration {r['checkpoint_iteration']} ({r['last_checkpoint']:.3f} s), "
                   f"resumed at {r['resumed_at']:.3f} s: lost work {r['lost_work']:.3f} s")
    return out


def print_fault_timeline(job, console) -> None:
    """Print the timeline, then what the faults did (:func:`fault_lines`)."""
    console.print(timeline_table(job))
    for line in fault_lines(job):
        console.print(line, highlight=False, soft_wrap=True)


def throughput_steps(rows, stalls=()) -> tuple[list[float], list[float]]:
    """Step coordinates of samples/s per iteration; a gap between iterations (an abandoned
    attempt, a restart) is drawn at 0: no sample is trained then. So is a stall (``stalls``:
    ``{"start", "end"}`` spans the job was cut off, :attr:`JobTimeline.stalls
    <hpnsim.faults.timeline.JobTimeline>`): an iteration across one is drawn at 0 during it
    and, the rest of its time, at its samples over the time it was not stalled (not as the
    average over the stall).

    >>> throughput_steps([{"start": 0, "end": 1, "samples_per_s": 8},
    ...                   {"start": 3, "end": 4, "samples_per_s": 8}])
    ([0, 1, 1, 3, 3, 4], [8, 8, 0.0, 0.0, 8, 8])
    >>> throughput_steps([{"start": 0, "end": 2, "samples_per_s": 4}], [{"start": 1, "end": 1.5}])
    ([0, 1, 1, 1.5, 1.5, 2], [5.333333333333333, 5.333333333333333, 0.0, 0.0, 5.333333333333333, 5.333333333333333])
    """
    spans = sorted((s["start"], s["end"]) for s in stalls)
    xs, ys, end = [], [], None
    for r in sorted(rows, key=lambda r: r["start"]):
        if end is not None and r["start"] > end + 1e-9:
            xs += [end, r["start"]]
            ys += [0.0, 0.0]
        cut = [(max(a, r["start"]), min(b, r["end"])) for a, b in spans
               if min(b, r["end"]) > max(a, r["start"])]
        active = (r["end"] - r["start"]) - sum(b - a for a, b in cut)
        rate = (r["samples_per_s"] if not cut else
                r["samples_per_s"] * (r["end"] - r["start"]) / active if active > 0 else 0.0)
        at = r["start"]
        for a, b in cut:
            if a > at:
                xs += [at, a]
                ys += [rate] * 2
            xs += [a, b]
            ys += [0.0, 0.0]
            at = b
        if r["end"] > at or not cut:
            xs += [at, r["end"]]
            ys += [rate] * 2
        end = r["end"]
    return xs, ys


def plot_throughput_timeline(jobs, path: str | Path, labels=None, title: str = "",
                             dpi: int = 120) -> Path:
    """Samples/s per iteration against time (a step at each iteration's end), one line per
    job result, the fault windows shaded, restarts marked; written to ``path``.

    >>> import tempfile, os
    >>> from hpnsim.results import JobResult
    >>> j = JobResult("j", "m", [0], 0.0, 2.0, [], faults={"timeline": [
    ...     {"attempt": 0, "iteration": k, "start": k, "end": k + 1.0, "iteration_time": 1.0,
    ...      "samples_per_s": 8.0} for k in range(2)], "windows": [
    ...     {"kind": "link", "target": "gpu0.port0", "start": 0.5, "end": 1.0}],
    ...     "restarts": [], "lost_work": 0.0, "nominal_samples_per_s": 8.0})
    >>> out = plot_throughput_timeline([j], os.path.join(tempfile.mkdtemp(), "t.png"))
    >>> out.stat().st_size > 0
    True
    """
    return save(throughput_figure(jobs, labels, title), path, dpi)


def throughput_figure(jobs, labels=None, title: str = ""):
    """:func:`plot_throughput_timeline`'s figure, for job results or their JSON.

    >>> f = {"timeline": [{"start": 0.0, "end": 1.0, "samples_per_s": 8.0}],
    ...      "windows": [{"start": 0.2, "end": 0.4}], "restarts": []}
    >>> len(throughput_figure([{"name": "j", "faults": f}]).axes[0].patches)
    1
    """
    fig, ax = subplots(figsize=(8, 3.6))
    named = [_name_and_faults(job) for job in jobs]
    labels = labels or [name for name, _ in named]
    shaded = set()
    for (_, faults), label in zip(named, labels, strict=True):
        xs, ys = throughput_steps(faults["timeline"], faults.get("stalls", ()))
        line, = ax.plot(xs, ys, label=label, lw=1.4)
        for r in faults["restarts"]:
            ax.axvline(r["failed_at"], color=line.get_color(), ls=":", lw=1)
            ax.axvspan(r["failed_at"], r["resumed_at"], color=line.get_color(), alpha=0.08)
        for w in faults["windows"]:
            key = (w["start"], w["end"])
            if key not in shaded:
                shaded.add(key)
                ax.axvspan(w["start"], w["end"], color="red", alpha=0.15, lw=0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("samples/s (per iteration)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "Throughput through faults (red: fault windows; dotted: job failed)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def faults_section(run: dict):
    """The run's faults (``results.json``): throughput over time with the fault windows,
    and per job the windows, the worst throughput, the time lost and what moved. None when
    no job ran through a fault."""
    jobs = [j for j in run.get("jobs", []) if j.get("faults")]
    if not jobs:
        return None
    rows = []
    for j in jobs:
        f = j["faults"]
        nominal = f["nominal_samples_per_s"]
        worst = 0.0 if f["restarts"] or f.get("stalls") else min(
            (r["samples_per_s"] for r in f["timeline"]), default=0.0)
        moved = f.get("moves", [])
        rows.append([_name_and_faults(j)[0], "; ".join(f"{w['kind']} {w['target']} {w['start']:g}-"
                                          f"{w['end']:g} s" for w in f["windows"]),
                     f"{worst:.1f} of {nominal:.1f} ({worst / nominal:.0%})",
                     "-" if f.get("time_lost") is None else format_time(f["time_lost"]),
                     str(len(f["restarts"])),
                     "; ".join(f"{m['time']:g} s: {m['transfers']:,} transfers "
                               f"({m['flows']:,} flows) off {m['links_left']} links onto "
                               f"{m['links_taken']}" for m in moved) or "-"])
    lines = [line for j in jobs for line in fault_lines(j)]
    return ("faults", "Faults: throughput through them, time lost, what moved", [
        Figure(throughput_figure(jobs), "fault_throughput",
               "Samples/s of each iteration against time; red: the fault windows; dotted: "
               "a job failed (shaded until it resumed)."),
        Table(["job", "fault windows", "worst samples/s (of nominal)", "time lost",
               "restarts", "reroutes (transfers, flows, links left and taken)"], rows,
              " ".join(lines))])


def plot_failure_study(panels: dict, path: str | Path, title: str = "", dpi: int = 120) -> Path:
    """One panel per fault scenario, samples/s per iteration against time, one line per ToR
    design; fault windows shaded, the time a job failed until it resumed shaded in the
    line's colour. ``panels`` maps a panel title to ``{design label: faults dict}`` (a
    :meth:`~hpnsim.faults.runner.JobTimeline.to_dict`).

    >>> import tempfile, os
    >>> t = {"timeline": [{"start": k, "end": k + 1.0, "samples_per_s": 8.0} for k in range(3)],
    ...      "windows": [{"start": 1.0, "end": 1.5}], "restarts": []}
    >>> out = plot_failure_study({"link": {"dual": t}, "flap": {"dual": t}},
    ...                          os.path.join(tempfile.mkdtemp(), "s.png"))
    >>> out.stat().st_size > 0
    True
    """
    fig, axes = subplots(len(panels), 1, figsize=(8, 2.8 * len(panels)), squeeze=False)
    for ax, (name, lines) in zip(axes[:, 0], panels.items(), strict=True):
        shaded = set()
        for label, faults in lines.items():
            xs, ys = throughput_steps(faults["timeline"], faults.get("stalls", ()))
            line, = ax.plot(xs, ys, label=label, lw=1.3)
            for r in faults["restarts"]:
                ax.axvspan(r["failed_at"], r["resumed_at"], color=line.get_color(), alpha=0.1)
            for w in faults["windows"]:
                if (w["start"], w["end"]) not in shaded:
                    shaded.add((w["start"], w["end"]))
                    ax.axvspan(w["start"], w["end"], color="red", alpha=0.15, lw=0)
        ax.set_title(name, fontsize=10)
        ax.set_ylabel("samples/s")
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower right", fontsize=8)
    axes[-1, 0].set_xlabel("time (s)   (red: fault down)")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save(fig, path, dpi)


def failure_figure(failure: dict, held: str):
    """Samples/s per iteration against time through the demo's link failure, one line per
    ToR design; the fault window shaded red; both axes from zero; legend below the axes.

    >>> t = [{"start": k * 1.0, "end": k + 1.0, "samples_per_s": 8.0} for k in range(3)]
    >>> f = {"fault": "link:gpu1.port0@1s+1s", "fault_start": 1.0, "fault_duration": 1.0,
    ...      "designs": [{"design": "single ToR", "timeline": t, "time_lost": 0.5}]}
    >>> fig = failure_figure(f, "held")
    >>> [float(v) for v in fig.axes[0].get_xlim()[:1] + fig.axes[0].get_ylim()[:1]]
    [0.0, 0.0]
    """
    fig, ax = subplots(figsize=(9, 4.2), layout="constrained")
    start, duration = failure["fault_start"], failure["fault_duration"]
    ax.axvspan(start, start + duration, color="red", alpha=0.12, lw=0,
               label=f"link down ({failure['fault']})")
    for i, d in enumerate(failure["designs"]):
        xs, ys = throughput_steps(d["timeline"], d.get("stalls", ()))
        ax.plot(xs, ys, lw=1.6, color=FABRIC_COLORS[i], ls="-" if i == 0 else "--",
                label=f"{d['design']}: {d['time_lost']:.2f} s lost against no fault")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time (s; axis from 0)")
    ax.set_ylabel("samples/s of each iteration (axis from 0)")
    ax.grid(alpha=0.3)
    fig.suptitle("One access link fails and is repaired: single ToR vs non-stacked dual ToR",
                 fontsize=11)
    ax.set_title(held, fontsize=8, loc="left", color="#444444", wrap=True)
    fig.legend(loc="outside lower center", ncol=1, fontsize=8, frameon=False)
    return fig


def failure_section(demo: dict):
    """The demo's link failure (``failure``): throughput per ToR design, and its table."""
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
               "Single ToR: the NIC's only ToR is gone, the job stalls until the repair, "
               "drawn at 0; the iteration that waits it out is drawn, outside the stall, at "
               "its samples over its unstalled time (above nominal when its computation went "
               "on during the stall). Dual ToR (dashed): the other port carries on at half "
               "the NIC bandwidth."), table])
