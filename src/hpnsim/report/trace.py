"""Iteration and cluster timelines as Chrome-trace JSON (opens in Perfetto and chrome://tracing).

The Trace Event Format: a JSON object ``{"traceEvents": [...], "displayTimeUnit": "ms"}``
whose events carry ``name``, ``ph`` (phase), ``ts`` (microseconds), ``pid`` and ``tid``.
Intervals are complete events (``ph: "X"`` with ``dur`` in microseconds); metadata events
(``ph: "M"``: ``process_name``, ``thread_name``, ``*_sort_index``) name and order the tracks;
flow events (``ph: "s"`` / ``"f"``, one ``id``) draw an arrow between two slices; counter
events (``ph: "C"``) draw a value over time. Complete events on one thread must nest or be
disjoint, so every kind of work that can overlap another gets its own thread.

Layout of an iteration (:func:`iteration_trace`, :func:`run_trace`): one process per job;
per pipeline stage a compute thread (forward ``F``, backward ``B`` and the optimizer step)
and one thread per communication phase that overlaps compute (``dp`` gradient reduction,
``allgather`` of a distributed optimizer, ZeRO-3's ``fsdp-ag`` and ``fsdp-rs``); pipeline
(PP) sends are flow arrows from a micro-batch's slice on one stage to its slice on the next;
an ``iterations`` thread holds one slice per iteration with its breakdown. A cluster run
(:func:`cluster_trace`) is one process per scheduler, one thread per job (queued, running,
and each interval of its piecewise-linear progress at its rate) and a utilization counter.

Examples
--------
>>> rows = [{"stage": 0, "kind": "F", "micro_batch": 0, "chunk": 0, "start": 0.0, "finish": 0.5},
...         {"stage": 1, "kind": "F", "micro_batch": 0, "chunk": 0, "start": 0.6, "finish": 1.0}]
>>> trace = timeline_trace(rows, "job")
>>> [(e["ph"], e["name"], e.get("ts")) for e in trace["traceEvents"] if e["ph"] != "M"]
[('X', 'F mb0', 0.0), ('X', 'F mb0', 600000.0), ('s', 'PP send', 500000.0), ('f', 'PP send', 600000.0)]
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["cluster_trace", "iteration_trace", "jobs_trace", "run_trace", "timeline_rows",
           "timeline_trace", "write_trace"]

#: seconds -> the format's microseconds
US = 1e6
#: kinds on a stage's compute thread; every other kind gets a thread of its own
COMPUTE_KINDS = ("F", "B", "W", "optimizer")
_CATEGORY = {"F": "forward", "B": "backward", "W": "backward", "optimizer": "optimizer",
             "dp": "dp", "allgather": "dp", "fsdp-ag": "dp", "fsdp-rs": "dp"}


def _meta(name: str, pid: int, tid: int, value) -> dict:
    key = "sort_index" if name.endswith("sort_index") else "name"
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {key: value}}


class _Process:
    """One process of the trace: its threads (by key, numbered in order of creation) and
    events; a thread can hold several lanes so that overlapping slices never share one."""

    def __init__(self, pid: int, name: str) -> None:
        self.pid, self.name = pid, name
        self.events: list[dict] = []
        self.threads: dict[tuple, tuple[int, str]] = {}
        self._ends: dict[tuple, float] = {}

    def tid(self, key: tuple, name: str) -> int:
        if key not in self.threads:
            self.threads[key] = (len(self.threads) + 1, name)
        return self.threads[key][0]

    def slice(self, key: tuple, thread: str, name: str, start: float, finish: float,
              cat: str, args: dict, nested: bool = False) -> dict:
        """A complete event from ``start`` to ``finish`` (seconds) on the thread ``key``, or
        on a new lane of it when it would overlap the lane's last slice (``nested``: the
        caller guarantees it lies inside that slice)."""
        lane = 0
        while not nested and self._ends.get((*key, lane), float("-inf")) > start:
            lane += 1
        label = thread if lane == 0 else f"{thread} ({lane + 1})"
        tid = self.tid((*key, lane), label)
        if not nested:
            self._ends[(*key, lane)] = finish
        event = {"name": name, "cat": cat, "ph": "X", "ts": start * US,
                 "dur": max(finish - start, 0.0) * US, "pid": self.pid, "tid": tid,
                 "args": args}
        self.events.append(event)
        return event

    def metadata(self) -> list[dict]:
        out = [_meta("process_name", self.pid, 0, self.name),
               _meta("process_sort_index", self.pid, 0, self.pid)]
        for tid, name in self.threads.values():
            out += [_meta("thread_name", self.pid, tid, name),
                    _meta("thread_sort_index", self.pid, tid, tid)]
        return out


def _iteration_slices(proc: _Process, timeline: list, origin: float, iteration: int) -> None:
    """The Gantt rows of one iteration, shifted by ``origin`` seconds, with PP flow arrows."""
    def lane_of(kind: str) -> str:
        return "compute" if kind in COMPUTE_KINDS else kind

    ordered = sorted(timeline, key=lambda r: (r["stage"], lane_of(r["kind"]) != "compute",
                                              lane_of(r["kind"]), r["start"], r["finish"]))
    chunks = any(r["chunk"] > 0 for r in timeline)
    placed = {}
    for row in ordered:
        s, kind = row["stage"], row["kind"]
        lane = lane_of(kind)
        name = kind if row["micro_batch"] < 0 else f"{kind} mb{row['micro_batch']}"
        if chunks and row["chunk"] >= 0:
            name += f" chunk{row['chunk']}"
        args = {**row, "iteration": iteration, "iteration_start": origin}
        event = proc.slice((s, lane), f"stage {s} {lane}", name, origin + row["start"],
                           origin + row["finish"], _CATEGORY.get(kind, kind), args)
        if kind in ("F", "B"):
            placed[(kind, s, row["micro_batch"], row["chunk"])] = event
    _pipeline_flows(proc, placed)


def _pipeline_flows(proc: _Process, placed: dict) -> None:
    """A flow arrow for each pipeline message: a forward's activations to the next stage
    (past the last stage: stage 0's next chunk), a backward's gradients to the previous."""
    if not placed:
        return
    last = max(key[1] for key in placed)
    for (kind, s, mb, chunk), source in placed.items():
        if kind == "F":
            nxt = ("F", s + 1, mb, chunk) if s < last else ("F", 0, mb, chunk + 1)
        else:
            nxt = ("B", s - 1, mb, chunk) if s > 0 else ("B", last, mb, chunk - 1)
        target = placed.get(nxt)
        if target is None:
            continue
        flow = f"{proc.pid}:{kind}{mb}:{s}:{chunk}:{source['args']['iteration']}"
        common = {"name": "PP send", "cat": "pp", "id": flow, "pid": proc.pid}
        proc.events.append({**common, "ph": "s", "ts": source["ts"] + source["dur"],
                            "tid": source["tid"]})
        proc.events.append({**common, "ph": "f", "bp": "e", "ts": target["ts"],
                            "tid": target["tid"]})


def _summary_args(it) -> dict:
    return {"iteration_time": it.iteration_time, "compute": it.compute_time,
            **{f"exposed_{k}": v for k, v in it.exposed_comm.items()}, "bubble": it.bubble,
            "optimizer": it.optimizer_time, "straggler": it.straggler_time, "mfu": it.mfu}


def _trace(processes: list[_Process]) -> dict:
    events = [e for p in processes for e in p.metadata()]
    events += [e for p in processes for e in p.events]
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def timeline_trace(timeline: list[dict], name: str = "iteration") -> dict:
    """A trace of one iteration's Gantt rows (``stage``, ``kind``, ``micro_batch``,
    ``chunk``, ``start``, ``finish`` in seconds) as one process called ``name``."""
    proc = _Process(1, name)
    _iteration_slices(proc, timeline, 0.0, 0)
    return _trace([proc])


def iteration_trace(result, name: str = "") -> dict:
    """A trace of an :class:`~hpnsim.training.iteration.IterationResult`: its timeline
    and one ``iterations`` slice with its breakdown (process named after the job).

    >>> from hpnsim.fabrics import build_fabric
    >>> from hpnsim.training import TrainJob, simulate_iteration
    >>> f = build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 4, "backup_hosts": 0})
    >>> it = simulate_iteration(TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=4), f)
    >>> trace = iteration_trace(it)
    >>> sorted({e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"})
    ['iterations', 'stage 0 compute', 'stage 0 dp', 'stage 1 compute', 'stage 1 dp']
    """
    proc = _Process(1, name or _job_label(result.job))
    proc.slice(("iterations",), "iterations", "iteration 0", 0.0, result.iteration_time,
               "iteration", _summary_args(result))
    _iteration_slices(proc, result.timeline, 0.0, 0)
    return _trace([proc])


def _job_label(job: dict) -> str:
    shape = " x ".join(f"{k.upper()}{job[k]}" for k in ("tp", "pp", "dp", "ep")
                       if job.get(k, 1) > 1)
    return f"{job.get('model', 'job')} {shape}".strip()


def iteration_origins(job) -> list[float]:
    """When each kept iteration of a :class:`~hpnsim.results.JobResult` started (seconds
    from the run's start): back to back from its arrival, or with faults the start of the
    attempt that finished it.

    >>> from types import SimpleNamespace as NS
    >>> iteration_origins(NS(arrival=1.0, faults=None,
    ...                      iterations=[NS(iteration_time=2.0), NS(iteration_time=3.0)]))
    [1.0, 3.0]
    """
    if job.faults:
        last = {}
        for row in job.faults["timeline"]:
            last[row["iteration"]] = row["start"]
        return [last[k] for k in sorted(last)][:len(job.iterations)]
    origins, t = [], job.arrival
    for it in job.iterations:
        origins.append(t)
        t += it.iteration_time
    return origins


def run_trace(result) -> dict:
    """A trace of a :class:`~hpnsim.results.RunResult`: one process per job with every
    iteration at its place in the run (and its fault windows and lost attempts, if any)."""
    return jobs_trace(result.jobs)


def jobs_trace(jobs: list) -> dict:
    """A trace of :class:`~hpnsim.results.JobResult` objects, one process each (see
    :func:`run_trace`)."""
    processes = []
    for pid, job in enumerate(jobs, 1):
        proc = _Process(pid, f"{job.name}: {job.model}, {len(job.gpus)} GPUs")
        for k, (origin, it) in enumerate(zip(iteration_origins(job), job.iterations,
                                             strict=True)):
            proc.slice(("iterations",), "iterations", f"iteration {k}", origin,
                       origin + it.iteration_time, "iteration", _summary_args(it))
            _iteration_slices(proc, it.timeline, origin, k)
        if job.faults:
            for row in job.faults["timeline"]:
                proc.slice(("attempts",), "attempts", f"attempt {row['attempt']} iteration "
                           f"{row['iteration']}", row["start"], row["end"], "attempt", row)
            for w in job.faults.get("windows", []):
                proc.slice(("faults",), "faults", f"{w['kind']} {w['target']}", w["start"],
                           w["end"], "fault", w)
        processes.append(proc)
    return _trace(processes)


def cluster_trace(results: list) -> dict:
    """A trace of shared-cluster runs (:class:`~hpnsim.sched.cluster.result.ClusterResult`,
    one process per scheduler): per job a thread with its wait in the queue, its run, and
    within the run each interval of its progress at its rate; a GPU-utilization counter.

    >>> import numpy as np
    >>> from hpnsim.sched.cluster.result import ClusterResult, JobOutcome
    >>> j = JobOutcome("a", 2, [0], 1.0, 2.0, 6.0, 2.0, 2.0, 1.5, ((2.0, 6.0), (0.0, 2.0)))
    >>> r = ClusterResult("none", "packed", True, 0.01, 4, [j], np.array([0.0, 1.0, 6.0]))
    >>> [(e["name"], e["ts"], e["dur"]) for e in cluster_trace([r])["traceEvents"]
    ...  if e["ph"] == "X"]
    [('queued', 1000000.0, 1000000.0), ('running', 2000000.0, 4000000.0), ('0.5 it/s', 2000000.0, 4000000.0)]
    """
    processes, counters = [], []
    for pid, result in enumerate(results, 1):
        proc = _Process(pid, f"cluster: {result.scheduler} ({result.allocator})")
        for job in result.jobs:
            key, thread = (job.name,), f"{job.name} ({job.gpus} GPUs)"
            proc.tid(key + (0,), thread)
            if job.start > job.arrival:
                proc.slice(key, thread, "queued", job.arrival, job.start, "queued",
                           {"wait": job.wait})
            proc.slice(key, thread, "running", job.start, job.finish, "running",
                       {k: v for k, v in job.row().items() if k != "name"})
            times, done = job.progress
            for a, b, d0, d1 in zip(times[:-1], times[1:], done[:-1], done[1:], strict=True):
                if b > a:
                    rate = (d1 - d0) / (b - a)
                    proc.slice(key, thread, f"{rate:.3g} it/s", a, b, "progress",
                               {"iterations_start": d0, "iterations_end": d1,
                                "iterations_per_s": rate}, nested=True)
        for row in result.timeline():
            counters.append({"name": "GPU utilization", "ph": "C", "ts": row["start"] * US,
                             "pid": pid, "tid": 0, "args": {"utilization": row["utilization"]}})
        processes.append(proc)
    trace = _trace(processes)
    trace["traceEvents"] += counters
    return trace


def timeline_rows(trace: dict, pid: int = 1) -> list[dict]:
    """The Gantt rows back from a trace's slices of process ``pid`` (times in seconds from
    each iteration's start), ordered as :func:`timeline_trace` wrote them.

    >>> rows = [{"stage": 0, "kind": "F", "micro_batch": 0, "chunk": 0, "start": 0.25,
    ...          "finish": 0.5}]
    >>> timeline_rows(timeline_trace(rows)) == rows
    True
    """
    out = []
    for e in trace["traceEvents"]:
        if e["ph"] != "X" or e["pid"] != pid or "stage" not in e.get("args", {}):
            continue
        origin = e["args"]["iteration_start"]
        out.append({"stage": e["args"]["stage"], "kind": e["args"]["kind"],
                    "micro_batch": e["args"]["micro_batch"], "chunk": e["args"]["chunk"],
                    "start": e["ts"] / US - origin, "finish": (e["ts"] + e["dur"]) / US - origin})
    return out


def write_trace(trace: dict, path: str | Path) -> Path:
    """Write a trace as JSON to ``path`` (atomically); open it at https://ui.perfetto.dev."""
    from hpnsim.jsonable import to_jsonable
    from hpnsim.results import write_atomic

    return write_atomic(path, json.dumps(to_jsonable(trace)) + "\n")
