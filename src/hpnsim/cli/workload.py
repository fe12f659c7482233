"""CLI commands: ``hpnsim traffic`` (traffic of a training job) and ``hpnsim aicb`` (workload files)."""

from __future__ import annotations

from pathlib import Path

import typer

from hpnsim.cli.common import emit_json, guarded

_DECIMAL_UNITS = (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))


def _fmt(value: float) -> str:
    """Decimal bytes, as the article prints them (1 PB = 1e15 B)."""
    for unit, scale in _DECIMAL_UNITS:
        if abs(value) >= scale:
            return f"{value / scale:,.1f} {unit}"
    return f"{value:.0f} B"


def _pb(value: float) -> str:
    return f"{value / 1e15:,.1f} PB"


def _article(spec, gpus, tp, pp, dp, dataset_tokens, dataset_samples, batch, seq_len,
             parameters, json_out):
    from hpnsim.workloads import article

    inputs = article.article_inputs(spec, dataset_tokens=dataset_tokens,
                                    dataset_samples=dataset_samples, batch=batch,
                                    seq_len=seq_len, parameters=parameters)
    table = article.article_table(inputs, gpus)
    three_d = None
    if any(v is not None for v in (tp, pp, dp)):
        three_d = article.article_3d(inputs, tp or 1, pp or 1, dp or 1)
    if json_out:
        out = {"model": spec.name, "article_inputs": vars(inputs), "gpus": gpus}
        out.update({mode: line.to_dict() for mode, line in table.items()})
        if three_d is not None:
            out["3d"] = three_d.to_dict()
            out["3d"]["switch_days_51_2T"] = article.switch_days(three_d.total_bytes)
        emit_json(out)
        return
    typer.echo(f"{spec.name} under the article's formulas: P={inputs.parameters:.4g}, "
               f"T={inputs.tokens:.4g} tokens, L={inputs.layers}, H={inputs.hidden}, "
               f"N={inputs.batches:,.0f} mini-batches, G={gpus}  (per epoch, 1 PB = 1e15 B)")
    typer.echo(f"{'mode':<6}{'pattern':<26}{'backward':>14}{'syncs':>8}{'forward':>14}{'passes':>12}")
    lines = list(table.values()) + ([three_d] if three_d is not None else [])
    for line in lines:
        syncs = "-" if line.backward_syncs != line.backward_syncs else f"{line.backward_syncs:g}"
        passes = "-" if line.forward_passes != line.forward_passes else f"{line.forward_passes:.4g}"
        typer.echo(f"{line.mode:<6}{line.pattern:<26}{_pb(line.backward_bytes):>14}"
                   f"{syncs:>8}{_pb(line.forward_bytes):>14}{passes:>12}")
    tp_line = table["tp"]
    mixed = 2**20 * 1e9
    typer.echo(f"note: the article prints TP as {tp_line.backward_bytes / mixed:,.0f} / "
               f"{tp_line.forward_bytes / mixed:,.0f}, i.e. bytes / (2^20 * 1e9), not PB")
    if three_d is not None:
        days = article.switch_days(three_d.total_bytes)
        typer.echo(f"3d total {_fmt(three_d.total_bytes)} per epoch; one 51.2 Tbps switch at full "
                   f"load: {days['as_bits_per_second']:.0f} days "
                   f"({days['as_bytes_per_second']:.1f} days if 51.2T were bytes/s)")


def _real(spec, gpus, tp, pp, dp, cp, ep, vpp, zero, sequence_parallel, micro_batch, batch,
          seq_len, dataset_tokens, gpus_per_host, allow_cross_host_tp, grad_bytes, algorithm,
          recompute, json_out):
    from hpnsim.workloads.layout import make_layout
    from hpnsim.workloads.traffic import iteration_traffic

    layout = make_layout(spec, tp=tp or 1, pp=pp or 1, dp=dp or 1, cp=cp, ep=ep, vpp=vpp,
                         zero=zero, sequence_parallel=sequence_parallel,
                         micro_batch=micro_batch, global_batch=batch, n_gpus=gpus,
                         gpus_per_host=gpus_per_host, allow_cross_host_tp=allow_cross_host_tp)
    report = iteration_traffic(spec, layout, seq_len=seq_len, gpus_per_host=gpus_per_host,
                               algorithm=algorithm, grad_bytes=grad_bytes, recompute=recompute,
                               dataset_tokens=dataset_tokens,
                               allow_cross_host_tp=allow_cross_host_tp)
    if json_out:
        emit_json(report)
        return
    lay = layout
    typer.echo(f"{spec.name}: TP{lay.tp} x CP{lay.cp} x PP{lay.pp} x DP{lay.dp} (EP{lay.ep}, "
               f"ZeRO-{lay.zero}) on {lay.n_gpus} GPUs, {lay.num_microbatches} micro-batches of "
               f"{lay.micro_batch} x {report.seq_len} tokens, {algorithm} collectives; "
               f"{report.iterations_per_epoch:,.0f} iterations per epoch")
    typer.echo(f"{'dim':<5}{'phase':<10}{'op':<15}{'group':>6}{'buffer':>12}{'calls':>8}"
               f"{'per GPU':>12}{'all GPUs':>12}{'network':>9}")
    for row in report.rows:
        typer.echo(f"{row.dimension:<5}{row.phase:<10}{row.op:<15}{row.group_size:>6}"
                   f"{_fmt(row.buffer_bytes):>12}{row.calls_per_iteration:>8}"
                   f"{_fmt(row.bytes_per_gpu):>12}{_fmt(row.total_bytes):>12}"
                   f"{row.network_fraction:>9.0%}")
    typer.echo("per iteration / per epoch (all GPUs):")
    for dim, d in report.by_dimension().items():
        typer.echo(f"  {dim:<5}{_fmt(d['total_bytes']):>12} / {_fmt(d['per_epoch_bytes']):>12}"
                   f"   network {_fmt(d['network_bytes'])} per iteration")
    typer.echo(f"  total{_fmt(report.total_bytes):>12} / {_fmt(report.per_epoch_bytes):>12}")


