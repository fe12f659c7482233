"""One accounting of a compiled iteration: where each stage's time goes.

Every GPU of a pipeline stage has the same timeline, so the accounting is per stage. A
stage's iteration time splits, with no remainder, into:

- ``compute``: its forward/backward kernels;
- ``tp``: blocking TP collectives on its compute stream, and waits of the stream for TP
  collectives overlapped with compute (``tp_comm_overlap``);
- ``ep``: MoE all-to-alls, dispatch and combine (blocking, on the compute stream);
- ``cp`` (jobs with context parallelism only): waits of the stream for ring attention's
  key/value exchange;
- ``pp``: waiting for a pipeline message while that message is in flight;
- ``bubble``: waiting for a neighbouring stage to *compute* (pipeline fill and drain), and
  idling at the end until the slowest stage finishes the iteration;
- ``dp``: waiting for gradient buckets before the optimizer and for ZeRO gathers after it
  (the part not hidden behind compute); with ZeRO-3 / FSDP also every wait of the compute
  stream for a unit's parameter all-gather;
- ``optimizer``: the optimizer step;
- ``straggler``: the compute stream waiting for the job's slowest GPU (every compute kernel
  is longer by the expected maximum of the GPUs' variation, :mod:`hpnsim.training.straggler`;
  the extra seconds are counted here, not in ``compute``).

The compute part splits further by operation class (:data:`~hpnsim.training.cost.OP_CLASSES`:
GEMM, attention, memory-bound kernels, the time between kernels; and ``contention``, the
further time kernels take beside overlapped communication kernels) when the program comes from a
:class:`~hpnsim.training.job.TrainJob`, whose job description carries each stage's class
seconds (``compute_by_class``); ``IterationResult.compute_by_class`` averages them over the
stages as the parts are, so its values add up to ``compute_time``.

Delays (compute, replayed NVLink collectives) count their nominal seconds; collectives
simulated in the graph count their simulated duration. Job-level figures average the
stages (they hold equal numbers of GPUs), so they are GPU averages and still sum to the
iteration time.
"""

from __future__ import annotations

import math

import numpy as np

from hpnsim.training.compile import CompiledIteration
from hpnsim.training.cost import OP_CLASSES
from hpnsim.training.iteration import PARTS, IterationResult


def _stage(it: CompiledIteration, s: int, start, finish, t0: float, end: float):
    """Parts and Gantt rows of stage ``s``; also the durations of its EP all-to-alls."""
    parts = dict.fromkeys((*_parts(it), "contention"), 0.0)
    rows, ep_calls = [], []
    clock = t0
    optimizer_row = None
    for sp in it.passes[s]:
        if not sp.elements:
            continue
        for n, el in enumerate(sp.elements):
            begin = start[el.first]
            if begin > clock:
                if n == 0 and sp.kind in ("F", "B"):
                    # waiting for the pipeline message (in flight: pp; its sender still
                    # computing: bubble), then for the unit's parameters (ZeRO-3: dp) or an
                    # overlapped TP all-gather (tp): what the element says it waits for
                    recv = sp.recv
                    ready = max(clock, finish[recv]) if recv >= 0 else clock
                    ready = min(ready, begin)
                    in_flight = ready - max(clock, start[recv]) if recv >= 0 else 0.0
                    parts["pp"] += max(in_flight, 0.0)
                    parts["bubble"] += (ready - clock) - max(in_flight, 0.0)
                    parts[el.wait] += begin - ready
                else:
                    parts[el.wait] += begin - clock
            if el.nominal is not None:
                for key, seconds in el.nominal.items():
                    parts["optimizer" if sp.kind == "optimizer" and key == "compute"
                          else key] += seconds
                    if key == "contention":   # compute, slower beside communication
                        parts["compute"] += seconds
            else:
                parts[el.category] += finish[el.last] - begin
                if el.category == "ep":
                    ep_calls.append(finish[el.last] - begin)
            clock = finish[el.last]
        row = {"stage": s, "kind": sp.kind, "micro_batch": sp.micro_batch, "chunk": sp.chunk,
               "start": float(start[sp.elements[0].first]), "finish": float(clock)}
        if sp.kind == "optimizer":
            optimizer_row = row
        else:
            rows.append(row)
    stage_end = finish[it.stage_end[s]]
    parts["dp"] += stage_end - clock
    parts["bubble"] += end - stage_end
    tail = []
    for kind, first, finals in it.rows[s]:
        firsts = first or finals
        row = {"stage": s, "kind": kind, "micro_batch": -1, "chunk": -1,
               "start": float(min(start[t] for t in firsts)),
               "finish": float(max(finish[t] for t in finals))}
        (tail if kind == "allgather" else rows).append(row)
    rows += ([optimizer_row] if optimizer_row else []) + tail
    return parts, rows, ep_calls


