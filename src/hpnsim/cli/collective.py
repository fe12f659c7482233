"""CLI commands: ``hpnsim collective`` — nccl-tests-style sweeps of one collective on a fabric.

parse -> Scenario -> run -> report: the options become a scenario with one collective
(``collectives[0]``, keys named as the options; see :mod:`hpnsim.scenario.collectives`),
:func:`hpnsim.scenario.runner.run` runs it, and the table or JSON is printed from its result. Errors
name the option as typed, without dashes (``error: sizes: ...``), as this command always
has.
"""

from __future__ import annotations

import sys
import warnings
from contextlib import nullcontext

import typer

from hpnsim.cli.common import (
    PASS_THROUGH,
    TableFiles,
    calibration_option,
    csv_option,
    emit_json,
    guarded,
    max_packets_option,
    packet_params_option,
    parquet_option,
    parse_extra_options,
    watch_option,
)
from hpnsim.collectives.ops import COLLECTIVE_ALGORITHMS, OPS, PROTOCOLS
from hpnsim.collectives.planning.options import CollectiveOptions as Defaults
from hpnsim.routing.names import ROUTING_POLICIES


def collective_scenario(fabric: str, options: dict, *, op: str = "allreduce",
                        gpus: int | str = 0, sizes: str = "1M:1G", algo: str = Defaults.algo,
                        protocol: str = Defaults.protocol, routing: str = Defaults.routing,
                        channels: int = 0, qps: int = 1, root: int = Defaults.root,
                        seed: int = Defaults.seed, calibration: str | None = None,
                        per_rail: bool = False, gpu: str | None = None,
                        engine: dict | None = None, lag: str = "balanced"):
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
    engine : dict, optional
        The scenario's ``engine:`` key (:class:`~hpnsim.scenario.engine.EngineSpec`);
        None: the flow engine.

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
    if lag != "balanced":
        data["lag"] = lag
    if calibration is not None:
        data["calibration"] = calibration
    if engine is not None:
        data["engine"] = engine
    return scenario_from_flags(data, name=option_of)


def engine_settings(engine: str, packet_params: str | None, window: bool,
                    max_packets: float | None, watch: str | None,
                    share_rails: bool = True) -> dict | None:
    """The ``engine:`` key of ``--engine`` and the packet options (None for the flow
    engine); packet options without ``--engine packet`` are refused, each named.

    >>> engine_settings("packet", None, True, 1e6, "a->b,c->d")["watch"]
    ['a->b', 'c->d']
    >>> engine_settings("flow", None, False, None, None)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --no-window: sets the packet engine; add --engine packet
    """
    from hpnsim.errors import InputError
    from hpnsim.scenario.engine import ENGINES

    if engine not in ENGINES:
        raise InputError("engine", f"must be {' or '.join(ENGINES)}, got {engine!r}")
    given = {"packet_params": packet_params is not None, "--no-window": not window,
             "--no-share-rails": not share_rails,
             "max_packets": max_packets is not None, "watch": watch is not None}
    if engine == "flow":
        for name, set_ in given.items():
            if set_:
                raise InputError(name, "sets the packet engine; add --engine packet")
        return None
    if max_packets is not None and not max_packets > 0:
        raise InputError("max_packets", f"must be > 0, got {max_packets:g}")
    out: dict = {"kind": "packet", "window": window}
    if not share_rails:
        out["share_rails"] = False
    if packet_params is not None:
        from hpnsim.scenario.engine import EngineSpec

        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", DeprecationWarning)
                EngineSpec(kind="packet", params=packet_params)
        except ValueError as exc:      # pydantic's, with the message the spec wrote
            message = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise InputError("packet_params", message.removeprefix("params: ")) from None
        for warning in caught:         # an old parameter name in the file: say so
            if issubclass(warning.category, DeprecationWarning):
                from hpnsim.cli.common import note

                note(str(warning.message))
        out["params"] = packet_params
    if max_packets is not None:
        out["max_packets"] = max_packets
    if watch:
        out["watch"] = [w.strip() for w in watch.split(",") if w.strip()]
    return out


def _engine_name(path: str) -> str:
    """Errors of the ``engine:`` key named by this command's options."""
    from hpnsim.cli.common import option_of

    if path.startswith("engine"):
        last = path.rsplit(".", 1)[-1]
        return {"params": "packet_params", "engine": "engine"}.get(last, last)
    return option_of(path)


def _status():
    """A status line on stderr while the sizes run, when stderr is a terminal."""
    if not sys.stderr.isatty():
        return nullcontext(None)
    from rich.console import Console

    return Console(stderr=True).status("collective")


