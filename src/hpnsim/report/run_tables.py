"""Tables of a scenario run (``hpnsim run``): one row per job, then the notes."""

from __future__ import annotations

from hpnsim.units import format_time


def run_table(result):
    """A :class:`rich.table.Table` with one row per job (its model is in the JSON) of a
    :class:`~hpnsim.results.RunResult`: GPUs, arrival, iterations, mean iteration time, the
    time alone and the slowdown (when measured), MFU and exposed communication.

    Examples
    --------
    >>> from hpnsim.run import run
    >>> r = run({"fabric": {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0},
    ...          "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 4}]})
    >>> [c.header for c in run_table(r).columns][:4]
    ['job', 'GPUs', 'arrival', 'iters']
    """
    from rich.table import Table

    rows = result.rows()
    exposed = [k for k in ("tp", "pp", "dp", "ep") if any(r[f"exposed_{k}"] for r in rows)]
    table = Table(title=f"{len(rows)} job(s) on {result.fabric['template']} "
                        f"({result.fabric['gpus']:,} GPUs), makespan "
                        f"{format_time(result.makespan)}")
    columns = ["job", "GPUs", "arrival", "iters", "iteration", "alone", "slowdown",
               "MFU", *(f"exp. {k}" for k in exposed), "finish"]
    for name in columns:
        table.add_column(name, justify="left" if name == "job" else "right",
                         no_wrap=True)
    for row in rows:
        alone, slowdown = row["alone_iteration_time"], row["slowdown"]
        table.add_row(row["job"], f"{row['gpus']:,}",
                      format_time(row["arrival"]) if row["arrival"] else "0",
                      str(row["iterations"]), format_time(row["iteration_time"]),
                      "-" if alone is None else format_time(alone),
                      "-" if slowdown is None else f"{slowdown:.3f}x",
                      f"{100 * row['mfu']:.1f}%",
                      *(format_time(row[f"exposed_{k}"]) for k in exposed),
                      format_time(row["finish"]))
    return table


def print_run(result, console) -> None:
    """The job table and the run's notes."""
    console.print(run_table(result))
    console.print(f"tasks {result.n_tasks:,}   events {result.n_events:,}")
    for note in result.notes:
        console.print(f"note: {note}")
