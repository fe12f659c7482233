"""CLI commands: ``hpnsim bench [SUITE ...]`` runs the benchmarks in :mod:`hpnsim.benchmarks`."""

from __future__ import annotations

import importlib

import typer

from hpnsim.cli.common import (
    TableFiles,
    csv_option,
    emit_json,
    fail,
    guarded,
    parquet_option,
    table_console,
)


def register(app: typer.Typer) -> None:
    """Add ``bench`` to the root app."""

    @app.command()
    @guarded
    def bench(
        suites: list[str] = typer.Argument(None, help="Suites to run (default: all)."),
        quick: bool = typer.Option(False, "--quick", help="Small problems: a smoke run."),
        json_out: bool = typer.Option(False, "--json", help="Print results as JSON."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Run performance benchmarks and print time, peak memory and target per figure."""
        from rich.console import Console
        from rich.table import Table

        from hpnsim.benchmarks import SUITES

        chosen = suites or list(SUITES)
        for name in chosen:
            if name not in SUITES:
                fail("suite", f"unknown benchmark {name!r}; choose from {', '.join(SUITES)}")
        tables = TableFiles(csv, parquet)
        results = []
        console = Console(stderr=True)
        for name in chosen:
            module = importlib.import_module(f"hpnsim.benchmarks.{name}")
            with console.status(f"benchmark {name} ..."):
                results.extend(module.run(quick=quick))
        tables.write([m.to_dict() for m in results])
        if json_out:
            emit_json([m.to_dict() for m in results])
            return
        table = Table(title="hpnsim benchmarks" + (" (quick)" if quick else ""))
        for column in ("benchmark", "seconds", "target s", "ok", "peak RSS MiB", "details"):
            table.add_column(column)
        for m in results:
            ok = {True: "yes", False: "NO", None: "-"}[m.meets_target]
            target = "-" if m.target_seconds is None else f"{m.target_seconds:g}"
            details = ", ".join(f"{k}={v}" for k, v in m.details.items())
            table.add_row(m.name, f"{m.seconds:.3f}", target, ok, f"{m.peak_rss_mib:.0f}", details)
        table_console().print(table)
