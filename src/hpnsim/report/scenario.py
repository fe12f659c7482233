"""A scenario run (``hpnsim run``): one row per job, an nccl-tests-style table per
collective, the fabric table of a fabric report, the notes; and every section of its HTML
report (``results.json``), in reading order."""

from __future__ import annotations

from hpnsim.report.collective import collective_sections
from hpnsim.report.fabric import fabric_section, fabric_table
from hpnsim.report.faults import fault_lines, faults_section, timeline_table
from hpnsim.report.iteration import job_sections
from hpnsim.report.packet import packet_sections
from hpnsim.report.section import Table
from hpnsim.report.style import EXPOSED
from hpnsim.report.text import collective_table
from hpnsim.units import format_time

__all__ = ["collective_text", "print_run", "run_sections", "run_table"]


def run_table(result):
    """A :class:`rich.table.Table` with one row per job (its model is in the JSON) of a
    :class:`~hpnsim.results.RunResult`: GPUs, arrival, iterations, mean iteration time, the
    time alone and the slowdown (when measured), MFU and exposed communication.

    Examples
    --------
    >>> from hpnsim.scenario.runner import run
    >>> r = run({"fabric": {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0},
    ...          "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 4}]})
    >>> [c.header for c in run_table(r).columns][:4]
    ['job', 'GPUs', 'arrival', 'iters']
    """
    from rich.table import Table as RichTable

    rows = result.rows()
    exposed = [k for k in EXPOSED if any(r[f"exposed_{k}"] for r in rows)]
    table = RichTable(title=f"{len(rows)} job(s) on {result.fabric['template']} "
                        f"({result.fabric['gpus']:,} GPUs), makespan "
                        f"{format_time(result.makespan)}")
    faulted = any(job.faults for job in result.jobs)
    columns = ["job", "GPUs", "arrival", "iters", "iteration", "alone", "slowdown",
               "MFU", *(f"exp. {k}" for k in exposed), "finish",
               *(["time lost"] if faulted else [])]
    for name in columns:
        table.add_column(name, justify="left" if name == "job" else "right",
                         no_wrap=True)
    for row, job in zip(rows, result.jobs, strict=True):
        alone, slowdown = row["alone_iteration_time"], row["slowdown"]
        table.add_row(row["job"], f"{row['gpus']:,}",
                      format_time(row["arrival"]) if row["arrival"] else "0",
                      str(row["iterations"]), format_time(row["iteration_time"]),
                      "-" if alone is None else format_time(alone),
                      "-" if slowdown is None else f"{slowdown:.3f}x",
                      f"{100 * row['mfu']:.1f}%",
                      *(format_time(row[f"exposed_{k}"]) for k in exposed),
                      format_time(row["finish"]),
                      *([_time_lost(job)] if faulted else []))
    return table


def _time_lost(job) -> str:
    lost = (job.faults or {}).get("time_lost")
    return "-" if lost is None else format_time(lost)


def collective_text(result) -> str:
    """Every collective of a :class:`~hpnsim.results.RunResult` as ``hpnsim collective``
    prints it: a ``#`` header line, then its nccl-tests-style table.

    Examples
    --------
    >>> from hpnsim.scenario.runner import run
    >>> r = run({"fabric": {"template": "fat_tree", "k": 4},
    ...          "collectives": [{"name": "ar", "sizes": "1M", "algo": "ring"}]})
    >>> collective_text(r).splitlines()[0]
    '# ar: allreduce on 16 GPUs of fat_tree (16 GPUs), routing ecmp, seed 0'
    """
    blocks = []
    specs = result.scenario.get("collectives", [])
    for i, run in enumerate(result.collectives):
        root = specs[i].get("root", 0) if i < len(specs) else 0
        blocks.append(f"# {run.name}: {run.op} on {len(run.gpus):,} GPUs of "
                      f"{result.fabric['template']} ({result.fabric['gpus']:,} GPUs), routing "
                      f"{result.scenario.get('routing', 'ecmp')}, seed "
                      f"{result.scenario.get('seed', 0)}\n" + collective_table(run.results, root))
    return "\n\n".join(blocks)


def print_run(result, console) -> None:
    """The job table (when there are jobs), each collective's table, the fabric table (when
    the run reported the fabric), and the run's notes."""
    if result.jobs:
        console.print(run_table(result))
        if result.n_tasks:   # a run through faults is many simulations: no one count
            console.print(f"tasks {result.n_tasks:,}   events {result.n_events:,}")
        for job in result.jobs:
            if job.faults:
                console.print(timeline_table(job))
            for line in fault_lines(job):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        if result.packet:
            from hpnsim.report.packet import jobs_packet_text

            console.print(jobs_packet_text(result.packet), markup=False, highlight=False,
                          soft_wrap=True)
    if result.collectives:
        console.print(collective_text(result), markup=False, highlight=False,
                      soft_wrap=True)
    if result.fabric_report is not None:
        console.print(fabric_table([result.fabric_report],
                                   f"fabric {result.fabric['template']}"))
    for note in result.notes:
        console.print(f"note: {note}")


def run_sections(run: dict) -> list:
    """Every section a ``results.json`` has data for, in reading order."""
    sections = [fabric_section([run["fabric_report"]] if run.get("fabric_report") else [],
                               run.get("fabric"))]
    sections += job_sections(run) + [faults_section(run)] + collective_sections(run) \
        + packet_sections(run)
    if run.get("notes"):
        sections.append(("notes", "Notes", [Table(["note"], [[str(n)] for n in run["notes"]])]))
    return [s for s in sections if s]
