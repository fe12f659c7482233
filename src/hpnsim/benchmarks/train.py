"""Benchmark: simulate one training iteration (graph build + engine run + accounting).

Full run: Llama-3 70B TP8 x PP8 x DP16 (global batch 2048, 128 micro-batches) on a 1,024-GPU
HPN 7.0 segment, target 30 s; TP8 x PP8 x DP240 (global batch 3840) on the 15,360-GPU
HPN 7.0 pod, target 120 s. Quick run: Llama-3 8B TP8 x PP2 x DP2 on 32 GPUs.
"""

from __future__ import annotations

from hpnsim.benchmarks import Measurement, timed


def _case(name: str, model: str, tp: int, pp: int, dp: int, global_batch: int,
          fabric_options: dict, target: float | None) -> list[Measurement]:
    from hpnsim.fabrics import hpn7
    from hpnsim.workloads.iteration import simulate_iteration
    from hpnsim.workloads.iteration_job import TrainJob

    build, fabric = timed(f"{name}: build fabric", lambda: hpn7(**fabric_options))
    job = TrainJob(model, tp=tp, pp=pp, dp=dp, global_batch=global_batch)
    m, result = timed(f"{name}: one iteration", lambda: simulate_iteration(job, fabric), target,
                      gpus=job.gpus, micro_batches=job.micro_batches)
    m.details.update(tasks=result.n_tasks, simulated_s=round(result.iteration_time, 4),
                     mfu=round(result.mfu, 4))
    return [build, m]


def run(quick: bool = False) -> list[Measurement]:
    """Time one simulated iteration at each size.

    >>> [m.name for m in run(quick=True)]
    ['quick 32 GPUs: build fabric', 'quick 32 GPUs: one iteration']
    """
    if quick:
        return _case("quick 32 GPUs", "llama3-8b", 8, 2, 2, 8,
                     {"segments": 1, "hosts_per_segment": 4, "backup_hosts": 0}, None)
    out = _case("llama3-70b 1,024 GPUs", "llama3-70b", 8, 8, 16, 2048, {"segments": 1}, 30.0)
    out += _case("llama3-70b 15,360 GPUs", "llama3-70b", 8, 8, 240, 3840, {}, 120.0)
    return out
