"""A scenario's collectives under ``engine: packet`` (:func:`packet_runs`): each alone
through :func:`~hpnsim.collectives.packet.run.run_collective_packet`, or, ``per_rail`` and
``together:``, several in one packet run
(:func:`~hpnsim.collectives.packet.groups.run_groups_packet`), as the flow engine runs them
together (:func:`hpnsim.scenario.collective_runs._run_together`)."""

from __future__ import annotations

from hpnsim.errors import InputError
from hpnsim.results import CollectiveRun
from hpnsim.scenario.collectives import scenario_options
from hpnsim.scenario.groups import _gathered, _members, collective_nccl
from hpnsim.scenario.yaml import located

__all__ = ["packet_runs"]


def packet_runs(scenario, fabric, nccl, say, lines) -> list[CollectiveRun]:
    """Every collective through the packet engine
    (:func:`~hpnsim.collectives.packet.run.run_collective_packet`), each alone, size by size,
    but ``per_rail`` ones and those sharing a ``together`` label, which run size by size in
    one packet run (:func:`~hpnsim.collectives.packet.groups.run_groups_packet`); every
    collective's largest size is checked first (ring, operation, packet budget, of all
    groups together), so a refusal comes before anything runs. Errors name
    ``collectives[i].<key>`` or ``engine``."""
    from hpnsim.collectives.packet.run import check_collective_packet

    def named(i, exc):
        key = "engine.max_packets" if exc.field == "max_packets" else \
            f"collectives[{i}].{exc.field}"
        path = ("engine", "max_packets") if exc.field == "max_packets" else \
            ("collectives", i, exc.field)
        return located(InputError(key, exc.message), lines, path)

    run_ = scenario.engine.packet_run(fabric)
    work, labels = [], set()
    for i, spec in enumerate(scenario.collectives):
        if spec.together and spec.together in labels:
            continue
        if spec.per_rail or spec.together:
            labels.add(spec.together)
            work.append(_packet_batch(scenario, fabric, i, nccl, run_, named, lines))
            continue
        options = spec.options(scenario_options(scenario, collective_nccl(scenario, spec, nccl)))
        gpus = spec.group(fabric.n_gpus)
        try:
            check_collective_packet(fabric, spec.op, gpus, max(spec.sizes), options, run_)
        except InputError as exc:
            raise named(i, exc) from None
        work.append(_alone(fabric, i, spec, options, gpus, run_, named))
    done: dict[int, CollectiveRun] = {}
    for step in work:
        done.update(step(say))
    return [done[i] for i in range(len(scenario.collectives))]


def _alone(fabric, i, spec, options, gpus, run_, named):
    """``say -> {i: CollectiveRun}``: collective ``i`` alone, size by size."""
    from hpnsim.collectives.packet.run import run_collective_packet
    from hpnsim.units import format_bytes

    def step(say) -> dict[int, CollectiveRun]:
        results = []
        for k, size in enumerate(spec.sizes):
            say(f"{spec.name}: {spec.op} on {len(gpus):,} GPUs as packets, size {k + 1}/"
                f"{len(spec.sizes)} ({format_bytes(size)})")
            try:
                results.append(run_collective_packet(fabric, spec.op, gpus, size, options,
                                                     run_))
            except InputError as exc:
                raise named(i, exc) from None
        return {i: CollectiveRun(name=spec.name, gpus=gpus, results=results)}
    return step


def _packet_batch(scenario, fabric, i: int, nccl, run_, named, lines):
    """Collective ``i`` with its rails (``per_rail``) or its ``together`` partners, checked
    for one packet run (one operation, options and group size; the work estimate
    of every group together at the largest size); returns ``say -> {index: CollectiveRun}``,
    which runs it size by size."""
    from hpnsim.collectives.packet.groups import run_groups_packet
    from hpnsim.collectives.packet.run import check_collective_packet

    specs = scenario.collectives
    lead = specs[i]
    members = _members(scenario, fabric, i, lines)
    key = "per_rail" if lead.per_rail else "together"
    for j, _ in members:
        other = specs[j]
        if other.op != lead.op:         # the sizes are one sweep already (spec.py)
            raise located(InputError(f"collectives[{j}].op", f"collectives run together as "
                                     f"packets share one op ({lead.op}, that of "
                                     f"{lead.name}); use engine: flow"),
                          lines, ("collectives", j, "op"))
        if other.overrides() != lead.overrides():
            raise located(InputError(f"collectives[{j}].together", f"collectives run together "
                                     f"as packets share their options (algo, protocol, "
                                     f"channels, qps) with {lead.name}; use engine: flow"),
                          lines, ("collectives", j, "together"))
    if len({len(g) for _, g in members}) > 1:
        raise located(InputError(f"collectives[{i}].{key}", "collectives run together as "
                                 "packets need groups of one size (their ring steps line "
                                 "up); use engine: flow"), lines, ("collectives", i, key))
    options = lead.options(scenario_options(scenario, collective_nccl(scenario, lead, nccl)))
    groups = [list(g) for _, g in members]
    try:
        hops = sum(check_collective_packet(fabric, lead.op, g, max(lead.sizes), options, run_,
                                           together=True) for g in groups)
    except InputError as exc:
        raise named(i, exc) from None
    if hops > run_.max_packets:
        raise named(i, InputError("max_packets", f"the run would simulate ~{hops:.3g} packet "
                                  f"hops ({len(groups)} collectives together), over the "
                                  f"limit {run_.max_packets:.3g}: raise --max-packets"))

    def batch(say) -> dict[int, CollectiveRun]:
        per_member: list[list] = [[] for _ in members]
        for k, size in enumerate(lead.sizes):
            say(f"{lead.name}: {len(members)} collectives together as packets, size "
                f"{k + 1}/{len(lead.sizes)}")
            for out, r in zip(per_member, run_groups_packet(fabric, lead.op, groups, size,
                                                            options, run_), strict=True):
                out.append(r)
        return _gathered(scenario, fabric, i, members, per_member)
    return batch
