"""CLI commands: ``hpnsim wiring plan | check | impact`` (docs/wiring.md).

``plan`` writes a fabric's cabling plan; ``check`` compares a plan with lldpd's neighbour
tables (and observed hop lists), exit 0 when the fabric matches, 1 when it does not, 2 on
bad input; ``impact`` runs the collectives that cross the miswired ports on the planned
and the as-built fabric.
"""

from __future__ import annotations

import typer

from hpnsim.cli.common import PASS_THROUGH, emit_json, guarded, parse_extra_options
from hpnsim.errors import InputError

wiring_app = typer.Typer(name="wiring", no_args_is_help=True,
                         help="Cabling plan of a fabric, the check of what was built against "
                              "it, and what a miswire costs.")


def _tables(plan, lldp: str | None):
    from hpnsim.wiring.lldp import read_neighbour_tables

    if lldp is None:
        return None
    return read_neighbour_tables(lldp, plan.devices)


def _echo_findings(report) -> None:
    typer.echo(f"# {report.cables:,} planned cables, {report.matched:,} matched, "
               f"{len(report.missing)} missing, {len(report.unexpected)} unexpected, "
               f"{len(report.swaps)} swaps, {len(report.one_sided)} seen from one end "
               f"({report.tables} tables)")
    for a, b in report.swaps:
        typer.echo(f"swap ({a['class']}): {a['a_device']} {a['a_port']} - {a['b_device']} "
                   f"{a['b_port']} and {b['a_device']} {b['a_port']} - {b['b_device']} "
                   f"{b['b_port']}: {a['fix']}")
    for item in report.missing:
        typer.echo(f"missing: {item['a_device']} {item['a_port']} - {item['b_device']} "
                   f"{item['b_port']} ({item['why']})")
    for item in report.unexpected:
        typer.echo(f"unexpected ({item['class']}): {item['a_device']} {item['a_port']} - "
                   f"{item['b_device']} {item['b_port']}")
    for item in report.one_sided:
        typer.echo(f"one end only: {item['a_device']} {item['a_port']} - {item['b_device']} "
                   f"{item['b_port']} (seen by {item['seen_from']}, not listed by "
                   f"{item['not_listed_by']})")


def register(app: typer.Typer) -> None:
    """Add the ``wiring`` group (``plan``, ``check``, ``impact``) to the root app.

    >>> app = typer.Typer()
    >>> register(app)
    >>> [c.callback.__name__ for c in wiring_app.registered_commands]
    ['plan', 'check', 'impact']
    """
    app.add_typer(wiring_app, name="wiring")


@wiring_app.command(context_settings=PASS_THROUGH)
@guarded
def plan(
    ctx: typer.Context,
    template: str = typer.Argument(..., help="Fabric template (hpn7, dcn_plus, "
                                   "rail_optimized, rail_only, fat_tree, lingjun); its "
                                   "parameters pass through as --name value."),
    out: str = typer.Option(None, "--out", help="Write the plan as CSV to this file "
                            "(default: CSV on stdout)."),
    in_host: bool = typer.Option(False, "--in-host", help="Also list the NVLink and PCIe "
                                 "links inside each host."),
    json_out: bool = typer.Option(False, "--json", help="Print the plan as one JSON object "
                                  "(fabric, counts, cables)."),
) -> None:
    """Write a fabric's cabling plan: one row per cable (a_device,a_port,b_device,b_port,
    speed,medium), devices and ports named as in docs/wiring.md."""
    from hpnsim.cli.common import check_output_file
    from hpnsim.fabrics.registry import build_fabric
    from hpnsim.wiring.plan import cabling_plan
    from hpnsim.wiring.planfile import plan_csv, plan_json

    if out:
        check_output_file(out, "--out")
    options = parse_extra_options(list(ctx.args))
    fabric = build_fabric(template, options)
    cables = cabling_plan(fabric, template, options, in_host=in_host)
    if out:
        from hpnsim.results import write_atomic

        write_atomic(out, plan_csv(cables))
    if json_out:
        emit_json(plan_json(cables))
    elif out:
        counts = cables.counts()
        detail = "; ".join(f"{net}: " + ", ".join(f"{n:,} {cls}" for cls, n in
                                                  section["cables"].items())
                           for net, section in counts.items())
        typer.echo(f"wrote {out}: {len(cables.cables):,} cables ({detail})")
    else:
        typer.echo(plan_csv(cables), nl=False)


