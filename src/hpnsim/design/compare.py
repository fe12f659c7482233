"""One workload on the top designs side by side (``hpnsim design --compare``).

The workload is a collective (``allreduce:1GiB:2048``) or one training iteration
(``train:llama3-8b:8:1:32``: model, TP, PP, DP; TP inside a host). Each design is built by its
emitted template (sized for at least the workload's GPUs); the workload runs on its first
GPUs (whole hosts, then segments: what a scheduler packing a job would hand it) under the
routing the design was made for: HPN's dual-plane routing on a dual-plane rail-optimized
fabric, ECMP elsewhere. Rail-only designs are left out: traffic across rails has no path
through their network (it would relay over NVLink, which the fabric model does not route).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpnsim.design.emit import template_options
from hpnsim.design.inputs import DesignInputs
from hpnsim.design.space import Design
from hpnsim.errors import InputError
from hpnsim.units import parse_size

#: collectives ``--compare`` runs (those of ``hpnsim collective`` that take a group)
OPS = ("allreduce", "allgather", "reducescatter", "alltoall")


@dataclass(frozen=True)
class Workload:
    """A collective (``op`` of ``size`` bytes) or, with ``model``, a training iteration
    (``tp x pp x dp``), on ``gpus`` GPUs."""

    op: str
    size: float
    gpus: int
    model: str = ""
    tp: int = 1
    pp: int = 1
    dp: int = 1


def _train(parts: list[str], text, field: str) -> Workload:
    if len(parts) != 5:
        raise InputError(field, f"give train:MODEL:TP:PP:DP, e.g. train:llama3-8b:8:1:32, "
                                f"got {text!r}")
    try:
        tp, pp, dp = (int(p) for p in parts[2:])
    except ValueError:
        tp = pp = dp = 0
    if min(tp, pp, dp) < 1:
        raise InputError(field, f"TP, PP and DP must be integers >= 1, got {text!r}")
    from hpnsim.workloads import models

    try:
        models.get(parts[1])   # an unknown model is refused before anything is built
    except InputError as error:
        raise InputError(field, error.message) from None
    return Workload("train", 0.0, tp * pp * dp, parts[1], tp, pp, dp)


def parse_workload(text, field: str = "compare") -> Workload:
    """``"allreduce:1G:1024"`` or ``"train:MODEL:TP:PP:DP"`` -> Workload.

    >>> parse_workload("allreduce:1GiB:1024")
    Workload(op='allreduce', size=1073741824.0, gpus=1024, model='', tp=1, pp=1, dp=1)
    >>> parse_workload("train:llama3-8b:8:1:4").gpus
    32
    >>> parse_workload("allreduce:1G")
    Traceback (most recent call last):
    hpnsim.errors.InputError: compare: give OP:SIZE:GPUS, e.g. allreduce:1GiB:1024, got 'allreduce:1G'
    """
    parts = str(text).split(":")
    if parts[0] == "train":
        return _train(parts, text, field)
    if len(parts) != 3:
        raise InputError(field, f"give OP:SIZE:GPUS, e.g. allreduce:1GiB:1024, got {text!r}")
    op, size, gpus = parts
    if op not in OPS:
        raise InputError(field, f"op must be one of {', '.join(OPS)} or train, got {op!r}")
    try:
        n = int(gpus)
    except ValueError:
        n = 0
    if n < 2:
        raise InputError(field, f"GPUS must be an integer >= 2, got {gpus!r}")
    return Workload(op, parse_size(size, field), n)


def routing_for(design: Design) -> str:
    """The routing a design was made for."""
    m = design.mechanisms
    return "hpn_dual_plane" if m.dual_plane and m.rail_optimized else "ecmp"


def pick(designs: list[Design], work: Workload, names: list[str] | None = None,
         top: int = 3) -> list[Design]:
    """The designs named (each must be feasible, hold the GPUs and not be rail-only), or the
    first ``top`` of ``designs``' order that are."""
    def why_not(x: Design) -> str | None:
        if not x.feasible:
            return f"cannot be built: {x.reason}"
        if x.mechanisms.rail_only:
            return "rail-only: no cross-rail path through its network"
        if x.gpus < work.gpus:
            return f"built for {x.gpus:,} GPUs, fewer than the collective's {work.gpus:,}"
        return None

    if names is None:
        return [x for x in designs if why_not(x) is None][:top]
    by_name = {x.name: x for x in designs}
    chosen = []
    for name in names:
        if name not in by_name:
            raise InputError("designs", f"no design {name!r}; choose from "
                                        f"{', '.join(sorted(by_name))}")
        reason = why_not(by_name[name])
        if reason:
            raise InputError("designs", f"{name} cannot run it: {reason}")
        chosen.append(by_name[name])
    return chosen


def compare(d: DesignInputs, designs: list[Design], work: Workload) -> list[dict[str, Any]]:
    """Run ``work`` on each of ``designs`` (see :func:`pick`); one row each."""
    from hpnsim.collectives import run_collective
    from hpnsim.fabrics.registry import build_fabric

    rows = []
    for x in designs:
        template, options = template_options(d, x)
        fabric = build_fabric(template, options)
        routing = routing_for(x)
        row = {"name": x.name, "template": template, "routing": routing,
               "gpus_built": fabric.n_gpus, "cost_per_gpu_usd": x.bill["cost_per_gpu_usd"]}
        if work.model:
            row.update(_iteration(fabric, work, routing))
        else:
            r = run_collective(fabric, work.op, range(work.gpus), work.size, routing=routing)
            row.update({"algo": r.algo, "time_s": r.time, "busbw_GBps": r.busbw / 1e9,
                        "bottleneck": r.bottleneck, "hash_collisions": int(r.hash_collisions)})
        rows.append(row)
    return rows


def _iteration(fabric, work: Workload, routing: str) -> dict[str, Any]:
    """One training iteration of ``work`` on ``fabric``: its time and what is exposed."""
    from hpnsim.training import TrainJob, simulate_iteration

    job = TrainJob(work.model, tp=work.tp, pp=work.pp, dp=work.dp)
    r = simulate_iteration(job, fabric, routing=routing)
    return {"iteration_time_s": r.iteration_time, "compute_time_s": r.compute_time,
            "contention_s": r.compute_by_class["contention"],
            "exposed_comm_s": dict(r.exposed_comm), "tokens_per_second": r.tokens_per_second,
            "mfu": r.mfu}
