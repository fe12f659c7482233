"""The :class:`Scenario`: one YAML file describes a whole run (fabric, jobs, routing, seed).

A scenario is validated in two steps, both before any simulation:

1. :meth:`Scenario.model_validate` (pydantic): types, ranges, units (``"30s"``, ``"4GiB"``),
   unknown keys, a job's model *or* workload;
2. :func:`check_against_fabric`: what needs the built fabric (TP within a host, jobs that
   fit, explicit placements that exist and do not overlap).

Every error becomes an :class:`~hpnsim.errors.InputError` named by its YAML path, with the
line when the scenario came from a file: ``jobs[1].tp: must divide the GPUs per host (8),
got 3 (line 14)``.

Examples
--------
>>> s = Scenario.model_validate({"fabric": {"template": "hpn7", "segments": 1},
...                              "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 4}]})
>>> s.jobs[0].name, s.jobs[0].gpu_count, s.fabric.options()
('job0', 32, {'segments': 1})
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from hpnsim.errors import MAX_SEED, InputError, read_user_text
from hpnsim.scenario.cluster import ClusterSpec, check_cluster
from hpnsim.scenario.collectives import CollectiveSpec, check_collectives, name_collectives
from hpnsim.scenario.fabric import FabricSpec
from hpnsim.scenario.faults import FailoverSpec, FaultSpec
from hpnsim.scenario.yaml import format_path, load_yaml, located, seconds_field

ROUTINGS = ("ecmp", "hpn_dual_plane", "precise", "spray")
SCHEDULERS = ("none",)

__all__ = ["CollectiveSpec", "FabricSpec", "JobSpec", "Scenario", "check_against_fabric",
           "load_scenario", "parse_scenario", "parse_section", "scenario_lines"]


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {value!r}")
    return value


#: seconds, from a number or a string with a unit ("30s", "1.5ms", "2h")
Seconds = Annotated[float, BeforeValidator(seconds_field), Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[int, Field(ge=1, strict=True)]


class JobSpec(BaseModel):
    """One training job: what it trains, how it is parallelised, where and when it runs.

    ``model`` names a catalog model (or one in ``model_file``); ``workload`` a SimAI/AICB
    workload file instead, whose header fixes the parallelism. ``gpus`` is an explicit
    placement (GPU indices in rank order); without it the run allocates whole hosts.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    model: str | None = None
    model_file: str | None = None
    workload: str | None = None
    tp: Positive = 1
    pp: Positive = 1
    dp: Positive = 1
    ep: Positive = 1
    zero: Annotated[Literal[0, 1, 2, 3], BeforeValidator(_not_bool)] = 0
    micro_batch: Positive = 1
    global_batch: Positive | None = None
    seq_len: Positive | None = None
    gpu: Literal["a100", "h100", "h800", "b200"] = "h800"
    mfu: Annotated[float, Field(gt=0, le=1, strict=True)] | None = None
    schedule: Literal["", "1f1b", "interleaved", "gpipe"] = ""
    vpp: Positive = 1
    sequence_parallel: bool = False
    recompute: bool = False
    prefetch: bool = True
    bucket_params: Positive | None = None
    grad_bytes: Annotated[Literal[2, 4], BeforeValidator(_not_bool)] = 2
    tp_algo: str = "auto"
    dp_algo: str = "auto"
    gpus: list[Annotated[int, Field(ge=0, strict=True)]] | None = Field(
        None, min_length=1, description="explicit placement: GPU indices in rank order")
    hosts: list[Annotated[int, Field(ge=0, strict=True)]] | None = Field(
        None, min_length=1, description="explicit placement by host: the hosts' GPUs, host by host, in "
                          "rank order")
    arrival: Seconds = 0.0
    iterations: Positive = 1

    @model_validator(mode="after")
    def _what_it_trains(self) -> JobSpec:
        if (self.model is None) == (self.workload is None):
            raise ValueError("give model (a catalog name) or workload (an AICB file), "
                             "exactly one")
        if self.workload is not None:
            fixed = sorted({"tp", "pp", "dp", "ep", "micro_batch", "global_batch", "vpp"}
                           & self.model_fields_set)
            if fixed:
                raise ValueError(f"{fixed[0]}: fixed by the workload file; remove it")
        if self.gpus is not None and self.hosts is not None:
            raise ValueError("hosts: give gpus or hosts, not both")
        for key in ("gpus", "hosts"):
            values = getattr(self, key)
            if values is not None and len(set(values)) != len(values):
                raise ValueError(f"{key}: {max(values, key=values.count)} appears twice")
        return self

    def placement(self, gpus_per_host: int) -> list[int] | None:
        """The explicit placement as GPU indices (``gpus``, or the GPUs of ``hosts``)."""
        if self.hosts is None:
            return self.gpus
        return [h * gpus_per_host + g for h in self.hosts for g in range(gpus_per_host)]

    @property
    def gpu_count(self) -> int:
        """GPUs the job occupies (tp * pp * dp, or the workload's)."""
        if self.workload is not None:
            return self.load_workload().to_layout().n_gpus
        return self.tp * self.pp * self.dp

    def load_workload(self):
        """The parsed workload file (read once)."""
        cached = self.__dict__.get("_workload")
        if cached is None:
            from hpnsim.workloads.aicb import parse_aicb

            text = read_user_text(self.workload, "workload")
            cached = parse_aicb(text, source=self.workload)
            self.__dict__["_workload"] = cached
        return cached

    def train_job(self):
        """The :class:`~hpnsim.training.job.TrainJob` of a ``model`` job."""
        from hpnsim.training.job import TrainJob
        from hpnsim.workloads import models

        extra = models.load_yaml(self.model_file) if self.model_file else None
        return TrainJob(models.get(self.model, extra), tp=self.tp, pp=self.pp, dp=self.dp,
                        ep=self.ep, zero=self.zero, micro_batch=self.micro_batch,
                        global_batch=self.global_batch, seq_len=self.seq_len, gpu=self.gpu,
                        mfu=self.mfu, schedule=self.schedule, virtual_stages=self.vpp,
                        sequence_parallel=self.sequence_parallel, recompute=self.recompute,
                        fsdp_prefetch=self.prefetch, bucket_params=self.bucket_params,
                        grad_bytes=self.grad_bytes)


