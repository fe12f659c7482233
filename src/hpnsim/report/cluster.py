"""Shared-cluster runs: the summary and job tables, schedulers side by side, and the
cluster GPU utilization over time per scheduler (``hpnsim cluster``); the demo's small
shared cluster (figure and section)."""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import save, subplots
from hpnsim.report.section import Figure, Table
from hpnsim.report.style import FABRIC_COLORS
from hpnsim.units import format_time

__all__ = ["cluster_figure", "cluster_section", "compare_table", "jobs_table",
           "plot_utilization", "print_cluster", "print_compare", "scheduler_verdict",
           "utilization_steps"]

#: columns of the side-by-side table: (summary key, header, format)
COMPARE_COLUMNS = (
    ("scheduler", "scheduler", "{}"),
    ("window_utilization", "util. per cluster GPU\n(/ cluster GPUs x T)", "{:.2%}"),
    ("window_held_utilization", "util. per GPU held\n(/ GPU-s held in T)", "{:.2%}"),
    ("mean_jct", "mean JCT (s)", "{:,.1f}"),
    ("mean_slowdown", "mean slowdown", "{:.4f}"),
    ("contended_job_share", "jobs contended", "{:.1%}"),
    ("contended_gpu_share", "GPUs contended", "{:.1%}"),
    ("makespan", "makespan (s)", "{:,.1f}"),
    ("extrapolated_share", "extrapolated", "{:.1%}"),
)


def _row(summary: dict) -> dict:
    span = summary["makespan"]
    return {**summary, "extrapolated_share": summary["extrapolated_time"] / span
            if span > 0 else 0.0}


def scheduler_verdict(summaries: list[dict]) -> str:
    """Whether the schedulers' runs differ, and, when they do not, why: no job ran slower
    than alone (nothing contended, nothing to order) or Crux's order changed no outcome.

    >>> run = {"scheduler": "none", "makespan": 3.6, "mean_jct": 2.3,
    ...        "gpu_utilization": 0.18, "mean_slowdown": 0.98, "contended_job_share": 0.0}
    >>> scheduler_verdict([run, {**run, "scheduler": "crux"}])[:48]
    'none and crux give the same result: no job ran m'
    >>> scheduler_verdict([run, {**run, "scheduler": "crux", "mean_jct": 2.0,
    ...                          "makespan": 3.4, "gpu_utilization": 0.19}])
    'crux against none: mean JCT 2.000 s vs 2.300 s (-13.0%), makespan 3.400 s vs 3.600 s, GPU utilization 19.00% vs 18.00%.'
    """
    if len(summaries) < 2:
        return ""
    base = summaries[0]
    keys = ("makespan", "mean_jct", "gpu_utilization")

    def same(a, b):
        return all(abs(a[k] - b[k]) <= 1e-9 * max(abs(a[k]), abs(b[k]), 1e-12) for k in keys)

    names = " and ".join(s["scheduler"] for s in summaries)
    if all(same(base, s) for s in summaries[1:]):
        if max(s["contended_job_share"] for s in summaries) == 0.0:
            why = ("no job ran more than the tolerance slower than alone (mean slowdown "
                   f"{base['mean_slowdown']:.3f}x): the links had room for every job, so "
                   "there was no contention for a scheduler to order")
        else:
            why = (f"{base['contended_job_share']:.0%} of jobs ran slower than alone, but "
                   "the order the scheduler chose changed no job's finish")
        return f"{names} give the same result: {why}."
    out = []
    for s in summaries[1:]:
        change = (s["mean_jct"] - base["mean_jct"]) / base["mean_jct"] if base["mean_jct"] else 0.0
        out.append(f"{s['scheduler']} against {base['scheduler']}: mean JCT "
                   f"{format_time(s['mean_jct'])} vs {format_time(base['mean_jct'])} "
                   f"({change:+.1%}), makespan {format_time(s['makespan'])} vs "
                   f"{format_time(base['makespan'])}, GPU utilization "
                   f"{s['gpu_utilization']:.2%} vs {base['gpu_utilization']:.2%}.")
    return " ".join(out)


