"""Work a cluster run shares or skips must not change what it computes: the runs of a
comparison share compiled iterations and steady-state probes (each reused, and the results
those of separate runs), the link-sharing components are those of a brute-force
union-find, and the periodic model's chained iterations are the task-by-task graph."""

import math

import numpy as np
import pytest
from cluster_tiny import program

from hpnsim.engine import Simulation, TaskGraph
from hpnsim.sched import SchedJob, simulate_periodic
from hpnsim.sched.cluster.driver import ClusterDriver, ClusterJob
from hpnsim.sched.cluster.jobs import TemplateCache
from hpnsim.sched.cluster.steady import components

# a and b share the uplink and never settle within the probe budget (as in
# tests/test_cluster_probe_reuse.py); c and d queue behind them and run together later
JOBS = [ClusterJob("a", program(0.010, 3e8), duration=20.0, gpus=[0, 2]),
        ClusterJob("b", program(0.004, 2e8), duration=20.0, gpus=[1, 3]),
        ClusterJob("c", program(0.004, 2e8), arrival=5.0, iterations=3, gpus=[0, 2]),
        ClusterJob("d", program(0.004, 2e8), arrival=10.0, iterations=3, gpus=[1, 3])]


def _run(fabric, scheduler, templates=None):
    driver = ClusterDriver(fabric, JOBS, scheduler=scheduler, allocator="given",
                           tolerance=1e-6, probe_tasks=300, templates=templates)
    return driver, driver.run()


def _same(x, y):
    assert x.to_dict() == y.to_dict()


@pytest.mark.parametrize("second, hits", [("none", 2), ("cassini", 0), ("crux-pa", 0)])
def test_a_shared_cache_compiles_and_probes_once_with_the_results_of_separate_runs(
        tiny, second, hits):
    shared = TemplateCache(tiny)
    _, first = _run(tiny, "none", shared)
    compiled = shared.compiled
    assert compiled == 3               # a, b (d: the same program on the same GPUs), c
    driver, again = _run(tiny, second, shared)
    assert shared.compiled == compiled           # nothing compiled twice
    _, alone = _run(tiny, second)
    _same(again, alone)
    # the counters say what the run would have probed, whoever computed the probe
    assert (again.probes, again.unstable_probes) == (alone.probes, alone.unstable_probes)
    # a second run with the same classes and no offsets takes the first's probes
    # (CASSINI offsets the jobs, Crux puts them in two classes): a+b's (it stopped at its
    # budget: it repeats) and c+d's (the same limit and iterations left)
    assert driver.mode.shared_hits == hits
    _, first_alone = _run(tiny, "none")
    _same(first, first_alone)


def _components_by_union_find(link_sets):
    parent = list(range(len(link_sets)))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(link_sets)):
        for j in range(i):
            if set(link_sets[i].tolist()) & set(link_sets[j].tolist()):
                parent[find(i)] = find(j)
    groups = {}
    for i in range(len(link_sets)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values())


def test_components_are_those_of_a_pairwise_union_find():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 10))
        sets = [np.unique(rng.integers(0, 30, rng.integers(0, 5))) for _ in range(n)]
        assert components(sets) == _components_by_union_find(sets)


def _periodic_task_by_task(jobs, cap, horizon, prio):
    """The periodic model's graph added iteration by iteration (head compute, tail
    compute, the transfer after the head; the next head after the tail and the transfer)."""
    graph, ends = TaskGraph(), []
    for j, job in enumerate(jobs):
        t = job.transfer_time(cap)
        prev, mine = [], []
        for _ in range(int(horizon // job.iteration_time(cap)) + 1):
            head = graph.add_delay(job.comm_start * job.compute_time, deps=prev)
            prev = [graph.add_delay((1 - job.comm_start) * job.compute_time, deps=[head])]
            if t > 0:
                prev.append(graph.add_transfer(job.links, job.link_bytes / t, t,
                                               priority=int(prio[j]), deps=[head]))
            mine.append(prev)
        ends.append(mine)
    sim = Simulation(graph, cap)
    sim.run(until=horizon)
    finish = sim.result().finish
    return [[max(finish[t] for t in e) for e in mine] for mine in ends]


def test_chained_periodic_iterations_are_the_task_by_task_graph():
    # a fast job beside a slow one on a shared link, both strict orders: the iteration
    # ends of the chained graph are those of the graph built task by task, to the bit
    cap = np.array([1.0, 2.0])
    jobs = [SchedJob("fast", 2, 0.3, [0], [0.2], comm_start=0.5),
            SchedJob("slow", 8, 2.0, [0, 1], [1.5, 1.0])]
    for prio in ([0, 1], [1, 0]):
        got = simulate_periodic(jobs, cap, 20.0, priority=prio)
        want = _periodic_task_by_task(jobs, cap, 20.0, prio)
        limit = 20.0 * (1 + 1e-9)
        for g, w in zip(got.iteration_finish, want, strict=True):
            assert g.tolist() == [f for f in w if f <= limit]
            assert all(math.isfinite(f) for f in g)
