"""CLI commands: ``hpnsim traffic`` (traffic of a training job) and ``hpnsim aicb`` (workload files)."""

from __future__ import annotations

from pathlib import Path

import typer

from hpnsim.cli.common import TableFiles, csv_option, emit_json, guarded, parquet_option


def _article(spec, gpus, tp, pp, dp, dataset_tokens, dataset_samples, batch, seq_len,
             parameters, json_out, tables):
    from hpnsim.workloads import article

    inputs = article.article_inputs(spec, dataset_tokens=dataset_tokens,
                                    dataset_samples=dataset_samples, batch=batch,
                                    seq_len=seq_len, parameters=parameters)
    table = article.article_table(inputs, gpus)
    three_d = None
    if any(v is not None for v in (tp, pp, dp)):
        # None (not given) is 1; 0 stays 0 so that article_3d refuses it
        three_d = article.article_3d(inputs, *(1 if v is None else v for v in (tp, pp, dp)))
    tables.write([{"mode": mode, **line.to_dict()} for mode, line in table.items()])
    if json_out:
        out = {"model": spec.name, "article_inputs": vars(inputs), "gpus": gpus}
        out.update({mode: line.to_dict() for mode, line in table.items()})
        if three_d is not None:
            out["3d"] = three_d.to_dict()
            out["3d"]["switch_days_51_2T"] = article.switch_days(three_d.total_bytes)
        emit_json(out)
        return
    from hpnsim.report.text import article_text

    typer.echo(article_text(spec, inputs, table, three_d, gpus))


def _real(spec, gpus, tp, pp, dp, cp, ep, vpp, zero, sequence_parallel, micro_batch, batch,
          seq_len, dataset_tokens, gpus_per_host, allow_cross_host_tp, grad_bytes, algorithm,
          recompute, json_out, tables):
    from hpnsim.workloads.layout import make_layout
    from hpnsim.workloads.traffic import iteration_traffic

    tp, pp, dp = (1 if v is None else v for v in (tp, pp, dp))   # 0 is refused, not 1
    layout = make_layout(spec, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp,
                         zero=zero, sequence_parallel=sequence_parallel,
                         micro_batch=micro_batch, global_batch=batch, n_gpus=gpus,
                         gpus_per_host=gpus_per_host, allow_cross_host_tp=allow_cross_host_tp)
    report = iteration_traffic(spec, layout, seq_len=seq_len, gpus_per_host=gpus_per_host,
                               algorithm=algorithm, grad_bytes=grad_bytes, recompute=recompute,
                               dataset_tokens=dataset_tokens,
                               allow_cross_host_tp=allow_cross_host_tp)
    tables.write(report.rows())
    if json_out:
        emit_json(report)
        return
    from hpnsim.report.text import traffic_text

    typer.echo(traffic_text(spec, layout, report, algorithm))


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
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Bytes per iteration and per epoch of each parallel dimension, with real collectives
        (ring all-reduce 2(n-1)/n per GPU, ...) or, with --article, the article's naive table."""
        from hpnsim.workloads import models

        tables = TableFiles(csv, parquet)
        extra = models.load_yaml(model_file) if model_file is not None else None
        spec = models.get(model, extra)
        if article:
            _article(spec, 8 if gpus is None else gpus, tp, pp, dp, dataset_tokens,
                     dataset_samples, batch, seq_len, parameters, json_out, tables)
        else:
            _real(spec, gpus, tp, pp, dp, cp, ep, vpp, zero, sequence_parallel, micro_batch,
                  batch, seq_len, dataset_tokens, gpus_per_host, allow_cross_host_tp,
                  grad_bytes, algorithm, recompute, json_out, tables)

    @app.command("aicb")
    @guarded
    def aicb_summary(
        path: Path = typer.Argument(..., help="SimAI/AICB workload file."),
        json_out: bool = typer.Option(False, "--json", help="Print the parsed workload as JSON."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Parse a SimAI/AICB workload file and summarize it (errors name the line)."""
        from hpnsim.workloads.aicb import PHASES, load_aicb

        tables = TableFiles(csv, parquet)
        work = load_aicb(path)
        # the summary's rows: compute seconds and bytes per group, per phase
        tables.write([{"phase": phase, "compute": work.compute_time(phase),
                       **{f"{g}_bytes": work.comm_bytes(g, phase)
                          for g in ("tp", "dp", "ep", "edp")}} for phase in PHASES])
        if json_out:
            emit_json(work)
            return
        from hpnsim.report.text import aicb_text

        typer.echo(aicb_text(path, work))
