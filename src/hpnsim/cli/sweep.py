"""CLI command: ``hpnsim sweep SWEEP.yaml`` (a grid or list of overrides on a base scenario)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer

from hpnsim.cli.common import (
    OutputFolder,
    TableFiles,
    check_output_dir,
    csv_option,
    emit_json,
    force_option,
    guarded,
    parquet_option,
    table_console,
)

#: what a sweep writes into its --out folder (cleared by --force even when an interrupted
#: sweep left no manifest)
SWEEP_FILES = ("rows.jsonl", "summary.csv", "sweep.png", "sweep.json")


def register(app: typer.Typer) -> None:
    """Add ``sweep`` to the root app."""

    @app.command()
    @guarded
    def sweep(
        sweep_file: str = typer.Argument(..., metavar="SWEEP", help="Sweep YAML file: base "
                                         "(a scenario, or its file) and grid or points (see "
                                         "examples/sweep.yaml)."),
        backend: str = typer.Option("local", "--backend", help="local (a process pool) or "
                                    "ray (pip install 'hpnsim[ray]')."),
        address: str = typer.Option(None, "--address", help="Ray cluster address (with "
                                    "--backend ray; default: start a local Ray instance)."),
        workers: int = typer.Option(None, "--workers", min=1, help="Parallel points "
                                    "(default: the CPU count)."),
        resume: bool = typer.Option(False, "--resume", help="Skip the points already in "
                                    "OUT/rows.jsonl."),
        out: str = typer.Option(None, "--out", help="Output folder: rows.jsonl, summary.csv, "
                                "sweep.png, sweep.json (default: sweep-<file name>)."),
        force: bool = force_option(),
        json_out: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Run a scenario at every point of a grid (or list) of overrides, in parallel: one
        row per point (per job iteration time, slowdown, MFU; per collective bus bandwidth;
        makespan) appended to OUT/rows.jsonl as it finishes; then summary.csv, a table and
        a plot of the headline figure against the first swept parameter. Every point is
        validated before any runs.

        Example: hpnsim sweep examples/sweep.yaml --workers 2; after an interruption,
        the same command with --resume runs only the missing points.
        """
        from hpnsim.sweep.execute import check_backend
        from hpnsim.sweep.spec import load_sweep

        check_backend(backend)
        if address and backend != "ray":
            from hpnsim.errors import InputError

            raise InputError("--address", "is a Ray cluster address; add --backend ray")
        folder = Path(out or f"sweep-{Path(sweep_file).stem}")
        if resume:
            check_output_dir(folder, "--out")
        else:
            output = OutputFolder(folder, "--out", force, known=SWEEP_FILES)
        tables = TableFiles(csv, parquet)
        console = table_console(stderr=True)
        with console.status("validating every point"):
            plan = load_sweep(sweep_file)
        with output if not resume else contextlib.nullcontext():
            result = _run(plan, folder, console, backend=backend, workers=workers,
                          address=address, resume=resume)
            metric = result.metric()
            if metric and result.parameters:
                from hpnsim.report.sweep import plot_sweep

                result.files.append(plot_sweep(result, metric, folder / "sweep.png"))
        tables.write(result.rows)
        for path in result.files:
            typer.echo(f"wrote {path}", err=True)
        if result.resumed:
            typer.echo(f"resumed: {result.resumed} point(s) were already done", err=True)
        if json_out:
            emit_json(result.to_dict())
        else:
            from hpnsim.report.sweep import sweep_table

            table_console().print(sweep_table(result))


def _run(plan, folder, console, **options):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from hpnsim.sweep.execute import run_sweep

    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(f"sweep {plan.name}", total=len(plan.points))
        return run_sweep(plan, folder, **options,
                         progress=lambda done, total: bar.update(task, completed=done))
