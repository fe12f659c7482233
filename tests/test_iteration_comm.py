"""Replaying a compiled collective gives exactly the tasks compiling it again would."""

import numpy as np
import pytest

from hpnsim.collectives import CollectiveOptions, compile_collective, compile_into
from hpnsim.engine import TaskGraph, simulate
from hpnsim.fabrics import hpn7
from hpnsim.training.comm import compile_groups, replay


@pytest.mark.parametrize("op, algo, gpus", [
    ("allreduce", "hier", range(16)), ("allreduce", "tree", [0, 8, 16, 24]),
    ("allgather", "ring", [0, 8, 16, 24]), ("reducescatter", "ring", range(32)),
    ("alltoall", "direct", [0, 1, 9, 18, 27]),
])
def test_replay_matches_a_fresh_compile(op, algo, gpus):
    fabric = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    size = 3e7
    fresh, replayed = TaskGraph(), TaskGraph()
    delay_a, delay_b = fresh.add_delay(1e-3), replayed.add_delay(1e-3)
    first = compile_into(fresh, fabric, op, gpus, size, algo=algo)
    again = compile_collective(fresh, fabric, op, gpus, size, algo=algo, deps=[delay_a])
    c = compile_into(replayed, fabric, op, gpus, size, algo=algo)
    back = replay(replayed, c, deps=[delay_b])
    assert len(fresh) == len(replayed)
    a, b = simulate(fresh, fabric.link_capacity), simulate(replayed, fabric.link_capacity)
    assert b.finish[back[0]] == pytest.approx(a.finish[again[0]], rel=1e-12)
    assert b.finish[c.final[0]] == pytest.approx(a.finish[first.final[0]], rel=1e-12)
    assert np.allclose(a.link_bytes, b.link_bytes)


def test_compile_groups_with_a_cache_replays_and_counts_bytes_each_time():
    fabric = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    graph, cache = TaskGraph(), {}
    groups = np.array([[0, 8], [1, 9]])
    done1, _, sent1 = compile_groups(graph, fabric, "allgather", groups, 1e6, cache=cache)
    done2, _, sent2 = compile_groups(graph, fabric, "allgather", groups, 1e6, deps=[done1],
                                     cache=cache)
    # two collectives compiled; the second call replays each through a recording
    compiled = [k for k in cache if k[0] != "replay"]
    assert len(compiled) == 2 and len(cache) == 4 and sent1 == sent2 == 2 * 2 * 0.5e6
    sim = simulate(graph, fabric.link_capacity)
    assert sim.finish[done2] == pytest.approx(2 * sim.finish[done1], rel=1e-12)


@pytest.mark.parametrize("op, algo, gpus", [
    ("allreduce", "hier", range(16)), ("allreduce", "tree", [0, 8, 16, 24]),
    ("allgather", "ring", [0, 8, 16, 24]), ("alltoall", "direct", [0, 1, 9, 18, 27]),
])
def test_a_recorded_replay_adds_exactly_the_tasks_of_replay(op, algo, gpus):
    # compile_groups replays a cached collective through a recorded fragment; the frozen
    # graph must be the one replay() builds call by call, array for array, after one and
    # after several dependencies (a stage's barrier), twice (the recording reused)
    fabric = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    groups = np.array([list(gpus)])
    direct, recorded, cache = TaskGraph(), TaskGraph(), {}
    for graph in (direct, recorded):
        graph.add_delay(1e-3)
        graph.add_delay(2e-3)
    c = compile_into(direct, fabric, op, groups[0], 3e7, algo=algo, deps=[0])
    compile_groups(recorded, fabric, op, groups, 3e7, CollectiveOptions(algo=algo), deps=[0],
                   cache=cache)
    for deps in ([0], [0, 1], [1], [0, 1]):
        finals = replay(direct, c, deps=deps)
        done, _, _ = compile_groups(recorded, fabric, op, groups, 3e7,
                                    CollectiveOptions(algo=algo), deps=deps, cache=cache)
        assert done == finals[0]
    assert sum(k[0] == "replay" for k in cache) == 2          # one per number of deps
    a, b = direct.arrays(fabric.n_links), recorded.arrays(fabric.n_links)
    for name in a.__dataclass_fields__:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert direct.names == recorded.names
    # the packet engine moves each member on its own path: the replay keeps them too
    for mine, theirs in zip(direct.member_paths(), recorded.member_paths(), strict=True):
        assert np.array_equal(mine, theirs)
