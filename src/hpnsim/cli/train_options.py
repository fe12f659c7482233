"""What ``hpnsim train`` and ``hpnsim scaling`` accept: the compute options they share, the
job flags and how a scenario field maps back to the flag the user typed.

The commands themselves (:mod:`hpnsim.cli.train`) turn these flags into a one-job scenario;
an error in that scenario names the flag (:func:`flag_of_path`), and with ``--workload``
every job flag is refused (:func:`refuse_job_flags`), as the workload file fixes the job.
"""

from __future__ import annotations

import typer

from hpnsim.cli.common import parse_extra_options
from hpnsim.workloads.gpus import GPUS

__all__ = ["COMPUTE_EFFICIENCY_OPTION", "DTYPE_OPTION", "GPU_OPTION", "JOB_FLAGS",
           "KERNEL_TABLE_OPTION", "PARALLELISM", "RENAMED_FLAGS", "fabric_options",
           "flag_of_path", "int_list", "note", "refuse_job_flags"]


def fabric_options(ctx: typer.Context) -> dict:
    """The fabric options the user added after the known flags (``--pods 2 ...``)."""
    return parse_extra_options(list(ctx.args))


#: job keys whose flag is not the key with dashes (the flags keep their short names)
RENAMED_FLAGS = {"virtual_stages": "--vpp", "fsdp_prefetch": "--prefetch"}


def flag_of_path(path: str) -> str:
    """The flag of a scenario path, ``--fault`` and ``--timeout`` included.

    >>> flag_of_path("jobs[0].virtual_stages"), flag_of_path("jobs[0].micro_batch")
    ('--vpp', '--micro-batch')
    >>> flag_of_path("faults[0].at")
    '--fault'
    """
    from hpnsim.cli.common import flag_of

    if path.startswith("faults["):
        return "--fault"
    if path.startswith("engine"):
        from hpnsim.cli.collective import _engine_name

        return "--" + _engine_name(path).replace("_", "-")
    if path.startswith("jobs[") and path.rsplit(".", 1)[-1] in RENAMED_FLAGS:
        return RENAMED_FLAGS[path.rsplit(".", 1)[-1]]
    return "--timeout" if path.startswith("failover.") else flag_of(path)


#: the compute options train and scaling share (one definition, one help text)
GPU_OPTION = typer.Option(None, "--gpu", help=f"GPU model: {', '.join(GPUS)} (default: the "
                                              "GPU of the fabric's hosts, e.g. H800 on "
                                              "hpn7 and dcn_plus).")
DTYPE_OPTION = typer.Option("bf16", "--dtype", help="GEMM dtype of the linear layers: bf16, "
                                                    "fp16, fp8 (Hopper, Blackwell).")
KERNEL_TABLE_OPTION = typer.Option(None, "--kernel-table",
                                   help="Measured kernel CSV (tools/measure_kernels.py, "
                                        "hpnsim kernels) overriding the compute model on "
                                        "that GPU, or a table shipped with hpnsim by name "
                                        "(e.g. f8e_bf16_h100; docs/compute.md lists them).")
COMPUTE_EFFICIENCY_OPTION = typer.Option(
    None, "--compute-efficiency",
    help="Override the per-operation compute model: every kernel at this fraction of peak "
         "(the old constant model).")


def note(message: str) -> None:
    """``note: message`` on stderr once the command has succeeded
    (:func:`hpnsim.cli.common.note`)."""
    from hpnsim.cli.common import note as deferred

    deferred(message)


#: train options that describe the job; a --workload file fixes every one of them
JOB_FLAGS = {"tp": "--tp", "pp": "--pp", "dp": "--dp", "ep": "--ep", "cp": "--cp",
              "vpp": "--vpp",
              "zero": "--zero", "micro_batch": "--micro-batch", "global_batch": "--global-batch",
              "seq_len": "--seq-len", "schedule": "--schedule",
              "sequence_parallel": "--sequence-parallel", "model": "--model",
              "model_file": "--model-file", "gpu": "--gpu", "dtype": "--dtype",
              "compute_efficiency": "--compute-efficiency", "mfu": "--mfu",
              "kernel_table": "--kernel-table",
              "prefetch": "--prefetch", "recompute": "--recompute",
              "bucket_params": "--bucket-params", "grad_bytes": "--grad-bytes",
              "tp_algo": "--tp-algo", "dp_algo": "--dp-algo", "stage_layers": "--stage-layers",
              "first_stage_layers": "--first-stage-layers",
              "last_stage_layers": "--last-stage-layers",
              "account_for_embedding": "--account-for-embedding",
              "account_for_loss": "--account-for-loss", "tp_comm_overlap": "--tp-comm-overlap",
              "userbuffers": "--userbuffers",
              "overlap_grad_reduce": "--overlap-grad-reduce",
              "selective_recompute": "--selective-recompute",
              "overlap_param_gather": "--overlap-param-gather",
              "megatron_core": "--megatron-core", "attention": "--attention",
              "cross_entropy": "--cross-entropy", "dropout": "--dropout",
              "fp8_gemm": "--fp8-gemm", "fp8_recipe": "--fp8-recipe",
              "fp8_param_gather": "--fp8-param-gather",
              "gpu_variation": "--gpu-variation", "rank_order": "--rank-order"}
PARALLELISM = ("tp", "pp", "dp", "ep", "cp", "vpp", "zero", "micro_batch", "global_batch",
                "seq_len", "schedule", "sequence_parallel", "stage_layers",
                "first_stage_layers", "last_stage_layers", "account_for_embedding",
                "account_for_loss", "tp_comm_overlap", "userbuffers", "rank_order")


def int_list(text: str | None, flag: str) -> list[int] | None:
    """``"1,3,3,1"`` as a list of integers (None stays None).

    >>> int_list("1, 3,3,1", "--stage-layers")
    [1, 3, 3, 1]
    """
    from hpnsim.errors import InputError

    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise InputError(flag, f"comma-separated integers, e.g. 7,9,9,7; got {text!r}") from None


def refuse_job_flags(ctx: typer.Context) -> None:
    """A job flag given with --workload would be silently ignored: refuse it, naming it."""
    from hpnsim.errors import InputError

    for name, flag in JOB_FLAGS.items():
        source = ctx.get_parameter_source(name)
        if source is None or source.name in ("DEFAULT", "DEFAULT_MAP"):
            continue
        what = ("parallelism and batches (tp, pp, dp, ep, micro-batches)"
                if name in PARALLELISM else "job (model, compute times, collectives)")
        raise InputError(flag, f"not used with --workload: the workload file fixes the {what}; "
                               f"drop {flag} or use --model instead of --workload")
