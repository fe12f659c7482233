"""CLI command: ``hpnsim kernels TRACE.json`` — a PyTorch profiler trace's GPU kernels as a
kernel table that ``train``, ``scaling`` and ``run`` take (``--kernel-table FILE``)
(:mod:`hpnsim.training.compute.trace_kernels`)."""

from __future__ import annotations

from pathlib import Path

import typer

from hpnsim.cli.common import emit_json, guarded


def register(app: typer.Typer) -> None:
    """Add ``kernels`` to the root app."""

    @app.command()
    @guarded
    def kernels(
        trace: str = typer.Argument(..., help="PyTorch profiler trace (Kineto / Chrome trace "
                                    "JSON, .json or .json.gz) of one or more iterations; "
                                    "record_shapes=True gives GEMM and attention shapes."),
        out: str = typer.Option(None, "--out", help="Write the kernel table (CSV) here "
                                "(default: print it)."),
        gpu: str = typer.Option(None, "--gpu", help="Catalog GPU of the rows (default: from "
                                "the trace's device name): a100, h100, h200, h800, b200."),
        force: bool = typer.Option(False, "--force", help="Replace an existing --out file."),
        json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    ) -> None:
        """Classify a profiled run's GPU kernels (GEMM, attention, memory-bound,
        communication, idle gaps) and write the measured ones as a kernel table.

        Example: hpnsim kernels trace.json --out h100.csv, then
        hpnsim train --model llama3-8b --gpu h100 --kernel-table h100.csv
        """
        from hpnsim.cli.common import check_output_file
        from hpnsim.errors import InputError
        from hpnsim.training.compute.profiler_trace import read_trace
        from hpnsim.training.compute.trace_kernels import table_text, trace_kernels

        if out:
            check_output_file(out, "--out")
            if Path(out).exists() and not force:
                raise InputError("--out", f"{out} exists; pass --force to replace it")
        result = trace_kernels(read_trace(trace, "trace"), gpu)
        text = table_text(result)
        if out:
            Path(out).write_text(text, encoding="utf-8")
            typer.echo(f"wrote {out}: {len(result.rows)} rows", err=True)
        if json_out:
            emit_json(result.to_dict())
        elif out:
            typer.echo(_summary(result))
        else:
            typer.echo(text, nl=False)


def _summary(result) -> str:
    lines = [f"# hpnsim kernels: {result.device_name or result.gpu} ({result.gpu}), "
             f"{result.steps} profiler step(s)",
             f"{'class':<13} {'seconds':>10} {'measured':>9} {'tabled':>7}"]
    for name in ("gemm", "attention", "memory", "communication"):
        if name in result.seconds:
            lines.append(f"{name:<13} {result.seconds[name]:>10.6f} "
                         f"{result.counts.get(name, 0):>9} {result.tabled.get(name, 0):>7}")
    lines.append(f"{'idle gaps':<13} {result.idle_gap_s:>10.6f}")
    return "\n".join(lines)
