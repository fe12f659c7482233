"""The program of a SimAI/AICB workload file (:class:`~hpnsim.workloads.aicb.Workload`).

Semantics (Megatron, as AICB's ``HYBRID_TRANSFORMER_FWD_IN_BCKWD`` files describe it): for
each of the ``ga`` micro-batches the layers run forward (compute, then the layer's forward
collective, blocking), then backward in reverse (input-gradient compute and collective,
weight-gradient compute and collective). Collectives on the DP or expert-DP group
(``_DP_EP``) are gradient synchronisation: they run once, in the last micro-batch, each
after its compute, overlapped with the rest of the backward pass, one after another per
group. Then the update (the layers' update times summed). ``ALLREDUCEALLTOALL`` is an
all-reduce followed by an all-to-all. Zero compute times add no op.

Pipeline parallelism (``pp > 1``): the file's layers are the work of *one* stage (as SimAI
runs the listed layers on every rank), so every stage runs them; with ``vpp > 1`` they are
split into ``vpp`` equal model chunks, in order. Passes follow Megatron's 1F1B (interleaved
with ``vpp > 1``); each forward pass sends ``pp_comm`` bytes per GPU to the next stage and
each backward pass the same to the previous one.
"""

from __future__ import annotations

from hpnsim.errors import InputError
from hpnsim.training.program import Collective, Compute, Pass, Program, Recv, Send
from hpnsim.training.schedule import pipeline_schedule
from hpnsim.workloads.aicb import Workload

_DP_GROUPS = ("dp", "edp")


def program_from_aicb(workload: Workload) -> Program:
    """The training program of one iteration of an AICB workload.

    Parameters
    ----------
    workload : Workload
        A parsed AICB file (:func:`~hpnsim.workloads.aicb.load_aicb`).

    Returns
    -------
    Program

    Raises
    ------
    InputError
        When pipeline stages have no message size, or virtual stages do not split the
        layers evenly.

    Examples
    --------
    >>> from hpnsim.workloads.aicb import example_path, load_aicb
    >>> prog = program_from_aicb(load_aicb(example_path()))
    >>> [op.kind for op in prog.stages[0] if isinstance(op, Pass)]
    ['F', 'B', 'F', 'B', 'optimizer']
    >>> sorted({(op.op, op.group, op.blocking) for op in prog.ops(Collective)})
    [('allreduce', 'dp', False), ('allreduce', 'tp', True)]
    """
    layout = workload.to_layout()
    p, v, m = layout.pp, layout.vpp, workload.ga
    where = f"{workload.source} line {workload.header_line}"
    layers = list(workload.layers)
    if p > 1 and workload.pp_comm <= 0:
        raise InputError(where, f"pp={p} needs pp_comm: the pipeline message bytes")
    if len(layers) % v:
        raise InputError(where, f"vpp={v} model chunks must split the {len(layers)} layers "
                                "evenly")
    per_chunk = len(layers) // v
    chunks = [layers[k * per_chunk:(k + 1) * per_chunk] for k in range(v)]
    schedule = pipeline_schedule(layout.schedule, p, m, v)
    stages = [_stage(workload, s, schedule[s], chunks) for s in range(p)]
    job = {"workload": workload.source, "policy": workload.policy, "tp": workload.tp,
           "pp": workload.pp, "dp": workload.dp, "ep": workload.ep, "ga": workload.ga,
           "gpus": layout.n_gpus, "micro_batches": workload.ga, "model": workload.source}
    return Program(layout=layout, stages=stages, job=job,
                   notes=["AICB files carry no model FLOPs: MFU and tokens/s are not defined"])


def _stage(workload: Workload, s: int, schedule, chunks) -> list:
    p, m = workload.pp, workload.ga
    n_chunks = p * len(chunks)
    ops: list = []
    last = -1
    chains: dict[str, int] = {}

    def add(op) -> int:
        nonlocal last
        ops.append(op)
        if isinstance(op, Compute) or (isinstance(op, Collective) and op.blocking):
            last = len(ops) - 1
        return len(ops) - 1

    def phase(layer, name: str, sync: bool) -> None:
        compute = layer.compute(name)
        if compute > 0:
            add(Compute(compute, f"{layer.name} {name}"))
        comm = layer.comm(name)
        if comm.kind is None:
            return
        if comm.group in _DP_GROUPS:
            if sync and comm.size > 0:
                after = (last,) if last >= 0 else ()
                chains[comm.group] = add(Collective(
                    comm.kind.split("_")[0], comm.group, comm.size, blocking=False,
                    after=after, follows=chains.get(comm.group, -1), row="dp",
                    label=layer.name))
            return
        kinds = ("allreduce", "alltoall") if comm.kind == "allreduce_alltoall" else (comm.kind,)
        for kind in kinds:
            add(Collective(kind, comm.group, comm.size, label=layer.name))

    for kind, j, k in schedule:
        u = k * p + s
        add(Pass(kind, j, k))
        if kind == "F" and u > 0:
            add(Recv((u - 1) % p, ("F", j, u)))
        elif kind == "B" and u < n_chunks - 1:
            add(Recv((u + 1) % p, ("B", j, u)))
        if kind == "F":
            for layer in chunks[k]:
                phase(layer, "forward", j == m - 1)
        else:
            for layer in reversed(chunks[k]):
                phase(layer, "input_grad", j == m - 1)
                phase(layer, "weight_grad", j == m - 1)
        if kind == "F" and u < n_chunks - 1:
            add(Send((u + 1) % p, workload.pp_comm, ("F", j, u + 1)))
        elif kind == "B" and u > 0:
            add(Send((u - 1) % p, workload.pp_comm, ("B", j, u - 1)))
    add(Pass("optimizer"))
    update = float(sum(layer.update_time for chunk in chunks for layer in chunk))
    add(Compute(update, "update", after=tuple(chains.values())))
    return ops
