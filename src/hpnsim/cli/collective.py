"""CLI commands: ``hpnsim collective`` — nccl-tests-style sweeps of one collective on a fabric.

parse -> Scenario -> run -> report: the options become a scenario with one collective
(``collectives[0]``, keys named as the options; see :mod:`hpnsim.scenario.collectives`),
:func:`hpnsim.scenario.runner.run` runs it, and the table or JSON is printed from its result. Errors
name the option as typed, without dashes (``error: sizes: ...``), as this command always
has.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext

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
from hpnsim.collectives.ops import COLLECTIVE_ALGORITHMS, OPS, PROTOCOLS
from hpnsim.collectives.options import CollectiveOptions as Defaults
from hpnsim.routing.names import ROUTING_POLICIES


def collective_scenario(fabric: str, options: dict, *, op: str = "allreduce",
                        gpus: int | str = 0, sizes: str = "1M:1G", algo: str = Defaults.algo,
                        protocol: str = Defaults.protocol, routing: str = Defaults.routing,
                        channels: int = 0, qps: int = 1, root: int = Defaults.root,
                        seed: int = Defaults.seed, calibration: str | None = None,
                        per_rail: bool = False, gpu: str | None = None):
    """The scenario ``hpnsim collective`` runs: one collective (``gpus``: a count, 0 for every
    GPU, or indices and ranges such as ``"0-127,1024-1151"``, read as the scenario's
    ``collectives[].gpus``) on the fabric ``fabric`` with builder ``options``; errors named by
    option (``sizes``, ``gpus``).

    Parameters
    ----------
    fabric : str
        Fabric template.
    options : dict
        Options of the template's builder, as typed (``{"segments": "2"}``).
    op, gpus, sizes, algo, protocol, routing, channels, qps, root, seed, calibration
        The command's options (``channels`` 0: one per rail; ``calibration``: a file of
        ``hpnsim calibrate``).

    Returns
    -------
    Scenario
        Validated, with the collective as ``collectives[0]``.

    Examples
    --------
    >>> s = collective_scenario("fat_tree", {"k": "4"}, gpus=8, sizes="1M:4M")
    >>> s.collectives[0].sizes, s.fabric.options()
    ([1048576.0, 2097152.0, 4194304.0], {'k': '4'})
    >>> collective_scenario("fat_tree", {"k": "4"}, gpus="0-1,8-9").collectives[0].gpus
    [0, 1, 8, 9]
    """
    from hpnsim.cli.common import option_of, scenario_from_flags
    from hpnsim.errors import InputError

    if "template" in options:
        raise InputError("template", "name the fabric template with --fabric")
    if isinstance(gpus, str) and gpus.strip() in ("", "0"):
        gpus = 0
    spec = {"op": op, "gpus": gpus or None, "sizes": sizes, "algo": algo,
            "protocol": protocol, "channels": channels, "qps": qps, "root": root}
    if per_rail:
        spec["per_rail"] = True
    if gpu is not None:
        spec["gpu"] = gpu
    data = {"fabric": {**options, "template": fabric}, "routing": routing, "seed": seed,
            "collectives": [spec]}
    if calibration is not None:
        data["calibration"] = calibration
    return scenario_from_flags(data, name=option_of)


def _status():
    """A status line on stderr while the sizes run, when stderr is a terminal."""
    if not sys.stderr.isatty():
        return nullcontext(None)
    from rich.console import Console

    return Console(stderr=True).status("collective")


def register(app: typer.Typer) -> None:
    """Add ``collective`` to the root app (defaults and names from
    :class:`~hpnsim.collectives.options.CollectiveOptions` and :mod:`hpnsim.collectives.ops`).

    Parameters
    ----------
    app : typer.Typer
        The ``hpnsim`` app.

    Returns
    -------
    None

    Examples
    --------
    >>> app = typer.Typer()
    >>> register(app)
    >>> [c.callback.__name__ for c in app.registered_commands]
    ['collective']
    """

    @app.command(context_settings=PASS_THROUGH)
    @guarded
    def collective(
        ctx: typer.Context,
        fabric: str = typer.Option("hpn7", "--fabric", help="Fabric template (hpn7, dcn_plus, "
                                   "fat_tree, rail_optimized, rail_only); other --options "
                                   "pass through to its builder, e.g. --segments 2."),
        gpus: str = typer.Option("0", "--gpus", help="Group: a count N (the first N GPUs, "
                                 "host-major; 0 = every GPU of the fabric) or GPU indices and "
                                 "ranges in rank order, e.g. 0-127,1024-1151."),
        op: str = typer.Option("allreduce", "--op", help=f"{', '.join(OPS)}."),
        algo: str = typer.Option(Defaults.algo, "--algo",
                                 help=f"{', '.join(COLLECTIVE_ALGORITHMS)} or {Defaults.algo}."),
        protocol: str = typer.Option(Defaults.protocol, "--protocol",
                                     help=f"{', '.join(PROTOCOLS)} or {Defaults.protocol}."),
        routing: str = typer.Option(Defaults.routing, "--routing", help=f"{', '.join(ROUTING_POLICIES)}."),
        sizes: str = typer.Option("1M:1G", "--sizes", help="MIN:MAX[:FACTOR] or a comma list "
                                  "(bare prefixes are binary, as in nccl-tests)."),
        channels: int = typer.Option(0, "--channels", help="Parallel rings/trees (0 = one per "
                                     "rail)."),
        qps: int = typer.Option(1, "--qps", help="Connections per peer."),
        root: int = typer.Option(Defaults.root, "--root", help="Root rank of broadcast/reduce."),
        seed: int = typer.Option(Defaults.seed, "--seed", help="Seed of source ports and "
                                 "hashing."),
        calibration: str = typer.Option(None, "--calibration", help="Calibration file from "
                                        "`hpnsim calibrate` (NCCL efficiencies, latency)."),
        per_rail: bool = typer.Option(False, "--per-rail", help="One collective per rail "
                                      "(the selected GPUs with the same local index on every "
                                      "host), all run together (the HPN paper's "
                                      "Multi-AllReduce): busbw of the slowest, and each "
                                      "rail's."),
        gpu: str = typer.Option(None, "--gpu", help="GPU model (a100, h100, h200, h800, "
                                "b200): NCCL's parameters for it (NVLS on Hopper) and its "
                                "NVLink bandwidth; default: NCCL's generic parameters."),
        json_out: bool = typer.Option(False, "--json", help="Print a JSON list, one object "
                                      "per size (size in bytes, time_us, algbw/busbw GB/s)."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Simulate a collective over a size sweep and print an nccl-tests-style table."""
        from hpnsim.cli.common import errors_as_flags, option_of
        from hpnsim.errors import check_seed
        from hpnsim.scenario.runner import run

        check_seed(seed, "--seed")
        tables = TableFiles(csv, parquet)
        scenario = collective_scenario(fabric, parse_extra_options(list(ctx.args)), op=op,
                                       gpus=gpus, sizes=sizes, algo=algo, protocol=protocol,
                                       routing=routing, channels=channels, qps=qps,
                                       root=root, seed=seed, calibration=calibration,
                                       per_rail=per_rail, gpu=gpu)
        with errors_as_flags(option_of), _status() as status:
            result = run(scenario, progress=status.update if status else None)
        run_ = result.collectives[0]
        results = run_.results
        tables.write(run_.rows())
        if json_out:
            emit_json([r.to_dict() for r in results] if not per_rail else run_.to_dict())
            return
        typer.echo(f"# hpnsim collective: {results[0].op} on {len(result.collectives[0].gpus)} "
                   f"GPUs of {fabric} ({result.fabric['gpus']} GPUs), routing {routing}, "
                   f"seed {seed}")
        from hpnsim.report.text import collective_table

        typer.echo(collective_table(results, root))
        if per_rail:
            from hpnsim.report.text import rail_table

            typer.echo(rail_table(run_))
