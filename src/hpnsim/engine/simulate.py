"""simulate(graph, capacity) -> SimResult, and run_flows for plain flows: one-shot runs."""

from __future__ import annotations

import numpy as np

from hpnsim.engine.simresult import SimResult
from hpnsim.engine.simulation import Simulation
from hpnsim.engine.taskgraph import TaskGraph
from hpnsim.engine.validate import check_length


def simulate(graph: TaskGraph, capacity, *, capacity_events=()) -> SimResult:
    """Run the task graph on links of the given capacity; exact max-min at every event.

    Parameters
    ----------
    graph : TaskGraph
    capacity : array of float, shape (n_links,)
        Bytes/s per link.
    capacity_events : sequence of (time, link, capacity)
        Set a link's capacity at a time (0 takes it down; a later event restores it).

    Examples
    --------
    Two 100-byte flows share link 0 (10 B/s); the second also needs 50 more bytes:

    >>> g = TaskGraph()
    >>> a = g.add_transfer([0], 1.0, 100.0)
    >>> b = g.add_transfer([0], 1.0, 150.0)
    >>> c = g.add_delay(1.0, deps=[a, b])
    >>> r = simulate(g, [10.0])
    >>> r.finish.tolist(), r.link_bytes.tolist()
    ([20.0, 25.0, 26.0], [250.0])
    """
    sim = Simulation(graph, capacity, capacity_events=capacity_events)
    sim.run()
    return sim.result()


def run_flows(capacity, paths, sizes, starts=None, priority=None) -> np.ndarray:
    """Finish time of each plain flow (one max-min variable per flow).

    Parameters
    ----------
    capacity : array of float
        Bytes/s per link.
    paths : Paths or sequence of sequences of int
        Link ids of each flow (CSR ``ptr``/``links``/``weight`` or plain lists).
    sizes : float or array of float
        Bytes per flow (a scalar, or one value per path).
    starts : float or array of float, optional
        Start time per flow (default 0).
    priority : int or array of int, optional
        Strict priority class per flow (lower first).

    Returns
    -------
    numpy.ndarray
        Finish time per flow (``inf`` if it could not finish).

    Examples
    --------
    Flows of 10 and 30 bytes share a 2 B/s link: both get 1 B/s until t=10, then the
    second gets 2 B/s for its last 20 bytes.

    >>> run_flows([2.0], [[0], [0]], [10.0, 30.0]).tolist()
    [10.0, 20.0]
    """
    graph = TaskGraph()
    n = len(paths.ptr) - 1 if hasattr(paths, "ptr") else len(paths)
    check_length(starts, n, "starts")  # add_transfers checks sizes and priority, not by this name
    graph.add_transfers(paths, sizes, priority=0 if priority is None else priority,
                        release=0.0 if starts is None else starts)
    result = simulate(graph, capacity)
    assert result.finish.shape == (n,)
    return result.finish
