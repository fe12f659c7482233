"""A shared cluster in a scenario: the ``cluster:`` section (:class:`ClusterSpec`).

With a ``cluster:`` section the scenario's jobs are a *trace*: each arrives at its
``arrival``, waits until the allocator finds it hosts, runs its ``iterations`` and leaves,
while the scheduler re-decides paths, priority classes and offsets at every cluster event
(:func:`~hpnsim.sched.cluster.driver.simulate_cluster`). Jobs then need not fit the fabric all at
once (they queue), but a single job larger than the cluster is still an error. Errors are
named by YAML path with the line (``cluster.K: ... (line 7)``), before any simulation.

Examples
--------
>>> spec = ClusterSpec.model_validate({"scheduler": "crux", "K": 4, "horizon": "2h"})
>>> spec.scheduler, spec.K, spec.horizon, spec.exact
('crux', 4, 7200.0, False)
>>> ClusterSpec.model_validate({"scheduler": "fifo"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for ClusterSpec
...
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from hpnsim.errors import InputError
from hpnsim.scenario.yaml import located, seconds_field
from hpnsim.sched.defaults import CLUSTER_CANDIDATES, MAX_PROBE_SIZE
from hpnsim.workloads.allocator_names import ALLOCATORS

__all__ = ["ClusterSpec", "check_cluster", "cluster_jobs", "run_cluster"]



class ClusterSpec(BaseModel):
    """How the scenario's jobs share the fabric as a cluster trace.

    Attributes
    ----------
    scheduler : one of :data:`~hpnsim.sched.names.SCHEDULERS`
    allocator : one of :data:`~hpnsim.workloads.allocator_names.ALLOCATORS` (``given``:
        every job's ``gpus`` or ``hosts``)
    K : priority classes (switch queues) the schedulers may use
    samples : topological orders Crux's compression tries
    exact : simulate every iteration (else steady-state extrapolation between events)
    tolerance : relative tolerance of a stable iteration time
    horizon : stop the trace at this time (default: when every job has left)
    candidates : routing seeds tried per job by path selection
    probe_budget : tasks plus link entries a task-by-task steady-state probe may need;
        costlier components are probed phase-level (0: always phase-level)
    share_hosts : a job smaller than a host takes free GPUs of a partly used host (best fit);
        jobs of a host or more take whole free hosts by ``allocator``
    window : ``[start, end]``, the period utilization is measured over (Crux's Definition 1:
        the computation the GPUs finish in a period); default the whole run. Without a
        ``horizon`` the trace stops at its end.
    """

    model_config = ConfigDict(extra="forbid")

    scheduler: str = "none"
    allocator: Literal[ALLOCATORS] = "packed"
    K: Annotated[int, Field(ge=1, le=64, strict=True)] = 8
    samples: Annotated[int, Field(ge=1, strict=True)] = 10
    exact: bool = False
    tolerance: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 0.01
    horizon: Annotated[float | None, BeforeValidator(seconds_field),
                       Field(gt=0, allow_inf_nan=False)] = None
    candidates: Annotated[int, Field(ge=1, strict=True)] = CLUSTER_CANDIDATES
    probe_budget: Annotated[int, Field(ge=0, strict=True)] = MAX_PROBE_SIZE
    share_hosts: bool = False
    window: Annotated[list[Annotated[float, BeforeValidator(seconds_field),
                                     Field(ge=0, allow_inf_nan=False)]] | None,
                      Field(min_length=2, max_length=2)] = None

    @field_validator("window")
    @classmethod
    def _ordered(cls, value):
        if value is not None and not value[0] < value[1]:
            raise ValueError(f"needs start < end, got [{value[0]:g}, {value[1]:g}] s")
        return value

    @field_validator("scheduler")
    @classmethod
    def _known_scheduler(cls, value: str) -> str:
        # the names module, not the schedulers: validating a scenario loads no policy code
        from hpnsim.sched.names import SCHEDULERS

        if value not in SCHEDULERS:
            raise ValueError(f"choose one of {', '.join(SCHEDULERS)}, got {value!r}")
        return value


def check_cluster(scenario, lines: dict) -> None:
    """What a cluster section needs of the rest of the scenario (no fabric needed): every
    job a catalog model, placements for the ``given`` allocator, no faults.
    Raises InputError by YAML path.

    >>> from hpnsim.scenario.spec import parse_scenario
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b"}],
    ...                     "cluster": {"allocator": "given"}})
    >>> check_cluster(s, {})
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].gpus: the given allocator needs every job's gpus or hosts
    """
    spec = scenario.cluster
    if spec is None:
        return
    if scenario.faults:
        raise located(InputError("", "faults are not simulated in a cluster trace yet; "
                                     "remove faults or the cluster section"),
                      lines, ("faults",))
    for i, job in enumerate(scenario.jobs):
        if job.workload is not None:
            raise located(InputError("", "a cluster trace runs catalog models; give model"),
                          lines, ("jobs", i, "workload"))
        if spec.allocator == "given" and job.gpus is None and job.hosts is None:
            raise located(InputError("", "the given allocator needs every job's gpus or "
                                         "hosts"), lines, ("jobs", i, "gpus"))


def cluster_jobs(scenario, fabric) -> list:
    """The scenario's jobs as :class:`~hpnsim.sched.cluster.driver.ClusterJob` (in scenario order).

    >>> from hpnsim.fabrics import fat_tree
    >>> from hpnsim.scenario.spec import parse_scenario
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b", "dp": 2, "arrival": "5s",
    ...                               "iterations": 3}], "cluster": {}})
    >>> [(j.name, j.n_gpus, j.arrival, j.iterations) for j in cluster_jobs(s, fat_tree(4))]
    [('job0', 2, 5.0, 3)]
    """
    from hpnsim.sched.cluster.jobs import ClusterJob

    out = []
    for job in scenario.jobs:
        gpus = job.placement(fabric.gpus_per_host)
        timed = job.duration is not None
        out.append(ClusterJob(job.name, job.train_job(), arrival=float(job.arrival),
                              iterations=None if timed else int(job.iterations),
                              duration=float(job.duration) if timed else None,
                              gpus=None if gpus is None else gpus[:job.gpu_count],
                              tp_algo=job.tp_algo, dp_algo=job.dp_algo))
    return out


def run_cluster(scenario, fabric, *, scheduler: str | None = None,
                allocator: str | None = None, exact: bool | None = None, progress=None,
                templates=None):
    """Run the scenario's jobs as a cluster trace on ``fabric``; the keywords override the
    ``cluster:`` section. Returns the :class:`~hpnsim.sched.cluster.driver.ClusterResult`.

    >>> from hpnsim.fabrics import fat_tree
    >>> from hpnsim.scenario.spec import parse_scenario
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b", "dp": 16, "zero": 1,
    ...                               "iterations": 2}], "cluster": {}})
    >>> r = run_cluster(s, fat_tree(4, gpus_per_host=1))
    >>> r.jobs[0].start, r.unfinished
    (0.0, [])
    """
    from hpnsim.sched.cluster.driver import check_horizon, check_window, simulate_cluster

    spec = scenario.cluster or ClusterSpec()
    jobs = cluster_jobs(scenario, fabric)
    try:
        check_horizon(spec.horizon, jobs)
    except InputError as exc:
        raise InputError("cluster.horizon", exc.message) from None
    try:
        check_window(spec.window, spec.horizon, jobs)
    except InputError as exc:
        raise InputError("cluster.window", exc.message) from None
    return simulate_cluster(
        fabric, jobs,
        scheduler=spec.scheduler if scheduler is None else scheduler,
        allocator=spec.allocator if allocator is None else allocator,
        K=spec.K, samples=spec.samples, exact=spec.exact if exact is None else exact,
        tolerance=spec.tolerance, seed=scenario.seed, horizon=spec.horizon,
        progress=progress, candidates=spec.candidates, routing=scenario.routing,
        probe_budget=spec.probe_budget,
        window=None if spec.window is None else tuple(spec.window), templates=templates,
        share_hosts=spec.share_hosts)