class Scenario(BaseModel):
    """A whole run: one fabric, the jobs and collectives on it, the routing policy, the seed.

    ``jobs`` run together in one simulation; each of ``collectives`` (a size sweep, as
    ``hpnsim collective`` runs) runs alone. A scenario with neither describes only the
    fabric: its report (``report_fabric``, the data of ``hpnsim fabric --json``) is the
    result. ``scheduler`` is reserved for cluster scheduling; today it is ``none`` (ECMP or
    the chosen routing, one queue, max-min sharing). ``faults`` fail links and switches
    while the jobs run (``failover``: how the fabric's ToR design and the jobs react,
    :mod:`hpnsim.faults`).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    fabric: FabricSpec = Field(default_factory=FabricSpec)
    jobs: list[JobSpec] = Field(default_factory=list)
    collectives: list[CollectiveSpec] = Field(
        default_factory=list, description="collectives swept over sizes, each alone on the "
                                          "fabric (the options of hpnsim collective)")
    report_fabric: bool | None = Field(
        None, description="report the fabric (counts, oversubscription, path choices, bill "
                          "of materials; default: when there are no jobs and no collectives)")
    routing: Literal["ecmp", "hpn_dual_plane", "precise", "spray"] = "ecmp"
    seed: Annotated[int, Field(ge=0, le=MAX_SEED, strict=True)] = 0
    compare_alone: bool | None = Field(
        None, description="also run each job alone to report its slowdown (default: when "
                          "there are several jobs)")
    scheduler: Literal["none"] = "none"
    faults: list[FaultSpec] = Field(
        default_factory=list, description="faults during the jobs' run (kind, target, at, "
                                          "duration; a flap: down, period, count)")
    failover: FailoverSpec = Field(
        default_factory=FailoverSpec, description="detection delays, collective timeout, "
                                                  "checkpoints and restart")
    cluster: ClusterSpec | None = Field(
        None, description="run the jobs as a cluster trace: they arrive, queue for hosts, "
                          "leave; a scheduler orders their traffic (hpnsim cluster)")
    calibration: str | None = Field(
        None, description="calibration file written by hpnsim calibrate: the NCCL "
                          "efficiencies and latency the collectives and jobs run with")

    def nccl_params(self):
        """The :class:`~hpnsim.collectives.nccl.NcclParams` of ``calibration`` (None without
        one: NCCL's defaults); a bad file is an :class:`InputError` named ``calibration``."""
        if self.calibration is None:
            return None
        cached = self.__dict__.get("_nccl")
        if cached is None:
            from hpnsim.collectives.calibrate import load_calibration

            try:
                cached = load_calibration(self.calibration)
            except InputError as exc:
                raise located(exc, scenario_lines(self), ("calibration",)) from None
            self.__dict__["_nccl"] = cached
        return cached

    @model_validator(mode="after")
    def _job_names(self) -> Scenario:
        seen: set[str] = set()
        for i, job in enumerate(self.jobs):
            if not job.name:
                job.name = f"job{i}"
            if job.name in seen:
                raise ValueError(f"jobs[{i}].name: {job.name!r} is used by another job")
            seen.add(job.name)
        name_collectives(self.collectives, self.jobs)
        for key in ("jobs", "collectives"):
            if key in self.model_fields_set and not getattr(self, key):
                raise ValueError(f"{key}: an empty list; list at least one, or leave the key "
                                 f"out")
        # a fabric-only scenario: refuse what only traffic would use (it would be ignored)
        unused = sorted({"routing", "seed", "compare_alone"} & self.model_fields_set)
        if not self.jobs and not self.collectives and unused:
            raise ValueError(f"jobs: required: {unused[0]} sets how jobs and collectives run; "
                             f"give jobs or collectives, or leave {unused[0]} out for a "
                             f"fabric-only scenario")
        if self.cluster is not None and not self.jobs:
            raise ValueError("cluster: schedules jobs; the scenario has no jobs")
        if self.faults and not self.jobs:
            raise ValueError("faults: act on running jobs; the scenario has no jobs")
        if self.compare_alone and not self.jobs:
            raise ValueError("compare_alone: compares jobs with running alone; the scenario "
                             "has no jobs")
        return self

    @property
    def wants_fabric_report(self) -> bool:
        """``report_fabric``, by default true when there are no jobs and no collectives."""
        if self.report_fabric is None:
            return not self.jobs and not self.collectives
        return self.report_fabric


#: a YAML path at the start of a validator's message: ``jobs[1].name: ...``
_PATH_PREFIX = re.compile(r"([A-Za-z_]\w*(?:\[\d+\])*(?:\.[A-Za-z_]\w*(?:\[\d+\])*)*): ")


def _first_error(exc: ValidationError) -> tuple[tuple, str]:
    """The first pydantic error as (YAML path, one-line message).

    A model validator that blames a nested key says so first (``"gpus: appears twice"``);
    that key joins the path.
    """
    err = exc.errors(include_url=False)[0]
    path = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
    message = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    elif err["type"] == "missing":
        message = "required"
    elif "input" in err and not isinstance(err["input"], dict | list) \
            and "got " not in message:
        message = f"{message}, got {err['input']!r}"
    nested = _PATH_PREFIX.match(message)
    if nested:
        sub = re.findall(r"[A-Za-z_]\w*|\d+", nested.group(1))
        path = (*path, *(int(x) if x.isdigit() else x for x in sub))
        message = message[nested.end():]
    return path, message


def parse_scenario(data: Any, lines: dict | None = None) -> Scenario:
    """Validate a scenario dict; errors name the YAML path (and line, given ``lines``).

    >>> parse_scenario({"jobs": [{"model": "llama3-8b", "tp": 0}]})
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].tp: Input should be greater than or equal to 1, got 0
    """
    if not isinstance(data, dict):
        raise InputError("scenario", "must be a mapping (fabric, jobs, collectives ...), got "
                                     f"{type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        path, message = _first_error(exc)
        raise located(InputError(format_path(path), message), lines or {}, path) from None


def parse_section(model: type[BaseModel], data: Any, section: str):
    """Validate one section of a scenario (e.g. :class:`FabricSpec` as ``"fabric"``);
    errors are named ``section.key``.

    >>> parse_section(FabricSpec, {"template": "hpn7", "segmnts": 1}, "fabric")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: fabric.segmnts: not a parameter of hpn7; allowed: ...
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        path, message = _first_error(exc)
        raise InputError(format_path((section, *path)), message) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read, parse and validate a scenario file; relative file names in it (workloads,
    model files, topologies) are taken relative to the scenario's folder."""
    text = read_user_text(path, "scenario")
    data, lines = load_yaml(text, "scenario")
    scenario = parse_scenario(data, lines)
    scenario.__dict__["_lines"] = lines
    base = Path(path).resolve().parent
    for job in scenario.jobs:
        for key in ("workload", "model_file"):
            value = getattr(job, key)
            if value is not None and not Path(value).is_absolute():
                setattr(job, key, str(base / value))
    if scenario.fabric.topology is not None and not Path(scenario.fabric.topology).is_absolute():
        scenario.fabric.topology = str(base / scenario.fabric.topology)
    if scenario.calibration is not None and not Path(scenario.calibration).is_absolute():
        scenario.calibration = str(base / scenario.calibration)
    return scenario


def scenario_lines(scenario: Scenario) -> dict:
    """YAML line numbers of a scenario loaded from a file (empty otherwise)."""
    return scenario.__dict__.get("_lines", {})


def check_against_fabric(scenario: Scenario, fabric) -> None:
    """What needs the fabric: TP within a host, every job fits, placements exist and are
    disjoint, all jobs together fit (unless a ``cluster:`` section queues them), the cluster
    section's needs, and every collective's GPUs exist. Raises :class:`InputError` by YAML path.

    >>> from hpnsim.fabrics import hpn7
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b", "tp": 3}]})
    >>> check_against_fabric(s, hpn7(segments=1))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].tp: must divide the GPUs per host (8), got 3
    """
    lines = scenario_lines(scenario)

    def fail(path, message):
        raise located(InputError(format_path(path), message), lines, path)

    per_host = fabric.gpus_per_host
    used = np.zeros(fabric.n_gpus, dtype=bool)
    total = 0
    for i, job in enumerate(scenario.jobs):
        if job.model is not None:
            if per_host % job.tp:
                fail(("jobs", i, "tp"), f"must divide the GPUs per host ({per_host}), "
                                        f"got {job.tp}")
            try:
                job.train_job()
            except InputError as exc:
                key = exc.field.lstrip("-").replace("-", "_")
                key = {"virtual_stages": "vpp", "fsdp_prefetch": "prefetch"}.get(key, key)
                fail(("jobs", i, key) if key in JobSpec.model_fields else ("jobs", i),
                     exc.message if key in JobSpec.model_fields else str(exc))
        try:
            count = job.gpu_count
        except InputError as exc:
            fail(("jobs", i, "workload"), exc.message)
        total += count
        if count > fabric.n_gpus:
            fail(("jobs", i), f"needs {count:,} GPUs; the fabric has {fabric.n_gpus:,} "
                              f"(raise fabric.segments, fabric.pods or fabric.gpus)")
        if job.hosts is not None:
            if max(job.hosts) >= fabric.n_hosts:
                fail(("jobs", i, "hosts"), f"host {max(job.hosts)} does not exist (the fabric "
                                           f"has hosts 0..{fabric.n_hosts - 1})")
            if len(job.hosts) * per_host < count or (len(job.hosts) - 1) * per_host >= count:
                fail(("jobs", i, "hosts"), f"lists {len(job.hosts)} hosts; the job's {count} "
                                           f"GPUs need {-(-count // per_host)}")
        placement = job.placement(per_host)
        if placement is None:
            continue
        key = "gpus" if job.hosts is None else "hosts"
        placed = np.asarray(placement[:count])
        if len(placement) != count and key == "gpus":
            fail(("jobs", i, key), f"lists {len(placement)} GPUs; the job has {count} ranks")
        if placed.max() >= fabric.n_gpus:
            fail(("jobs", i, key), f"GPU {int(placed.max())} does not exist (the fabric has "
                                   f"GPUs 0..{fabric.n_gpus - 1})")
        if used[placed].any() and scenario.cluster is None:   # a cluster trace queues
            gpu = int(placed[used[placed]][0])
            fail(("jobs", i, key), f"GPU {gpu} is already given to another job")
        used[placed] = True
    if total > fabric.n_gpus and scenario.cluster is None:   # a cluster trace queues
        fail(("jobs",), f"the jobs need {total:,} GPUs together; the fabric has "
                        f"{fabric.n_gpus:,}")
    check_cluster(scenario, lines)
    check_collectives(scenario, fabric.n_gpus, lines)
