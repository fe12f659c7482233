"""How much of each published FP8 run's step the delayed-scaling amax reduction takes.

Per GPU and iteration: micro-batches x model chunks x (the forward's and the backward's
reduction ops of :mod:`hpnsim.training.compute.amax_reduction`, plus one dispatch gap per op),
over the published iteration time. The runs are experiments/published_runs.py's FP8 rows.

Usage: python experiments/amax_reduction_share.py   (well under a second of CPU)
"""

from __future__ import annotations

from published_runs import RUNS, published_iteration

from hpnsim.training.compute.amax_reduction import amax_group, amax_reduction_ops
from hpnsim.training.compute.overhead import KERNEL_GAP_S
from hpnsim.training.job_options import parse_version
from hpnsim.workloads.gpus import get_gpu
from hpnsim.workloads.models import get


def chunk_seconds(gpu, gemms: int, group: int) -> float:
    """The forward's and the backward's reduction of one chunk, with their dispatch gaps."""
    total = 0.0
    for phase in ("forward", "input_grad"):
        ops = amax_reduction_ops(gpu, gemms=gemms, group=group, phase=phase)
        total += ops.seconds() + len(ops) * KERNEL_GAP_S
    return total


def reductions(run) -> tuple[int, float, int]:
    """(the amax group's GPUs, seconds of one chunk's pair of reductions, pairs per GPU and
    iteration) of a published FP8 run."""
    spec = get(run.model) if isinstance(run.model, str) else run.model
    chunks = run.vp or 1
    gemms = 4 * (spec.layers // (run.pp * chunks))
    group = amax_group(parse_version(run.megatron_core), tp=run.tp, cp=run.cp, dp=run.dp)
    n = run.global_batch // (run.dp * run.micro_batch) * chunks
    return group, chunk_seconds(get_gpu(run.gpu), gemms, group), n


def share(run) -> float:
    """The reductions' seconds per iteration over the run's published iteration time."""
    _, per, n = reductions(run)
    return n * per / published_iteration(run)


def main() -> None:
    for run in RUNS:
        if run.dtype != "fp8" or run.options.get("fp8_recipe") == "current":
            continue   # current scaling has no delayed-scaling reduction
        group, per, n = reductions(run)
        print(f"{run.label:24s} {run.gpus:5d} GPUs  core {run.megatron_core:5s} group {group:4d}"
              f"  {per * 1e6:6.1f} us x {n:4d} = {n * per * 1e3:6.2f} ms  {share(run):.2%}")


if __name__ == "__main__":
    main()
