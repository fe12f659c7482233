"""CLI command: ``hpnsim reliability --fabric hpn7 --gpus 3072 --dual-tor nonstacked``.

parse -> compute (:mod:`hpnsim.faults.reliability`) -> report (:mod:`hpnsim.report.reliability`).
Every input is checked before a fabric is built; errors name the flag (``error: --gpus: ...``).
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
)
from hpnsim.errors import InputError

#: dataclass field -> the flag that sets it
_FLAGS = {"interval_s": "--checkpoint-interval", "write_s": "--checkpoint-write",
          "restart_s": "--restart", "detection_s": "--detection", "template": "--fabric"}


def _flag(field: str) -> str:
    """The flag of a field of the conditions (a flag already stays as it is).

    >>> _flag("detection_s"), _flag("--detection"), _flag("gpu_hour_price")
    ('--detection', '--detection', '--gpu-hour-price')
    """
    if field.startswith("--"):
        return field
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


def _conditions(rates_file, overrides: dict, times: dict, price, switch, chassis_factor,
                pair_loss):
    from dataclasses import replace

    from hpnsim.faults.reliability import CheckpointPolicy, Conditions, FailureRates, load_rates
    from hpnsim.units import parse_time

    rates = load_rates(rates_file) if rates_file else FailureRates()
    rates = replace(rates, **{k: v for k, v in overrides.items() if v is not None})
    policy = CheckpointPolicy(**{field: parse_time(value, _flag(field))
                                 for field, value in times.items() if value is not None})
    return Conditions(rates, policy, price, switch=switch, chassis_factor=chassis_factor,
                      stacked_pair_loss=pair_loss)


def register(app: typer.Typer) -> None:
    """Add ``reliability`` to the root app."""

    @app.command(context_settings=PASS_THROUGH)
    @guarded
    def reliability(
        ctx: typer.Context,
        fabric: str = typer.Option("hpn7", "--fabric", help="Fabric template; other --options "
                                   "pass through to its builder (e.g. --pods 2)."),
        gpus: int = typer.Option(..., "--gpus", help="Job size: the first N GPUs of the fabric "
                                 "(whole hosts first)."),
        dual_tor: str = typer.Option("nonstacked", "--dual-tor",
                                     help="ToR design: single, stacked or nonstacked."),
        gpu_hour_price: float = typer.Option(None, "--gpu-hour-price", help="Price of one "
                                             "GPU-hour in your currency, for the cost rows (no "
                                             "default: it varies by provider, contract and "
                                             "GPU; without it, counts and GPU-hours only)."),
        compare: bool = typer.Option(False, "--compare", help="The three ToR designs side by "
                                     "side (and chassis switches with --chassis-factor)."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
        monte_carlo: bool = typer.Option(False, "--monte-carlo", help="Also draw failures "
                                         "over --years and give the monthly spread."),
        years: float = typer.Option(100.0, "--years", help="Years the Monte Carlo draws."),
        seed: int = typer.Option(0, "--seed", help="Seed of the Monte Carlo."),
        rates: str = typer.Option(None, "--rates", help="JSON/YAML file of failure rates "
                                  "(keys as the flags below, with underscores)."),
        link_per_month: float = typer.Option(None, "--link-per-month", help="Access-link "
                                             "failures per link per month (HPN: 0.00057)."),
        tor_per_month: float = typer.Option(None, "--tor-per-month", help="ToR critical "
                                            "failures per ToR per month (HPN: 0.00051)."),
        agg_per_month: float = typer.Option(None, "--agg-per-month", help="Agg failures per "
                                            "Agg per month (default: the ToR rate)."),
        uplink_per_month: float = typer.Option(None, "--uplink-per-month",
                                               help="ToR-Agg/Agg-core link failures per month."),
        link_repair_hours: float = typer.Option(None, "--link-repair-hours",
                                                help="Mean repair time of a link (h)."),
        switch_repair_hours: float = typer.Option(None, "--switch-repair-hours",
                                                  help="Mean repair time of a switch (h)."),
        repair_distribution: str = typer.Option(None, "--repair-distribution",
                                                help="exponential (default) or fixed."),
        interval: str = typer.Option(None, "--checkpoint-interval", help="e.g. 3h (HPN: 2-4h)."),
        write: str = typer.Option(None, "--checkpoint-write", help="e.g. 100s (HPN)."),
        restart: str = typer.Option(None, "--restart", help="Restart time after an "
                                    "interruption (default: reloading, 100s)."),
        detection: str = typer.Option(None, "--detection", help="Time to notice a failure "
                                      "(default: PyTorch's NCCL timeout, 10min)."),
        switch: str = typer.Option("single-chip", "--switch", help="single-chip or chassis "
                                   "(ToRs and Aggs)."),
        chassis_factor: float = typer.Option(None, "--chassis-factor", help="Chassis failure "
                                             "rate over single-chip (HPN: 'several times')."),
        stacked_pair_loss: float = typer.Option(None, "--stacked-pair-loss", help="P(a ToR "
                                                "failure takes its stacked pair down), 0..1."),
        plot: str = typer.Option(None, "--plot", help="Write a PNG of the designs."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Expected job interruptions, lost GPU-hours and their cost per month for a ToR design.

        A failure interrupts the job when it cuts a host off: with a single ToR, any access
        link or ToR of its hosts; with dual ToRs, both sides of a NIC at once (stacked pairs
        also lose the rack with --stacked-pair-loss). Lost GPU-hours: rollback to the last
        checkpoint (half an interval), detection and restart, times the job's GPUs, plus the
        time spent writing checkpoints. See docs/reliability.md.
        """
        from hpnsim.cli.common import check_figure_file, errors_as_flags, table_console
        from hpnsim.errors import check_seed
        from hpnsim.fabrics.registry import build_fabric
        from hpnsim.faults.montecarlo import monte_carlo as draw
        from hpnsim.faults.reliability import (
            DESIGNS,
            compare_designs,
            expected_reliability,
            job_exposure,
        )
        from hpnsim.report.reliability import monte_carlo_table, reliability_table

        options = parse_extra_options(list(ctx.args))
        if dual_tor not in DESIGNS:
            raise InputError("--dual-tor", f"choose one of {', '.join(DESIGNS)}, got {dual_tor!r}")
        if "dual_tor" in options or "gpus" in options:
            raise InputError("arguments", "give --dual-tor and --gpus once")
        check_seed(seed, "--seed")
        if plot:
            check_figure_file(plot)
        tables = TableFiles(csv, parquet)
        overrides = {"link_per_month": link_per_month, "tor_per_month": tor_per_month,
                     "agg_per_month": agg_per_month, "uplink_per_month": uplink_per_month,
                     "link_repair_hours": link_repair_hours,
                     "switch_repair_hours": switch_repair_hours,
                     "repair_distribution": repair_distribution}
        times = {"interval_s": interval, "write_s": write, "restart_s": restart,
                 "detection_s": detection}
        with errors_as_flags(_flag):
            cond = _conditions(rates, overrides, times, gpu_hour_price, switch, chassis_factor,
                               stacked_pair_loss)
            if monte_carlo and not 0 < years <= 100_000:
                raise InputError("years", f"must be in (0, 100000], got {years!r}")
            designs = DESIGNS if compare else (dual_tor,)
            if compare and stacked_pair_loss is None:   # no published figure to default to
                designs = tuple(d for d in DESIGNS if d != "stacked")
                from hpnsim.cli.common import note

                note("--compare leaves out the stacked dual ToR: give --stacked-pair-loss P "
                     "(the chance a ToR failure takes its stacked pair down) to include it")
            if "stacked" in designs:
                cond.pair_loss("stacked")   # ask for it before any fabric is built
            if compare:
                results = compare_designs(fabric, options, gpus, cond, designs)
                exposures = None
            else:
                built = build_fabric(fabric, {**options, "dual_tor": dual_tor})
                exposures = [job_exposure(built, gpus)]
                results = [expected_reliability(exposures[0], cond)]
            runs = []
            if monte_carlo:
                from dataclasses import replace

                for result in results:
                    exposure = exposures[0] if exposures else job_exposure(
                        build_fabric(fabric, {**options, "dual_tor": result.design}), gpus)
                    runs.append(draw(exposure, replace(cond, switch=result.switch), years, seed))
        dicts = [r.to_dict() for r in results]
        tables.write(dicts)   # one row per design; exposure and inputs flattened
        if plot:
            from hpnsim.report.reliability import plot_reliability

            plot_reliability(dicts, plot, f"{fabric}, {gpus:,} GPUs")
        if json_out:
            out = dict(dicts[0]) if not compare else {"designs": dicts}
            if runs:
                if compare:
                    out["monte_carlo"] = runs
                else:
                    out["monte_carlo"] = {k: v for k, v in runs[0].items() if k != "expected"}
            emit_json(out)
            return
        console = table_console()
        console.print(reliability_table(dicts, f"reliability: {fabric}, {gpus:,} GPUs"))
        if runs:
            console.print(monte_carlo_table(runs, f"Monte Carlo: {years:g} years, seed {seed} "
                                                  f"(monthly spread)"))
        if plot:
            typer.echo(f"wrote {plot}")
