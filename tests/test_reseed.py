"""A template on another routing seed built from one compile (issue 20, compile speed) is the
template a full compile on that seed gives, bit for bit.

The reference is the independent way: compiling the program again with the other seed
(every op through the training compiler, every collective planned and added to a fresh
graph) and running it alone. The jobs cover what a seed touches and what it must not:
hashed collectives across hosts (ring and tree DP, ZeRO's reduce-scatter and all-gather,
replayed collectives), pipeline messages (their latency is their longest member path) and
TP collectives inside a host (timed alone and replayed as delays).
"""

from dataclasses import replace

import numpy as np
import pytest

from hpnsim.collectives.planning.plan import plan_collective
from hpnsim.engine import TaskGraph
from hpnsim.fabrics import hpn7
from hpnsim.sched.cluster.jobs import ClusterJob, IterationTemplate, TemplateCache
from hpnsim.training import compile_program, program_from_job
from hpnsim.training.job import TrainJob
from hpnsim.training.reseed import reseeded_arrays

FABRIC = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
              aggs_per_plane=2)
JOBS = [
    (TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=8), "auto"),
    (TrainJob("llama3-8b", tp=4, dp=8, zero=1, global_batch=16), "ring"),
    (TrainJob("llama3-8b", tp=2, pp=2, dp=4, zero=3, global_batch=8), "auto"),
]
FIELDS = ("kind", "amount", "priority", "weight", "latency", "release", "channel", "ptr",
          "links", "usage", "dep_ptr", "deps")


def _gpus(job):
    return np.arange(job.gpus)


@pytest.mark.parametrize("job,dp_algo", JOBS)
def test_reseeded_template_is_the_compiled_one(job, dp_algo):
    spec = ClusterJob("j", job, iterations=1, dp_algo=dp_algo)
    gpus = _gpus(job)
    base, it = IterationTemplate.compiled(spec, FABRIC, gpus, seed=0)
    moved = False
    for seed in (1, 2, 7):
        again = IterationTemplate.reseeded(it, base.arrays, FABRIC, seed)
        fresh = IterationTemplate.compile(spec, FABRIC, gpus, seed=seed)
        for name in FIELDS:
            a, b = getattr(again.arrays, name), getattr(fresh.arrays, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (seed, name)
        assert again.iteration_time == fresh.iteration_time
        assert again.compute_time == fresh.compute_time
        assert np.array_equal(again.links, fresh.links)
        assert np.array_equal(again.link_bytes, fresh.link_bytes)
        assert np.array_equal(again.stage_end, fresh.stage_end)
        assert np.array_equal(again.transfers, fresh.transfers)
        moved |= not np.array_equal(fresh.arrays.links, base.arrays.links)
    assert moved, "no seed moved a path: the comparison would prove nothing"


def test_timed_collectives_are_recorded_and_checked():
    # TP 8 inside a host: its all-reduces are timed alone once and replayed as delays
    program = program_from_job(JOBS[0][0])
    graph = TaskGraph()
    it = compile_program(program, graph, FABRIC, gpus=_gpus(JOBS[0][0]), release=1.0)
    assert it.timed and all(np.unique(group // 8).size == 1 for _, group, *_ in it.timed)
    arrays = graph.arrays(FABRIC.n_links)
    same = reseeded_arrays(it, arrays, FABRIC, 0)
    assert all(np.array_equal(getattr(same, n), getattr(arrays, n)) for n in FIELDS)
    # a replayed collective whose routes the seed changes (across hosts): compile instead
    op, group, size, options = it.timed[0]
    across = np.array([0, 8, 16, 24])
    moves = [seed for seed in range(1, 8) if not np.array_equal(
        plan_collective(FABRIC, op, across, size, replace(options, seed=seed)).wire_paths[0].links,
        plan_collective(FABRIC, op, across, size, options).wire_paths[0].links)]
    assert moves
    it.timed.append((op, across, size, options))
    assert reseeded_arrays(it, arrays, FABRIC, moves[0]) is None


def test_unaccounted_transfers_compile_instead():
    program = program_from_job(JOBS[1][0])
    graph = TaskGraph()
    it = compile_program(program, graph, FABRIC, gpus=_gpus(JOBS[1][0]), release=1.0)
    arrays = graph.arrays(FABRIC.n_links)
    it.routes = it.routes[1:]
    assert reseeded_arrays(it, arrays, FABRIC, 1) is None


def test_cache_reseeds_other_seeds_of_a_placement():
    spec = ClusterJob("j", JOBS[1][0], iterations=1, dp_algo="ring")
    gpus = _gpus(JOBS[1][0])
    cache = TemplateCache(FABRIC)
    first = cache.get(spec, gpus, 0)
    second = cache.get(spec, gpus, 3)
    assert cache.compiled == 2 and cache.get(spec, gpus, 3) is second
    fresh = IterationTemplate.compile(spec, FABRIC, gpus, seed=3)
    assert second.iteration_time == fresh.iteration_time
    assert np.array_equal(second.arrays.links, fresh.arrays.links)
    assert not np.array_equal(first.arrays.links, second.arrays.links)