def register(app: typer.Typer) -> None:
    """Add ``collective`` to the root app (defaults and names from
    :class:`~hpnsim.collectives.planning.options.CollectiveOptions` and :mod:`hpnsim.collectives.ops`).

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
        lag: str = typer.Option("balanced", "--lag", help="hpn_dual_plane: how each bonded "
                                "NIC puts its QPs on its ports: balanced, queue_affinity "
                                "(mlx5 round-robin per QP) or hash (mlx5 hash mode); "
                                "docs/failures.md."),
        sizes: str = typer.Option("1M:1G", "--sizes", help="MIN:MAX[:FACTOR] or a comma list "
                                  "(bare prefixes are binary, as in nccl-tests)."),
        channels: int = typer.Option(0, "--channels", help="Parallel rings/trees (0 = one per "
                                     "rail)."),
        qps: int = typer.Option(1, "--qps", help="Connections per peer."),
        root: int = typer.Option(Defaults.root, "--root", help="Root rank of broadcast/reduce."),
        seed: int = typer.Option(Defaults.seed, "--seed", help="Seed of source ports and "
                                 "hashing."),
        calibration: str = calibration_option(),
        per_rail: bool = typer.Option(False, "--per-rail", help="One collective per rail "
                                      "(the selected GPUs with the same local index on every "
                                      "host), all run together (the HPN paper's "
                                      "Multi-AllReduce): busbw of the slowest, and each "
                                      "rail's; with --engine packet, all rails in one packet "
                                      "run (shared queues and counters)."),
        gpu: str = typer.Option(None, "--gpu", help="GPU model (a100, h100, h200, h800, "
                                "b200): NCCL's parameters for it (NVLS on Hopper) and its "
                                "NVLink bandwidth; default: the GPU of the fabric's hosts "
                                "(H800 on hpn7 and dcn_plus, the HPN paper's)."),
        json_out: bool = typer.Option(False, "--json", help="Print a JSON list, one object "
                                      "per size (size in bytes, time_us, algbw/busbw GB/s)."),
        engine: str = typer.Option("flow", "--engine", help="flow (max-min, default) or "
                                   "packet (queues, ECN, PFC, DCQCN; rings as NCCL's "
                                   "chunked steps, other algorithms as their task graph's "
                                   "flows; --per-rail rings too; docs/packet.md)."),
        packet_params: str = packet_params_option(),
        window: bool = typer.Option(True, "--window/--no-window", help="packet: simulate "
                                    "ring steps until the per-step time is stable and "
                                    "extrapolate (default), or every step (rings only)."),
        share_rails: bool = typer.Option(True, "--share-rails/--no-share-rails", help="packet: "
                                         "a tree or NVLS-tree whose rails run alike (one "
                                         "HPN segment) simulates one rail and copies it to "
                                         "the others (default), or every rail."),
        max_packets: float = max_packets_option("default 5e7, ~20-40 s"),
        watch: str = watch_option(),
        queue_plot: str = typer.Option(None, "--queue-plot", help="packet: save the queue at "
                                       "the watched ports over time (largest size) to this "
                                       "PNG/SVG."),
        queue_trace: str = typer.Option(None, "--queue-trace", help="packet: write the queue "
                                        "at the watched ports (largest size) as "
                                        "Chrome-trace counters (open in Perfetto)."),
        show_params: bool = typer.Option(False, "--show-params", help="packet: print the "
                                         "parameters in effect with their sources and exit."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Simulate a collective over a size sweep and print an nccl-tests-style table."""
        from hpnsim.cli.common import check_output_file, errors_as_flags
        from hpnsim.errors import InputError, check_seed
        from hpnsim.scenario.runner import run

        check_seed(seed, "--seed")
        tables = TableFiles(csv, parquet)
        settings = engine_settings(engine, packet_params, window, max_packets, watch,
                                   share_rails)
        for name, value in (("show_params", show_params), ("queue_plot", queue_plot),
                            ("queue_trace", queue_trace)):
            if value and settings is None:
                raise InputError(name, "shows the packet engine; add --engine packet")
        for name, value in (("queue_plot", queue_plot), ("queue_trace", queue_trace)):
            if value:
                check_output_file(value, name)
        scenario = collective_scenario(fabric, parse_extra_options(list(ctx.args)), op=op,
                                       gpus=gpus, sizes=sizes, algo=algo, protocol=protocol,
                                       routing=routing, channels=channels, qps=qps,
                                       root=root, seed=seed, calibration=calibration,
                                       per_rail=per_rail, gpu=gpu, engine=settings, lag=lag)
        if show_params:
            from hpnsim.packet import params_dict
            from hpnsim.report.packet import params_table

            params = params_dict(scenario.engine.packet_params())
            if json_out:
                emit_json(params)
            else:
                typer.echo(params_table(params))
            return
        with errors_as_flags(_engine_name), _status() as status:
            result = run(scenario, progress=status.update if status else None)
        run_ = result.collectives[0]
        results = run_.results
        tables.write(run_.rows())
        if queue_plot or queue_trace:
            from hpnsim.report.packet import plot_queue
            from hpnsim.report.packet import queue_trace as trace_of
            from hpnsim.report.trace import write_trace

            last = max(results, key=lambda r: r.size).to_dict()
            title = f"{results[0].op}, {int(last['size'])} B, {fabric}, routing {routing}"
            if queue_plot:
                plot_queue(last, queue_plot, title)
            if queue_trace:
                write_trace(trace_of(last["packet"]["queue"], title), queue_trace)
        if json_out:
            emit_json([r.to_dict() for r in results] if not per_rail else run_.to_dict())
            return
        from hpnsim.fabrics.hosts import gpu_choice

        used, source = gpu_choice(fabric, gpu)
        uses = "NVLink; NCCL's parameters from --calibration" if calibration else \
            "NCCL's parameters, NVLink"
        typer.echo(f"# hpnsim collective: {results[0].op} on {len(result.collectives[0].gpus)} "
                   f"GPUs of {fabric} ({result.fabric['gpus']} GPUs), routing {routing}, "
                   f"seed {seed}; GPU {used.upper()} ({uses}) from {source}")
        from hpnsim.report.text import collective_table

        typer.echo(collective_table(results, root))
        if settings is not None:
            from hpnsim.report.packet import packet_table, ports_table

            rows = [r.to_dict() for r in results]
            typer.echo("# packet engine (docs/packet.md)")
            typer.echo(packet_table(rows))
            last = max(rows, key=lambda r: r["size"])
            typer.echo(f"# fullest queues at {int(last['size'])} B")
            typer.echo(ports_table(last))
            if queue_plot:
                typer.echo(f"# queue figure: {queue_plot}")
        if per_rail:
            from hpnsim.report.text import rail_table

            typer.echo(rail_table(run_))
