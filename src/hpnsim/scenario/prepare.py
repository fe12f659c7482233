"""``prepare(scenario) -> PreparedScenario``: everything a run needs, checked before any
simulation, in one explicit object.

A :class:`~hpnsim.scenario.spec.Scenario` is what the user wrote, validated on its own.
:func:`prepare` checks it against the fabric it builds, reads the files it names (AICB
workloads, the calibration), resolves its faults to links and places its jobs; it returns
all of that as a frozen :class:`PreparedScenario`, which the run drivers consume. Nothing is
stored on the pydantic model. Every error is an :class:`~hpnsim.errors.InputError` named by
YAML path, with the line when the YAML line map is given (:func:`~hpnsim.scenario.spec.
read_scenario` returns it with the scenario).

Examples
--------
>>> p = prepare({"fabric": {"template": "fat_tree", "k": 4},
...              "jobs": [{"model": "llama3-8b", "dp": 4}, {"model": "llama3-8b", "dp": 2}]})
>>> p.fabric.n_gpus, p.gpu_counts, [g.tolist() for g in p.placements]
(16, (4, 2), [[0, 1, 2, 3], [4, 5]])
>>> p.faults, p.nccl, p.workloads
((), None, (None, None))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from hpnsim.errors import InputError
from hpnsim.scenario.collectives import check_collectives
from hpnsim.scenario.spec import Scenario, check_against_fabric, parse_scenario, read_scenario
from hpnsim.scenario.yaml import located

__all__ = ["PreparedScenario", "allocate", "as_scenario", "build_scenario_fabric", "prepare",
           "scenario_and_lines"]


@dataclass(frozen=True)
class PreparedScenario:
    """A scenario checked against its built fabric, with everything it read and decided.

    Attributes
    ----------
    scenario : the validated :class:`~hpnsim.scenario.spec.Scenario`
    fabric : the built :class:`~hpnsim.fabrics.fabric.Fabric`
    lines : YAML path -> line (empty when the scenario did not come from a file)
    faults : the scenario's faults, resolved against the fabric
        (:class:`~hpnsim.faults.events.Fault`, in scenario order)
    nccl : the calibration's :class:`~hpnsim.collectives.nccl.params.NcclParams` (None: NCCL's
        defaults)
    workloads : per job, its parsed AICB workload (None for a model job)
    gpu_counts : per job, the GPUs it occupies
    placements : per job, its GPU indices in rank order (read-only arrays); empty for a
        cluster trace, whose allocator places the jobs as they arrive
    """

    scenario: Scenario
    fabric: Any
    lines: Mapping
    faults: tuple
    nccl: Any
    workloads: tuple
    gpu_counts: tuple[int, ...]
    placements: tuple[np.ndarray, ...]


def scenario_and_lines(scenario, lines: Mapping | None = None) -> tuple[Scenario, Mapping]:
    """A :class:`Scenario` and its YAML line map, from a Scenario (with ``lines`` if known),
    a dict, or the path of a YAML file (whose lines are read with it)."""
    if isinstance(scenario, str | Path):
        return read_scenario(scenario)
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario, dict(lines or {}))
    return scenario, lines or {}


def as_scenario(scenario) -> Scenario:
    """A :class:`Scenario` from a Scenario, a dict, or the path of a YAML file."""
    return scenario_and_lines(scenario)[0]


def build_scenario_fabric(scenario: Scenario, lines: Mapping | None = None):
    """Build the scenario's fabric; builder errors are named ``fabric.<parameter>``.

    When ``fabric.nvlink`` is not given and every job and collective that names a GPU uses
    the same GPU type, the hosts get
    that GPU's NVLink bandwidth (an H100 job runs on 900 GB/s NVLink, an H800 one on 400).
    The fabric's ``meta`` carries the scenario's ``units`` table (for the bill of materials).
    """
    from hpnsim.workloads.gpus import get_gpu

    lines = lines or {}
    spec = scenario.fabric
    options = spec.options()
    kinds = {job.gpu for job in scenario.jobs} | {c.gpu for c in scenario.collectives if c.gpu}
    if "nvlink" not in options and spec.resolved_template != "lingjun" and kinds:
        if len(kinds) > 1:
            raise located(InputError("fabric.nvlink", "jobs or collectives use different GPUs "
                                     f"({', '.join(sorted(kinds))}); set fabric.nvlink"),
                          lines, ("fabric",))
        options["nvlink"] = f"{get_gpu(kinds.pop()).nvlink_bandwidth / 1e9:g}GB/s"
    try:
        from hpnsim.fabrics import build_fabric
        from hpnsim.fabrics.registry import planned_gpus

        # every check of the builder, and the collectives' sizes, before the (long) build
        planned = planned_gpus(spec.resolved_template, options)
        check_collectives(scenario, planned, lines)
        return build_fabric(spec.resolved_template, options, meta={"units": spec.units})
    except InputError as exc:
        if exc.field.startswith("collectives["):
            raise
        path = ("fabric", exc.field.lstrip("-").replace("-", "_"))
        raise located(InputError("", exc.message), lines, path) from None


def allocate(scenario: Scenario, fabric, gpu_counts=None,
             lines: Mapping | None = None) -> list[np.ndarray]:
    """GPU indices of every job, in rank order: its ``gpus`` (or the GPUs of its ``hosts``)
    if given, else the lowest whole hosts no other job holds (jobs in scenario order).
    ``gpu_counts`` (per job) saves reading workload files again.

    >>> from hpnsim.fabrics import hpn7
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b", "tp": 4},
    ...                              {"model": "llama3-8b", "tp": 8, "dp": 2}]})
    >>> [g[[0, -1]].tolist() for g in allocate(s, hpn7(segments=1))]
    [[0, 3], [8, 23]]
    """
    if gpu_counts is None:
        gpu_counts = [job.gpu_count for job in scenario.jobs]
    per_host = fabric.gpus_per_host
    host_free = np.ones(fabric.n_gpus // per_host, dtype=bool)
    given = [job.placement(per_host) for job in scenario.jobs]
    for gpus in given:
        if gpus is not None:
            host_free[np.unique(np.asarray(gpus) // per_host)] = False
    out = []
    for i, count in enumerate(gpu_counts):
        if given[i] is not None:
            out.append(np.asarray(given[i][:count], dtype=np.int64))
            continue
        hosts = np.flatnonzero(host_free)[: -(-count // per_host)]
        if hosts.size * per_host < count:
            raise located(InputError("", f"no {-(-count // per_host)} free hosts left for "
                                         f"its {count} GPUs (other jobs hold the rest)"),
                          lines or {}, ("jobs", i))
        host_free[hosts] = False
        gpus = (hosts[:, None] * per_host + np.arange(per_host)).ravel()[:count]
        out.append(gpus.astype(np.int64))
    return out


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def prepare(scenario, *, lines: Mapping | None = None, progress=None) -> PreparedScenario:
    """Check a scenario against its fabric and gather what a run needs.

    In order, each failure an :class:`InputError` by YAML path: AICB workloads with faults
    (not simulated yet), the calibration file, the calibration with faults or workloads;
    then the fabric is built and the jobs, cluster section and collectives are checked
    against it, the faults resolved to links and the jobs placed (unless a ``cluster:``
    section queues them).

    Parameters
    ----------
    scenario : Scenario, dict or path
        A validated :class:`Scenario`, a dict in its shape, or a YAML file.
    lines : mapping, optional
        The YAML line map of ``scenario`` (read with it when it is a path).
    progress : callable, optional
        Called with a short message before the fabric is built.

    Returns
    -------
    PreparedScenario

    Examples
    --------
    >>> prepare({"jobs": [{"model": "llama3-8b", "tp": 3}]})
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].tp: must divide the GPUs per host (8), got 3
    """
    say = progress or (lambda message: None)
    scenario, lines = scenario_and_lines(scenario, lines)
    for i, job in enumerate(scenario.jobs):
        if job.workload is not None and scenario.faults:
            raise located(InputError("", "runs through faults take model jobs only, for now"),
                          lines, ("jobs", i, "workload"))
    try:   # a bad calibration file fails before the fabric is built
        nccl = scenario.nccl_params()
    except InputError as exc:
        raise located(exc, lines, ("calibration",)) from None
    if scenario.calibration is not None and (scenario.faults or any(
            job.workload is not None for job in scenario.jobs)):
        raise located(InputError("", "applies to collectives and model jobs; runs through "
                                     "faults and AICB workloads do not take it yet"),
                      lines, ("calibration",))
    say("building the fabric")
    fabric = build_scenario_fabric(scenario, lines)
    workloads = tuple(check_against_fabric(scenario, fabric, lines))
    from hpnsim.scenario.faults import check_faults

    faults = tuple(check_faults(scenario, fabric, lines))
    counts = tuple(job.gpu_count_with(w) for job, w in zip(scenario.jobs, workloads,
                                                               strict=True))
    placements = () if scenario.cluster is not None else tuple(
        _read_only(g) for g in allocate(scenario, fabric, counts, lines))
    return PreparedScenario(scenario=scenario, fabric=fabric, lines=MappingProxyType(
        dict(lines)), faults=faults, nccl=nccl, workloads=workloads, gpu_counts=counts,
        placements=placements)
