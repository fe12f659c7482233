"""CLI commands: ``hpnsim fabric TEMPLATE [--param value ...]`` and ``hpnsim fabric compare A B``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from hpnsim.cli.common import (
    PASS_THROUGH,
    emit_json,
    guarded,
    parse_extra_options,
    table_console,
)
from hpnsim.errors import InputError
from hpnsim.fabrics.bom import validate_units


def fabric_report(fabric) -> dict[str, Any]:
    """Summary and bill of materials of a fabric as one JSON-ready dict.

    ``requested_gpus`` is the ``--gpus`` request the fabric was sized for (None if unsized).

    >>> from hpnsim.fabrics import fat_tree
    >>> r = fabric_report(fat_tree(4))
    >>> r["gpus"], r["switches"], r["path_choices"]["cross_pod"]
    (16, {'tor': 8, 'agg': 8, 'core': 4}, 4)
    """
    from hpnsim.fabrics.analysis import summary
    from hpnsim.fabrics.bom import bill_of_materials

    out = summary(fabric)
    out = {**{k: v for k, v in out.items() if k in ("template", "gpus")},
           "requested_gpus": fabric.meta.get("requested_gpus"), **out}
    out["options"] = fabric.meta.get("options", {})
    out["bom"] = bill_of_materials(fabric, units=fabric.meta.get("units"))
    return out


def _load_units(path: str | None) -> dict | None:
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise InputError("units", f"cannot read unit table {path!r}: {error}") from None
    validate_units(data)  # fail before building: shape, names and figures
    return data


def _rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    from hpnsim.units import format_bandwidth

    def ratio(value):
        return "-" if value is None else f"{value:.3f}:1"

    def opt(value):
        return "-" if value is None else f"{value:,}"

    bom = report["bom"]
    rows = [("GPUs", f"{report['gpus']:,}"), ("hosts (active)", f"{report['hosts']:,}"),
            ("backup hosts", f"{report['backup_hosts']:,}")]
    rows += [(f"{tier} switches", f"{n:,}") for tier, n in report["switches"].items()]
    rows += [("cables (incl. in-host)", f"{report['cables']:,}")]
    rows += [(f"oversubscription {t}", ratio(v)) for t, v in report["oversubscription"].items()]
    rows += [("bisection bandwidth", format_bandwidth(report["bisection_bandwidth"]))]
    rows += [(f"ECMP paths {k.replace('_', ' ')}", opt(v))
             for k, v in report["path_choices"].items()]
    rows += [(f"switch ports {s}", f"{n:,}") for s, n in sorted(bom["switch_ports"].items())]
    rows += [(f"transceivers {t}", f"{n:,}") for t, n in sorted(bom["transceivers"].items())]
    rows += [("network power", f"{bom['power_w']['network'] / 1e3:,.0f} kW")]
    rows += _frontend_rows(report)
    rows += [("total power (GPUs + networks)", f"{bom['power_w']['total'] / 1e6:,.2f} MW"),
             ("  of which backup hosts", f"{bom['power_w']['backup_hosts'] / 1e6:,.2f} MW"),
             ("network cost", f"${bom['cost_usd']['network'] / 1e6:,.1f} M"),
             ("network cost per GPU", f"${bom['network_cost_per_gpu_usd']:,.0f}"),
             ("GPUs per MW", f"{bom['gpus_per_mw']:,.0f}")]
    return rows


def _frontend_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the frontend network (none without one)."""
    front = report.get("frontend")
    if not front:
        return []
    bom = report["bom"]["frontend"]
    rows = [("frontend hosts", f"{front['hosts']:,}"),
            ("storage hosts", f"{front['storage_hosts']:,}")]
    rows += [(f"frontend {tier} switches", f"{n:,}") for tier, n in front["switches"].items()]
    rows += [(f"frontend oversubscription {t}", "-" if v is None else f"{v:.3f}:1")
             for t, v in front["oversubscription"].items()]
    rows += [(f"frontend transceivers {t}", f"{n:,}")
             for t, n in sorted(bom["transceivers"].items())]
    check = front["checkpoint"]
    rows += [("checkpoint 30 GB/GPU at least",
              f"{check['seconds']:.1f} s ({check['bottleneck'].replace('_', ' ')})"),
             ("frontend network power", f"{bom['power_w']['network'] / 1e3:,.0f} kW"),
             ("frontend network cost", f"${bom['cost_usd']['network'] / 1e6:,.1f} M")]
    return rows


