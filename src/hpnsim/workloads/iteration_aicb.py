"""Run a SimAI/AICB workload file as one training iteration on a fabric.

Semantics (Megatron, as AICB's ``HYBRID_TRANSFORMER_FWD_IN_BCKWD`` files describe it): for
each of the ``ga`` micro-batches, the layers run forward (compute, then the layer's forward
collective, blocking), then backward in reverse (input-gradient compute and collective,
weight-gradient compute). Weight-gradient collectives on the DP (or expert-DP) group are
gradient synchronisation: they run once, during the last micro-batch's backward, overlapped
with it, on every DP group of the job, simulated on the fabric. Then the update times.

Blocking collectives of the TP and EP groups are timed once per (kind, group, size) with
*all* groups of that kind running together on the fabric (so collisions between groups count)
and folded into the compute chain, as in :mod:`iteration_graph`. ``_EP`` collectives run on
the ``ep`` groups (``ep`` consecutive DP ranks) and are reported as ``exposed_comm["ep"]``;
with ``ep == 1`` those groups are single GPUs, so such a collective moves nothing and costs no
time. The header sizes (``ep`` dividing ``dp``, ``tp * pp`` dividing ``all_gpus``) are checked
by the parser (:class:`~hpnsim.workloads.aicb.Workload`), the same check the ``aicb`` summary
command gets. Pipeline-parallel files (``pp > 1``) are not run: AICB gives no per-stage split
of the layers.
"""

from __future__ import annotations

import numpy as np

from hpnsim.collectives import compile_collective
from hpnsim.engine import TaskGraph, simulate
from hpnsim.errors import InputError
from hpnsim.workloads.aicb import Workload, load_aicb
from hpnsim.workloads.iteration import IterationResult
from hpnsim.workloads.placement import place

_DP_GROUPS = ("dp", "edp")


def _blocking_time(fabric, groups: np.ndarray, op: str, size: float, routing: str,
                   seed: int) -> float:
    """Time of ``op`` with every group of ``groups`` running it at once."""
    graph = TaskGraph()
    finals = []
    for group in groups:
        finals += compile_collective(graph, fabric, op, group, size, routing=routing, seed=seed)
    sim = simulate(graph, fabric.link_capacity)
    return float(sim.finish[finals].max())


def simulate_aicb(workload: Workload, fabric, *, routing: str = "ecmp",
                  seed: int = 0) -> IterationResult:
    """Simulate one iteration of a parsed AICB workload.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.workloads.aicb import example_path
    >>> fab = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    >>> r = simulate_aicb(load_aicb(example_path()), fab)
    >>> bool(r.iteration_time > r.compute_time > 0)
    True
    """
    if workload.pp > 1:
        raise InputError("workload", f"pp={workload.pp}: pipeline-parallel AICB files are not "
                                     "simulated (no per-stage layer split)")
    layout = workload.to_layout()
    if layout.n_gpus > fabric.n_gpus:
        raise InputError("fabric", f"has {fabric.n_gpus} GPUs; the workload needs {layout.n_gpus}")
    placement = place(layout, fabric.gpus_per_host)
    blocking: dict[tuple, float] = {}

    def comm_time(op) -> float:
        if op.kind is None or op.group in _DP_GROUPS:
            return 0.0
        key = (op.kind, op.group, op.size)
        if key not in blocking:
            groups = placement.groups(op.group)
            if groups.shape[1] < 2:
                blocking[key] = 0.0
            else:
                kinds = ("allreduce", "alltoall") if op.kind == "allreduce_alltoall" \
                    else (op.kind,)
                blocking[key] = sum(_blocking_time(fabric, groups, k, op.size, routing, seed)
                                    for k in kinds)
        return blocking[key]

    graph = TaskGraph()
    parts = dict.fromkeys(("compute", "tp", "pp", "dp", "ep", "bubble", "optimizer"), 0.0)
    prev: list[int] = []
    timeline = []
    dp_tails: dict[str, list[list[int]]] = {}
    dp_tasks: list[int] = []
    ops = []
    layers = workload.layers
    for j in range(workload.ga):
        last = j == workload.ga - 1
        phases = [(layer, "forward") for layer in layers]
        phases += [(layer, ph) for layer in reversed(layers) for ph in ("input_grad", "weight_grad")]
        for layer, phase in phases:
            op = layer.comm(phase)
            blocked = comm_time(op)
            compute = layer.compute(phase)
            parts["compute"] += compute
            parts["ep" if op.group in ("ep",) else "tp"] += blocked
            task = graph.add_delay(compute + blocked, deps=prev, name=f"{layer.name} {phase} {j}")
            ops.append((task, "F" if phase == "forward" else "B", j))
            prev = [task]
            if last and op.kind is not None and op.group in _DP_GROUPS and op.size > 0:
                groups = placement.groups(op.group)
                tails = dp_tails.setdefault(op.group, [[] for _ in range(len(groups))])
                for g, group in enumerate(groups):
                    if group.size < 2:
                        continue
                    tails[g] = compile_collective(graph, fabric, op.kind.split("_")[0], group,
                                                  op.size, routing=routing, seed=seed,
                                                  deps=[task, *tails[g]])
                    dp_tasks.extend(tails[g])
    last_compute = prev[0]
    waits = [t for tails in dp_tails.values() for tail in tails for t in tail]
    update_time = float(sum(layer.update_time for layer in layers))
    update = graph.add_delay(update_time, deps=[last_compute, *waits], name="update")
    sim = simulate(graph, fabric.link_capacity)
    start, finish = sim.start, sim.finish
    end = float(finish[update])
    parts["dp"] = float(start[update] - finish[last_compute])
    parts["optimizer"] = update_time
    for task, kind, j in ops:
        timeline.append({"stage": 0, "kind": kind, "micro_batch": j, "chunk": 0,
                         "start": float(start[task]), "finish": float(finish[task])})
    if dp_tasks:
        timeline.append({"stage": 0, "kind": "dp", "micro_batch": -1, "chunk": -1,
                         "start": float(start[dp_tasks].min()),
                         "finish": float(finish[dp_tasks].max())})
    job = {"workload": workload.source, "policy": workload.policy, "tp": workload.tp,
           "pp": workload.pp, "dp": workload.dp, "ep": workload.ep, "ga": workload.ga,
           "gpus": layout.n_gpus, "micro_batches": workload.ga, "model": workload.source}
    return IterationResult(
        job=job, iteration_time=end, compute_time=parts["compute"],
        exposed_comm={k: parts[k] for k in ("tp", "pp", "dp", "ep")}, bubble=0.0,
        bubble_fraction=0.0, optimizer_time=update_time, mfu=float("nan"),
        tokens_per_second=float("nan"), model_flops=float("nan"),
        tp_allreduce_time=float("nan"),
        per_stage=[{"stage": 0, **parts}], timeline=timeline,
        notes=["AICB files carry no model FLOPs: MFU and tokens/s are not defined"],
        n_tasks=len(graph))


def simulate_aicb_file(path, template: str, fabric_options: dict | None = None, *,
                       routing: str = "ecmp", seed: int = 0) -> IterationResult:
    """Load an AICB file, size a ``template`` fabric for it, simulate one iteration."""
    from hpnsim.workloads.scaling import fabric_for_job

    workload = load_aicb(path)
    fabric = fabric_for_job(template, workload.to_layout().n_gpus, fabric_options)
    return simulate_aicb(workload, fabric, routing=routing, seed=seed)
