"""Benchmark: a synthetic Lingjun day under Crux (``simulate_cluster``, steady-state mode).

Full run: :func:`~hpnsim.workloads.jobmix.lingjun_mix` defaults (300 jobs arriving over 24
hours, 1-512 GPUs) on the Lingjun topology (847 hosts, 6,776 GPUs), scheduler ``crux``,
packed allocation, run until every job has left; target 600 s on 2 cores (issue 11).
Quick run: 6 jobs arriving over half an hour, stopped at 15 simulated minutes.
"""

from __future__ import annotations

from hpnsim.benchmarks import Measurement, timed


def _case(name: str, n_jobs: int, hours: float, horizon: float | None,
          target: float | None) -> list[Measurement]:
    from hpnsim.fabrics.lingjun import from_lingjun
    from hpnsim.scenario.spec import JobSpec
    from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster
    from hpnsim.workloads.jobmix import lingjun_mix

    build, fabric = timed(f"{name}: build Lingjun", from_lingjun)
    specs = [JobSpec(**d) for d in lingjun_mix(n_jobs, seed=0, hours=hours)]
    jobs = [ClusterJob(s.name, s.train_job(), arrival=s.arrival, duration=s.duration)
            for s in specs]
    m, r = timed(f"{name}: crux, steady state", lambda: simulate_cluster(
        fabric, jobs, scheduler="crux", horizon=horizon), target, jobs=n_jobs,
        hosts=fabric.n_hosts)
    m.details.update(simulated_hours=round(r.makespan / 3600, 2), events=int(r.events.size),
                     probes=r.probes, unstable_probes=r.unstable_probes,
                     phase_probes=r.phase_probes,
                     extrapolated_share=round(r.extrapolated_time / max(r.makespan, 1e-9), 4),
                     gpu_utilization=round(r.gpu_utilization, 4),
                     unfinished=len(r.unfinished))
    return [build, m]


def run(quick: bool = False) -> list[Measurement]:
    """Time a Lingjun trace under Crux.

    >>> [m.name.split(":")[0] for m in run(quick=True)]
    ['quick 6 jobs', 'quick 6 jobs']
    """
    if quick:
        return _case("quick 6 jobs", 6, 0.5, 900.0, None)
    return _case("Lingjun day, 300 jobs", 300, 24.0, None, 600.0)
