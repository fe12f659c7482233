"""CLI commands: ``hpnsim train`` (one simulated iteration) and ``hpnsim scaling`` (linearity).

Their shared options and the job flags' vocabulary are in :mod:`hpnsim.cli.train_options`.
"""

from __future__ import annotations

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
    table_console,
    watch_option,
)
from hpnsim.cli.train_options import (
    COMPUTE_EFFICIENCY_OPTION,
    DTYPE_OPTION,
    GPU_OPTION,
    JOB_FLAGS,
    KERNEL_TABLE_OPTION,
    fabric_options,
    flag_of_path,
    int_list,
    note,
    refuse_job_flags,
)
from hpnsim.routing.names import ROUTING_POLICIES


def _size_field(job) -> str:
    """The job's input that makes it large: its workload file, else its largest parallel
    dimension (data parallelism on a tie), as a scenario path.

    >>> from types import SimpleNamespace as J
    >>> _size_field(J(workload=None, tp=8, pp=1, dp=4096, cp=1))
    'jobs[0].dp'
    """
    if job.workload is not None:
        return "--workload"
    dims = {"dp": job.dp, "tp": job.tp, "pp": job.pp, "cp": job.cp or 1}
    return f"jobs[0].{max(dims, key=lambda k: dims[k])}"


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``scaling`` to the root app."""

    @app.command(context_settings=PASS_THROUGH)
    @guarded
    def train(
        ctx: typer.Context,
        model: str = typer.Option(None, "--model", help="Catalog model, e.g. llama3-70b."),
        model_file: str = typer.Option(None, "--model-file", help="YAML with user models."),
        workload: str = typer.Option(None, "--workload",
                                     help="SimAI/AICB workload file, run instead of --model."),
        tp: int = typer.Option(1, "--tp", help="Tensor-parallel size."),
        pp: int = typer.Option(1, "--pp", help="Pipeline-parallel size."),
        dp: int = typer.Option(1, "--dp", help="Data-parallel size."),
        ep: int = typer.Option(1, "--ep", help="Expert-parallel size (MoE models; divides dp "
                                              "and the experts)."),
        cp: int = typer.Option(1, "--cp", help="Context-parallel size (ring attention; "
                                              "2*cp divides the sequence)."),
        micro_batch: int = typer.Option(1, "--micro-batch", help="Sequences per micro-batch."),
        global_batch: int = typer.Option(None, "--global-batch",
                                         help="Sequences per iteration (default dp*mb*4*pp)."),
        seq_len: int = typer.Option(None, "--seq-len", help="Sequence length (model default)."),
        gpu: str = GPU_OPTION,
        dtype: str = DTYPE_OPTION,
        kernel_table: str = KERNEL_TABLE_OPTION,
        compute_efficiency: float = COMPUTE_EFFICIENCY_OPTION,
        mfu: float = typer.Option(None, "--mfu", hidden=True,
                                  help="Deprecated: --compute-efficiency."),
        schedule: str = typer.Option("", "--schedule", help="1f1b, interleaved, gpipe or zb-h1 "
                                                              "(zero-bubble H1)."),
        vpp: int = typer.Option(1, "--vpp", help="Virtual stages per rank (interleaved)."),
        zero: int = typer.Option(0, "--zero", help="0 (all-reduce), 1/2 (distributed optimizer) "
                                                  "or 3 (ZeRO-3/FSDP: per-layer gathers)."),
        prefetch: bool = typer.Option(True, "--prefetch/--no-prefetch",
                                      help="ZeRO-3: gather the next unit during this one's "
                                           "compute."),
        sequence_parallel: bool = typer.Option(False, "--sequence-parallel",
                                               help="Megatron sequence parallelism."),
        tp_comm_overlap: bool = typer.Option(
            False, "--tp-comm-overlap", help="Overlap sequence parallelism's all-gathers and "
                                             "reduce-scatters with their GEMMs (Megatron-Core "
                                             "tp_comm_overlap over TE userbuffers)."),
        userbuffers: str = typer.Option(
            None, "--userbuffers", help="With --tp-comm-overlap: the per-GEMM userbuffer "
                                        "configuration a recipe names (SMs each overlap "
                                        "takes), e.g. ub_cfg_h100_h8192_tp4_mbs1_seqlen8192; "
                                        "default TransformerEngine's own (te_default)."),
        recompute: bool = typer.Option(False, "--recompute", help="Full activation recompute."),
        selective_recompute: bool = typer.Option(
            False, "--selective-recompute", help="Recompute core attention only (Megatron's "
                                                 "--recompute-activations)."),
        stage_layers: str = typer.Option(
            None, "--stage-layers", help="Layers per virtual stage, comma-separated (uneven "
                                         "pipeline split; Megatron-Core's layout), e.g. 7,9,9,7."),
        first_stage_layers: int = typer.Option(None, "--first-stage-layers",
                                               help="Layers of the first pipeline stage."),
        last_stage_layers: int = typer.Option(None, "--last-stage-layers",
                                              help="Layers of the last pipeline stage."),
        account_for_embedding: bool = typer.Option(
            False, "--account-for-embedding", help="Count the embedding as a layer when "
                                                   "splitting the pipeline."),
        account_for_loss: bool = typer.Option(
            False, "--account-for-loss", help="Count the loss (output head) as a layer when "
                                              "splitting the pipeline."),
        overlap_grad_reduce: bool = typer.Option(
            True, "--overlap-grad-reduce/--no-overlap-grad-reduce",
            help="Reduce gradient buckets during the backward (default); off: one bucket per "
                 "chunk after it (Megatron-Core's default)."),
        overlap_param_gather: bool = typer.Option(
            False, "--overlap-param-gather", help="ZeRO-1/2: gather updated parameters during "
                                                  "the next forward (Megatron-Core)."),
        megatron_core: str = typer.Option(
            None, "--megatron-core", help="Megatron-Core version the job runs, e.g. 0.13 "
                                          "(default: the one docs/pipelines.md reads); an "
                                          "option it lacks is refused."),
        attention: str = typer.Option(
            None, "--attention", help="Core attention kernel: flash (fused FlashAttention), "
                                      "cudnn (fused, TransformerEngine's choice on Hopper), "
                                      "flash2 (FlashAttention-2, TransformerEngine before 1.11 "
                                      "with NVTE_FUSED_ATTN=0) "
                                      "or unfused (Megatron's, scores in HBM); default: what "
                                      "--megatron-core runs by default (cudnn, TransformerEngine's "
                                      "attention, from 0.7 and with --cp; unfused before)."),
        cross_entropy: str = typer.Option(
            None, "--cross-entropy", help="The loss as the framework computes it: unfused "
                                          "(Megatron's, the default), fused (Megatron-Core's "
                                          "cross_entropy_loss_fusion, from 0.8) or te "
                                          "(TransformerEngine's kernels, from 0.13)."),
        dropout: bool = typer.Option(
            False, "--dropout", help="Megatron's hidden and attention dropout at 0.1 (GPT-3 "
                                     "recipes) rather than 0 (Llama recipes, the default)."),
        fp8_gemm: str = typer.Option(
            None, "--fp8-gemm", help="FP8 GEMM library whose measured kernels time --dtype "
                                     "fp8: cublas (TransformerEngine's cuBLASLt, default) "
                                     "or deepgemm."),
        fp8_recipe: str = typer.Option(
            None, "--fp8-recipe", help="How --dtype fp8 scales its casts: delayed "
                                       "(TransformerEngine's delayed scaling, default) or "
                                       "current (Float8CurrentScaling, Megatron-Core's "
                                       "--fp8-recipe tensorwise, from 0.12)."),
        fp8_param_gather: bool = typer.Option(
            False, "--fp8-param-gather", help="Megatron-Core's --fp8-param-gather (from 0.9; "
                                              "--dtype fp8 with --zero 1-3): the layers' "
                                              "linear weights kept in FP8, all-gathered as "
                                              "1 byte each."),
        rank_order: str = typer.Option(
            None, "--rank-order", help="How ranks map to GPUs, fastest dimension first: "
                                       "tp-cp-dp-pp (Megatron-Core's default) or tp-cp-pp-dp "
                                       "(--use-tp-pp-dp-mapping, from 0.7: a pipeline's "
                                       "stages on consecutive hosts, as Llama 3 ran); "
                                       "default hpnsim's order."),
        gpu_variation: float = typer.Option(
            None, "--gpu-variation", help="Coefficient of variation of a GPU's compute time "
                                          "per step, for the slowest-GPU term (0: off; "
                                          "default the measured 0.007)."),
        bucket_params: int = typer.Option(None, "--bucket-params",
                                          help="Parameters per gradient bucket."),
        grad_bytes: int = typer.Option(2, "--grad-bytes", help="Bytes per gradient element."),
        fabric: str = typer.Option("hpn7", "--fabric",
                                   help="Fabric template; extra --name value options go to it."),
        routing: str = typer.Option("ecmp", "--routing", help=f"{', '.join(ROUTING_POLICIES)}."),
        lag: str = typer.Option("balanced", "--lag", help="hpn_dual_plane: how each bonded "
                                "NIC puts its collectives' QPs on its ports: balanced, "
                                "queue_affinity (mlx5 round-robin per QP) or hash (mlx5 "
                                "hash mode); docs/failures.md."),
        tp_algo: str = typer.Option("auto", "--tp-algo", help="TP all-reduce algorithm."),
        dp_algo: str = typer.Option("auto", "--dp-algo", help="DP collective algorithm."),
        seed: int = typer.Option(0, "--seed", help="Routing hash seed."),
        iterations: int = typer.Option(None, "--iterations",
                                       help="Iterations to simulate (default 1; with --fault "
                                            "20)."),
        faults: list[str] = typer.Option(
            None, "--fault", help="kind:target@start+duration, e.g. link:gpu17.port0@30s+120s "
                                  "(kinds: link, nic_port, tor_crash, tor_dataplane, agg, "
                                  "core_link; a flap: flap:gpu17.port0@30s+1s/10s*5 = down 1 s "
                                  "every 10 s, 5 times); repeatable. Simulates --iterations "
                                  "across it and reports the throughput timeline."),
        timeout: str = typer.Option(None, "--timeout",
                                    help="Collective timeout before a cut-off job fails "
                                         "(default 120s)."),
        plot: str = typer.Option(None, "--plot", help="Write a Gantt chart PNG here (with "
                                                      "--fault: the throughput timeline)."),
        timeline: bool = typer.Option(False, "--timeline", help="Include Gantt rows in --json."),
        trace: str = typer.Option(None, "--trace", help="Write the iteration timeline as "
                                                        "Chrome-trace JSON (open it in "
                                                        "https://ui.perfetto.dev)."),
        calibration: str = calibration_option(),
        engine: str = typer.Option("flow", "--engine", help="flow (max-min, default) or "
                                   "packet (the iteration's task graph as packets: queues, "
                                   "ECN, PFC, DCQCN; docs/packet.md)."),
        packet_params: str = packet_params_option(),
        max_packets: float = max_packets_option(),
        watch: str = watch_option(),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Simulate one training iteration on a fabric: time, exposed communication, bubble, MFU.

        Example: hpnsim train --model llama3-70b --tp 8 --pp 8 --dp 16 --global-batch 2048
        --fabric hpn7 --json. MoE: --model mixtral-8x7b --tp 8 --dp 8 --ep 8; FSDP: --zero 3.
        """
        from hpnsim.cli.collective import engine_settings
        from hpnsim.cli.common import (
            check_figure_file,
            check_output_file,
            errors_as_flags,
            scenario_from_flags,
        )
        from hpnsim.errors import InputError, check_seed
        from hpnsim.scenario.runner import run
        from hpnsim.scenario.spec import FabricSpec
        from hpnsim.workloads.sizing import check_fabric_for_job

        check_seed(seed, "--seed")
        settings = engine_settings(engine, packet_params, True, max_packets, watch)
        if settings is not None and faults:
            from hpnsim.scenario.engine import FAULTS_ON_FLOW

            raise InputError("--engine", FAULTS_ON_FLOW)
        if plot:
            check_figure_file(plot)
        if trace:
            check_output_file(trace, "--trace")
        tables = TableFiles(csv, parquet)
        if workload:
            refuse_job_flags(ctx)
            job = {"workload": workload}
        else:
            if not model:
                raise InputError("--model", "give --model NAME (or --workload FILE)")
            job = {"model": model, "model_file": model_file, "tp": tp, "pp": pp, "dp": dp,
                   "ep": ep, "cp": cp if cp != 1 else None, "zero": zero,
                   "micro_batch": micro_batch,
                   "global_batch": global_batch, "seq_len": seq_len, "gpu": gpu, "dtype": dtype,
                   "compute_efficiency": compute_efficiency, "kernel_table": kernel_table,
                   "schedule": schedule, "virtual_stages": vpp,
                   "sequence_parallel": sequence_parallel, "recompute": recompute,
                   "fsdp_prefetch": prefetch,
                   "bucket_params": bucket_params, "grad_bytes": grad_bytes,
                   "tp_algo": tp_algo, "dp_algo": dp_algo,
                   "stage_layers": int_list(stage_layers, "--stage-layers"),
                   "first_stage_layers": first_stage_layers,
                   "last_stage_layers": last_stage_layers,
                   "account_for_embedding": account_for_embedding or None,
                   "account_for_loss": account_for_loss or None,
                   "tp_comm_overlap": tp_comm_overlap or None,
                   "userbuffers": userbuffers,
                   "overlap_grad_reduce": None if overlap_grad_reduce else False,
                   "selective_recompute": selective_recompute or None,
                   "overlap_param_gather": overlap_param_gather or None,
                   "megatron_core": megatron_core, "attention": attention,
                   "cross_entropy": cross_entropy, "dropout": dropout or None,
                   "fp8_gemm": fp8_gemm, "fp8_recipe": fp8_recipe,
                   "fp8_param_gather": fp8_param_gather or None,
                   "gpu_variation": gpu_variation, "rank_order": rank_order}
            if mfu is not None:
                if compute_efficiency is not None:
                    raise InputError("--mfu", "give --compute-efficiency only (--mfu is its "
                                              "old name)")
                note("--mfu is deprecated (it never was MFU): use --compute-efficiency")
                job["compute_efficiency"] = mfu
        from hpnsim.faults.events import parse_fault

        fault_list = [parse_fault(text) for text in faults or []]
        if timeout is not None and not fault_list:
            from hpnsim.units import parse_time

            parse_time(timeout, "--timeout")         # a bad value is refused as such first
            raise InputError("--timeout", "the collective timeout of a run through faults: "
                                          "add --fault (without one nothing times out)")
        if iterations is not None:
            job["iterations"] = iterations
        elif fault_list:
            job["iterations"] = 20
        flags = {"fabric": {"template": fabric}, "routing": routing, "seed": seed,
                 "jobs": [{k: v for k, v in job.items() if v is not None}]}
        if calibration is not None:
            flags["calibration"] = calibration
        if lag != "balanced":
            flags["lag"] = lag
        if settings is not None:
            flags["engine"] = settings
        if fault_list:
            flags["faults"] = [{k: v for k, v in (("kind", f.kind), ("target", f.target),
                                                  ("at", f.at), ("duration", f.duration
                                                                 if f.kind != "flap" else None),
                                                  ("period", f.period or None),
                                                  ("down", f.down or None),
                                                  ("count", f.count or None)) if v is not None}
                               for f in fault_list]
            if timeout is not None:
                flags["failover"] = {"timeout": timeout}
        scenario = scenario_from_flags(flags, name=flag_of_path)
        with errors_as_flags(flag_of_path):
            # the fabric is sized to the job unless the user sized it (--pods, --gpus ...)
            options = check_fabric_for_job(fabric, scenario.jobs[0].gpu_count,
                                           fabric_options(ctx), note=note,
                                           size_field=_size_field(scenario.jobs[0]))
            scenario.fabric = scenario_from_flags(
                {"template": fabric, **options}, model=FabricSpec, section="fabric")
            ran = run(scenario)
            outcome = ran.jobs[0]
        if trace:
            from hpnsim.report.trace import iteration_trace, jobs_trace, write_trace

            written = write_trace(jobs_trace([outcome]) if fault_list
                                  else iteration_trace(outcome.iterations[0]), trace)
            typer.echo(f"wrote {written}", err=True)
        from hpnsim.fabrics.hosts import gpu_choice

        _, source = gpu_choice(fabric, gpu if not workload else None)
        gpu_line = f"GPU: {scenario.jobs[0].gpu.upper()}, from {source}"
        if fault_list:
            tables.write(outcome.faults["timeline"])
            if plot:
                from hpnsim.report.faults import plot_throughput_timeline

                plot_throughput_timeline([outcome], plot)
            if json_out:
                emit_json(outcome.to_dict())
            else:
                from hpnsim.report.faults import print_fault_timeline

                typer.echo(gpu_line)
                print_fault_timeline(outcome, table_console())
            return
        result = outcome.iterations[0]
        tables.write(result.rows())
        if plot:
            from hpnsim.report.gantt import plot_gantt

            plot_gantt(result, plot)
        if json_out:
            emit_json(result.to_dict(timeline=timeline) | ({"packet": ran.packet}
                                                             if ran.packet else {}))
        else:
            from hpnsim.report.iteration import print_iteration

            typer.echo(gpu_line)
            print_iteration(result, table_console())
            if ran.packet:
                from hpnsim.report.packet import jobs_packet_text

                typer.echo(jobs_packet_text(ran.packet))

    @app.command(context_settings=PASS_THROUGH)
    @guarded
    def scaling(
        ctx: typer.Context,
        model: str = typer.Option(..., "--model", help="Catalog model, e.g. llama3-8b."),
        tp: int = typer.Option(8, "--tp", help="Tensor-parallel size (fixed)."),
        pp: int = typer.Option(1, "--pp", help="Pipeline-parallel size (fixed)."),
        dps: str = typer.Option("1,2,4,8,16", "--dp", help="Comma list of DP sizes."),
        fabrics: str = typer.Option("hpn7,dcn_plus", "--fabrics", help="Comma list of templates."),
        micro_batches: int = typer.Option(None, "--micro-batches",
                                          help="Micro-batches per pipeline (default 4*pp)."),
        gpu: str = GPU_OPTION,
        dtype: str = DTYPE_OPTION,
        kernel_table: str = KERNEL_TABLE_OPTION,
        compute_efficiency: float = COMPUTE_EFFICIENCY_OPTION,
        routing: str = typer.Option("native", "--routing",
                                    help="native (each fabric its own: hpn_dual_plane on hpn7, "
                                         f"ecmp elsewhere), {', '.join(ROUTING_POLICIES)}."),
        plot: str = typer.Option(None, "--plot", help="Write a linearity PNG here."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        csv: str = csv_option(),
        parquet: str = parquet_option(),
    ) -> None:
        """Weak-scaling linearity (throughput at N / (N/N0 x throughput at N0)) per fabric.

        Example: hpnsim scaling --model llama3-8b --tp 8 --dp 1,2,4,8 --fabrics hpn7,dcn_plus
        """
        from hpnsim.cli.common import check_figure_file, errors_as_flags
        from hpnsim.errors import InputError
        from hpnsim.training.scaling import scaling_linearity

        if plot:
            check_figure_file(plot)
        tables = TableFiles(csv, parquet)
        try:
            dp_list = [int(x) for x in dps.split(",") if x.strip()]
        except ValueError:
            raise InputError("dp", f"a comma list of integers, got {dps!r}") from None
        with errors_as_flags(lambda field: JOB_FLAGS.get(field, field)):
            result = scaling_linearity(
                model, tp=tp, pp=pp, dps=dp_list,
                fabrics=[f.strip() for f in fabrics.split(",") if f.strip()],
                micro_batches=micro_batches, routing=routing, gpu=gpu,
                fabric_options=fabric_options(ctx) or None, note=note, dtype=dtype,
                kernel_table=kernel_table, compute_efficiency=compute_efficiency)
        tables.write(result.rows())
        if plot:
            from hpnsim.report.scaling import plot_linearity

            plot_linearity(result, plot)
        if json_out:
            emit_json(result.to_dict())
            return
        from hpnsim.fabrics.hosts import gpu_choice
        from hpnsim.report.scaling import scaling_table

        for name in dict.fromkeys(p.fabric for p in result.points):
            used, source = gpu_choice(name, gpu)
            typer.echo(f"GPU on {name}: {used.upper()}, from {source}")
        table_console().print(scaling_table(result))
