"""CLI commands: ``hpnsim run SCENARIO.yaml`` and ``hpnsim schema``."""

from __future__ import annotations

import json

import typer

from hpnsim.cli.common import (
    OutputFolder,
    TableFiles,
    emit_json,
    force_option,
    guarded,
    parquet_option,
    table_console,
)

#: what ``run --out`` writes (cleared by --force even from a folder with no manifest)
RUN_FILES = ("results.json", "jobs.csv", "iterations.csv", "collectives.csv")


def _table_rows(result) -> list[dict]:
    """The rows ``--csv``/``--parquet`` write: the jobs, the collectives (each size), both
    with a ``table`` column, or the fabric when the scenario has neither."""
    jobs, collectives = result.rows(), result.collective_rows()
    if jobs and collectives:
        return ([{"table": "jobs", **row} for row in jobs]
                + [{"table": "collectives", **row} for row in collectives])
    if jobs or collectives:
        return jobs or collectives
    return [result.fabric_report] if result.fabric_report else []   # nested keys flattened


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``schema`` to the root app."""

    @app.command()
    @guarded
    def run(
        scenario: str = typer.Argument(..., help="Scenario YAML file (see `hpnsim schema` and "
                                                 "examples/)."),
        out: str = typer.Option(None, "--out", help="Write results.json (and jobs.csv, "
                                                    "iterations.csv, collectives.csv when "
                                                    "there are jobs or collectives) into "
                                                    "this folder."),
        force: bool = force_option(),
        timeline: bool = typer.Option(False, "--timeline", help="Include Gantt rows in --json."),
        trace: str = typer.Option(None, "--trace", help="Write every job's iterations as "
                                                        "Chrome-trace JSON (one process per "
                                                        "job; open in https://ui.perfetto.dev)."),
        calibration: str = typer.Option(None, "--calibration", help="Calibration file from "
                                        "`hpnsim calibrate` (overrides the scenario's "
                                        "calibration: key)."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        csv: str = typer.Option(None, "--csv", help="Also write the table's rows to this CSV "
                                "file: one row per job; a scenario with only collectives, one "
                                "per collective and size; with both, both, a 'table' column "
                                "telling them apart."),
        parquet: str = parquet_option(),
    ) -> None:
        """Run a scenario: every job on one fabric in one simulation, each job's iteration
        time, exposed communication and slowdown against running alone; each collective
        alone over its sizes (nccl-tests-style table); a scenario with neither prints the
        fabric table (as `hpnsim fabric`).

        Example: hpnsim run examples/two_jobs.yaml --out results/;
        hpnsim run examples/collective.yaml
        """
        from hpnsim.scenario.runner import run as run_scenario
        from hpnsim.scenario.spec import read_scenario

        folder = OutputFolder(out, "--out", force, known=RUN_FILES) if out is not None else None
        if trace:
            from hpnsim.cli.common import check_output_file

            check_output_file(trace, "--trace")
        tables = TableFiles(csv, parquet)
        console = table_console(stderr=True)
        with console.status("running") as status:
            loaded, lines = read_scenario(scenario)
            if calibration is not None:
                loaded = loaded.model_copy(update={"calibration": calibration})
            result = run_scenario(loaded, lines=lines, progress=lambda msg: status.update(msg))
        if folder is not None:
            with folder as path:
                for written in result.save(path):
                    typer.echo(f"wrote {written}", err=True)
        if trace and result.jobs:
            from hpnsim.report.trace import run_trace, write_trace

            typer.echo(f"wrote {write_trace(run_trace(result), trace)}", err=True)
        elif trace:
            typer.echo("note: --trace: the scenario has no jobs, so no timeline", err=True)
        if tables:
            tables.write(_table_rows(result))
        if json_out:
            emit_json(result.to_dict(timeline=timeline))
        else:
            from hpnsim.report.scenario import print_run

            print_run(result, table_console())
            if loaded.jobs or loaded.collectives:
                typer.echo(f"# {loaded.gpu_line()}")

    @app.command()
    def schema() -> None:
        """Print the JSON Schema of scenario files (for editors and validators)."""
        from hpnsim.scenario.spec import Scenario

        typer.echo(json.dumps(Scenario.model_json_schema(), indent=2))
