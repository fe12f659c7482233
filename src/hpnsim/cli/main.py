"""Entry point of the ``hpnsim`` command. Each command family lives in its own module."""

from __future__ import annotations

import sys

import typer

try:  # typer >= 0.24 vendors click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on plain click
    from click.exceptions import NoArgsIsHelpError, UsageError

from hpnsim import __version__
from hpnsim.cli import bench, collective, demo, fabric, kernels, scenario, sweep, train, workload
from hpnsim.cli import calibrate as calibrate_cli
from hpnsim.cli import cluster as cluster_cli
from hpnsim.cli import design as design_cli
from hpnsim.cli import reliability as reliability_cli
from hpnsim.cli import report as report_cli
from hpnsim.cli import wiring as wiring_cli

app = typer.Typer(
    name="hpnsim",
    help="Design, simulate and schedule the networks that train large language models.",
    no_args_is_help=True,
    add_completion=True,
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


for module in (demo, scenario, fabric, collective, workload, train, bench, reliability_cli,
               report_cli, sweep, cluster_cli, calibrate_cli, wiring_cli, kernels, design_cli):
    module.register(app)


def _missing(param) -> str:
    """What a required option or argument left out is for (click's own message is empty)."""
    help_text = (getattr(param, "help", None) or "").strip().rstrip(".")
    kind = "option" if getattr(param, "param_type_name", "") == "option" else "argument"
    return f"required {kind} not given" + (f"; {help_text}" if help_text else "")


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point: a command-line parse error is one line and exit code 2,
    like every other bad input (``error: --seed: 'abc' is not a valid integer.``)."""
    try:
        code = app(args=argv, prog_name="hpnsim", standalone_mode=False)
    except NoArgsIsHelpError as error:
        error.show()
        code = 2
    except UsageError as error:
        param = getattr(error, "param", None)
        field, message = ("/".join(param.opts), error.message or _missing(param)) if param \
            else ("arguments", error.format_message())
        typer.echo(f"error: {field}: {message}", err=True)
        code = 2
    except typer.Abort:
        typer.echo("aborted", err=True)
        code = 130
    sys.exit(code or 0)


if __name__ == "__main__":
    run()
