"""CLI command: ``hpnsim calibrate LOG... --fabric TEMPLATE`` — fit NCCL's efficiencies and
latency to nccl-tests logs (:mod:`hpnsim.collectives.nccl.calibrate`) and write a calibration
file that ``collective``, ``train`` and ``run`` take (``--calibration FILE``)."""

from __future__ import annotations

import typer

from hpnsim.cli.common import PASS_THROUGH, emit_json, guarded, parse_extra_options

#: how nccl-tests' device names (``NVIDIA H100 80GB HBM3``) name the catalog GPUs
_GPU_NAMES = ("h100", "h200", "h800", "a100", "b200")


def gpu_of_logs(logs) -> str | None:
    """The catalog GPU every log's devices are (None if no log names a known GPU); logs on
    different GPUs are an input error.

    >>> from types import SimpleNamespace
    >>> gpu_of_logs([SimpleNamespace(source="a", gpu_names=("NVIDIA H100 80GB HBM3",))])
    'h100'
    """
    from hpnsim.errors import InputError

    found: dict[str, str] = {}
    for log in logs:
        for name in log.gpu_names:
            for key in _GPU_NAMES:
                if key in name.lower().replace(" ", ""):
                    found.setdefault(key, log.source)
    if len(found) > 1:
        (a, fa), (b, fb) = list(found.items())[:2]
        raise InputError("--gpu", f"{fa} ran on {a.upper()}, {fb} on {b.upper()}; calibrate "
                                  f"one GPU type at a time")
    return next(iter(found), None)


def measurements_of(logs, fabric, algo: str, protocol: str) -> list:
    """One :class:`~hpnsim.collectives.nccl.calibrate.Measurement` per log: its ranks placed on
    ``fabric`` as it ran (hosts × GPUs per host), the mean of the out-of-place and in-place
    time per size."""
    import numpy as np

    from hpnsim.collectives.nccl.calibrate import Measurement, log_gpus
    from hpnsim.errors import InputError
    from hpnsim.workloads.nccl_tests import check_fits

    out = []
    for log in logs:
        check_fits(log, fabric)
        gpus = log_gpus(log.source, log.n_gpus, log.n_hosts, fabric)
        times = (log.column("oop_time") + log.column("ip_time")) / 2
        for row, t in zip(log.rows, times, strict=True):
            if not t > 0:
                raise InputError(f"{log.source} line {row.line}", "a time of 0 us cannot be "
                                                                  "fitted")
        out.append(Measurement(log.source, log.op, gpus, log.column("size"), np.asarray(times),
                               lines=tuple(r.line for r in log.rows), algo=algo,
                               protocol=protocol))
    return out


def register(app: typer.Typer) -> None:
    """Add ``calibrate`` to the root app."""

    @app.command(context_settings=PASS_THROUGH)
    @guarded
    def calibrate(
        ctx: typer.Context,
        logs: list[str] = typer.Argument(..., help="nccl-tests logs (all_reduce_perf, "
                                                   "all_gather_perf, reduce_scatter_perf, "
                                                   "alltoall_perf output), one run per file."),
        fabric: str = typer.Option("hpn7", "--fabric", help="Fabric template the logs ran on "
                                   "(its hosts' NVLink, NICs); other --options pass through "
                                   "to its builder, e.g. --nvlink 900GB/s."),
        gpu: str = typer.Option(None, "--gpu", help="a100, h100, h200, h800 or b200 (default: "
                                "from the logs' device names): NCCL's defaults for it, NVLS, "
                                "and the NVLink bandwidth when --nvlink is not given."),
        algo: str = typer.Option("auto", "--algo", help="The algorithm the logs forced "
                                 "(NCCL_ALGO: ring, tree, nvls, nvlstree ...) or auto."),
        protocol: str = typer.Option("auto", "--protocol", help="The protocol the logs "
                                     "forced (NCCL_PROTO: ll, ll128, simple) or auto."),
        routing: str = typer.Option("spray", "--routing", help="Routing of the simulation "
                                    "run at the optimum (spray: NIC ports evenly used, as the "
                                    "closed forms the fit uses assume; ecmp adds the hash "
                                    "collisions of your fabric on top)."),
        seed: int = typer.Option(0, "--seed", help="Seed of the simulation's hashing."),
        simulate: bool = typer.Option(True, "--simulate/--no-simulate", help="Also run every "
                                      "size in the simulator with the fitted parameters."),
        out: str = typer.Option(None, "--out", help="Write the calibration file (YAML) here."),
        json_out: bool = typer.Option(False, "--json", help="Print the calibration as JSON."),
    ) -> None:
        """Fit NCCL efficiencies and latency to nccl-tests logs; print residuals per size.

        Example: hpnsim calibrate all_reduce_perf_1x8.txt all_reduce_perf_2x8.txt
        --fabric hpn7 --segments 1 --gpu h100 --out calib.yaml
        """
        from hpnsim.cli.common import check_output_file
        from hpnsim.collectives.nccl.calibrate import calibrate as fit
        from hpnsim.collectives.nccl.calibrate import write_calibration
        from hpnsim.collectives.nccl.params import NcclParams
        from hpnsim.collectives.ops import normalize_algorithm, normalize_protocol
        from hpnsim.errors import InputError, check_seed
        from hpnsim.fabrics import build_fabric
        from hpnsim.workloads.gpus import get_gpu
        from hpnsim.workloads.nccl_tests import load_nccl_tests

        check_seed(seed, "--seed")
        algo, protocol = normalize_algorithm(algo), normalize_protocol(protocol)
        if out:
            check_output_file(out, "--out")
        # click hands fabric options given after the logs to the variadic argument
        tokens = list(logs) + list(ctx.args)
        first = next((i for i, t in enumerate(tokens) if t.startswith("--")), len(tokens))
        options = parse_extra_options(tokens[first:])
        if not tokens[:first]:
            raise InputError("logs", "give the nccl-tests logs first, then fabric options")
        parsed = load_nccl_tests(tokens[:first])
        name = gpu.strip().lower() if gpu else gpu_of_logs(parsed)
        if name is not None:
            spec = get_gpu(name)
            options.setdefault("nvlink", f"{spec.nvlink_bandwidth / 1e9:g}GB/s")
            base = NcclParams.for_gpu(name)
        else:
            base = NcclParams()
        built = build_fabric(fabric, options)
        result = fit(built, measurements_of(parsed, built, algo, protocol), base,
                     simulate=simulate, routing=routing, seed=seed)
        if out:
            write_calibration(result, out)
            typer.echo(f"wrote {out}", err=True)
        if json_out:
            emit_json(result.to_dict())
            return
        from hpnsim.report.calibration import calibration_text

        typer.echo(f"# hpnsim calibrate: {len(parsed)} log(s) on {fabric}"
                   f"{f' ({name.upper()})' if name else ''}")
        typer.echo(calibration_text(result))
