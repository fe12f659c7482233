"""CLI command ``hpnsim report DIR``: a self-contained HTML report of a run's results."""

from __future__ import annotations

from pathlib import Path

import typer

from hpnsim.cli.common import check_output_file, guarded


def register(app: typer.Typer) -> None:
    """Add ``report`` to the root app."""

    @app.command()
    @guarded
    def report(
        folder: Path = typer.Argument(..., metavar="DIR", help="A folder written by `hpnsim "
                                      "run --out DIR` (results.json) or `hpnsim demo --out "
                                      "DIR` (demo.json)."),
        out: Path = typer.Option(None, "--out", help="The HTML file to write (default "
                                 "DIR/index.html); figures go beside it as PNG and SVG."),
    ) -> None:
        """Render a run's results as one self-contained HTML page (figures embedded, no
        external files or scripts): fabric overview, per-job iteration results, iteration
        timelines, bus bandwidth against message size -- each section when its data exists.

        Example: hpnsim run examples/two_jobs.yaml --out results/ && hpnsim report results/
        """
        from hpnsim.errors import InputError
        from hpnsim.report.html import write_report

        if out is not None and out.is_dir():
            raise InputError("--out", f"{out} is a folder; give the HTML file to write")
        if out is not None or folder.is_dir():
            check_output_file(out if out is not None else folder / "index.html", "--out",
                              ("html", "htm"))
        path = write_report(folder, out)
        typer.echo(f"wrote {path}")
