"""Benchmark: training through a fault (``simulate_with_faults``: iterations on one resumable
simulation, failover and rerouting at each fault edge).

Full run: Llama-3 70B TP8 x PP8 x DP16 (global batch 2048) on a 1,024-GPU non-stacked dual-ToR
HPN 7.0 segment, 20 iterations; the access link of GPU 17 port 0 fails 100 s in and is
repaired 150 s later (an iteration takes about 27 s simulated); target 60 s on 2 cores.
The job's iteration is compiled once; its 20 iterations are copies of it
(:mod:`hpnsim.faults.iterations`).
Quick run: Llama-3 8B TP8 x DP4 on 32 GPUs, 6 iterations across a 1 s link failure.
"""

from __future__ import annotations

import time

from hpnsim.benchmarks import Measurement, timed


def _case(name: str, model: str, tp: int, pp: int, dp: int, global_batch: int, iterations: int,
          fault: str, fabric_options: dict, target: float | None) -> list[Measurement]:
    import numpy as np

    from hpnsim.faults.events import parse_fault
    from hpnsim.faults.runner import JobPlan, simulate_with_faults
    from hpnsim.training.job import TrainJob
    from hpnsim.workloads.sizing import fabric_for_job

    job = TrainJob(model, tp=tp, pp=pp, dp=dp, global_batch=global_batch)
    build, fabric = timed(f"{name}: build fabric",
                          lambda: fabric_for_job("hpn7", job.gpus, fabric_options, gpu=job.gpu))
    plan = JobPlan(name, job, np.arange(job.gpus), iterations=iterations)
    cpu = time.process_time()
    m, [timeline] = timed(f"{name}: {iterations} iterations through {fault}",
                          lambda: simulate_with_faults(fabric, [plan], [parse_fault(fault)],
                                                       routing="hpn_dual_plane"),
                          target, gpus=job.gpus, iterations=iterations)
    cpu = time.process_time() - cpu
    times = [r["iteration_time"] for r in timeline.rows]
    # CPU seconds (user + system) beside the wall time: on a shared machine the wall time
    # of the same run varies with the other processes' load
    m.details.update(cpu_s=round(cpu, 1), nominal_s=round(timeline.nominal, 4), slowest_s=round(max(times), 4),
                     simulated_s=round(timeline.finish, 3), restarts=len(timeline.restarts))
    return [build, m]


def run(quick: bool = False) -> list[Measurement]:
    """Time a job's iterations across a link failure and repair.

    >>> [m.name.split(":")[0] for m in run(quick=True)]
    ['quick 32 GPUs', 'quick 32 GPUs']
    """
    if quick:
        return _case("quick 32 GPUs", "llama3-8b", 8, 1, 4, 16, 6, "link:gpu17.port0@0.3s+1s",
                     {"segments": 1, "hosts_per_segment": 4, "backup_hosts": 0}, None)
    return _case("llama3-70b 1,024 GPUs", "llama3-70b", 8, 8, 16, 2048, 20,
                 "link:gpu17.port0@100s+150s", {"segments": 1}, 60.0)
