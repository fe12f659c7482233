"""CLI commands: ``hpnsim fabric TEMPLATE [--param value ...]`` and ``hpnsim fabric compare A B``.

parse -> Scenario -> run -> report: each template with its options becomes a fabric-only
scenario (``fabric:`` and nothing else; ``--units`` is ``fabric.units``), :func:`hpnsim.scenario.runner.run`
builds it and reports it, and the table, JSON or export is made from that report. Errors
name the builder parameter as typed, without dashes (``error: segments: ...``).
"""

from __future__ import annotations

import typer

from hpnsim.cli.common import (
    PASS_THROUGH,
    TableFiles,
    csv_option,
    emit_json,
    guarded,
    parquet_option,
    parse_extra_options,
    table_console,
)
from hpnsim.errors import InputError
from hpnsim.fabrics.bom import validate_units
from hpnsim.report.fabric import fabric_table


def _load_units(path: str | None) -> dict | None:
    if path is None:
        return None
    from hpnsim.errors import read_user_text
    from hpnsim.scenario.yaml import load_yaml

    # JSON is YAML: one reader takes both, and names the line of a mistake in either
    data, _ = load_yaml(read_user_text(path, "units", "JSON or YAML file"), "units")
    validate_units(data)  # fail before building: shape, names and figures
    return data


def _split(args: list[str]) -> tuple[list[str], list[str]]:
    head = 0
    while head < len(args) and not args[head].startswith("--"):
        head += 1
    return args[:head], args[head:]


def _compare_options(template: str, options: dict[str, str], shared: set[str]) -> dict:
    from hpnsim.fabrics.registry import template_parameters

    params = template_parameters(template)
    return {k: v for k, v in options.items() if k in params or k == "gpus" or k not in shared}


def _option_name(path: str) -> str:
    """``fabric.segments`` -> ``segments``, ``fabric.template`` -> ``template``."""
    from hpnsim.cli.common import option_of

    if path in ("fabric", "fabric.template"):
        return "template"
    return option_of(path)


def fabric_scenario(template: str, options: dict, units: dict | None = None):
    """The fabric-only scenario ``hpnsim fabric TEMPLATE --options`` runs (it reports the
    fabric); errors are named by builder parameter.

    >>> s = fabric_scenario("fat_tree", {"k": "4"})
    >>> s.jobs, s.collectives, s.wants_fabric_report, s.fabric.options()
    ([], [], True, {'k': '4'})
    """
    from hpnsim.cli.common import scenario_from_flags

    if "template" in options:
        raise InputError("template", "not a builder parameter; name the template first")
    if "units" in options:
        raise InputError("units", "give a unit table file with --units FILE")
    fabric = {**options, "template": template}
    if units is not None:
        fabric["units"] = units
    return scenario_from_flags({"fabric": fabric}, name=_option_name)


def _run_fabric(template: str, options: dict, units: dict | None):
    """Run the fabric-only scenario; returns the :class:`~hpnsim.results.RunResult`."""
    from hpnsim.cli.common import errors_as_flags
    from hpnsim.scenario.runner import run

    scenario = fabric_scenario(template, options, units)
    with errors_as_flags(_option_name):
        return run(scenario)


def register(app: typer.Typer) -> None:
    """Add ``fabric`` to the root app."""

    @app.command(context_settings=PASS_THROUGH)
    @guarded
    def fabric(
        ctx: typer.Context,
        template: str = typer.Argument(
            None, help="Template (hpn7, dcn_plus, rail_optimized, rail_only, fat_tree, "
                       "lingjun) or 'compare' followed by templates. Omit to list templates."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
        export_path: str = typer.Option(None, "--export", help="Write the fabric to PATH."),
        fmt: str = typer.Option("json", "--format", help="Export format: json|graphml|simai."),
        units: str = typer.Option(None, "--units",
                                  help="JSON or YAML unit table {name: {power_w, cost_usd}} "
                                       "overriding the BOM defaults."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Build a fabric and print counts, oversubscription, ECMP path choices and its BOM.

        Builder parameters pass through as --name value, e.g.
        `hpnsim fabric hpn7 --segments 2 --dual-tor stacked`, `--gpus 15360` sizes a
        template (hpn7 exactly, in 1,024-GPU segments: `--gpus 131072` is 8 pods and 8
        segments of a 9th); `hpnsim fabric hpn7 --frontend` adds HPN's frontend network
        (its switches, optics, power and a checkpoint bound are reported apart); `hpnsim fabric compare hpn7 dcn_plus --gpus 15360` puts them side by side.
        """
        from hpnsim.fabrics.export import FORMATS, export
        from hpnsim.fabrics.registry import TEMPLATES, template_parameters

        unit_table = _load_units(units)
        tables = TableFiles(csv, parquet)   # one row per fabric, nested figures flattened
        if template is None:
            listing = {name: sorted(template_parameters(name)) for name in TEMPLATES}
            if json_out:
                emit_json(listing)
            else:
                for name, params in listing.items():
                    typer.echo(f"{name}: --{' --'.join(p.replace('_', '-') for p in params)}")
            return
        if fmt not in FORMATS:
            raise InputError("format", f"choose one of {', '.join(FORMATS)}, got {fmt!r}")
        if template == "compare":
            names, rest = _split(list(ctx.args))
            if len(names) < 2:
                raise InputError("compare", "name at least two templates, e.g. compare hpn7 "
                                            "dcn_plus --gpus 15360")
            options = parse_extra_options(rest)
            known = set().union(*(template_parameters(n) for n in names if n in TEMPLATES))
            runs = [_run_fabric(n, _compare_options(n, options, known), unit_table)
                    for n in names]
        else:
            names, rest = _split(list(ctx.args))
            if names:
                raise InputError("arguments", f"unexpected argument {names[0]!r}; use --name value")
            runs = [_run_fabric(template, parse_extra_options(rest), unit_table)]
        from hpnsim.cli.common import note

        for result in runs:
            for message in result.notes:
                note(message)
        fabrics = [result.built_fabric for result in runs]
        reports = [result.fabric_report for result in runs]
        if export_path:
            if len(fabrics) != 1:
                raise InputError("export", "export one fabric at a time, not a comparison")
            export(fabrics[0], export_path, fmt)
        tables.write(reports)
        if json_out:
            emit_json(reports[0] if len(reports) == 1 else {"fabrics": reports})
            return
        table_console().print(fabric_table(reports, "fabric comparison" if len(reports) > 1
                                           else f"fabric {template}"))
        if export_path:
            typer.echo(f"wrote {export_path} ({fmt})")
