"""CLI commands: ``hpnsim collective`` — nccl-tests-style sweeps of one collective on a fabric."""

from __future__ import annotations

import sys

import typer

from hpnsim.cli.common import PASS_THROUGH, emit_json, guarded, parse_extra_options
from hpnsim.errors import InputError
from hpnsim.fabrics import build_fabric
from hpnsim.report.text import ELEMENT_BYTES as _ELEMENT_BYTES  # nccl-tests type: float


def _progress(total: int):
    """A rich progress bar on stderr when it is a terminal, else None."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(TextColumn("collective"), BarColumn(), MofNCompleteColumn(),
                    console=Console(stderr=True), transient=True)


def sweep(fabric, op: str, gpus, sizes: list[float], **options) -> list:
    """Run the collective at every size; returns the :class:`CollectiveResult` list."""
    from hpnsim.collectives import run_collective

    progress = _progress(len(sizes))
    results = []
    if progress is None:
        return [run_collective(fabric, op, gpus, s, **options) for s in sizes]
    with progress:
        task = progress.add_task("sizes", total=len(sizes))
        for s in sizes:
            results.append(run_collective(fabric, op, gpus, s, **options))
            progress.advance(task)
    return results


def _larger_fabric_hint(template: str, options: dict, n: int) -> str:
    """``"; for a larger fabric pass --pods P"`` when a pod count would hold ``n`` GPUs."""
    import math

    from hpnsim.fabrics.registry import planned_gpus, template_parameters

    if n < 2 or "pods" not in template_parameters(template) or "gpus" in options:
        return ""
    keep = {k: v for k, v in options.items() if k not in ("pods", "last_pod_segments")}
    try:
        pods = math.ceil(n / planned_gpus(template, {**keep, "pods": 1}))
        planned_gpus(template, {**keep, "pods": pods})
    except InputError:
        return ""
    return f"; for a larger fabric pass --pods {pods}"


def register(app: typer.Typer) -> None:
    """Add ``collective`` to the root app."""

    @app.command(context_settings=PASS_THROUGH)
    @guarded
    def collective(
        ctx: typer.Context,
        fabric: str = typer.Option("hpn7", "--fabric", help="Fabric template (hpn7, dcn_plus, "
                                   "fat_tree, rail_optimized, rail_only); other --options "
                                   "pass through to its builder, e.g. --segments 2."),
        gpus: int = typer.Option(0, "--gpus", help="Group size: the first N GPUs (host-major); "
                                 "0 = every GPU of the fabric."),
        op: str = typer.Option("allreduce", "--op", help="allreduce, allgather, reducescatter, "
                               "alltoall, broadcast, reduce, sendrecv, send."),
        algo: str = typer.Option("auto", "--algo", help="ring, tree, hd, hier, direct or auto."),
        protocol: str = typer.Option("auto", "--protocol", help="ll, ll128, simple or auto."),
        routing: str = typer.Option("ecmp", "--routing", help="ecmp, hpn_dual_plane, precise, "
                                    "spray."),
        sizes: str = typer.Option("1M:1G", "--sizes", help="MIN:MAX[:FACTOR] or a comma list "
                                  "(bare prefixes are binary, as in nccl-tests)."),
        channels: int = typer.Option(0, "--channels", help="Parallel rings/trees (0 = one per "
                                     "rail)."),
        qps: int = typer.Option(1, "--qps", help="Connections per peer."),
        root: int = typer.Option(0, "--root", help="Root rank of broadcast/reduce."),
        seed: int = typer.Option(0, "--seed", help="Seed of source ports and hashing."),
        json_out: bool = typer.Option(False, "--json", help="Print a JSON list, one object "
                                      "per size (size in bytes, time_us, algbw/busbw GB/s)."),
    ) -> None:
        """Simulate a collective over a size sweep and print an nccl-tests-style table."""
        from hpnsim.collectives.ops import (
            check_supported,
            normalize_algorithm,
            normalize_op,
            normalize_protocol,
        )
        from hpnsim.routing.route import POLICIES
        from hpnsim.units import parse_size_range

        canonical_op, canonical_algo = normalize_op(op), normalize_algorithm(algo)
        if canonical_algo != "auto":
            check_supported(canonical_op, canonical_algo)
        normalize_protocol(protocol)
        if routing not in POLICIES:
            raise InputError("routing", f"must be one of {', '.join(POLICIES)}, got {routing!r}")
        size_list = parse_size_range(sizes, "sizes")
        if any(s < _ELEMENT_BYTES for s in size_list):
            raise InputError("sizes", f"must be at least {_ELEMENT_BYTES} bytes (one float "
                                      f"element), got {sizes!r}")
        from hpnsim.errors import check_seed
        from hpnsim.fabrics.registry import planned_gpus

        check_seed(seed, "--seed")
        if channels < 0:
            raise InputError("channels", f"must be >= 0, got {channels}")
        options = parse_extra_options(list(ctx.args))
        have = planned_gpus(fabric, options)   # checks only: refuse before building
        n = have if gpus == 0 else gpus
        if n < 2 or n > have:
            raise InputError("gpus", f"must be 2..{have:,} (a collective needs two GPUs; the "
                                     f"fabric has {have:,}), got {gpus}"
                                     + _larger_fabric_hint(fabric, options, n))
        built = build_fabric(fabric, options)
        results = sweep(built, op, list(range(n)), size_list, algo=algo, protocol=protocol,
                        routing=routing, channels=channels or None, qps=qps, seed=seed,
                        root=root)
        if json_out:
            emit_json([r.to_dict() for r in results])
            return
        typer.echo(f"# hpnsim collective: {results[0].op} on {n} GPUs of {fabric} "
                   f"({built.n_gpus} GPUs), routing {routing}, seed {seed}")
        from hpnsim.report.text import collective_table

        typer.echo(collective_table(results, root))
