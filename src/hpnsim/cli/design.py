"""CLI command: ``hpnsim design --chip 51.2T --nic-ports 2 --nic-speed 200G [--ladder]``.

parse -> compute (:mod:`hpnsim.design`) -> report (:mod:`hpnsim.report.design`). Every input
is checked before any design is computed; errors name the flag (``error: --nic-speed: ...``).
"""

from __future__ import annotations

import typer

from hpnsim.cli.common import emit_json, guarded
from hpnsim.errors import InputError


def register(app: typer.Typer) -> None:
    """Add ``design`` to the root app."""

    @app.command()
    @guarded
    def design(
        chip: str = typer.Option("51.2T", "--chip", help="Switch chip: 25.6T, 51.2T or 102.4T "
                                 "(lanes, port speeds; power and price from the BOM table)."),
        nic_ports: int = typer.Option(2, "--nic-ports", help="Ports of each GPU's NIC."),
        nic_speed: str = typer.Option("200G", "--nic-speed", help="Speed of one NIC port."),
        uplink_speed: str = typer.Option(None, "--uplink-speed", help="ToR-Agg-core link "
                                         "speed (default: twice the NIC port, HPN's 400G)."),
        domain: str = typer.Option("hgx-h800", "--domain", help="Scale-up domain: hgx-h800, "
                                   "hgx-h100, nvl72, gh200-256 or a GPU count (<= 256)."),
        nvlink: str = typer.Option(None, "--nvlink", help="NVLink bandwidth per GPU "
                                   "(bidirectional) of the domain, e.g. 1.8TB/s."),
        rails: int = typer.Option(None, "--rails", help="Rails (must divide the domain's "
                                  "GPUs; default: its largest divisor up to 8)."),
        tor_oversub: str = typer.Option(None, "--tor-oversub", help="Largest ToR down:up "
                                        "allowed, e.g. 1 or 16/15 (default: HPN's 16/15)."),
        agg_oversub: str = typer.Option(None, "--agg-oversub", help="Agg down:up toward the "
                                        "core, e.g. 15:1 (default: HPN's 15)."),
        power_budget: str = typer.Option(None, "--power-budget", help="Building power, e.g. "
                                         "18MW (GPUs, backup hosts and network)."),
        gpu_power: str = typer.Option(None, "--gpu-power", help="Power per GPU all-in, e.g. "
                                      "1035W (default: the BOM's DGX H100 maximum, 1275W)."),
        gpus: int = typer.Option(None, "--gpus", help="Target GPUs: size every design for "
                                 "them (default: each at its largest)."),
        ladder_out: bool = typer.Option(False, "--ladder", help="The mechanism ladder (the "
                                        "HPN paper's Table 2 and Table 4) for this chip."),
        emit: str = typer.Option(None, "--emit", help="Print the hpnsim fabric command and "
                                 "the scenario fabric block that build design NAME."),
        compare_work: str = typer.Option(None, "--compare", help="Run one workload on the "
                                         "top three designs (or --designs) side by side: a "
                                         "collective OP:SIZE:GPUS (allreduce:1GiB:2048) or "
                                         "an iteration train:MODEL:TP:PP:DP."),
        designs_named: str = typer.Option(None, "--designs", help="Comma-separated design "
                                          "names for --compare."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
        plot: str = typer.Option(None, "--plot", help="Write the scale-against-cost figure."),
    ) -> None:
        """Derive the fabric family from a chip, NICs and a scale-up domain: every design's
        scale, switches, optics, power, cost per GPU, hops, ECMP paths and binding constraint.

        `hpnsim design --ladder` shows how each mechanism (dual ToR, rail-optimized, dual plane,
        15:1 oversubscription, rail-only tier 2) multiplies the scale of a plain Clos, with the
        arithmetic; `hpnsim design --chip 102.4T --emit 2tier-dualtor-rail-dualplane` prints the
        template that builds HPN's shape on the next chip. See docs/design-space.md.
        """
        from hpnsim.cli.common import check_figure_file, table_console
        from hpnsim.design import design_inputs, design_space, ladder, scenario_block
        from hpnsim.design.records import design_dict, inputs_dict
        from hpnsim.report.design import designs_table, ladder_table, plot_designs

        if plot:
            check_figure_file(plot)
        work = None
        if compare_work is not None:
            from hpnsim.design.compare import parse_workload

            work = parse_workload(compare_work)
            gpus = max(gpus or 0, work.gpus)   # every design built for the collective
        elif designs_named is not None:
            raise InputError("designs", "names the designs of --compare; give --compare too")
        inputs = design_inputs(chip=chip, nic_ports=nic_ports, nic_speed=nic_speed,
                               uplink_speed=uplink_speed, domain=domain, nvlink=nvlink,
                               rails=rails, tor_oversub=tor_oversub, agg_oversub=agg_oversub,
                               power_budget=power_budget, gpus=gpus, gpu_power=gpu_power)
        head = inputs_dict(inputs)
        if work is not None:
            from hpnsim.design.compare import compare, pick
            from hpnsim.report.design import compare_table

            names = None if designs_named is None else [
                n.strip() for n in designs_named.split(",") if n.strip()]
            rows = compare(inputs, pick(design_space(inputs), work, names), work)
            what = (f"{work.model} TP {work.tp} PP {work.pp} DP {work.dp}" if work.model
                    else f"{work.op} of {compare_work.split(':')[1]}")
            if json_out:
                emit_json({"inputs": head, "workload": {"spec": compare_work,
                                                        "gpus": work.gpus}, "compare": rows})
            else:
                typer.echo(compare_table(rows, f"{what} on {work.gpus:,} GPUs"))
            return
        if ladder_out:
            steps = [s.to_dict() for s in ladder(inputs)]
            if json_out:
                emit_json({"inputs": head, "ladder": steps})
            else:
                table_console().print(ladder_table(
                    steps, f"mechanism ladder: {inputs.chip.name}, {nic_ports} x {nic_speed} "
                           f"NICs, {inputs.rails} rails"))
            return
        designs = [design_dict(inputs, x) for x in design_space(inputs)]
        if emit is not None:
            chosen = {x["name"]: x for x in designs}
            if emit not in chosen:
                raise InputError("emit", f"no design {emit!r}; choose one of "
                                         f"{', '.join(sorted(chosen))}")
            x = chosen[emit]
            if not x["feasible"]:
                raise InputError("emit", f"{emit} cannot be built with these inputs: "
                                         f"{x['binding']}: {x['reason']}")
            template, options = x["emit"]["template"], x["emit"]["options"]
            yaml = scenario_block(template, options)
            if json_out:
                emit_json({"name": emit, "template": template, "options": options,
                           "command": x["emit"]["command"], "scenario_yaml": yaml})
            else:
                typer.echo(x["emit"]["command"])
                typer.echo("")
                typer.echo(yaml)
            return
        if json_out:
            emit_json({"inputs": head, "designs": designs})
        else:
            typer.echo(designs_table(
                designs, f"designs: {inputs.chip.name}, {nic_ports} x {nic_speed} NICs, "
                         f"{inputs.domain.name}, {inputs.rails} rails"))
        if plot:
            plot_designs(designs, plot, f"{inputs.chip.name}, {nic_ports} x {nic_speed} NICs")
            if not json_out:
                typer.echo(f"wrote {plot}")