def compare_table(summaries: list[dict], title: str = "Schedulers on the same trace"):
    """A rich Table, one row per scheduler (``ClusterResult.summary()`` dicts).

    The caption names the window ``[t0, t0 + T]`` the utilization columns measure.

    >>> s = {"scheduler": "none", "window_utilization": 0.5, "window_held_utilization": 0.6,
    ...      "window_start": 0.0, "window_end": 20.0,
    ...      "mean_jct": 10.0, "mean_slowdown": 1.1, "contended_job_share": 0.5,
    ...      "contended_gpu_share": 0.4, "makespan": 20.0, "extrapolated_time": 5.0}
    >>> t = compare_table([s])
    >>> t.row_count, t.caption
    (1, 'window T = [0, 20] s; utilization = computation finished in T / the divisor named')
    """
    from rich.table import Table as RichTable

    table = RichTable(title=title)
    if summaries:
        a, b = summaries[0]["window_start"], summaries[0]["window_end"]
        table.caption = (f"window T = [{a:,.6g}, {b:,.6g}] s; utilization = computation "
                         "finished in T / the divisor named")
    for i, (_, header, _) in enumerate(COMPARE_COLUMNS):
        table.add_column(header, justify="left" if i == 0 else "right")
    for summary in summaries:
        row = _row(summary)
        table.add_row(*(fmt.format(row[key]) for key, _, fmt in COMPARE_COLUMNS))
    return table


def jobs_table(result, limit: int = 40):
    """A rich Table of the jobs of one run (the first ``limit``; the caption says if cut).

    >>> from hpnsim.sched.cluster.result import ClusterResult, JobOutcome
    >>> import numpy as np
    >>> j = JobOutcome("a", 2, [0], 0.0, 0.0, 4.0, 2.0, 2.0, 1.5, ((0.0, 4.0), (0.0, 2.0)))
    >>> jobs_table(ClusterResult("none", "packed", True, 0.01, 4, [j], np.array([0.0, 4.0]))).row_count
    1
    """
    from rich.table import Table as RichTable

    table = RichTable(title=f"Jobs under {result.scheduler}")
    for name in ("job", "GPUs", "arrival (s)", "wait (s)", "JCT (s)", "iterations",
                 "iteration (s)", "alone (s)", "slowdown", "rate in T (it/s)"):
        table.add_column(name, justify="left" if name == "job" else "right")
    for job, rate in zip(result.jobs[:limit], result.window_rates()[:limit], strict=True):
        table.add_row(job.name, f"{job.gpus:,}", f"{job.arrival:,.1f}", f"{job.wait:,.1f}",
                      f"{job.jct:,.1f}", f"{job.iterations:,.1f}", f"{job.iteration_time:.4f}",
                      f"{job.alone_iteration_time:.4f}", f"{job.slowdown:.4f}", f"{rate:.4g}")
    if len(result.jobs) > limit:
        table.caption = f"first {limit} of {len(result.jobs)} jobs (--json or --out for all)"
    return table


def print_cluster(result, console) -> None:
    """The run's summary line, its jobs table, and what was extrapolated."""
    console.print(compare_table([result.summary()], title="Cluster run"))
    console.print(jobs_table(result))
    console.print(f"steady state: {result.extrapolated_time:,.1f} s of "
                  f"{result.makespan:,.1f} s extrapolated ({result.extrapolated_iterations:,.0f}"
                  f" iterations), {result.probes} probes, {result.unstable_probes} unstable, "
                  f"{result.phase_probes} phase-level"
                  if not result.exact else "exact: every iteration simulated")
    if result.unfinished:
        console.print(f"unfinished at the horizon: {len(result.unfinished)} job(s)")


def print_compare(results, console) -> None:
    """Schedulers side by side (same jobs, allocator and seed)."""
    summaries = [r.summary() for r in results]
    console.print(compare_table(summaries))
    for other in summaries[1:]:   # one line per scheduler against the first
        console.print(scheduler_verdict([summaries[0], other]))


