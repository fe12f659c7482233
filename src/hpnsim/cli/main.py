"""Entry point of the ``hpnsim`` command. Each command family lives in its own module."""

from __future__ import annotations

import typer

from hpnsim import __version__
from hpnsim.cli import bench, collective, demo, fabric, train, workload

app = typer.Typer(
    name="hpnsim",
    help="Design, simulate and schedule the networks that train large language models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hpnsim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """hpnsim: HPN 7.0-style fabrics, LLM traffic, collectives, Crux scheduling and faults."""


for module in (demo, fabric, collective, workload, train, bench):
    module.register(app)


def run() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    run()
