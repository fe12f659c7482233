"""What runs with a scenario collective (:func:`_members`: its rails, ``per_rail``, or the
collectives sharing its ``together`` label), their results gathered (:func:`_gathered`), and
a collective's NCCL parameters (:func:`collective_nccl`): shared by the flow engine's
(:mod:`hpnsim.scenario.runner`) and the packet engine's (:mod:`hpnsim.scenario.packet_runs`)
runs."""

from __future__ import annotations

from hpnsim.errors import InputError
from hpnsim.results import CollectiveRun
from hpnsim.scenario.yaml import located

__all__ = ["collective_nccl"]


def collective_nccl(scenario, spec, calibrated=None):
    """NCCL parameters of a scenario collective: the calibration if any, else those of its
    ``gpu``, else of the jobs' GPU (one kind), else None (NCCL's generic parameters)."""
    from hpnsim.collectives.nccl import NcclParams

    if calibrated is not None:
        return calibrated
    kinds = {job.gpu for job in scenario.jobs}
    gpu = spec.gpu or (kinds.pop() if len(kinds) == 1 else None)
    return NcclParams.for_gpu(gpu) if gpu else None


def _members(scenario, fabric, i: int, lines) -> list[tuple[int, list]]:
    """``(index, gpus)`` of what runs with collective ``i``: its rails (``per_rail``) or
    the collectives with its ``together`` label."""
    from hpnsim.collectives.concurrent import rail_groups

    specs = scenario.collectives
    lead = specs[i]
    if lead.per_rail:
        try:
            groups = [g.tolist() for g in rail_groups(lead.group(fabric.n_gpus),
                                                      fabric.gpus_per_host)]
        except InputError as exc:
            raise located(InputError("", exc.message), lines,
                          ("collectives", i, "gpus")) from None
        return [(i, g) for g in groups]
    return [(j, s.group(fabric.n_gpus)) for j, s in enumerate(specs)
            if s.together == lead.together]


def _gathered(scenario, fabric, i, members, per_member) -> dict[int, CollectiveRun]:
    """The runs of :func:`_members` as ``{index: CollectiveRun}``: a ``per_rail`` collective's
    rails as its groups, the slowest rail's result at each size as its results."""
    from hpnsim.collectives.concurrent import slowest

    specs = scenario.collectives
    lead = specs[i]
    if lead.per_rail:
        rails = [CollectiveRun(name=f"{lead.name}/rail{int(g[0]) % fabric.gpus_per_host}",
                               gpus=g, results=res)
                 for (_, g), res in zip(members, per_member, strict=True)]
        worst = [slowest([res[k] for res in per_member]) for k in range(len(lead.sizes))]
        return {i: CollectiveRun(name=lead.name, gpus=lead.group(fabric.n_gpus),
                                 results=worst, groups=rails)}
    return {j: CollectiveRun(name=specs[j].name, gpus=g, results=res)
            for (j, g), res in zip(members, per_member, strict=True)}
