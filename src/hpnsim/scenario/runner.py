"""``run(scenario) -> RunResult``: every job of a scenario on one fabric, in one simulation;
then every collective of the scenario, each alone; then the fabric report, when asked.

:func:`run` prepares the scenario (:func:`~hpnsim.scenario.prepare.prepare`: checks, the
built fabric, placements) and hands it to the jobs-together driver, :class:`JobsTogether`,
one method per phase: :meth:`~JobsTogether.compile`, :meth:`~JobsTogether.simulate`,
:meth:`~JobsTogether.compare_alone`, :meth:`~JobsTogether.collectives`; a scenario with
faults runs its jobs through them instead (:meth:`~JobsTogether.through_faults`).

The fabric is built once; each job gets its GPUs (its explicit ``gpus``, or whole free hosts,
lowest first); every iteration of every job is compiled into one shared
:class:`~hpnsim.engine.TaskGraph` (a job's first iteration is released at its arrival, each
next one starts when the previous one ended); one engine run shares every link max-min
fairly among all of them, so jobs whose collectives cross the same links slow each other.
With ``compare_alone`` (default when there are several jobs) each job also runs alone on the
same GPUs, and its slowdown is the ratio of the two iteration times. Collectives
(``collectives:``) do not share the simulation with the jobs: each runs alone on the idle
fabric, one size after another (:func:`run_collectives`, in
:mod:`hpnsim.scenario.collective_runs`, re-exported here), as ``hpnsim collective`` does.

Examples
--------
>>> result = run({"fabric": {"template": "hpn7", "segments": 1, "hosts_per_segment": 4,
...                          "backup_hosts": 0},
...               "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 8}]})
>>> job = result.job("job0")
>>> job.gpus[:3], len(job.gpus), round(job.iteration_time, 3)
([0, 1, 2], 16, 0.781)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpnsim.engine import simulate
from hpnsim.errors import InputError
from hpnsim.results import CollectiveRun, JobResult, RunResult
from hpnsim.scenario.collective_runs import collective_runs, no_progress, run_collectives
from hpnsim.scenario.collectives import routing_options, scenario_options
from hpnsim.scenario.prepare import (
    PreparedScenario,
    allocate,
    as_scenario,
    build_scenario_fabric,
    prepare,
    scenario_and_lines,
)
from hpnsim.scenario.work import check_iteration_tasks, check_task_floor, iterations_tasks
from hpnsim.scenario.yaml import located

__all__ = ["JobsTogether", "SharedRun", "allocate", "as_scenario", "build_scenario_fabric",
           "check_task_floor", "run", "run_collectives"]


@dataclass(frozen=True)
class SharedRun:
    """Jobs simulated together in one engine run.

    Attributes
    ----------
    iterations : job index -> its :class:`~hpnsim.training.iteration.IterationResult` list
    finish : job index -> when its last iteration ended (seconds)
    n_tasks, n_events : size of the shared task graph and engine events
    packet : the packet engine's figures (``engine: packet``; None on the flow engine)
    """

    iterations: dict[int, list]
    finish: dict[int, float]
    n_tasks: int
    n_events: int
    packet: dict | None = None


class JobsTogether:
    """The jobs-together driver: every job of a prepared scenario in one simulation, then
    each job alone (with ``compare_alone``), then every collective alone.

    Parameters
    ----------
    prepared : PreparedScenario
    progress : callable, optional
        Called with a short message before each phase.

    Examples
    --------
    >>> from hpnsim.scenario.prepare import prepare
    >>> p = prepare({"fabric": {"template": "fat_tree", "k": 4},
    ...              "jobs": [{"model": "llama3-8b", "dp": 4, "global_batch": 8}]})
    >>> shared = JobsTogether(p).simulate([0])
    >>> len(shared.iterations[0]), shared.finish[0] > 0
    (1, True)
    """

    def __init__(self, prepared: PreparedScenario, progress=None):
        self.prepared = prepared
        self._say = progress or no_progress
        #: job index -> (a graph holding its first iteration alone, [that iteration]):
        #: compiled by :meth:`check_work`, continued by the first run that starts with it
        self._started: dict[int, tuple] = {}

    def run(self) -> RunResult:
        """Every phase in order; the :class:`~hpnsim.results.RunResult`."""
        p = self.prepared
        if not p.scenario.jobs:
            result = RunResult(scenario=_echo(p.scenario), fabric=_fabric_summary(p.fabric),
                               jobs=[], makespan=0.0, n_tasks=0, n_events=0)
        elif p.scenario.faults:
            result = self.through_faults()      # checks the work on the iterations it copies
        else:
            self.check_work()
            result = self.together()
        from hpnsim.fabrics.registry import sizing_note

        note = sizing_note(p.fabric)
        if note:
            result.notes.insert(0, f"gpus: {note}")
        result.collectives = self.collectives()
        if p.scenario.wants_fabric_report:
            result.fabric_report = self.fabric_report()
        result.built_fabric = p.fabric
        return result

    def check_work(self, few: int = 10) -> int:
        """Refuse, before simulating, jobs whose iterations would make more engine tasks than
        :func:`~hpnsim.errors.work_limit` ("tasks"): the first iteration of each job with more
        than ``few`` iterations is compiled and its tasks counted
        (:func:`~hpnsim.scenario.work.check_iteration_tasks`). That iteration is not compiled
        again: the first run that starts with the job (:meth:`simulate`) continues its graph.
        Returns the estimated tasks of those jobs' iterations.
        """
        from hpnsim.engine import TaskGraph

        scenario = self.prepared.scenario
        check_task_floor(scenario, few=few)
        tasks = {}
        for i, spec in enumerate(scenario.jobs):
            if spec.iterations > few:
                graph = TaskGraph()
                first = self.compile([i], graph, iterations=1)[i]
                self._started[i] = (graph, first)
                tasks[i] = iterations_tasks(len(graph), spec.iterations, first[0].origin >= 0)
        return check_iteration_tasks(scenario, tasks)

    def compile(self, jobs: list[int], graph, iterations: int | None = None,
                built: dict[int, list] | None = None) -> dict[int, list]:
        """Every iteration of ``jobs`` (indices into the scenario's jobs) into ``graph``: a
        job's first iteration is released at its arrival, each next one after the previous
        (``iterations`` of each instead, when given). ``built``: iterations of a job already
        in ``graph``, continued from. Returns job index -> its compiled iterations."""
        from hpnsim.training import compile_program, program_from_aicb, program_from_job

        p = self.prepared
        built = dict(built or {})
        for i in jobs:
            spec = p.scenario.jobs[i]
            its = list(built.get(i, []))
            count = spec.iterations if iterations is None else iterations
            if len(its) < count:
                program = program_from_aicb(p.workloads[i]) if spec.workload is not None \
                    else program_from_job(spec.train_job())
            after = its[-1].stage_end if its else ()
            for _ in range(len(its), count):
                it = compile_program(program, graph, p.fabric,
                                     scenario_options(p.scenario, p.nccl),
                                     gpus=p.placements[i], tp_algo=spec.tp_algo,
                                     dp_algo=spec.dp_algo, release=spec.arrival, after=after)
                its.append(it)
                after = it.stage_end
            built[i] = its
        return built

    def simulate(self, jobs: list[int]) -> SharedRun:
        """``jobs`` compiled into one shared task graph and simulated together (the graph
        :meth:`check_work` compiled ``jobs[0]``'s first iteration into, when there is one)."""
        from hpnsim.engine import TaskGraph
        from hpnsim.training import account

        graph, started = TaskGraph(), {}
        if jobs and jobs[0] in self._started:
            graph, first = self._started.pop(jobs[0])
            started = {jobs[0]: first}
        built = self.compile(jobs, graph, built=started)
        if self.prepared.scenario.runs_packets:
            from hpnsim.scenario.packet_jobs import simulate_jobs_packet

            iterations, finish, packet = simulate_jobs_packet(self.prepared, graph, built)
            return SharedRun(iterations, finish, len(graph), packet["events"], packet)
        sim = simulate(graph, self.prepared.fabric.link_capacity)
        return SharedRun(
            iterations={i: [account(it, sim.start, sim.finish) for it in its]
                        for i, its in built.items()},
            finish={i: float(max(sim.finish[t] for t in its[-1].stage_end))
                    for i, its in built.items()},
            n_tasks=len(graph), n_events=sim.n_events)

    def compare_alone(self) -> dict[int, float]:
        """Job index -> its mean iteration time running alone on the same GPUs (every job
        with ``compare_alone``, by default when there are several; else none)."""
        scenario = self.prepared.scenario
        compare = scenario.compare_alone
        if compare is None:
            compare = len(scenario.jobs) > 1
        alone: dict[int, float] = {}
        if compare:
            for i, spec in enumerate(scenario.jobs):
                self._say(f"simulating {spec.name} alone")
                its = self.simulate([i]).iterations[i]
                alone[i] = sum(r.iteration_time for r in its) / len(its)
        return alone

    def together(self) -> RunResult:
        """Every job in one simulation (and alone, to compare)."""
        p = self.prepared
        indices = list(range(len(p.scenario.jobs)))
        self._say(f"simulating {len(indices)} job(s) together")
        shared = self.simulate(indices)
        alone = self.compare_alone()
        jobs = [JobResult(name=spec.name, model=spec.model or Path(spec.workload).name,
                          gpus=p.placements[i].tolist(), arrival=spec.arrival,
                          finish=shared.finish[i], iterations=shared.iterations[i],
                          alone_iteration_time=alone.get(i))
                for i, spec in enumerate(p.scenario.jobs)]
        notes = []
        for job in jobs:
            notes.extend(f"{job.name}: {n}" for n in dict.fromkeys(job.iterations[0].notes))
        return RunResult(scenario=_echo(p.scenario), fabric=_fabric_summary(p.fabric),
                         jobs=jobs, makespan=max(shared.finish.values()),
                         n_tasks=shared.n_tasks, n_events=shared.n_events, notes=notes,
                         packet=shared.packet)

    def through_faults(self, few: int = 10) -> RunResult:
        """Every job together through the scenario's faults (:mod:`hpnsim.faults.runner`).

        Each job's iteration is compiled once, checked as :meth:`check_work` checks (jobs
        with more than ``few`` iterations), and handed to the faults driver, which copies it.
        """
        from hpnsim.faults.iterations import compile_iteration, template_of
        from hpnsim.faults.runner import JobPlan, simulate_with_faults

        p = self.prepared
        scenario = p.scenario
        check_task_floor(scenario, few=few)
        failover, recovery = scenario.failover.policies(scenario.seed)
        plans = [JobPlan(spec.name, spec.train_job(), p.placements[i], spec.iterations,
                         spec.arrival, spec.tp_algo, spec.dp_algo)
                 for i, spec in enumerate(scenario.jobs)]
        firsts = [compile_iteration(plan, p.fabric, scenario.routing, scenario.seed,
                                    routing_options(scenario)) for plan in plans]
        # every iteration a copy of the compiled one (its start task included)
        check_iteration_tasks(scenario, {i: arrays.kind.size * plans[i].iterations
                                         for i, (_, arrays) in enumerate(firsts)
                                         if plans[i].iterations > few})
        templates = [template_of(it, arrays, p.fabric) for it, arrays in firsts]
        check_faults_in_run(scenario, plans, templates, p.lines)
        self._say(f"simulating {len(plans)} job(s) through {len(scenario.faults)} fault(s)")
        timelines = simulate_with_faults(p.fabric, plans, list(p.faults),
                                         routing=scenario.routing, seed=scenario.seed,
                                         failover=failover, recovery=recovery,
                                         routing_options=routing_options(scenario),
                                         templates=templates)
        jobs = [JobResult(name=spec.name, model=spec.model, gpus=p.placements[i].tolist(),
                          arrival=spec.arrival, finish=t.finish, iterations=t.iterations,
                          faults=t.to_dict())
                for i, (spec, t) in enumerate(zip(scenario.jobs, timelines, strict=True))]
        result = RunResult(scenario=_echo(scenario), fabric=_fabric_summary(p.fabric),
                           jobs=jobs, makespan=max(t.finish for t in timelines), n_tasks=0,
                           n_events=0)
        for i, fault in enumerate(scenario.faults):
            if fault.at >= result.makespan:
                result.notes.append(f"faults[{i}]: at {fault.at:g} s, after the run ended "
                                    f"({result.makespan:.4g} s): it touched no job; give "
                                    f"more iterations or an earlier at")
        return result

    def collectives(self) -> list[CollectiveRun]:
        """Every collective of the scenario at every size, each alone on the fabric."""
        p = self.prepared
        return collective_runs(p.scenario, p.fabric, p.nccl, self._say, p.lines)

    def fabric_report(self) -> dict:
        """The fabric report (``hpnsim fabric --json``)."""
        from hpnsim.fabrics.analysis import fabric_report

        self._say("reporting the fabric")
        return fabric_report(self.prepared.fabric)


def check_faults_in_run(scenario, plans, templates, lines=None) -> None:
    """Refuse, before the run, faults that all start after a lone job's last iteration:
    the run would report as if nothing was asked. One job alone ends by its arrival plus
    its iterations at its nominal time (iterations of one job never overlap more slowly);
    with several jobs the end depends on how they share, so only the after-the-run note
    (:meth:`JobsTogether.through_faults`) speaks of a fault that touched nothing.

    >>> from types import SimpleNamespace as N
    >>> s = N(faults=[N(at=100.0)], jobs=[N(name="job0")])
    >>> check_faults_in_run(s, [N(arrival=0.0, iterations=3)], [N(nominal=1.5)])
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: faults[0].at: at 100 s, after the run has ended: job0 runs 3 iterations of 1.5 s from 0 s, so the run ends by 4.5 s; give an earlier at or more iterations
    """
    if len(plans) != 1 or not scenario.faults:
        return
    [plan], [template] = plans, templates
    end = plan.arrival + plan.iterations * template.nominal
    first = min(range(len(scenario.faults)), key=lambda i: scenario.faults[i].at)
    at = scenario.faults[first].at
    if at >= end:
        raise located(InputError("", f"at {at:g} s, after the run has ended: "
                                     f"{scenario.jobs[0].name} runs {plan.iterations} "
                                     f"iterations of {template.nominal:.4g} s from "
                                     f"{plan.arrival:g} s, so the run ends by {end:.4g} s; "
                                     f"give an earlier at or more iterations"),
                      lines or {}, ("faults", first, "at"))


def run(scenario, *, lines=None, progress=None) -> RunResult:
    """Run a scenario: build the fabric, place the jobs, simulate them together; then run
    each collective alone; then report the fabric if asked.

    Jobs share one simulation (they slow each other). Collectives do not run with the jobs:
    each runs alone on the idle fabric, one size after another, one collective after
    another, exactly as ``hpnsim collective`` runs it.

    Parameters
    ----------
    scenario : Scenario, dict or path
        A validated :class:`Scenario`, a dict in its shape, or a YAML file.
    lines : mapping, optional
        The YAML line map of ``scenario``, for errors with lines
        (:func:`~hpnsim.scenario.spec.read_scenario`; read with it when it is a path).
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
    scenario, lines = scenario_and_lines(scenario, lines)
    if scenario.cluster is not None:
        raise located(InputError("", "a cluster trace runs with `hpnsim cluster SCENARIO.yaml` "
                                     "(hpnsim.scenario.cluster.run_cluster)"),
                      lines, ("cluster",))
    prepared = prepare(scenario, lines=lines, progress=progress)
    return JobsTogether(prepared, progress).run()


def _echo(scenario) -> dict:
    """The scenario as a run reports it (renamed job keys under their old names, so the
    JSON output keeps its keys)."""
    out = scenario.model_dump(mode="json", by_alias=True)
    if out.get("engine", 0) is None:
        del out["engine"]              # no engine: key, the flow engine; echo as before it
    return out


def _fabric_summary(fabric) -> dict:
    meta = fabric.meta
    return {"template": meta.get("template", ""), "options": meta.get("options", {}),
            "gpus": fabric.n_gpus, "hosts": fabric.n_hosts, "links": fabric.n_links}
