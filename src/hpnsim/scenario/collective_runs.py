"""A scenario's collectives (``collectives:``), each at every size, alone on the idle fabric.

Collectives do not share the simulation with the jobs: each runs alone on the idle fabric,
one size after another, as ``hpnsim collective`` does, but those sharing a ``together``
label, which run size by size in one simulation, and ``per_rail`` ones, whose rails run
together (:func:`~hpnsim.collectives.planning.concurrent.run_together`). Under ``engine: packet``
they run on the packet engine (:mod:`hpnsim.scenario.packet_runs`).
:meth:`hpnsim.scenario.runner.JobsTogether.collectives` is the phase of a run that calls
:func:`collective_runs`.
"""

from __future__ import annotations

from hpnsim.results import CollectiveRun
from hpnsim.scenario.collectives import scenario_options
from hpnsim.scenario.groups import _gathered, _members, collective_nccl

__all__ = ["collective_runs", "no_progress", "run_collectives"]


def no_progress(message: str) -> None:
    """A progress callback that shows nothing (the default of every run)."""


def run_collectives(scenario, fabric, say=None) -> list[CollectiveRun]:
    """Every collective of ``scenario`` at every size, each alone on ``fabric``
    (:func:`~hpnsim.collectives.run_collective` with the scenario's routing and seed). The
    fabric is the scenario's: when it has jobs, its NVLink follows their GPU type (see
    :func:`~hpnsim.scenario.prepare.build_scenario_fabric`), else the template's default.

    >>> from hpnsim.fabrics import fat_tree
    >>> from hpnsim.scenario.spec import parse_scenario
    >>> s = parse_scenario({"collectives": [{"gpus": 4, "sizes": "1K,1M"}]})
    >>> [r.size for r in run_collectives(s, fat_tree(4))[0].results]
    [1024.0, 1048576.0]
    """
    return collective_runs(scenario, fabric, scenario.nccl_params(), say or no_progress)


def collective_runs(scenario, fabric, nccl, say, lines=None) -> list[CollectiveRun]:
    """Every collective of ``scenario`` at every size, each alone on ``fabric``, but those
    sharing a ``together`` label, which run size by size in one simulation, and ``per_rail``
    ones, whose rails run together (:func:`~hpnsim.collectives.planning.concurrent.run_together`).
    ``nccl``: the scenario's calibration, if any; ``lines``: its YAML line map."""
    from hpnsim.collectives import run_collective
    from hpnsim.units import format_bytes

    if scenario.runs_packets:
        from hpnsim.scenario.packet_runs import packet_runs

        return packet_runs(scenario, fabric, nccl, say, lines or {})
    done: dict[int, CollectiveRun] = {}
    for i, spec in enumerate(scenario.collectives):
        if i in done:
            continue
        if spec.per_rail or spec.together:
            done.update(_run_together(scenario, fabric, i, nccl, say, lines or {}))
            continue
        options = spec.options(scenario_options(scenario, collective_nccl(scenario, spec, nccl)))
        gpus = spec.group(fabric.n_gpus)
        results = []
        for k, size in enumerate(spec.sizes):
            say(f"{spec.name}: {spec.op} on {len(gpus):,} GPUs, size {k + 1}/"
                f"{len(spec.sizes)} ({format_bytes(size)})")
            results.append(run_collective(fabric, spec.op, gpus, size, options))
        done[i] = CollectiveRun(name=spec.name, gpus=gpus, results=results)
    return [done[i] for i in range(len(scenario.collectives))]


def _run_together(scenario, fabric, i: int, nccl, say, lines) -> dict[int, CollectiveRun]:
    """Collective ``i`` and those with its ``together`` label (or its rails, ``per_rail``),
    size by size in one simulation each: ``{index: CollectiveRun}``."""
    from hpnsim.collectives.planning.concurrent import Together, run_together

    specs = scenario.collectives
    lead = specs[i]
    members = _members(scenario, fabric, i, lines)
    base = scenario_options(scenario, collective_nccl(scenario, lead, nccl))
    per_member: list[list] = [[] for _ in members]
    for k, size in enumerate(lead.sizes):
        say(f"{lead.name}: {len(members)} collectives together, size {k + 1}/"
            f"{len(lead.sizes)}")
        batch = [Together(specs[j].op, g, size, specs[j].overrides()) for j, g in members]
        for out, r in zip(per_member, run_together(fabric, batch, base), strict=True):
            out.append(r)
    return _gathered(scenario, fabric, i, members, per_member)