@wiring_app.command()
@guarded
def check(
    plan_file: str = typer.Argument(..., metavar="PLAN", help="Plan file written by "
                                    "`hpnsim wiring plan` (CSV or JSON)."),
    lldp: str = typer.Option(None, "--lldp", help="Folder of DEVICE.json files, each the "
                             "output of `lldpcli -f json show neighbors` on that device."),
    paths: str = typer.Option(None, "--paths", help="JSON lines of observed hop lists "
                              "{source, destination, hops}, checked against the planned "
                              "routes."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object {cables, "
                                  "matched, missing, unexpected, swaps, ...}."),
) -> None:
    """Compare what was built with the plan. Exit 0 when it matches, 1 when it does not,
    2 on bad input."""
    from hpnsim.wiring.diff import check as check_plan
    from hpnsim.wiring.planfile import read_plan

    if lldp is None and paths is None:
        raise InputError("--lldp", "give neighbour tables (--lldp DIR), hop lists "
                                   "(--paths FILE) or both")
    planned = read_plan(plan_file)
    tables = _tables(planned, lldp)
    hops = None
    if paths is not None:
        from hpnsim.wiring.hops import check_hops, read_hops

        hops = check_hops(planned, read_hops(paths, planned))
    out: dict = {}
    ok = True
    if tables is not None:
        report = check_plan(planned, *tables)
        out = report.to_dict()
        ok = report.ok
    if hops is not None:
        out["paths"] = hops
        ok = ok and all(p["ok"] for p in hops)
    if json_out:
        emit_json(out)
    else:
        if tables is not None:
            _echo_findings(report)
        for item in hops or []:
            if not item["ok"]:
                typer.echo(f"path {item['source']} -> {item['destination']}: departs at hop "
                           f"{item['departs_at']}: {item['why']}")
        if hops is not None:
            typer.echo(f"# {sum(p['ok'] for p in hops)} of {len(hops)} paths follow the plan")
    if not ok:
        raise typer.Exit(code=1)


@wiring_app.command()
@guarded
def impact(
    plan_file: str = typer.Argument(..., metavar="PLAN", help="Plan file written by "
                                    "`hpnsim wiring plan`."),
    lldp: str = typer.Option(..., "--lldp", help="Folder of DEVICE.json neighbour tables "
                             "(lldpcli -f json show neighbors)."),
    gpus: str = typer.Option(None, "--gpus", help="Run this group instead (GPU indices and "
                             "ranges, e.g. 0-7,64-71); default: the rail's and the "
                             "segment's all-reduce of every miswired NIC."),
    op: str = typer.Option("allreduce", "--op", help="Collective to run (on --gpus, or on "
                           "the default groups)."),
    size: str = typer.Option("1GiB", "--size", help="Bytes per collective (nccl-tests "
                             "convention)."),
    routing: str = typer.Option(None, "--routing", help="Routing policy (default: the "
                                "fabric's own: hpn_dual_plane on a dual-plane fabric, else "
                                "ecmp)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object per "
                                  "collective, before and after."),
) -> None:
    """Run the collectives that cross the miswired ports on the planned and on the as-built
    fabric: busbw before and after, and the links that now collide."""
    from hpnsim.collectives.ops import normalize_op
    from hpnsim.routing.names import ROUTING_POLICIES
    from hpnsim.units import parse_size
    from hpnsim.wiring.impact import wiring_impact
    from hpnsim.wiring.planfile import read_plan

    nbytes = parse_size(size, "--size")
    op = normalize_op(op)
    if routing is not None and routing not in ROUTING_POLICIES:
        raise InputError("--routing", f"choose one of {', '.join(ROUTING_POLICIES)}, got "
                                      f"{routing!r}")
    planned = read_plan(plan_file)
    sightings, reported = _tables(planned, lldp)
    result = wiring_impact(planned, sightings, reported, gpus=gpus, op=op, size=nbytes,
                           routing=routing)
    if json_out:
        emit_json(result)
        return
    typer.echo(_impact_text(result))


def _impact_text(result: dict) -> str:
    """The impact as lines: the miswires, then one block per collective."""
    from hpnsim.units import format_bytes

    found = result["findings"]
    lines = [f"# {found['swaps']} swaps, {found['missing']} missing, {found['unexpected']} "
             f"unexpected; {len(result['changed_nodes'])} nodes cabled otherwise than planned"]
    for a, b in result["swaps"]:
        lines.append(f"swap ({a['class']}): {a['a_device']} {a['a_port']} <-> {b['a_device']} "
                     f"{b['a_port']}: {a['fix']}")
    if not result["collectives"]:
        lines.append("no network link differs from the plan: no collective is affected")
    for c in result["collectives"]:
        head = (f"{c['label']}: {c['op']} ({c['algo']}) of {c['n_gpus']} GPUs, "
                f"{format_bytes(c['size'])}, routing {c['routing']}")
        lines.append(head)
        if not c["reachable"]:
            lines.append(f"  busbw {c['busbw_planned']:.1f} GB/s planned; as built it cannot "
                         f"run: {c['why']}")
            continue
        lines.append(f"  busbw {c['busbw_planned']:.1f} GB/s planned, {c['busbw_as_built']:.1f} "
                     f"GB/s as built ({c['busbw_change_percent']:+.1f}%); through the Agg "
                     f"tier {format_bytes(c['uplink_bytes_planned'])} -> "
                     f"{format_bytes(c['uplink_bytes_as_built'])}")
        lines.append(f"  bottleneck {c['bottleneck_planned']} -> {c['bottleneck_as_built']}")
        if c["colliding_links"]:
            lines.append(f"  {c['colliding_links']} links now carry more flows than planned:")
            for item in c["colliding"]:
                lines.append(f"    {item['link']}: {item['flows']:g} flows (planned "
                             f"{item['flows_planned']:g})")
    return "\n".join(lines)
