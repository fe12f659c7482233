"""The scenario drivers' work estimate (issue 21): counted on the iteration the run goes on
with, compiled once, and equal to the tasks the run simulates.

Derivation: the run's ``n_tasks`` is the count of tasks in the graph it compiled and
simulated (every iteration of every job); the estimate is made before that graph exists,
from each job's first iteration. The compile counts are the
number of iterations each run simulates: the estimate's iteration is the run's first, not
an extra one.
"""

import numpy as np
import pytest

import hpnsim.training as training
from hpnsim.errors import InputError
from hpnsim.scenario.prepare import prepare
from hpnsim.scenario.runner import JobsTogether

FABRIC = {"template": "fat_tree", "k": 4}
JOB = {"model": "llama3-8b", "dp": 4, "global_batch": 8, "iterations": 12}
FAULT = {"kind": "link", "target": "gpu1.port0", "at": 0.1, "duration": 1}


@pytest.fixture
def counted(monkeypatch):
    """Calls of the two iteration compilers the drivers use."""
    calls = {"compile_program": 0, "build_iteration_graph": 0}
    for name in calls:
        real = getattr(training, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(training, name, counting)
    return calls


def test_one_job_estimate_is_the_tasks_run_and_each_iteration_compiles_once(counted):
    driver = JobsTogether(prepare({"fabric": FABRIC, "jobs": [JOB]}))
    estimate = driver.check_work()
    assert counted["compile_program"] == 1
    result = driver.together()
    assert estimate == result.n_tasks > 0
    assert counted["compile_program"] == JOB["iterations"]


def test_two_jobs_compared_alone_compile_each_simulated_iteration_once(counted):
    jobs = [JOB, dict(JOB, iterations=15, gpus=[8, 9, 10, 11])]
    driver = JobsTogether(prepare({"fabric": FABRIC, "jobs": jobs}))
    estimate = driver.check_work()
    assert counted["compile_program"] == 2
    counted["compile_program"] = 0
    result = driver.together()
    assert result.n_tasks == estimate
    # together (12 + 15) and each alone (12 + 15), less the two first iterations
    # check_work compiled: job 0's starts the shared graph, job 1's its alone graph
    assert counted["compile_program"] == 2 * (12 + 15) - 2
    assert all(job.alone_iteration_time is not None for job in result.jobs)


def test_faults_driver_checks_and_copies_the_one_compiled_iteration(counted, monkeypatch):
    from hpnsim.faults.iterations import compile_iteration
    from hpnsim.faults.runner import JobPlan

    scenario = {"fabric": FABRIC, "jobs": [JOB], "faults": [FAULT]}
    p = prepare(scenario)
    spec = p.scenario.jobs[0]
    plan = JobPlan(spec.name, spec.train_job(), p.placements[0], spec.iterations)
    tasks = compile_iteration(plan, p.fabric, p.scenario.routing, p.scenario.seed)[1].kind.size
    counted["build_iteration_graph"] = 0
    estimate = tasks * JOB["iterations"]

    monkeypatch.setenv("HPNSIM_MAX_TASKS", str(estimate - 1))
    with pytest.raises(InputError, match=rf"jobs\[0\]\.iterations: 12 iterations make about "
                                         rf"{estimate:,} engine tasks"):
        JobsTogether(prepare(scenario)).run()
    monkeypatch.setenv("HPNSIM_MAX_TASKS", str(estimate))
    result = JobsTogether(prepare(scenario)).run()
    assert len(result.jobs[0].iterations) == JOB["iterations"]
    # one compile per run (the refused one and the one that ran): the check and the
    # driver's copies share it
    assert counted["build_iteration_graph"] == 2
    assert np.isfinite(result.makespan)
