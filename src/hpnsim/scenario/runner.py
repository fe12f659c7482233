"""``run(scenario) -> RunResult``: every job of a scenario on one fabric, in one simulation;
then every collective of the scenario, each alone; then the fabric report, when asked.

The fabric is built once; each job gets its GPUs (its explicit ``gpus``, or whole free hosts,
lowest first); every iteration of every job is compiled into one shared
:class:`~hpnsim.engine.TaskGraph` (a job's first iteration is released at its arrival, each
next one starts when the previous one ended); one engine run shares every link max-min
fairly among all of them, so jobs whose collectives cross the same links slow each other.
With ``compare_alone`` (default when there are several jobs) each job also runs alone on the
same GPUs, and its slowdown is the ratio of the two iteration times. Collectives
(``collectives:``) do not share the simulation with the jobs: each runs alone on the idle
fabric, one size after another (:func:`run_collectives`), as ``hpnsim collective`` does.

Examples
--------
>>> result = run({"fabric": {"template": "hpn7", "segments": 1, "hosts_per_segment": 4,
...                          "backup_hosts": 0},
...               "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 8}]})
>>> job = result.job("job0")
>>> job.gpus[:3], len(job.gpus), round(job.iteration_time, 3)
([0, 1, 2], 16, 0.84)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpnsim.engine import simulate
from hpnsim.errors import InputError
from hpnsim.results import CollectiveRun, JobResult, RunResult
from hpnsim.scenario.collectives import check_collectives
from hpnsim.scenario.spec import (
    Scenario,
    check_against_fabric,
    load_scenario,
    parse_scenario,
    scenario_lines,
)
from hpnsim.scenario.yaml import located

__all__ = ["allocate", "as_scenario", "build_scenario_fabric", "run", "run_collectives"]


def as_scenario(scenario) -> Scenario:
    """A :class:`Scenario` from a Scenario, a dict, or the path of a YAML file."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, str | Path):
        return load_scenario(scenario)
    return parse_scenario(scenario)


def build_scenario_fabric(scenario: Scenario):
    """Build the scenario's fabric; builder errors are named ``fabric.<parameter>``.

    When ``fabric.nvlink`` is not given and every job uses the same GPU type, the hosts get
    that GPU's NVLink bandwidth (an H100 job runs on 900 GB/s NVLink, an H800 one on 400).
    """
    from hpnsim.workloads.gpus import get_gpu

    spec = scenario.fabric
    options = spec.options()
    kinds = {job.gpu for job in scenario.jobs} | {c.gpu for c in scenario.collectives if c.gpu}
    if "nvlink" not in options and spec.resolved_template != "lingjun" and kinds:
        if len(kinds) > 1:
            raise located(InputError("fabric.nvlink", f"jobs or collectives use different GPUs ({', '.join(sorted(kinds))}); "
                                     "set fabric.nvlink"), scenario_lines(scenario), ("fabric",))
        options["nvlink"] = f"{get_gpu(kinds.pop()).nvlink_bandwidth / 1e9:g}GB/s"
    try:
        from hpnsim.fabrics import build_fabric
        from hpnsim.fabrics.registry import planned_gpus

        # every check of the builder, and the collectives' sizes, before the (long) build
        planned = planned_gpus(spec.resolved_template, options)
        check_collectives(scenario, planned, scenario_lines(scenario))
        fabric = build_fabric(spec.resolved_template, options)
    except InputError as exc:
        if exc.field.startswith("collectives["):
            raise
        path = ("fabric", exc.field.lstrip("-").replace("-", "_"))
        raise located(InputError("", exc.message), scenario_lines(scenario), path) from None
    fabric.meta["units"] = spec.units
    return fabric