def utilization_steps(result) -> tuple[list[float], list[float]]:
    """``(times, utilization)`` of a step plot: the utilization of every interval between
    cluster events, held over the interval.

    >>> from hpnsim.sched.cluster.result import ClusterResult, JobOutcome
    >>> import numpy as np
    >>> j = JobOutcome("a", 2, [0], 0.0, 0.0, 4.0, 2.0, 2.0, 1.5, ((0.0, 4.0), (0.0, 2.0)))
    >>> utilization_steps(ClusterResult("none", "packed", True, 0.01, 4, [j], np.array([0.0, 4.0])))
    ([0.0, 4.0], [0.25, 0.25])
    """
    xs, ys = [], []
    for row in result.timeline():
        xs += [row["start"], row["end"]]
        ys += [float(row["utilization"])] * 2
    return xs, ys


def plot_utilization(results, path: str | Path, title: str = "", dpi: int = 120) -> Path:
    """Cluster GPU utilization over time, one step line per scheduler's run (hours when the
    trace is longer than two hours), both axes from zero; written to ``path``.

    >>> import os, tempfile
    >>> from hpnsim.sched.cluster.result import ClusterResult, JobOutcome
    >>> import numpy as np
    >>> j = JobOutcome("a", 2, [0], 0.0, 0.0, 4.0, 2.0, 2.0, 1.5, ((0.0, 4.0), (0.0, 2.0)))
    >>> r = ClusterResult("none", "packed", True, 0.01, 4, [j], np.array([0.0, 4.0]))
    >>> plot_utilization([r], os.path.join(tempfile.mkdtemp(), "u.png")).stat().st_size > 0
    True
    """
    fig, ax = subplots(figsize=(8, 3.8))
    span = max((r.makespan for r in results), default=0.0)
    scale, unit = (3600.0, "h") if span > 7200 else (1.0, "s")
    for r in results:
        xs, ys = utilization_steps(r)
        ax.plot([x / scale for x in xs], [100 * y for y in ys], lw=1.2,
                label=f"{r.scheduler} ({r.gpu_utilization:.2%} overall)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("cluster GPU utilization (%)")
    ax.set_title(title or "Cluster GPU utilization over time (computation / GPU time)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4, fontsize=8,
              frameon=False)
    fig.tight_layout()
    return save(fig, path, dpi)


def cluster_figure(cluster: dict, held: str):
    """Cluster GPU utilization between events over time, one step line per scheduler (its
    overall utilization and mean JCT in the legend); axes from zero, legend below.

    >>> run = {"scheduler": "none", "gpu_utilization": 0.4, "mean_jct": 3.0,
    ...        "timeline": [{"start": 0.0, "end": 1.0, "utilization": 0.4}]}
    >>> fig = cluster_figure({"runs": [run]}, "held")
    >>> float(fig.axes[0].get_ylim()[0])
    0.0
    """
    fig, ax = subplots(figsize=(9, 4.2), layout="constrained")
    for i, run in enumerate(cluster["runs"]):
        xs, ys = [], []
        for seg in run["timeline"]:
            xs += [seg["start"], seg["end"]]
            ys += [100 * seg["utilization"]] * 2
        ax.plot(xs, ys, lw=1.6, color=FABRIC_COLORS[i], ls="-" if i == 0 else "--",
                label=f"scheduler {run['scheduler']}: {100 * run['gpu_utilization']:.2f}% "
                      f"overall, mean JCT {run['mean_jct']:.2f} s")
    ax.set_xlim(left=0)
    ax.set_ylim(0, 100)
    ax.set_xlabel("time (s; axis from 0)")
    ax.set_ylabel("GPU utilization between events (%)")
    ax.grid(alpha=0.3)
    fig.suptitle("A small shared cluster with no scheduler and with Crux", fontsize=11)
    ax.set_title(held, fontsize=8, loc="left", color="#444444", wrap=True)
    fig.legend(loc="outside lower center", ncol=1, fontsize=8, frameon=False)
    return fig


def cluster_section(demo: dict):
    """The demo's shared cluster (``cluster``): utilization per scheduler, and its table."""
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
                  "metric). " + scheduler_verdict(c["runs"]))
    return ("cluster", "A small shared cluster, with and without Crux", [
        Figure(cluster_figure(c, held), "cluster_utilization",
               "Between events the set of running jobs is fixed; their contention on the "
               "ToR uplinks is what the scheduler orders."), table])