def register(app: typer.Typer) -> None:
    """Add ``traffic`` and ``aicb`` to the root app."""

    @app.command()
    @guarded
    def traffic(
        model: str = typer.Option(..., "--model", help="Catalog model (e.g. llama3-70b) or one from --model-file."),
        model_file: Path = typer.Option(None, "--model-file", help="YAML file with user models."),
        tp: int = typer.Option(None, "--tp", help="Tensor-parallel size (default 1)."),
        pp: int = typer.Option(None, "--pp", help="Pipeline-parallel size (default 1)."),
        dp: int = typer.Option(None, "--dp", help="Data-parallel size (default 1)."),
        cp: int = typer.Option(1, "--cp", help="Context (sequence) parallel size."),
        ep: int = typer.Option(1, "--ep", help="Expert-parallel size (MoE; divides dp)."),
        vpp: int = typer.Option(1, "--vpp", help="Virtual stages per pipeline rank (interleaved 1F1B)."),
        zero: int = typer.Option(0, "--zero", help="ZeRO stage 0-3 (3 = FSDP)."),
        sequence_parallel: bool = typer.Option(False, "--sequence-parallel", help="Megatron sequence parallelism."),
        micro_batch: int = typer.Option(1, "--micro-batch", help="Sequences per micro-batch."),
        batch: int = typer.Option(2048, "--batch", help="Global batch (sequences; the article: samples)."),
        seq_len: int = typer.Option(None, "--seq-len", help="Tokens per sequence (default the model's)."),
        dataset_tokens: float = typer.Option(156e9, "--dataset-tokens", help="Tokens per epoch (default C4, 156e9; samples for a CNN)."),
        dataset_samples: float = typer.Option(None, "--dataset-samples", help="Samples per epoch (--article; default from C4's 428 tokens per sample)."),
        gpus: int = typer.Option(None, "--gpus", help="--article: GPUs G in the group (default 8); else the job's GPU count to check."),
        parameters: float = typer.Option(None, "--parameters", help="--article: P (default the model's nominal size)."),
        article: bool = typer.Option(False, "--article", help="Evaluate the reference article's naive per-epoch formulas."),
        gpus_per_host: int = typer.Option(8, "--gpus-per-host", help="GPUs per host (NVLink domain)."),
        allow_cross_host_tp: bool = typer.Option(False, "--allow-cross-host-tp", help="Accept TP groups spanning hosts."),
        grad_bytes: float = typer.Option(2.0, "--grad-bytes", help="Bytes per gradient value in DP (2 BF16, 4 FP32)."),
        algorithm: str = typer.Option("ring", "--algorithm", help="All-reduce data movement: ring or naive."),
        recompute: bool = typer.Option(False, "--recompute", help="Full activation recomputation."),
        json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Bytes per iteration and per epoch of each parallel dimension, with real collectives
        (ring all-reduce 2(n-1)/n per GPU, ...) or, with --article, the article's naive table."""
        from hpnsim.workloads import models

        extra = models.load_yaml(model_file) if model_file is not None else None
        spec = models.get(model, extra)
        if article:
            _article(spec, 8 if gpus is None else gpus, tp, pp, dp, dataset_tokens,
                     dataset_samples, batch, seq_len, parameters, json_out)
        else:
            _real(spec, gpus, tp, pp, dp, cp, ep, vpp, zero, sequence_parallel, micro_batch,
                  batch, seq_len, dataset_tokens, gpus_per_host, allow_cross_host_tp,
                  grad_bytes, algorithm, recompute, json_out)

    @app.command("aicb")
    @guarded
    def aicb_summary(
        path: Path = typer.Argument(..., help="SimAI/AICB workload file."),
        json_out: bool = typer.Option(False, "--json", help="Print the parsed workload as JSON."),
    ) -> None:
        """Parse a SimAI/AICB workload file and summarize it (errors name the line)."""
        from hpnsim.workloads.aicb import PHASES, load_aicb

        work = load_aicb(path)
        if json_out:
            emit_json(work)
            return
        typer.echo(f"{path}: {work.policy}, TP{work.tp} x PP{work.pp} x DP{work.dp} (EP{work.ep}, "
                   f"vpp {work.vpp}, ga {work.ga}, {work.all_gpus} GPUs), {len(work.layers)} layers")
        for phase in PHASES:
            typer.echo(f"  {phase:<12} compute {work.compute_time(phase) * 1e3:9.3f} ms   "
                       + "   ".join(f"{g} {_fmt(work.comm_bytes(g, phase))}"
                                    for g in ("tp", "dp", "ep", "edp")
                                    if work.comm_bytes(g, phase) > 0))