def _parts(it: CompiledIteration) -> tuple[str, ...]:
    """:data:`PARTS`, and ``cp`` (exposed ring-attention exchange) when the job has CP."""
    return (*PARTS, "cp") if it.program.layout.cp > 1 else PARTS


def account(it: CompiledIteration, start: np.ndarray, finish: np.ndarray) -> IterationResult:
    """Split each stage's time into the parts of :data:`PARTS` from simulated task times.

    ``start`` and ``finish`` are the task times of the simulation of ``it.graph`` (it may
    hold other jobs and iterations too); times are measured from the iteration's start.

    Examples
    --------
    >>> from hpnsim.engine import TaskGraph, simulate
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.training import compile_program, program_from_job
    >>> from hpnsim.training.job import TrainJob
    >>> fab = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    >>> job = TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=8)
    >>> it = compile_program(program_from_job(job), TaskGraph(), fab)
    >>> sim = simulate(it.graph, fab.link_capacity)
    >>> r = account(it, sim.start, sim.finish)
    >>> parts = (r.compute_time + sum(r.exposed_comm.values()) + r.bubble + r.optimizer_time
    ...          + r.straggler_time)
    >>> bool(abs(parts - r.iteration_time) < 1e-9 * r.iteration_time)
    True
    """
    program = it.program
    t0 = float(finish[it.origin]) if it.origin >= 0 else 0.0
    end = float(max(finish[t] for t in it.stage_end))
    stages, timeline, ep_time = [], [], []
    by_class = program.job.get("compute_by_class") or []
    contention = []   # the part of each stage's compute spent beside communication kernels
    for s in range(len(it.passes)):
        parts, rows, ep_calls = _stage(it, s, start, finish, t0, end)
        contention.append(parts.pop("contention"))
        stages.append({"stage": s, **{key: float(val) for key, val in parts.items()}})
        timeline += rows
        ep_time.append(min(ep_calls, default=0.0))
    mean = {key: float(np.mean([row[key] for row in stages])) for key in _parts(it)}
    if t0:
        for row in timeline:
            row["start"] -= t0
            row["finish"] -= t0
    end -= t0
    classes = ({key: float(np.mean([row[key] for row in by_class])) for key in OP_CLASSES}
               if len(by_class) == len(it.passes) else {})
    if classes:
        classes["contention"] = float(np.mean(contention))
    peak = program.peak_flops * program.layout.n_gpus
    known = not math.isnan(program.model_flops)
    return IterationResult(
        job=dict(program.job),
        iteration_time=end,
        compute_time=mean["compute"],
        compute_by_class=classes,
        exposed_comm={key: mean[key] for key in ("tp", "pp", "dp", "ep", "cp") if key in mean},
        bubble=mean["bubble"],
        bubble_fraction=mean["bubble"] / end if end > 0 else 0.0,
        optimizer_time=mean["optimizer"],
        straggler_time=mean["straggler"],
        mfu=(program.model_flops / (end * peak) if end > 0 else 0.0) if known else math.nan,
        tokens_per_second=(program.tokens / end if end > 0 else 0.0) if known else math.nan,
        model_flops=program.model_flops,
        tp_allreduce_time=it.tp_time,
        ep_alltoall_time=float(max(max(ep_time, default=0.0), it.ep_replay)),
        comm_bytes={key: float(val) for key, val in it.comm_bytes.items()},
        per_stage=stages,
        timeline=timeline,
        notes=list(it.notes),
        n_tasks=it.end_task - it.first_task,
    )
