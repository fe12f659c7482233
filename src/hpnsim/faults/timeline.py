"""What a run through faults reports per job: its recovery policy (timeout, checkpoints,
restart), the plan it runs, its restarts and its timeline of iterations."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hpnsim.errors import InputError
from hpnsim.faults.reliability import CHECKPOINT_INTERVAL_S, CHECKPOINT_WRITE_S, RESTART_S

#: The issue's figure for the collective timeout NCCL users set (2 minutes); PyTorch's own
#: default for ProcessGroupNCCL is 10 minutes (kProcessGroupNCCLDefaultTimeout), which
#: reliability.DETECTION_S uses. Set ``timeout`` to your job's.
TIMEOUT = 120.0

__all__ = ["TIMEOUT", "JobPlan", "JobTimeline", "RecoveryPolicy", "Restart", "job_timeline"]


@dataclass(frozen=True)
class RecoveryPolicy:
    """What a cut-off job does: collective ``timeout``, checkpoints, restart (seconds).

    ``checkpoint_age``: how long before the job's first simulated iteration its last
    checkpoint was taken (0: the simulated window starts at a checkpoint).

    >>> RecoveryPolicy().timeout, RecoveryPolicy().restart_time
    (120.0, 100.0)
    """

    timeout: float = TIMEOUT
    checkpoint_interval: float = CHECKPOINT_INTERVAL_S
    checkpoint_write: float = CHECKPOINT_WRITE_S
    restart_time: float = RESTART_S
    checkpoint_age: float = 0.0

    def __post_init__(self):
        for key in ("timeout", "checkpoint_interval", "checkpoint_write", "restart_time",
                    "checkpoint_age"):
            value = getattr(self, key)
            if not np.isfinite(value) or value < 0:
                raise InputError(key, f"must be a time >= 0, got {value!r}")
        if self.checkpoint_interval <= 0:
            raise InputError("checkpoint_interval", "must be > 0")


@dataclass
class JobPlan:
    """A job to run through faults: its TrainJob, GPUs (rank order), iterations, arrival."""

    name: str
    job: object
    gpus: np.ndarray
    iterations: int = 1
    arrival: float = 0.0
    tp_algo: str = "auto"
    dp_algo: str = "auto"


@dataclass
class Restart:
    """One failure of a job: when it failed, the checkpoint it went back to, when it ran
    again, and the work lost (``resumed_at - last_checkpoint``: time since the checkpoint
    plus restart)."""

    failed_at: float
    last_checkpoint: float
    checkpoint_iteration: int
    iterations_lost: int
    resumed_at: float

    @property
    def lost_work(self) -> float:
        return self.resumed_at - self.last_checkpoint

    def to_dict(self) -> dict:
        return {"failed_at": self.failed_at, "last_checkpoint": self.last_checkpoint,
                "checkpoint_iteration": self.checkpoint_iteration,
                "iterations_lost": self.iterations_lost, "resumed_at": self.resumed_at,
                "lost_work": self.lost_work}


@dataclass
class JobTimeline:
    """A job's iterations through the faults: ``rows`` (one per completed iteration:
    attempt, iteration, start, end, iteration_time, samples_per_s), the accounted
    ``iterations`` that count (the last attempt of each), ``restarts``, ``nominal``
    iteration time alone on the healthy fabric, and checkpoints written."""

    name: str
    rows: list[dict]
    iterations: list
    restarts: list[Restart]
    nominal: float
    samples: int
    checkpoints: int = 0
    finish: float = 0.0
    windows: list[dict] = field(default_factory=list)
    stalls: list[dict] = field(default_factory=list)   # spans the job was cut off (start, end)
    #: each reroute that moved the job's transfers (:func:`~hpnsim.faults.runner.move_summary`)
    moves: list[dict] = field(default_factory=list)
    #: the finish against the same iterations at the nominal time from the arrival (s)
    time_lost: float = 0.0

    def to_dict(self) -> dict:
        """JSON-ready: ``timeline`` rows, fault ``windows``, ``stalls`` (spans the job was cut
        off: no transfer of it moves), ``restarts``, ``lost_work`` (seconds, summed),
        ``moves`` (the reroutes: when, transfers and flows moved, links left and taken),
        ``time_lost`` (finish - arrival - iterations x nominal), ``nominal_iteration_time``,
        ``nominal_samples_per_s``."""
        return {"timeline": list(self.rows), "windows": list(self.windows),
                "stalls": list(self.stalls),
                "restarts": [r.to_dict() for r in self.restarts],
                "lost_work": sum(r.lost_work for r in self.restarts),
                "moves": list(self.moves), "time_lost": self.time_lost,
                "checkpoints": self.checkpoints, "nominal_iteration_time": self.nominal,
                "nominal_samples_per_s": self.samples / self.nominal}


def job_timeline(plan: JobPlan, attempts, result, restarts: list[Restart], nominal: float,
                 faults, stalls=(), moves=()) -> JobTimeline:
    """The :class:`JobTimeline` of ``plan`` from its ``attempts`` (chains of iterations, in
    order) and the finished engine ``result``: a row per completed iteration, the last
    attempt's iteration of each index accounted."""
    from hpnsim.training import account

    samples = int(plan.job.layout.global_batch)
    rows, kept = [], {}
    checkpoints = 0
    for chain in attempts:
        for i, it in enumerate(chain.its):
            end = float(np.max(result.finish[it.stage_end]))
            if not math.isfinite(end):
                continue
            start = float(result.finish[it.origin]) if it.origin >= 0 else 0.0
            k = chain.start_iteration + i
            rows.append({"job": plan.name, "attempt": chain.attempt, "iteration": k,
                         "start": start, "end": end, "iteration_time": end - start,
                         "samples_per_s": samples / (end - start)})
            kept[k] = (it, chain)
        checkpoints += sum(np.isfinite(result.finish[t]) for t in chain.checkpoints.values())
    iterations = [account(it, result.start, result.finish) for k, (it, _) in sorted(kept.items())]
    windows = [{"kind": f.kind, "target": f.target, "start": a, "end": b}
               for f in faults for a, b in f.windows()]
    finish = max((r["end"] for r in rows), default=0.0)
    return JobTimeline(plan.name, rows, iterations, restarts, nominal, samples,
                       int(checkpoints), finish, windows,
                       [{"start": a, "end": b} for a, b in stalls], list(moves),
                       finish - plan.arrival - len(iterations) * nominal)