def _merge_labels(lists: list[list[str]]) -> list[str]:
    """Union of row labels keeping groups together: a label missing so far goes right after
    its predecessor in the list that has it (or first), so the order of each list is kept.

    >>> _merge_labels([["a", "b", "d"], ["a", "b", "c", "d", "e"], ["x", "a"]])
    ['x', 'a', 'b', 'c', 'd', 'e']
    """
    merged: list[str] = []
    for labels in lists:
        previous = None
        for label in labels:
            if label not in merged:
                merged.insert(0 if previous is None else merged.index(previous) + 1, label)
            previous = label
    return merged


def _print(reports: list[dict[str, Any]], title: str) -> None:
    from rich.table import Table

    table = Table(title=title)
    table.add_column("")
    for report in reports:
        table.add_column(report["template"], justify="right")
    rows = [_rows(r) for r in reports]
    columns = [dict(r) for r in rows]
    labels = _merge_labels([[label for label, _ in r] for r in rows])
    for label in labels:
        table.add_row(label, *(c.get(label, "-") for c in columns))
    table_console().print(table)


def _split(args: list[str]) -> tuple[list[str], list[str]]:
    head = 0
    while head < len(args) and not args[head].startswith("--"):
        head += 1
    return args[:head], args[head:]


def _compare_options(template: str, options: dict[str, str], shared: set[str]) -> dict:
    from hpnsim.fabrics.registry import template_parameters

    params = template_parameters(template)
    return {k: v for k, v in options.items() if k in params or k == "gpus" or k not in shared}


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
                                  help="JSON unit table {name: {power_w, cost_usd}} "
                                       "overriding the BOM defaults."),
    ) -> None:
        """Build a fabric and print counts, oversubscription, ECMP path choices and its BOM.

        Builder parameters pass through as --name value, e.g.
        `hpnsim fabric hpn7 --segments 2 --dual-tor stacked`, `--gpus 15360` sizes a
        template (hpn7 exactly, in 1,024-GPU segments: `--gpus 131072` is 8 pods and 8
        segments of a 9th); `hpnsim fabric hpn7 --frontend` adds HPN's frontend network
        (its switches, optics, power and a checkpoint bound are reported apart); `hpnsim fabric compare hpn7 dcn_plus --gpus 15360` puts them side by side.
        """
        from hpnsim.fabrics.export import FORMATS, export
        from hpnsim.fabrics.registry import (
            TEMPLATES,
            build_fabric,
            sizing_note,
            template_parameters,
        )

        unit_table = _load_units(units)
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
            fabrics = [build_fabric(n, _compare_options(n, options, known)) for n in names]
        else:
            names, rest = _split(list(ctx.args))
            if names:
                raise InputError("arguments", f"unexpected argument {names[0]!r}; use --name value")
            fabrics = [build_fabric(template, parse_extra_options(rest))]
        for f in fabrics:
            f.meta["units"] = unit_table
            note = sizing_note(f)
            if note:
                typer.echo(f"note: gpus: {note}", err=True)
        reports = [fabric_report(f) for f in fabrics]
        if export_path:
            if len(fabrics) != 1:
                raise InputError("export", "export one fabric at a time, not a comparison")
            export(fabrics[0], export_path, fmt)
        if json_out:
            emit_json(reports[0] if len(reports) == 1 else {"fabrics": reports})
            return
        _print(reports, "fabric comparison" if len(reports) > 1 else f"fabric {template}")
        if export_path:
            typer.echo(f"wrote {export_path} ({fmt})")
