"""TaskGraph.arrays() after a previous freeze appends only the tasks added since: its arrays
must equal those of the same graph frozen once at the end, and its checks (unknown links,
unknown dependencies, cycles) must still fire on the new tasks."""

import dataclasses

import numpy as np
import pytest

from hpnsim.engine import TaskGraph
from hpnsim.errors import InputError


def _build(graph: TaskGraph, freeze_between: bool, n_links: int = 6):
    """Transfers, delays, copies of a small template and plain flows, in four batches;
    ``freeze_between`` freezes after each batch (the incremental path)."""
    tpl = TaskGraph()
    start = tpl.add_delay(0.5, release=1.0)
    a = tpl.add_transfer([2, 1, 2], [1.0, 2.0, 0.5], 4.0, deps=[start])
    tpl.add_transfer([3], 1.0, 2.0, deps=[a, start], latency=0.1)
    frozen_tpl = tpl.arrays(n_links)
    batches = [
        lambda: (graph.add_transfer([0, 1], 1.0, 10.0, name="x"), graph.add_delay(2.0)),
        lambda: graph.append_copy(frozen_tpl, release=0.5, after=[0], priority=2),
        lambda: graph.add_transfers([[4], [5, 4]], [1.0, 3.0], deps=[1, 2], priority=[1, 0]),
        lambda: graph.append_copy(frozen_tpl, after=[len(graph) - 1, 3], priority=1),
    ]
    for batch in batches:
        batch()
        if freeze_between:
            graph.arrays(n_links)
    return graph.arrays(n_links)


def test_incremental_freeze_equals_one_freeze_of_the_whole_graph():
    pieces = _build(TaskGraph(), freeze_between=True)
    whole = _build(TaskGraph(), freeze_between=False)
    assert pieces.kind.size == 2 + 3 + 2 + 3
    for f in dataclasses.fields(whole):
        a, b = getattr(pieces, f.name), getattr(whole, f.name)
        assert a.dtype == b.dtype and np.array_equal(a, b), f.name
    # the second copy (ids 7-9) waits for the flows 5, 6 and task 3: its start task's deps
    assert sorted(whole.deps[whole.dep_ptr[7]:whole.dep_ptr[8]].tolist()) == [3, 6]


def test_incremental_freeze_checks_the_new_tasks():
    g = TaskGraph()
    g.add_transfer([0], 1.0, 1.0)
    g.arrays(2)
    g.add_transfer([2], 1.0, 1.0)
    with pytest.raises(InputError, match="task 1 uses unknown link id 2"):
        g.arrays(2)
    h = TaskGraph()
    h.add_delay(1.0)
    h.arrays(1)
    h.add_delay(1.0, deps=[5])
    with pytest.raises(InputError, match="depends on unknown task 5"):
        h.arrays(1)


def test_a_dependency_added_to_an_old_task_refreezes_and_finds_the_cycle():
    g = TaskGraph()
    a = g.add_delay(1.0)
    b = g.add_delay(1.0, deps=[a])
    g.arrays(1)
    g.add_dependency(a, b)
    with pytest.raises(InputError, match="dependency cycle"):
        g.arrays(1)
    h = TaskGraph()
    a = h.add_delay(1.0)
    h.arrays(1)
    b = h.add_delay(1.0)
    h.add_dependency(a, b)     # the old task a now waits for the new b
    arr = h.arrays(1)
    assert arr.deps[arr.dep_ptr[a]:arr.dep_ptr[a + 1]].tolist() == [b]