def allocate(scenario: Scenario, fabric) -> list[np.ndarray]:
    """GPU indices of every job, in rank order: its ``gpus`` (or the GPUs of its ``hosts``)
    if given, else the lowest whole hosts no other job holds (jobs in scenario order).

    >>> from hpnsim.fabrics import hpn7
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b", "tp": 4},
    ...                              {"model": "llama3-8b", "tp": 8, "dp": 2}]})
    >>> [g[[0, -1]].tolist() for g in allocate(s, hpn7(segments=1))]
    [[0, 3], [8, 23]]
    """
    per_host = fabric.gpus_per_host
    host_free = np.ones(fabric.n_gpus // per_host, dtype=bool)
    given = [job.placement(per_host) for job in scenario.jobs]
    for gpus in given:
        if gpus is not None:
            host_free[np.unique(np.asarray(gpus) // per_host)] = False
    out = []
    for i, job in enumerate(scenario.jobs):
        count = job.gpu_count
        if given[i] is not None:
            out.append(np.asarray(given[i][:count], dtype=np.int64))
            continue
        hosts = np.flatnonzero(host_free)[: -(-count // per_host)]
        if hosts.size * per_host < count:
            raise located(InputError("", f"no {-(-count // per_host)} free hosts left for "
                                         f"its {count} GPUs (other jobs hold the rest)"),
                          scenario_lines(scenario), ("jobs", i))
        host_free[hosts] = False
        gpus = (hosts[:, None] * per_host + np.arange(per_host)).ravel()[:count]
        out.append(gpus.astype(np.int64))
    return out


def _simulate_jobs(scenario: Scenario, fabric, jobs: list, placements: list):
    """One shared graph for ``jobs`` (indices into scenario.jobs); returns
    ``({job index: [IterationResult...]}, {job index: finish}, n_tasks, n_events)``."""
    from hpnsim.engine import TaskGraph
    from hpnsim.training import account, compile_program, program_from_aicb, program_from_job

    graph = TaskGraph()
    built: dict[int, list] = {}
    for i in jobs:
        spec = scenario.jobs[i]
        program = program_from_aicb(spec.load_workload()) if spec.workload is not None \
            else program_from_job(spec.train_job())
        its, after = [], ()
        for _ in range(spec.iterations):
            it = compile_program(program, graph, fabric, gpus=placements[i],
                                 routing=scenario.routing, seed=scenario.seed,
                                 tp_algo=spec.tp_algo, dp_algo=spec.dp_algo,
                                 release=spec.arrival, after=after,
                                 nccl=scenario.nccl_params())
            its.append(it)
            after = it.stage_end
        built[i] = its
    sim = simulate(graph, fabric.link_capacity)
    results = {i: [account(it, sim.start, sim.finish) for it in its] for i, its in built.items()}
    finish = {i: float(max(sim.finish[t] for t in its[-1].stage_end))
              for i, its in built.items()}
    return results, finish, len(graph), sim.n_events


def _check_workloads(scenario: Scenario) -> None:
    for i, job in enumerate(scenario.jobs):
        if job.workload is not None and scenario.faults:
            raise located(InputError("", "runs through faults take model jobs only, for now"),
                          scenario_lines(scenario), ("jobs", i, "workload"))


def run(scenario, *, progress=None) -> RunResult:
    """Run a scenario: build the fabric, place the jobs, simulate them together; then run
    each collective alone; then report the fabric if asked.

    Jobs share one simulation (they slow each other). Collectives do not run with the jobs:
    each runs alone on the idle fabric, one size after another, one collective after
    another, exactly as ``hpnsim collective`` runs it.

    Parameters
    ----------
    scenario : Scenario, dict or path
        A validated :class:`Scenario`, a dict in its shape, or a YAML file.
    progress : callable, optional
        Called with a short message before each phase (for a progress display).

    Returns
    -------
    RunResult
        Per job: its iterations (time, exposed communication per dimension, bubble, MFU),
        its finish time and, with ``compare_alone``, its slowdown against running alone.
        Per collective: its results per size. With ``report_fabric`` (the default when there
        are neither jobs nor collectives): the fabric report.

    Examples
    --------
    >>> r = run({"fabric": {"template": "fat_tree", "k": 4}})
    >>> r.jobs, r.collectives, r.fabric_report["gpus"], r.fabric_report["switches"]
    ([], [], 16, {'tor': 8, 'agg': 8, 'core': 4})
    """
    say = progress or (lambda message: None)
    scenario = as_scenario(scenario)
    if scenario.cluster is not None:
        raise located(InputError("", "a cluster trace runs with `hpnsim cluster SCENARIO.yaml` "
                                     "(hpnsim.scenario.cluster.run_cluster)"),
                      scenario_lines(scenario), ("cluster",))
    _check_workloads(scenario)
    scenario.nccl_params()   # a bad calibration file fails before the fabric is built
    if scenario.calibration is not None and (scenario.faults or any(
            job.workload is not None for job in scenario.jobs)):
        raise located(InputError("", "applies to collectives and model jobs; runs through "
                                     "faults and AICB workloads do not take it yet"),
                      scenario_lines(scenario), ("calibration",))
    say("building the fabric")
    fabric = build_scenario_fabric(scenario)
    check_against_fabric(scenario, fabric)
    from hpnsim.scenario.faults import check_faults

    scenario.__dict__["_faults"] = check_faults(scenario, fabric, scenario_lines(scenario))
    placements = allocate(scenario, fabric)
    if scenario.jobs:
        result = _run_jobs(scenario, fabric, placements, say)
    else:
        result = RunResult(scenario=scenario.model_dump(mode="json"),
                           fabric=_fabric_summary(fabric), jobs=[], makespan=0.0, n_tasks=0,
                           n_events=0)
    from hpnsim.fabrics.registry import sizing_note

    note = sizing_note(fabric)
    if note:
        result.notes.insert(0, f"gpus: {note}")
    result.collectives = run_collectives(scenario, fabric, say)
    if scenario.wants_fabric_report:
        from hpnsim.fabrics.analysis import fabric_report

        say("reporting the fabric")
        result.fabric_report = fabric_report(fabric)
    result.built_fabric = fabric
    return result


def run_collectives(scenario: Scenario, fabric, say=None) -> list[CollectiveRun]:
    """Every collective of ``scenario`` at every size, each alone on ``fabric``
    (:func:`~hpnsim.collectives.run_collective` with the scenario's routing and seed), but
    collectives sharing a ``together`` label, which run size by size in one simulation, and
    ``per_rail`` ones, whose rails run together
    (:func:`~hpnsim.collectives.concurrent.run_together`). The fabric is the scenario's: when
    it has jobs, its NVLink follows their GPU type (see :func:`build_scenario_fabric`), else
    the template's default.

    >>> from hpnsim.fabrics import fat_tree
    >>> s = parse_scenario({"collectives": [{"gpus": 4, "sizes": "1K,1M"}]})
    >>> [r.size for r in run_collectives(s, fat_tree(4))[0].results]
    [1024.0, 1048576.0]
    """
    from hpnsim.collectives import run_collective
    from hpnsim.units import format_bytes

    say = say or (lambda message: None)
    done: dict[int, CollectiveRun] = {}
    for i, spec in enumerate(scenario.collectives):
        if i in done:
            continue
        gpus = spec.group(fabric.n_gpus)
        if spec.per_rail or spec.together:
            done.update(_run_together(scenario, fabric, i, say))
            continue
        results = []
        for k, size in enumerate(spec.sizes):
            say(f"{spec.name}: {spec.op} on {len(gpus):,} GPUs, size {k + 1}/"
                f"{len(spec.sizes)} ({format_bytes(size)})")
            results.append(run_collective(fabric, spec.op, gpus, size,
                                          routing=scenario.routing, seed=scenario.seed,
                                          nccl=collective_nccl(scenario, spec),
                                          **spec.options()))
        done[i] = CollectiveRun(name=spec.name, gpus=gpus, results=results)
    return [done[i] for i in range(len(scenario.collectives))]


def collective_nccl(scenario: Scenario, spec):
    """NCCL parameters of a scenario collective: the calibration if any, else those of its
    ``gpu``, else of the jobs' GPU (one kind), else None (NCCL's generic parameters)."""
    from hpnsim.collectives.nccl import NcclParams

    calibrated = scenario.nccl_params()
    if calibrated is not None:
        return calibrated
    kinds = {job.gpu for job in scenario.jobs}
    gpu = spec.gpu or (kinds.pop() if len(kinds) == 1 else None)
    return NcclParams.for_gpu(gpu) if gpu else None


def _run_together(scenario: Scenario, fabric, i: int, say) -> dict[int, CollectiveRun]:
    """Collective ``i`` and those with its ``together`` label (or its rails, ``per_rail``),
    size by size in one simulation each: ``{index: CollectiveRun}``."""
    from hpnsim.collectives.concurrent import Together, rail_groups, run_together, slowest

    specs = scenario.collectives
    lead = specs[i]
    if lead.per_rail:
        try:
            groups = [g.tolist() for g in rail_groups(lead.group(fabric.n_gpus),
                                                      fabric.gpus_per_host)]
        except InputError as exc:
            raise located(InputError("", exc.message), scenario_lines(scenario),
                          ("collectives", i, "gpus")) from None
        members = [(i, g) for g in groups]
    else:
        members = [(j, s.group(fabric.n_gpus)) for j, s in enumerate(specs)
                   if s.together == lead.together]
    per_member: list[list] = [[] for _ in members]
    for k, size in enumerate(lead.sizes):
        say(f"{lead.name}: {len(members)} collectives together, size {k + 1}/"
            f"{len(lead.sizes)}")
        batch = [Together(specs[j].op, g, size, specs[j].options()) for j, g in members]
        for out, r in zip(per_member, run_together(fabric, batch, routing=scenario.routing,
                                                   seed=scenario.seed,
                                                   nccl=collective_nccl(scenario, lead)),
                                 strict=True):
            out.append(r)
    if lead.per_rail:
        rails = [CollectiveRun(name=f"{lead.name}/rail{int(g[0]) % fabric.gpus_per_host}",
                               gpus=g, results=res)
                 for (_, g), res in zip(members, per_member, strict=True)]
        worst = [slowest([res[k] for res in per_member]) for k in range(len(lead.sizes))]
        return {i: CollectiveRun(name=lead.name, gpus=lead.group(fabric.n_gpus),
                                 results=worst, groups=rails)}
    return {j: CollectiveRun(name=specs[j].name, gpus=g, results=res)
            for (j, g), res in zip(members, per_member, strict=True)}


def _run_jobs(scenario: Scenario, fabric, placements: list, say) -> RunResult:
    notes = []
    indices = list(range(len(scenario.jobs)))
    if scenario.faults:
        return _run_through_faults(scenario, fabric, placements, say)
    say(f"simulating {len(indices)} job(s) together")
    shared, finish, n_tasks, n_events = _simulate_jobs(scenario, fabric, indices, placements)
    alone: dict[int, float] = {}
    compare = scenario.compare_alone
    if compare is None:
        compare = len(indices) > 1
    if compare:
        for i in indices:
            say(f"simulating {scenario.jobs[i].name} alone")
            its = _simulate_jobs(scenario, fabric, [i], placements)[0][i]
            alone[i] = sum(r.iteration_time for r in its) / len(its)
    jobs = [JobResult(name=spec.name, model=spec.model or Path(spec.workload).name,
                      gpus=placements[i].tolist(), arrival=spec.arrival, finish=finish[i],
                      iterations=shared[i],
                      alone_iteration_time=alone.get(i))
            for i, spec in enumerate(scenario.jobs)]
    for job in jobs:
        notes.extend(f"{job.name}: {n}" for n in dict.fromkeys(job.iterations[0].notes))
    return RunResult(scenario=scenario.model_dump(mode="json"), fabric=_fabric_summary(fabric),
                     jobs=jobs, makespan=max(finish.values()), n_tasks=n_tasks,
                     n_events=n_events, notes=notes)


def _run_through_faults(scenario: Scenario, fabric, placements: list, say) -> RunResult:
    """Every job together through the scenario's faults (:mod:`hpnsim.faults.runner`)."""
    from hpnsim.faults.runner import JobPlan, simulate_with_faults

    failover, recovery = scenario.failover.policies(scenario.seed)
    plans = [JobPlan(spec.name, spec.train_job(), placements[i], spec.iterations, spec.arrival,
                     spec.tp_algo, spec.dp_algo) for i, spec in enumerate(scenario.jobs)]
    say(f"simulating {len(plans)} job(s) through {len(scenario.faults)} fault(s)")
    timelines = simulate_with_faults(fabric, plans, scenario.__dict__["_faults"],
                                     routing=scenario.routing, seed=scenario.seed,
                                     failover=failover, recovery=recovery)
    jobs = [JobResult(name=spec.name, model=spec.model, gpus=placements[i].tolist(),
                      arrival=spec.arrival, finish=t.finish, iterations=t.iterations,
                      faults=t.to_dict())
            for i, (spec, t) in enumerate(zip(scenario.jobs, timelines, strict=True))]
    return RunResult(scenario=scenario.model_dump(mode="json"), fabric=_fabric_summary(fabric),
                     jobs=jobs, makespan=max(t.finish for t in timelines), n_tasks=0,
                     n_events=0)


def _fabric_summary(fabric) -> dict:
    meta = fabric.meta
    return {"template": meta.get("template", ""), "options": meta.get("options", {}),
            "gpus": fabric.n_gpus, "hosts": fabric.n_hosts, "links": fabric.n_links}
