"""CLI command ``hpnsim report DIR``: a self-contained HTML report of a run's results."""

from __future__ import annotations

from pathlib import Path

import typer

from hpnsim.cli.common import check_output_dir, check_output_file, guarded


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
        json_out: bool = typer.Option(False, "--json", help="Print the page's path as JSON."),
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
        page = out if out is not None else folder / "index.html"
        if out is not None or folder.is_dir():
            check_output_dir(page.parent, "--out")   # made if missing
            if page.parent.is_dir():
                check_output_file(page, "--out", ("html", "htm"))
            elif page.suffix.lower() not in (".html", ".htm"):
                raise InputError("--out", f"{page}: the report is an HTML page; give a "
                                          f"path ending in .html")
        path = write_report(folder, out)
        if json_out:
            from hpnsim.cli.common import emit_json

            emit_json({"report": str(path)})
        else:
            typer.echo(f"wrote {path}")
