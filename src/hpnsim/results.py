"""Every result type of hpnsim, and how a result is written: ``to_dict``, ``rows``,
``to_frame``, atomic JSON and CSV files.

A result type is a dataclass with ``to_dict()`` (JSON-ready; what ``--json`` prints),
``rows()`` (its natural table, a list of dicts) and ``to_frame()`` (those rows as a pandas
DataFrame; pandas is the optional ``frames`` extra, ``pip install 'hpnsim[frames]'``).
This module defines the results of a scenario run and re-exports the others, so one import
finds them all: ``from hpnsim.results import IterationResult, CollectiveResult``.

====================  ====================================  ==================================
type                  returned by                           ``rows()``: one row per
====================  ====================================  ==================================
``RunResult``         ``hs.run(scenario)``                  job (its ``summary()``); also
                                                            ``iteration_rows()`` and
                                                            ``collective_rows()``
``JobResult``         ``RunResult.jobs``,                   simulated iteration
                      ``RunResult.job(name)``
``CollectiveRun``     ``RunResult.collectives``             size of its sweep (bandwidths in
                                                            GB/s, as in ``collectives.csv``)
``SimResult``         ``hs.simulate(graph, capacities)``    task: name, start, finish,
                                                            duration
``CollectiveResult``  ``hs.run_collective(fabric, op,       the collective (one row, SI units:
                      gpus, size)``                         s, bytes, bytes/s)
``IterationResult``   ``hs.simulate_iteration(job,          pipeline stage: compute, tp, pp,
                      fabric)``; ``JobResult.iterations``   dp, ep, bubble, optimizer
``TrafficReport``     ``workloads.iteration_traffic(        parallel dimension: bytes per GPU,
                      model, layout)``                      in all, on the network; calls
``ScalingResult``     ``training.scaling_linearity(         (fabric, size) point
                      model, ...)``
====================  ====================================  ==================================

The run results are defined here; the others live beside the code that makes them (a lower
layer must not import this one) and are loaded on first use, so ``import hpnsim.results``
stays cheap. The demo's ``DemoResult`` sits above this layer: import it from
:mod:`hpnsim.demo` (``hpnsim.results.DemoResult`` still finds it, with a
``DeprecationWarning``, for one release). Files are written through a temporary file in the same folder and renamed over
the target, so a run that is cut off never leaves a half-written result behind.

Examples
--------
>>> from hpnsim.fabrics import hpn7
>>> from hpnsim.results import CollectiveResult
>>> from hpnsim.collectives import run_collective
>>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
>>> r = run_collective(f, "allreduce", range(16), 2**20, algo="ring")
>>> isinstance(r, CollectiveResult)
True
>>> r.to_frame()[["op", "n_gpus", "size"]]
          op  n_gpus       size
0  allreduce      16  1048576.0
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpnsim.frames import to_frame
from hpnsim.jsonable import to_jsonable

if TYPE_CHECKING:  # for type checkers and editors; at run time see __getattr__
    from hpnsim.collectives.planning.run import CollectiveResult
    from hpnsim.engine.simresult import SimResult
    from hpnsim.training.iteration import IterationResult
    from hpnsim.training.scaling import ScalingResult
    from hpnsim.workloads.traffic import TrafficReport

#: result types defined elsewhere: name -> defining module, imported on first use (eagerly,
#: ``import hpnsim.scenario.runner`` would load every subpackage)
_REEXPORTS = {
    "SimResult": "hpnsim.engine.simresult",
    "CollectiveResult": "hpnsim.collectives.planning.run",
    "IterationResult": "hpnsim.training.iteration",
    "TrafficReport": "hpnsim.workloads.traffic",
    "ScalingResult": "hpnsim.training.scaling",
}
#: result types of a layer above this one, found here for one release (a name, not an import)
_DEPRECATED = {"DemoResult": "hpnsim.demo"}

__all__ = ["CollectiveResult", "CollectiveRun", "IterationResult", "JobResult", "RunResult",
           "ScalingResult", "SimResult", "TrafficReport", "write_atomic", "write_csv",
           "write_json"]


def __getattr__(name: str):
    if name in _REEXPORTS:
        value = getattr(importlib.import_module(_REEXPORTS[name]), name)
        globals()[name] = value   # once loaded, an ordinary module attribute
        return value
    if name in _DEPRECATED:
        import warnings

        warnings.warn(f"hpnsim.results.{name} is {_DEPRECATED[name]}.{name}; the old name goes "
                      "in the next release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_DEPRECATED[name]), name)
    raise AttributeError(f"module 'hpnsim.results' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_REEXPORTS))


def file_mode() -> int:
    """The permissions a new file gets from ``open()`` under the process's umask
    (``0o666 & ~umask``): a temporary file from :mod:`tempfile` is 0600 whatever the umask,
    so a file written through one is given this mode before it is renamed into place.

    >>> old = os.umask(0o022); mode = file_mode(); _ = os.umask(old); oct(mode)
    '0o644'
    """
    mask = os.umask(0o077)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename (never half-written),
    with the permissions a plain ``open()`` would give it (:func:`file_mode`).

    >>> import tempfile, os
    >>> p = write_atomic(os.path.join(tempfile.mkdtemp(), "r.txt"), "ok")
    >>> p.read_text()
    'ok'
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_json(path: str | Path, obj: Any) -> Path:
    """``obj`` (anything :func:`~hpnsim.jsonable.to_jsonable` takes) as indented JSON, atomically."""
    return write_atomic(path, json.dumps(to_jsonable(obj), indent=2) + "\n")


def write_csv(path: str | Path, rows: list[dict]) -> Path:
    """Rows of dicts as CSV (columns: the keys of the first row), atomically.

    >>> import tempfile, os
    >>> p = write_csv(os.path.join(tempfile.mkdtemp(), "t.csv"), [{"a": 1, "b": None}])
    >>> p.read_text().splitlines()
    ['a,b', '1,']
    """
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(to_jsonable(rows))
    return write_atomic(path, buffer.getvalue())


@dataclass
class JobResult:
    """One job of a run.

    Attributes
    ----------
    name, model : str
    gpus : list of int
        The GPUs it ran on, in rank order.
    arrival, finish : float
        When it arrived and when its last iteration ended (seconds from the run's start).
    iterations : list of IterationResult
        One per simulated iteration, each measured from its own start.
    alone_iteration_time : float or None
        Mean iteration time of the same job on the same GPUs with no other job running.
    faults : dict or None
        With faults: the throughput timeline (one row per completed iteration attempt), the
        fault windows, restarts and lost work (:class:`hpnsim.faults.runner.JobTimeline`).
    """

    name: str
    model: str
    gpus: list
    arrival: float
    finish: float
    iterations: list
    alone_iteration_time: float | None = None
    faults: dict | None = None

    @property
    def iteration_time(self) -> float:
        """Mean iteration time over the simulated iterations."""
        return sum(it.iteration_time for it in self.iterations) / len(self.iterations)

    @property
    def slowdown(self) -> float | None:
        """Iteration time over the time alone (1.0: nobody slowed it down)."""
        if not self.alone_iteration_time:
            return None
        return self.iteration_time / self.alone_iteration_time

    def summary(self) -> dict:
        """One row: the figures a table shows."""
        last = self.iterations[-1]
        return {"job": self.name, "model": self.model, "gpus": len(self.gpus),
                "arrival": self.arrival, "finish": self.finish,
                "iterations": len(self.iterations), "iteration_time": self.iteration_time,
                "alone_iteration_time": self.alone_iteration_time, "slowdown": self.slowdown,
                "mfu": sum(it.mfu for it in self.iterations) / len(self.iterations),
                "tokens_per_second": last.tokens_per_second,
                **{f"exposed_{k}": v for k, v in last.exposed_comm.items()},
                "bubble": last.bubble}

    def to_dict(self, timeline: bool = False) -> dict:
        out = {**self.summary(), "placement": list(self.gpus),
               "per_iteration": [it.to_dict(timeline=timeline) for it in self.iterations]}
        if self.faults is not None:
            out["faults"] = self.faults
        return out

    def rows(self) -> list[dict]:
        """One row per iteration."""
        return [{"job": self.name, "iteration": i, "iteration_time": it.iteration_time,
                 "compute": it.compute_time, **{f"exposed_{k}": v
                                                for k, v in it.exposed_comm.items()},
                 "bubble": it.bubble, "optimizer": it.optimizer_time,
                 "straggler": it.straggler_time, "mfu": it.mfu}
                for i, it in enumerate(self.iterations)]

    def to_frame(self):
        return to_frame(self.rows())


#: what ``CollectiveRun.to_dict`` keeps of each rail's result (per size)
_GROUP_KEYS = ("size", "time", "algbw", "busbw", "algo", "protocol", "hash_collisions")


@dataclass
class CollectiveRun:
    """One collective of a scenario: its :class:`~hpnsim.collectives.CollectiveResult` at
    every size of its sweep, each measured alone on the fabric (or with the collectives it
    runs ``together`` with). A ``per_rail`` collective has one :class:`CollectiveRun` per
    rail in ``groups`` (all run together) and, in ``results``, the slowest rail's result at
    each size.

    Examples
    --------
    >>> from hpnsim.scenario.runner import run
    >>> r = run({"fabric": {"template": "fat_tree", "k": 4},
    ...          "collectives": [{"op": "allreduce", "sizes": "1M:2M", "algo": "ring"}]})
    >>> c = r.collective("collective0")
    >>> len(c.gpus), [row["size"] for row in c.rows()]
    (16, [1048576.0, 2097152.0])
    """

    name: str
    gpus: list
    results: list
    groups: list = field(default_factory=list)

    @property
    def op(self) -> str:
        return self.results[0].op if self.results else ""

    @property
    def avg_busbw(self) -> float:
        """Mean bus bandwidth over the sizes (bytes/s; nccl-tests' "Avg bus bandwidth")."""
        return sum(r.busbw for r in self.results) / len(self.results) if self.results else 0.0

    def rows(self) -> list[dict]:
        """One row per size: the fields of ``CollectiveResult.to_dict`` (bandwidths in GB/s,
        time in s and us) but its list of busiest links; a packet run's totals as flat
        columns instead of its ``packet`` section (ports and queue series)."""
        from hpnsim.collectives.packet.run import PACKET_ROW_FIELDS

        return [{"collective": self.name, **{k: v for k, v in r.to_dict().items()
                                             if k not in ("top_links", "packet")},
                 **{k: getattr(r, k) for k in PACKET_ROW_FIELDS if hasattr(r, "network_time")}}
                for r in self.results]

    def to_dict(self) -> dict:
        out = {"name": self.name, "op": self.op, "n_gpus": len(self.gpus),
               "avg_busbw": self.avg_busbw / 1e9, "placement": list(self.gpus),
               "per_size": [r.to_dict() for r in self.results]}
        if self.groups:
            out["groups"] = [{"name": g.name, "placement": list(g.gpus),
                              "per_size": [{k: r.to_dict()[k] for k in _GROUP_KEYS}
                                           for r in g.results]} for g in self.groups]
        return out

    def to_frame(self):
        return to_frame(self.rows())


@dataclass
class RunResult:
    """Everything one scenario run produced.

    ``makespan`` is when the last job finished (0 without jobs); ``fabric`` summarises what
    ran on (template, GPUs, links); ``collectives`` holds each collective's size sweep (each
    run alone, not with the jobs); ``fabric_report`` the fabric's counts, oversubscription,
    path choices and bill of materials when the scenario asked for it (``hpnsim fabric
    --json`` prints the same dict); ``notes`` collects what the user should know
    (approximations, sizing). ``built_fabric`` is the fabric object itself (for exports; not
    saved).
    """

    scenario: dict
    fabric: dict
    jobs: list[JobResult]
    makespan: float
    n_tasks: int
    n_events: int
    notes: list = field(default_factory=list)
    collectives: list[CollectiveRun] = field(default_factory=list)
    fabric_report: dict | None = None
    built_fabric: Any = field(default=None, repr=False, compare=False)
    #: the packet engine's figures of the jobs' run (``engine: packet``; None on the flow
    #: engine): events, ECN marks, CNPs, PFC pauses, drops, fullest ports, queue samples,
    #: and ``flow_makespan``, the flow engine's time for the same graph
    packet: dict | None = None

    def job(self, name: str) -> JobResult:
        """The result of the job called ``name``."""
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)

    def collective(self, name: str) -> CollectiveRun:
        """The result of the collective called ``name``."""
        for run in self.collectives:
            if run.name == name:
                return run
        raise KeyError(name)

    def rows(self) -> list[dict]:
        """One row per job (the summary table)."""
        return [job.summary() for job in self.jobs]

    def collective_rows(self) -> list[dict]:
        """One row per collective and size."""
        return [row for run in self.collectives for row in run.rows()]

    def iteration_rows(self) -> list[dict]:
        """One row per job and iteration."""
        return [row for job in self.jobs for row in job.rows()]

    def to_dict(self, timeline: bool = False) -> dict:
        out = {"scenario": self.scenario, "fabric": self.fabric, "makespan": self.makespan,
               "n_tasks": self.n_tasks, "n_events": self.n_events, "notes": list(self.notes),
               "jobs": [job.to_dict(timeline=timeline) for job in self.jobs],
               "collectives": [run.to_dict() for run in self.collectives],
               "fabric_report": self.fabric_report}
        if self.packet is not None:
            out["packet"] = self.packet
        return out

    def to_frame(self):
        return to_frame(self.rows())

    def save(self, folder: str | Path) -> list[Path]:
        """Write ``results.json`` into ``folder`` (created if missing), with ``jobs.csv`` and
        ``iterations.csv`` when there are jobs and ``collectives.csv`` (one row per
        collective and size) when there are collectives, each atomically; returns the paths.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = [write_json(folder / "results.json", self.to_dict(timeline=True))]
        if self.jobs:
            paths += [write_csv(folder / "jobs.csv", self.rows()),
                      write_csv(folder / "iterations.csv", self.iteration_rows())]
        if self.collectives:
            paths.append(write_csv(folder / "collectives.csv", self.collective_rows()))
        timeline = [row for job in self.jobs if job.faults for row in job.faults["timeline"]]
        if timeline:
            paths.append(write_csv(folder / "timeline.csv", timeline))
        return paths
