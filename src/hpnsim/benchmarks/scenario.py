"""Benchmark: whole scenario runs (``hpnsim run``): fabric build, placement, one shared
simulation of every job, and each job alone for its slowdown.

Full run: two Llama-3 70B jobs of TP8 x PP8 x DP120 (7,680 GPUs each, global batch 1920,
16 micro-batches) filling the 15,360-GPU HPN 7.0 pod, target 30 s. Quick run: the two-job
example of ``examples/two_jobs.yaml`` at its size (128 GPUs).
"""

from __future__ import annotations

from hpnsim.benchmarks import Measurement, timed


def _case(name: str, scenario: dict, target: float | None) -> Measurement:
    from hpnsim.scenario.runner import run
    from hpnsim.scenario.spec import parse_scenario

    gpus = sum(job.gpu_count for job in parse_scenario(scenario).jobs)
    m, result = timed(name, lambda: run(scenario), target, gpus=gpus)
    m.details.update(tasks=result.n_tasks, events=result.n_events,
                     **{f"{j.name}_slowdown": round(j.slowdown, 4) for j in result.jobs
                        if j.slowdown is not None})
    return m


def _two_jobs(fabric: dict, job: dict, hosts_a, hosts_b) -> dict:
    return {"fabric": fabric, "routing": "ecmp", "seed": 1,
            "jobs": [{**job, "name": "a", "hosts": list(hosts_a)},
                     {**job, "name": "b", "hosts": list(hosts_b)}]}


def run(quick: bool = False) -> list[Measurement]:
    """Time whole scenario runs.

    >>> [m.name for m in run(quick=True)]
    ['two jobs, 128 GPUs (examples/two_jobs.yaml)']
    """
    if quick:
        fabric = {"template": "hpn7", "segments": 2, "hosts_per_segment": 8, "backup_hosts": 0,
                  "tor_uplinks": 4, "aggs_per_plane": 4}
        job = {"model": "llama3-8b", "tp": 8, "dp": 8, "global_batch": 64}
        order = [h for pair in zip(range(0, 4), range(8, 12), strict=True) for h in pair]
        return [_case("two jobs, 128 GPUs (examples/two_jobs.yaml)",
                      _two_jobs(fabric, job, order, [h + 4 for h in order]), None)]
    job = {"model": "llama3-70b", "tp": 8, "pp": 8, "dp": 120, "global_batch": 1920}
    return [_case("two Llama-3 70B jobs of 7,680 GPUs on a 15,360-GPU pod",
                  _two_jobs({"template": "hpn7"}, job, range(0, 960), range(960, 1920)), 30.0)]
