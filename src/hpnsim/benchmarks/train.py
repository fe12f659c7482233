"""Benchmark: simulate one training iteration (graph build + engine run + accounting).

Full run: Llama-3 70B TP8 x PP8 x DP16 (global batch 2048, 128 micro-batches) on a 1,024-GPU
HPN 7.0 segment, target 30 s; TP8 x PP8 x DP240 (global batch 3840) on the 15,360-GPU
HPN 7.0 pod, target 120 s; Llama-3 70B TP8 x DP16 (128 GPUs, 4 micro-batches) with ZeRO-1
and with ZeRO-3 / FSDP on HPN 7.0; Mixtral-8x7B TP4 x DP16 x EP8 (64 GPUs, sequence 4096,
2 micro-batches) on HPN 7.0 and on DCN+. Quick run: Llama-3 8B TP8 x PP2 x DP2 on 32 GPUs,
and small ZeRO-3 and EP jobs.
"""

from __future__ import annotations

from hpnsim.benchmarks import Measurement, timed


def _case(name: str, model: str, tp: int, pp: int, dp: int, global_batch: int,
          fabric_options: dict, target: float | None, *, template: str = "hpn7",
          routing: str = "ecmp", **job_options) -> list[Measurement]:
    from hpnsim.training import simulate_iteration
    from hpnsim.training.job import TrainJob
    from hpnsim.workloads.sizing import fabric_for_job

    job = TrainJob(model, tp=tp, pp=pp, dp=dp, global_batch=global_batch, **job_options)
    build, fabric = timed(f"{name}: build fabric",
                          lambda: fabric_for_job(template, job.gpus, fabric_options,
                                                         gpu=job.gpu))
    m, result = timed(f"{name}: one iteration",
                      lambda: simulate_iteration(job, fabric, routing=routing), target,
                      gpus=job.gpus, micro_batches=job.micro_batches)
    m.details.update(tasks=result.n_tasks, simulated_s=round(result.iteration_time, 4),
                     mfu=round(result.mfu, 4), compute_s=round(result.compute_time, 4),
                     **{f"exposed_{k}_s": round(v, 4) for k, v in result.exposed_comm.items()
                        if v > 0})
    return [build, m]


def run(quick: bool = False) -> list[Measurement]:
    """Time one simulated iteration at each size.

    >>> [m.name.split(":")[0] for m in run(quick=True)][::2]
    ['quick 32 GPUs', 'quick ZeRO-3 16 GPUs', 'quick EP4 16 GPUs']
    """
    if quick:
        out = _case("quick 32 GPUs", "llama3-8b", 8, 2, 2, 8,
                    {"segments": 1, "hosts_per_segment": 4, "backup_hosts": 0}, None)
        out += _case("quick ZeRO-3 16 GPUs", "llama3-8b", 8, 1, 2, 4,
                     {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0}, None,
                     zero=3, seq_len=1024)
        out += _case("quick EP4 16 GPUs", "mixtral-8x7b", 4, 1, 4, 4,
                     {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0}, None,
                     ep=4, seq_len=1024)
        return out
    out = _case("llama3-70b 1,024 GPUs", "llama3-70b", 8, 8, 16, 2048, {"segments": 1}, 30.0)
    out += _case("llama3-70b 15,360 GPUs", "llama3-70b", 8, 8, 240, 3840, {}, 120.0)
    for zero in (1, 3):
        out += _case(f"llama3-70b ZeRO-{zero} 128 GPUs", "llama3-70b", 8, 1, 16, 64, {}, None,
                     routing="hpn_dual_plane", zero=zero)
    for template, routing in (("hpn7", "hpn_dual_plane"), ("hpn7", "ecmp"),
                              ("dcn_plus", "ecmp")):
        out += _case(f"mixtral-8x7b EP8 64 GPUs {template} {routing}", "mixtral-8x7b", 4, 1,
                     16, 32, {}, None, template=template, routing=routing, ep=8, seq_len=4096)
    return out
