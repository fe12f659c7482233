"""An engine task graph run as packets: the flow engine's work (:class:`~hpnsim.engine.
TaskGraph`) with every transfer member moved as packets over its own path.

How a graph becomes packet-engine flows and waits (:func:`graph_flows`):

* a **delay** task (compute) is a wait of its duration; it starts at its release time once
  the tasks it depends on are done, as in the flow engine;
* a **transfer** task is a gate, a wait of the transfer's ``latency`` (NCCL's software
  latency terms, which the flow engine also adds before bytes flow), then one flow per
  member path, each of ``size x weight`` bytes; a member given as several legs (a PXN relay:
  NVLink to the GPU beside the right NIC, then the network) is one flow per leg, each leg
  leaving when the previous one has delivered; the transfer is done when its last flow is
  (a zero wait joins several);
* a task waiting for others waits for their done nodes.

QPs persist across transfers (:class:`QpScope`, default ``CONNECTION``), as NCCL's do: NCCL
2.18.3 creates a connection's QPs once, when the communicator connects its peers
(``ncclIbConnect``/``ncclIbAccept`` in ``src/transport/net_ib.cc``, called from the transport
setup of ``src/transport.cc``), and every later collective and step on that channel posts
its work requests on them; ConnectX keeps DCQCN's reaction point (rate, target rate, alpha,
timers) per QP. A connection is identified by its transfer's channel (``channels``: per
task, its connection id, e.g. ``TaskGraph.channels``; none: the route alone), its member's legs
(link ids: source NIC port, route, destination NIC port; a PXN relay's NVLink leg names
the source GPU) and its rank among the members of its transfer with the same legs (QPs of
one channel that ECMP hashes onto one route stay two connections); leg i of that member in
every transfer runs on one packet-engine QP, which sends its flows in order and carries
its DCQCN state from one transfer to the next. ``FLOW`` gives
every flow a fresh QP (line rate, alpha 1). Flows run in the data priority class; a graph
whose transfers use several priority classes or max-min weights other than 1 is refused (the
packet engine shares ports by its queues, not by weights).

>>> import numpy as np
>>> from hpnsim.engine import TaskGraph
>>> from hpnsim.packet import PacketParams
>>> g = TaskGraph()
>>> a = g.add_delay(2e-6)
>>> b = g.add_transfer_paths([[0, 1]], 4096.0, deps=[a], latency=1e-6)
>>> c = g.add_delay(3e-6, deps=[b])
>>> task, ptr, links, weight = g.member_paths()
>>> legs = [(links[ptr[i]:ptr[i + 1]],) for i in range(task.size)]
>>> run = simulate_graph([1e9, 1e9], 1e-6, g.arrays(2), task, legs, weight,
...                      params=PacketParams(header_bytes=0, framing_bytes=0),
...                      switch_of=[-1, 0])
>>> [round(float(x) * 1e6, 3) for x in run.finish]   # 2 + 1 + 2 x (4.096 + 1) + 3
[2.0, 13.192, 16.192]
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from hpnsim.engine.taskgraph import DELAY, TRANSFER, GraphArrays
from hpnsim.errors import InputError
from hpnsim.packet.api import simulate_flows
from hpnsim.packet.params import PacketParams
from hpnsim.packet.result import PacketResult

__all__ = ["GraphFlows", "GraphRun", "QpScope", "graph_flows", "simulate_graph"]


class QpScope(Enum):
    """Which flows of a graph share a QP (and its DCQCN state)."""

    CONNECTION = "connection"   # a connection's flows, across transfers (NCCL: QPs per job)
    FLOW = "flow"               # none: every flow starts with a fresh QP


@dataclass
class GraphFlows:
    """Flows and waits of a task graph (:func:`graph_flows`): ``paths[i]``, ``sizes[i]`` of
    flow i; ``waits[j]`` the duration of node ``n_flows + j``; ``starts`` and ``deps`` per node
    (flows, then waits); ``gate[t]`` and ``done[t]`` the nodes where task t starts and ends."""

    paths: list
    sizes: np.ndarray
    waits: np.ndarray
    starts: np.ndarray
    deps: list
    gate: np.ndarray
    done: np.ndarray
    packet_hops: float
    qp: np.ndarray

    @property
    def n_flows(self) -> int:
        """Flows (the nodes before the waits)."""
        return len(self.paths)


@dataclass
class GraphRun:
    """Outcome of :func:`simulate_graph`: per task its ``start`` and ``finish`` (as the flow
    engine's :class:`~hpnsim.engine.SimResult` gives them; ``inf`` if it never ran), the
    packet run of all its flows (``result``) and the flows it was built from."""

    start: np.ndarray
    finish: np.ndarray
    result: PacketResult
    flows: GraphFlows

    @property
    def makespan(self) -> float:
        """When the last task finished."""
        return float(self.finish.max(initial=0.0))


def _check_classes(arrays: GraphArrays) -> None:
    moving = arrays.kind == TRANSFER
    if np.unique(arrays.priority[moving]).size > 1:
        raise InputError("priority", "the packet engine runs a graph in one priority class; "
                                     "its transfers use several: use the flow engine")
    if np.any(arrays.weight[moving] != 1.0):
        raise InputError("weight", "the packet engine shares ports by queues, not max-min "
                                   "weights; the graph has weights other than 1: use the flow "
                                   "engine")


def graph_flows(arrays: GraphArrays, member_task, member_legs, member_weight,
                mtu: float = 4096.0, qps: QpScope = QpScope.CONNECTION,
                channels=None) -> GraphFlows:
    """Flows, waits and dependencies of a frozen task graph (see the module docstring).

    Parameters
    ----------
    arrays : GraphArrays
        ``TaskGraph.arrays(n_links)``.
    member_task, member_legs, member_weight : per member path of the transfers
        (:meth:`~hpnsim.engine.TaskGraph.member_paths`): its transfer, its legs (a tuple of
        link-id arrays crossed one after another), bytes per byte of the transfer's size.
    mtu : bytes per packet, to count packet hops (:attr:`GraphFlows.packet_hops`).
    qps : QpScope
        Which flows share a QP (module docstring).
    channels : sequence, optional
        Per task, a hashable naming its channel (connections of different channels never
        share a QP), or None: the task's flows get fresh QPs; default: one channel.

    Returns
    -------
    GraphFlows

    Examples
    --------
    A compute, then a transfer of two members (the second relayed over two legs):

    >>> from hpnsim.engine import TaskGraph
    >>> g = TaskGraph(); a = g.add_delay(1.0)
    >>> b = g.add_transfer_paths([[0, 2], [1, 2]], 8192.0, deps=[a])
    >>> fl = graph_flows(g.arrays(3), [1, 1], [([0, 2],), ([1], [2])], [1.0, 1.0])
    >>> fl.n_flows, fl.waits.tolist(), fl.deps, fl.packet_hops
    (3, [1.0, 0.0, 0.0], [[4], [4], [1], [], [3], [0, 2]], 8.0)

    Two transfers over one route, the second of two members: its first member reuses the
    first transfer's QP, its second (the same route again) is a connection of its own:

    >>> g = TaskGraph(); a = g.add_transfer_paths([[0, 1]], 8192.0)
    >>> b = g.add_transfer_paths([[0, 1], [0, 1]], 8192.0, deps=[a])
    >>> legs = [([0, 1],)] * 3
    >>> graph_flows(g.arrays(2), [0, 1, 1], legs, [1.0] * 3).qp.tolist()
    [0, 0, 1]
    >>> graph_flows(g.arrays(2), [0, 1, 1], legs, [1.0] * 3, qps=QpScope.FLOW).qp.tolist()
    [0, 1, 2]
    """
    _check_classes(arrays)
    n_tasks = arrays.kind.size
    member_task = np.asarray(member_task, dtype=np.int64)
    member_weight = np.asarray(member_weight, dtype=np.float64)
    rows_of = [[] for _ in range(n_tasks)]
    for r, t in enumerate(member_task.tolist()):
        rows_of[t].append(r)
    missing = [t for t in np.flatnonzero(arrays.kind == TRANSFER).tolist() if not rows_of[t]]
    if missing:
        raise InputError("graph", f"transfer task {missing[0]} has no member paths (added "
                                  f"from links and usage, or copied): the packet engine "
                                  f"needs each member's path")
    paths, sizes, flow_deps, flow_qp = [], [], [], []
    qp_of: dict[tuple, int] = {}    # (channel, member's legs, rank in transfer, leg) -> QP
    waits, wait_starts, wait_deps = [], [], []
    gate = np.zeros(n_tasks, dtype=np.int64)
    done = np.zeros(n_tasks, dtype=np.int64)
    hops = 0.0

    def wait(duration, start, deps) -> int:     # wait ids count from 0 until renumbered
        waits.append(float(duration))
        wait_starts.append(float(start))
        wait_deps.append(deps)
        return -1 - (len(waits) - 1)

    dep_lists = [arrays.deps[arrays.dep_ptr[t]:arrays.dep_ptr[t + 1]].tolist()
                 for t in range(n_tasks)]
    for t in range(n_tasks):                  # dependencies point back: done[] is known
        deps = [int(done[d]) for d in dep_lists[t]]
        if arrays.kind[t] == DELAY:
            gate[t] = done[t] = wait(arrays.amount[t], arrays.release[t], deps)
            continue
        gate[t] = wait(arrays.latency[t], arrays.release[t], deps)
        ends = []
        rank: dict[tuple, int] = {}     # members of this transfer with the same legs so far
        channel = None if channels is None else channels[t]
        shared = qps is QpScope.CONNECTION and (channels is None or channel is not None)
        for r in rows_of[t]:
            route = tuple(tuple(np.asarray(leg, dtype=np.int64).tolist())
                          for leg in member_legs[r])
            k = rank[route] = rank.get(route, -1) + 1
            size = float(arrays.amount[t] * member_weight[r])
            if size <= 0:
                continue
            behind = int(gate[t])
            for i, leg in enumerate(member_legs[r]):
                leg = np.asarray(leg, dtype=np.int64)
                key = (channel, route, k, i) if shared else len(paths)
                flow_qp.append(qp_of.setdefault(key, len(qp_of)))
                paths.append(leg)
                sizes.append(size)
                flow_deps.append([behind])
                behind = len(paths) - 1
                hops += float(np.ceil(size / mtu)) * leg.size
            ends.append(behind)
        done[t] = ends[0] if len(ends) == 1 else wait(0.0, 0.0, ends) if ends else gate[t]
    n = len(paths)

    def node(x: int) -> int:                  # waits follow the flows
        return x if x >= 0 else n + (-1 - x)

    gate = np.array([node(int(x)) for x in gate], dtype=np.int64)
    done = np.array([node(int(x)) for x in done], dtype=np.int64)
    deps = [[node(x) for x in d] for d in flow_deps + wait_deps]
    starts = np.concatenate([np.zeros(n), np.asarray(wait_starts, dtype=np.float64)])
    return GraphFlows(paths, np.asarray(sizes, dtype=np.float64),
                      np.asarray(waits, dtype=np.float64), starts, deps, gate, done, hops,
                      np.asarray(flow_qp, dtype=np.int64))


def simulate_graph(capacity, delay, arrays: GraphArrays, member_task, member_legs,
                   member_weight, params: PacketParams | None = None, *, flows=None,
                   qps: QpScope = QpScope.CONNECTION, channels=None, **options) -> GraphRun:
    """Run a frozen task graph as packets (see the module docstring).

    Parameters
    ----------
    capacity, delay : per link, bytes/s and seconds (as :func:`~hpnsim.packet.simulate_flows`).
    arrays, member_task, member_legs, member_weight : as :func:`graph_flows`.
    params : PacketParams (default: the ``connectx`` set).
    flows : GraphFlows, optional
        Already built by :func:`graph_flows` (to check its size before running).
    qps, channels : as :func:`graph_flows`, when ``flows`` is not given.
    **options
        Of :func:`~hpnsim.packet.simulate_flows` (``switch_of``, ``watch``,
        ``sample_interval``, ``histograms``, ...).

    Returns
    -------
    GraphRun

    Examples
    --------
    See the module docstring.
    """
    p = (params or PacketParams()).validate()
    fl = flows if flows is not None else graph_flows(arrays, member_task, member_legs,
                                                     member_weight, p.mtu_bytes, qps,
                                                     channels)
    res = simulate_flows(capacity, delay, fl.paths, fl.sizes, fl.starts, p, deps=fl.deps,
                         waits=fl.waits, qp=fl.qp, **options)
    finish = np.asarray(res.finish, dtype=np.float64)
    lead = np.where(arrays.kind == DELAY, arrays.amount, arrays.latency)
    gate_finish = finish[fl.gate]
    return GraphRun(start=gate_finish - lead, finish=finish[fl.done].copy(), result=res,
                    flows=fl)
