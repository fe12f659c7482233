"""How many engine tasks a scenario's jobs make, and the refusal of more than the limit,
before the long work (:func:`~hpnsim.errors.work_limit`, "tasks").

Two estimates, in order: a floor from the jobs' shapes alone (:func:`check_task_floor`,
nothing compiled), then the count from one compiled iteration of each job
(:func:`check_iteration_tasks`). The iteration counted is the one the run goes on with: the
jobs-together driver continues the graph it was compiled into, the faults driver copies it
(:class:`~hpnsim.scenario.runner.JobsTogether`), so counting costs no extra compile.
"""

from __future__ import annotations

from hpnsim.errors import check_work


def check_task_floor(scenario, every_iteration: bool = True, few: int = 10) -> None:
    """Refuse, before compiling anything, jobs that must make more engine tasks than
    :func:`~hpnsim.errors.work_limit` ("tasks"): every micro-batch on every virtual stage
    runs at least a forward and a backward, ``2 x micro-batches x stages`` tasks an
    iteration, times the iterations when each is simulated (``every_iteration``; a cluster
    trace's steady state simulates a few).

    >>> from hpnsim.scenario.spec import parse_scenario
    >>> check_task_floor(parse_scenario({"jobs": [{"model": "llama3-8b", "dp": 2,
    ...                                           "global_batch": 2 * 10**9}]}))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].global_batch: 1,000,000,000 micro-batches x 1 stages x 1 iterations make at least 2,000,000,000 engine tasks; hpnsim runs at most 5,000,000 tasks unless HPNSIM_MAX_TASKS=N raises it
    """
    for i, spec in enumerate(scenario.jobs):
        if spec.workload is not None:   # an AICB file lists its tasks: it is read, not made
            continue
        job = spec.train_job()
        iterations = spec.iterations if every_iteration else 1
        floor = 2 * job.micro_batches * job.pp * job.virtual_stages * iterations
        field = "iterations" if iterations > few else "global_batch"
        check_work(floor, "tasks", f"jobs[{i}].{field}",
                   f"{job.micro_batches:,} micro-batches x {job.pp * job.virtual_stages} "
                   f"stages x {iterations:,} iterations make at least {floor:,} engine tasks")


def iterations_tasks(first: int, iterations: int, first_has_start: bool) -> int:
    """Tasks of ``iterations`` iterations of one job compiled one after another, from the
    ``first`` one's count: every next one holds the same tasks plus an "iteration start"
    waiting for the previous one's stage ends, which the first holds only when released
    after 0 (``first_has_start``; :func:`~hpnsim.training.compile_program`).

    >>> iterations_tasks(240, 12, False), iterations_tasks(241, 12, True)
    (2891, 2892)
    """
    return first + (iterations - 1) * (first + (0 if first_has_start else 1))


def check_iteration_tasks(scenario, tasks: dict[int, int]) -> int:
    """Refuse jobs whose iterations make more engine tasks than
    :func:`~hpnsim.errors.work_limit` ("tasks") in all: job ``i`` makes ``tasks[i]`` (over
    all its iterations, counted from its compiled first one). The message names the job
    with the most iterations. Returns the total.

    >>> from hpnsim.scenario.spec import parse_scenario
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b", "dp": 2, "iterations": 20},
    ...                              {"model": "llama3-8b", "dp": 2, "iterations": 30}]})
    >>> check_iteration_tasks(s, {0: 2_000, 1: 3_000})
    5000
    >>> check_iteration_tasks(s, {0: 2_000_000, 1: 6_000_000})
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[1].iterations: 30 iterations make about 8,000,000 engine tasks; hpnsim runs at most 5,000,000 tasks unless HPNSIM_MAX_TASKS=N raises it
    """
    jobs = scenario.jobs
    total = sum(tasks.values())
    if tasks:
        largest = max(sorted(tasks), key=lambda i: jobs[i].iterations)
        check_work(total, "tasks", f"jobs[{largest}].iterations",
                   f"{jobs[largest].iterations:,} iterations make about {total:,} engine tasks")
    return total
