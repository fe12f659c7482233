"""Simulate one training iteration and account for where its time goes.

Every GPU of a pipeline stage has the same timeline (see :mod:`iteration_graph`), so the
accounting is per stage. A stage's iteration time splits, with no remainder, into:

- ``compute``: its forward/backward kernels;
- ``tp``: TP all-reduces (blocking, inside the compute stream);
- ``ep``: MoE all-to-alls, dispatch and combine (blocking, inside the compute stream);
- ``pp``: waiting for a pipeline message while that message is in flight;
- ``bubble``: waiting for a neighbouring stage to *compute* (pipeline fill and drain), and
  idling at the end until the slowest stage finishes the iteration;
- ``dp``: after its last backward, waiting for gradient buckets (and, with ZeRO, the
  parameter all-gather) — only the part not hidden behind backward compute; with ZeRO-3 /
  FSDP also every wait of the compute stream for a unit's parameter all-gather, and the
  last reduce-scatters before the optimizer;
- ``optimizer``: the Adam step.

Job-level figures average the stages (they hold equal numbers of GPUs), so they are GPU
averages and still sum to the iteration time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.engine import simulate
from hpnsim.workloads.iteration_graph import IterationGraph, build_iteration_graph
from hpnsim.workloads.iteration_job import TrainJob

__all__ = ["IterationResult", "TrainJob", "account", "simulate_iteration"]

PARTS = ("compute", "tp", "pp", "dp", "ep", "bubble", "optimizer")


@dataclass
class IterationResult:
    """Outcome of one simulated iteration (seconds unless named otherwise).

    Attributes
    ----------
    iteration_time : float
    compute_time : float
        Compute per GPU (average over stages).
    exposed_comm : dict
        Per dimension (``tp``, ``pp``, ``dp``, ``ep``): time GPUs wait on it, GPU average.
    bubble : float
        Pipeline-bubble idle time, GPU average; ``bubble_fraction`` is it over the iteration.
    optimizer_time : float
    mfu : float
        Model FLOPs / (iteration time x peak FLOP/s x GPUs).
    tokens_per_second : float
    per_stage : list of dict
        The same breakdown per pipeline stage.
    timeline : list of dict
        Gantt rows: ``stage``, ``kind`` (F, B, dp, optimizer, allgather; with ZeRO-3
        fsdp-ag and fsdp-rs, one per unit's collective step), ``micro_batch``,
        ``chunk``, ``start``, ``finish``.
    """

    job: dict
    iteration_time: float
    compute_time: float
    exposed_comm: dict
    bubble: float
    bubble_fraction: float
    optimizer_time: float
    mfu: float
    tokens_per_second: float
    model_flops: float
    tp_allreduce_time: float
    ep_alltoall_time: float = 0.0
    comm_bytes: dict = field(default_factory=dict)
    per_stage: list = field(default_factory=list)
    timeline: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    n_tasks: int = 0

    def to_dict(self, timeline: bool = True) -> dict:
        """JSON-ready dict (``timeline=False`` drops the Gantt rows)."""
        out = {k: v for k, v in self.__dict__.items() if k != "timeline" or timeline}
        out["exposed_comm"] = dict(self.exposed_comm)
        return out


def simulate_iteration(job: TrainJob, fabric, *, routing: str = "ecmp", tp_algo: str = "auto",
                       dp_algo: str = "auto", gpus=None, seed: int = 0) -> IterationResult:
    """Simulate one iteration of ``job`` on ``fabric``.

    Parameters are those of :func:`build_iteration_graph`.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    >>> job = TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=8)
    >>> r = simulate_iteration(job, fab)
    >>> parts = r.compute_time + sum(r.exposed_comm.values()) + r.bubble + r.optimizer_time
    >>> bool(abs(parts - r.iteration_time) < 1e-9 * r.iteration_time)
    True
    """
    it = build_iteration_graph(job, fabric, routing=routing, tp_algo=tp_algo, dp_algo=dp_algo,
                               gpus=gpus, seed=seed)
    sim = simulate(it.graph, fabric.link_capacity)
    return account(it, sim.start, sim.finish)


def account(it: IterationGraph, start: np.ndarray, finish: np.ndarray) -> IterationResult:
    """Split each stage's time into the parts of :data:`PARTS` from simulated task times."""
    job = it.job
    t0 = float(finish[it.origin]) if it.origin >= 0 else 0.0
    end = float(max(finish[t] for t in it.stage_end))
    stages, timeline = [], []
    for s, ops in enumerate(it.ops):
        parts = dict.fromkeys(PARTS, 0.0)
        clock = t0
        for op in ops:
            begin = start[op.first]
            if begin > clock:
                # waiting for the pipeline message first (in flight: pp; its sender still
                # computing: bubble), then for the unit's parameters (ZeRO-3: dp)
                ready = max(clock, finish[op.recv]) if op.recv >= 0 else clock
                ready = min(ready, begin)
                in_flight = ready - max(clock, start[op.recv]) if op.recv >= 0 else 0.0
                parts["pp"] += max(in_flight, 0.0)
                parts["bubble"] += (ready - clock) - max(in_flight, 0.0)
                parts["dp"] += begin - ready
            parts["compute"] += op.compute
            parts["tp"] += op.tp
            parts["ep"] += op.ep
            if op.fsdp:  # waits between units for their all-gathers
                parts["dp"] += (finish[op.last] - begin) - (op.compute + op.tp + op.ep)
            timeline.append({"stage": s, "kind": op.kind, "micro_batch": op.micro_batch,
                             "chunk": op.chunk, "start": float(begin),
                             "finish": float(finish[op.last])})
            clock = finish[op.last]
        optimizer = it.optimizer[s]
        parts["dp"] += start[optimizer] - clock
        parts["optimizer"] += it.optimizer_time[s]
        stage_end = finish[it.stage_end[s]]
        parts["dp"] += stage_end - finish[optimizer]
        parts["bubble"] += end - stage_end
        if it.dp_tasks[s]:
            dp = it.dp_tasks[s]
            timeline.append({"stage": s, "kind": "dp", "micro_batch": -1, "chunk": -1,
                             "start": float(min(start[t] for t in dp)),
                             "finish": float(max(finish[t] for t in dp))})
        for kind, first, done, _ in it.fsdp_comm[s]:
            timeline.append({"stage": s, "kind": "fsdp-ag" if kind == "allgather" else "fsdp-rs",
                             "micro_batch": -1, "chunk": -1,
                             "start": float(min(start[t] for t in first)),
                             "finish": float(finish[done])})
        timeline.append({"stage": s, "kind": "optimizer", "micro_batch": -1, "chunk": -1,
                         "start": float(start[optimizer]), "finish": float(finish[optimizer])})
        if it.gather_tasks[s]:
            gathers = it.gather_tasks[s]
            timeline.append({"stage": s, "kind": "allgather", "micro_batch": -1, "chunk": -1,
                             "start": float(min(start[t] for t in gathers)),
                             "finish": float(max(finish[t] for t in gathers))})
        stages.append({"stage": s, **{key: float(val) for key, val in parts.items()}})
    mean = {key: float(np.mean([row[key] for row in stages])) for key in PARTS}
    peak = job.gpu.peak_flops * job.gpus
    if t0:
        for row in timeline:
            row["start"] -= t0
            row["finish"] -= t0
    end -= t0
    return IterationResult(
        job=job.to_dict(),
        iteration_time=end,
        compute_time=mean["compute"],
        exposed_comm={key: mean[key] for key in ("tp", "pp", "dp", "ep")},
        bubble=mean["bubble"],
        bubble_fraction=mean["bubble"] / end if end > 0 else 0.0,
        optimizer_time=mean["optimizer"],
        mfu=job.model_flops / (end * peak) if end > 0 else 0.0,
        tokens_per_second=job.tokens_per_iteration / end if end > 0 else 0.0,
        model_flops=job.model_flops,
        tp_allreduce_time=it.tp_time,
        ep_alltoall_time=float(max(it.ep_time, default=0.0)),
        comm_bytes={key: float(val) for key, val in it.comm_bytes.items()},
        per_stage=stages,
        timeline=timeline,
        notes=list(it.notes),
        n_tasks=it.end_task - it.first_task,
    )
