"""The :class:`Scenario`: one YAML file describes a whole run (fabric, jobs, routing, seed).

A scenario is validated in two steps, both before any simulation:

1. :meth:`Scenario.model_validate` (pydantic): types, ranges, units (``"30s"``, ``"4GiB"``),
   unknown keys, a job's model *or* workload;
2. :func:`check_against_fabric`: what needs the built fabric (TP within a host, jobs that
   fit, explicit placements that exist and do not overlap); ``prepare()``
   (:mod:`hpnsim.scenario.prepare`) runs it and keeps what it read.

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

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from hpnsim.errors import MAX_SEED, InputError, read_user_text
from hpnsim.routing.names import ROUTING_POLICIES
from hpnsim.scenario.cluster import ClusterSpec, check_cluster
from hpnsim.scenario.collectives import CollectiveSpec, check_collectives, name_collectives
from hpnsim.scenario.engine import EngineSpec
from hpnsim.scenario.fabric import FabricSpec
from hpnsim.scenario.faults import FailoverSpec, FaultSpec
from hpnsim.scenario.jobs import JobSpec, check_jobs
from hpnsim.scenario.yaml import format_path, load_yaml, located

__all__ = ["CollectiveSpec", "FabricSpec", "JobSpec", "Scenario", "check_against_fabric",
           "load_scenario", "parse_scenario", "parse_section", "read_scenario"]


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
    routing: Literal[ROUTING_POLICIES] = "ecmp"
    lag: Literal["balanced", "queue_affinity", "hash"] = Field(
        "balanced", description="how each bonded NIC puts its QPs on its two ports under "
        "hpn_dual_plane routing (hpnsim.routing.lag: balanced, queue_affinity = mlx5 "
        "round-robin per QP, hash = mlx5 hash mode); the scenario's collectives use it")
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
    engine: EngineSpec | None = Field(
        None, description="flow (max-min, default) or packet (collectives only): a name, or "
                          "kind, params, window, max_packets, watch (hpnsim.scenario.engine)")

    #: where the GPU of the jobs and collectives that name none came from (set on validation)
    _gpu_from: str = PrivateAttr("")

    def nccl_params(self):
        """The :class:`~hpnsim.collectives.nccl.params.NcclParams` of ``calibration`` (None without
        one: NCCL's defaults), read from the file on every call; a bad file is an
        :class:`InputError` named ``calibration``."""
        if self.calibration is None:
            return None
        from hpnsim.collectives.nccl.calibrate import load_calibration

        return load_calibration(self.calibration)

    @property
    def runs_packets(self) -> bool:
        """Whether collectives and jobs run on the packet engine (``engine: packet``)."""
        return self.engine is not None and self.engine.kind == "packet"

    @model_validator(mode="after")
    def _lag_routing(self) -> Scenario:
        if self.lag != "balanced" and self.routing != "hpn_dual_plane":
            raise ValueError(f"lag: {self.lag!r} places QPs under routing hpn_dual_plane; "
                             f"routing {self.routing} has its own port choice")
        return self

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
        if self.runs_packets and (self.faults or self.cluster is not None):
            raise ValueError("engine: faults and cluster traces run on the flow engine only; "
                             "the packet engine runs collectives and jobs: remove engine: "
                             "packet, or the faults and the cluster section")
        if self.cluster is not None and not self.jobs:
            raise ValueError("cluster: schedules jobs; the scenario has no jobs")
        if self.faults and not self.jobs:
            raise ValueError("faults: act on running jobs; the scenario has no jobs")
        if self.compare_alone and not self.jobs:
            raise ValueError("compare_alone: compares jobs with running alone; the scenario "
                             "has no jobs")
        return self

    @model_validator(mode="after")
    def _host_gpus(self) -> Scenario:
        """Jobs and collectives that name no ``gpu`` run on the fabric's hosts' GPU
        (:mod:`hpnsim.fabrics.hosts`): a collective with the jobs' GPU when they share one."""
        from hpnsim.fabrics.hosts import host_gpu

        template = self.fabric.resolved_template
        host = host_gpu(template)
        filled = False
        for job in self.jobs:
            if "gpu" not in job.model_fields_set:
                job.gpu, filled = host.model, True
        kinds = {job.gpu for job in self.jobs}
        for spec in self.collectives:
            if spec.gpu is None:
                spec.gpu = next(iter(kinds)) if len(kinds) == 1 else host.model
                filled = filled or len(kinds) != 1
        self._gpu_from = f"the {template} hosts ({host.source})" if filled else "the scenario"
        return self

    def gpu_line(self) -> str:
        """The GPU the jobs and collectives run on and where it came from, for a header.

        >>> parse_scenario({"jobs": [{"model": "llama3-8b"}]}).gpu_line()
        "GPU: H800, from the hpn7 hosts (Qian et al., Alibaba HPN, SIGCOMM'24 §9 and App. A: hosts of 8 x H800)"
        >>> parse_scenario({"jobs": [{"model": "llama3-8b", "gpu": "h100"}]}).gpu_line()
        'GPU: H100, from the scenario'
        """
        kinds = sorted({j.gpu for j in self.jobs} | {c.gpu for c in self.collectives if c.gpu})
        return f"GPU: {', '.join(k.upper() for k in kinds)}, from {self._gpu_from}"

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
    elif err["type"] == "model_type":   # pydantic names the class: say what the user writes
        message = f"must be a mapping of keys to values (see hpnsim schema), got " \
                  f"{err.get('input')!r}"
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


def read_scenario(path: str | Path) -> tuple[Scenario, dict]:
    """Read, parse and validate a scenario file; returns it with its YAML line map (YAML path
    -> line, for errors found later). Relative file names in it (workloads, model files,
    topologies, calibration) are taken relative to the scenario's folder."""
    text = read_user_text(path, "scenario")
    data, lines = load_yaml(text, "scenario")
    scenario = parse_scenario(data, lines)
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
    return scenario, lines


def load_scenario(path: str | Path) -> Scenario:
    """The scenario of a YAML file (:func:`read_scenario` without the line map)."""
    return read_scenario(path)[0]


def check_against_fabric(scenario: Scenario, fabric, lines: dict | None = None) -> list:
    """What needs the fabric: TP within a host, every job fits, placements exist and are
    disjoint, all jobs together fit (unless a ``cluster:`` section queues them), the cluster
    section's needs, and every collective's GPUs exist. Returns each job's parsed workload
    (None for a model job). Raises :class:`InputError` by YAML path (with the line, given
    ``lines``).

    >>> from hpnsim.fabrics import hpn7
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b", "tp": 3}]})
    >>> check_against_fabric(s, hpn7(segments=1))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].tp: must divide the GPUs per host (8), got 3
    """
    lines = lines or {}
    workloads = check_jobs(scenario, fabric, lines)
    check_cluster(scenario, lines)
    check_collectives(scenario, fabric.n_gpus, lines)
    return workloads
