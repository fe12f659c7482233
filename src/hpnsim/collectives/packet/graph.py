"""A task graph on a fabric through the packet engine: the graph the flow engine runs
(:class:`~hpnsim.engine.TaskGraph`: compute and other waits, transfers with their member
paths, dependencies) moved as packets (:func:`hpnsim.packet.graph.simulate_graph`).

What each member path becomes (:func:`member_legs`):

* a path that crosses the network is cut to its NIC-to-NIC leg, as the ring path does
  (:func:`hpnsim.packet.adapter.network_legs`: DCQCN paces at the NIC; GPU-NIC PCIe hops
  are not simulated); NVLink hops before the NIC (a PXN relay) are a leg of their own
  before it (:func:`~hpnsim.collectives.packet.run.relayed_legs`);
* a path inside a host keeps its NVLink links (unbuffered, credit-based: no ECN, no PFC);
* a member whose links carry different bytes per byte of the transfer (an NVLS member:
  ``up`` bytes GPU -> NVSwitch, ``down`` bytes NVSwitch -> GPU) runs as one one-link flow per
  link, all at once.

Link rates are those of :func:`~hpnsim.collectives.packet.ports.packet_capacity`: network
links at line rate (headers simulated per packet), NVLink and PCIe at NCCL's efficiency.
A transfer's bytes are the graph's (payload over the protocol's efficiency for collectives);
its ``latency`` (NCCL's software terms; a pipeline message's propagation, which the packets
also take: counted twice, microseconds) is a wait before its flows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from hpnsim.errors import InputError

__all__ = ["GraphPacketRun", "GraphWork", "chain_latency", "check_graph_packet",
           "check_graph_work", "graph_members", "graph_plan", "member_legs", "packet_summary",
           "run_collective_graph_packet", "run_graph_packet", "task_channels"]


def member_legs(fabric, task, ptr, links, weight) -> tuple[np.ndarray, list, np.ndarray]:
    """``(task, legs, weight)`` per packet member of the kept member paths of a graph
    (:meth:`~hpnsim.engine.TaskGraph.member_paths`), as the module docstring says.

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing import route
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> p = route(f, [0, 0], [8, 1], "hpn_dual_plane")
    >>> t, legs, w = member_legs(f, [0, 1], p.ptr, p.links, p.weight)
    >>> [[len(x) for x in leg] for leg in legs], w.tolist()   # NIC to NIC; NVLink in a host
    ([[2], [2]], [1.0, 1.0])
    """
    from hpnsim.fabrics.fabric import LinkKind

    tier = np.asarray(fabric.node_tier)
    access = (tier[np.asarray(fabric.link_src)] == 0) != (tier[np.asarray(fabric.link_dst)] == 0)
    nvlink = np.asarray(fabric.link_kind) == LinkKind.NVLINK
    task = np.asarray(task, dtype=np.int64)
    ptr = np.asarray(ptr, dtype=np.int64)
    links = np.asarray(links, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    out_task, out_legs, out_weight = [], [], []
    for i in range(task.size):
        row, w = links[ptr[i]:ptr[i + 1]], weight[ptr[i]:ptr[i + 1]]
        if row.size == 0:
            continue
        if np.any(w != w[0]):                         # NVLS: every link its own flow
            out_task.extend([task[i]] * row.size)
            out_legs.extend((row[k:k + 1],) for k in range(row.size))
            out_weight.extend(w.tolist())
            continue
        at = np.flatnonzero(access[row])
        if at.size == 0:
            legs = (row,)
        else:
            head = row[:at[0]]
            relay = head[nvlink[head]]
            net = row[at[0]:at[-1] + 1]
            legs = (relay, net) if relay.size else (net,)
        out_task.append(task[i])
        out_legs.append(legs)
        out_weight.append(float(w[0]))
    return (np.asarray(out_task, dtype=np.int64), out_legs,
            np.asarray(out_weight, dtype=np.float64))


def graph_members(fabric, graph, state=None) -> tuple[np.ndarray, list, np.ndarray]:
    """:func:`member_legs` of every member path ``graph`` kept; a leg over a link that
    ``state`` has down is an :class:`~hpnsim.errors.InputError` named ``state``."""
    task, legs, weight = member_legs(fabric, *graph.member_paths())
    if state is not None and legs:
        used = np.concatenate([np.asarray(x, dtype=np.int64) for leg in legs for x in leg])
        dead = used[~np.asarray(state.up)[used]]
        if dead.size:
            raise InputError("state", f"no path around the down link "
                                      f"{fabric.link_name(int(dead[0]))}: it cannot run")
    return task, legs, weight


def task_channels(graph) -> list:
    """Per task of ``graph``, the connection id its transfers run on, as the compiler
    recorded it (:attr:`~hpnsim.engine.TaskGraph.channels`: a coupled stage's
    :attr:`~hpnsim.collectives.schedules.schedule.Stage.channel`, its
    :class:`~hpnsim.collectives.schedules.schedule.ChannelKind`, lane and NCCL channel). Transfers
    of one id reuse its connections' QPs (:class:`hpnsim.packet.graph.QpScope`). A task
    with none (-1: the per-member transfers of an uncoupled stage, pipeline sends, delays)
    gives None: its flows get fresh QPs.

    >>> from hpnsim.collectives import compile_into
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import hpn7
    >>> g = TaskGraph()
    >>> c = compile_into(g, hpn7(segments=1, hosts_per_segment=2, backup_hosts=0),
    ...                  "allreduce", range(16), 2**20, algo="ring", name="dp")
    >>> task_channels(g)[:2] == [c.schedule.stages[0].channel, c.schedule.stages[1].channel]
    True
    >>> task_channels(g)[:2]                    # ChannelKind.RING, lane 0, channels 0 and 1
    [0, 1]
    """
    return [c if c >= 0 else None for c in graph.channels]


@dataclass
class GraphPacketRun:
    """:class:`~hpnsim.packet.graph.GraphRun` of a graph on a fabric, with the links it
    watched and their names, and the packet hops estimated before it ran."""

    run: object
    watch: np.ndarray
    watch_names: list
    packets_estimated: float
    capacity: np.ndarray
    switch_of: np.ndarray


def _watch(fabric, legs, switch_of, watch, max_watch) -> np.ndarray:
    if len(watch):
        return np.asarray(watch, dtype=np.int64)
    if not legs:
        return np.zeros(0, dtype=np.int64)
    used = np.concatenate([np.asarray(x, dtype=np.int64) for leg in legs for x in leg])
    load = np.bincount(used, minlength=fabric.n_links).astype(float)
    load[switch_of < 0] = 0.0
    busy = np.flatnonzero(load > 0)
    return np.sort(busy[np.argsort(-load[busy], kind="stable")][:max_watch])


@dataclass
class GraphWork:
    """A graph checked for the packet engine (:func:`check_graph_work`): its frozen arrays,
    packet members (task, legs, weight), flows and the packet parameters."""

    arrays: object
    members: tuple
    flows: object
    params: object


def check_graph_work(fabric, graph, run, *, state=None, what: str = "the graph",
                     flag: str = "--max-packets") -> GraphWork:
    """Build the packet flows of ``graph`` and refuse them, in one line named
    ``max_packets`` (naming ``flag``), when their packet hops exceed ``run.max_packets``;
    nothing is simulated.

    >>> from hpnsim.collectives import compile_into
    >>> from hpnsim.collectives.packet.run import PacketRun
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> g = TaskGraph()
    >>> c = compile_into(g, f, "alltoall", [0, 8], 2**20)
    >>> check_graph_work(f, g, PacketRun(max_packets=10))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: max_packets: the graph would simulate ~560 packet hops, over the limit 10: raise --max-packets
    """
    from hpnsim.packet import PacketParams
    from hpnsim.packet.graph import graph_flows

    params = (run.params or PacketParams()).validate()
    arrays = graph.arrays(fabric.n_links)
    members = graph_members(fabric, graph, state)
    flows = graph_flows(arrays, *members, params.mtu_bytes, channels=task_channels(graph))
    if flows.packet_hops > run.max_packets:
        raise InputError("max_packets", f"{what} would simulate ~{flows.packet_hops:.3g} "
                                        f"packet hops, over the limit {run.max_packets:.3g}: "
                                        f"raise {flag}")
    return GraphWork(arrays, members, flows, params)


def run_graph_packet(fabric, graph, nccl, run, *, state=None, horizon: float | None = None,
                     what: str = "the graph", work: GraphWork | None = None) -> GraphPacketRun:
    """Run ``graph`` (built for ``fabric``) as packets, after :func:`check_graph_work`.

    Parameters
    ----------
    fabric : Fabric
    graph : TaskGraph
        With member paths (compiled collectives and iterations keep them).
    nccl : NcclParams
        Link efficiencies (NVLink and PCIe rates).
    run : :class:`~hpnsim.collectives.packet.run.PacketRun`
        Packet parameters, work limit, watched ports, samples.
    state : FabricState, optional
        Link capacities and down links.
    horizon : float, optional
        Expected run time, to space the queue samples (default: from the bytes).
    what : str
        How the refusal names the work.
    work : GraphWork, optional
        Already checked (:func:`check_graph_work`).

    Returns
    -------
    GraphPacketRun

    Examples
    --------
    >>> from hpnsim.collectives import compile_into
    >>> from hpnsim.collectives.packet.run import PacketRun
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> g = TaskGraph()
    >>> c = compile_into(g, f, "alltoall", [0, 8], 2**20)
    >>> r = run_graph_packet(f, g, c.nccl, PacketRun())
    >>> bool(r.run.finish[c.final[0]] > 0), int(r.run.result.drops.sum())
    (True, 0)
    """
    from hpnsim.collectives.packet.ports import packet_capacity
    from hpnsim.packet.adapter import fabric_links
    from hpnsim.packet.graph import simulate_graph

    work = work or check_graph_work(fabric, graph, run, state=state, what=what)
    arrays, flows = work.arrays, work.flows
    links = fabric_links(fabric)          # buffers, reverse links (CNPs, NACKs), framing
    switch_of = links["switch_of"]
    capacity = packet_capacity(fabric, nccl, work.params, state)
    watch = _watch(fabric, work.members[1], switch_of, run.watch, run.max_watch)
    if horizon is None:
        horizon = float(np.sum(flows.sizes)) / float(np.max(capacity)) + float(
            np.sum(arrays.amount[arrays.kind == 1]))
    interval = max(horizon / run.samples, 1e-8)
    result = simulate_graph(capacity, fabric.link_latency, arrays, *work.members, work.params,
                            flows=flows, switch_of=switch_of, reverse=links["reverse"],
                            framed=links["framed"], watch=watch,
                            sample_interval=interval, max_samples=4 * run.samples + 16,
                            pct=(99.0,))
    return GraphPacketRun(result, watch, [fabric.link_name(int(k)) for k in watch],
                          flows.packet_hops, capacity, switch_of)


def packet_summary(fabric, out: GraphPacketRun, watch_chosen: bool = False) -> dict:
    """The packet figures of a graph run, as a collective's JSON ``packet`` section has
    them: events, ECN marks, CNPs, PFC pauses, time paused, drops, the fullest ports and the
    queue over time at the watched ports.

    >>> from hpnsim.collectives import compile_into
    >>> from hpnsim.collectives.packet.run import PacketRun
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> g = TaskGraph(); c = compile_into(g, f, "alltoall", [0, 8], 2**20)
    >>> s = packet_summary(f, run_graph_packet(f, g, c.nccl, PacketRun()))
    >>> s["ecn_marks"], s["pfc_pauses"], s["drops"], s["events"] > 0
    (0, 0, 0, True)
    """
    from hpnsim.collectives.packet.ports import top_ports
    from hpnsim.collectives.packet.result import PacketCollectiveResult

    res = out.run.result
    view = PacketCollectiveResult(*[None] * 14, link_bytes=None, watch=out.watch,
                                  sample_times=res.sample_times, samples=res.samples,
                                  watch_names=out.watch_names, watch_chosen=watch_chosen)
    return {"packets_estimated": out.packets_estimated, "events": res.events,
            "ecn_marks": int(res.marks.sum()), "cnps": int(res.cnps.sum()),
            "pfc_pauses": int(res.pauses.sum()), "paused_time": float(res.paused_time.sum()),
            "drops": int(res.drops.sum()), **res.transport_counters(),
            "ports": top_ports(fabric, res, out.switch_of),
            "queue": view.queue(), "params": res.params}


def chain_latency(plan) -> float:
    """NCCL's software latency along the planned schedule's longest chain of stages (the
    base on the stages that start it, the per-hop terms of each): what the flow engine adds
    to the bytes' time, and what the gates of :func:`run_graph_packet` wait.

    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> plan = plan_collective(hpn7(segments=1, hosts_per_segment=2, backup_hosts=0),
    ...                        "allreduce", range(16), 2**20, algo="ring", protocol="simple")
    >>> round(chain_latency(plan) * 1e6, 3)        # 8.4 + 26 x 3.4 + 4 x 14 (slowest walk)
    152.8
    """
    from hpnsim.collectives.closed_form.cost import schedule_latencies

    base, nvlink_hop, net_hop = schedule_latencies(plan.schedule, plan.algo, plan.protocol,
                                                   plan.nccl)
    ends: list[float] = []
    for stage in plan.schedule.stages:
        own = stage.intra_steps * nvlink_hop + stage.inter_steps * net_hop
        ends.append(own + (max(ends[d] for d in stage.deps) if stage.deps else base))
    return max((ends[i] for i in plan.schedule.final), default=0.0)


def graph_plan(fabric, op: str, gpus, size: float, options, state=None):
    """The plan of a collective that the packet engine runs as its task graph, or None for
    one it runs as NCCL's chunked ring (ring all-reduce, all-gather, reduce-scatter, also
    when ``algo: auto`` picks ring).

    >>> from hpnsim.collectives.planning.options import CollectiveOptions
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> graph_plan(f, "allreduce", range(16), 2**20, CollectiveOptions(algo="ring")) is None
    True
    >>> graph_plan(f, "alltoall", range(16), 2**20, CollectiveOptions()).algo
    'direct'
    """
    from hpnsim.collectives.ops import AUTO, normalize_algorithm, normalize_op
    from hpnsim.collectives.packet.ports import PACKET_OPS
    from hpnsim.collectives.planning.plan import plan_collective

    op, algo = normalize_op(op), normalize_algorithm(options.algo)
    if op in PACKET_OPS and algo == "ring":
        return None
    plan = plan_collective(fabric, op, gpus, size, options, state=state)
    return None if op in PACKET_OPS and algo == AUTO and plan.algo == "ring" else plan


def _compiled(fabric, plan, state):
    from hpnsim.collectives.planning.compile import add_plan
    from hpnsim.engine import TaskGraph

    graph = TaskGraph()
    # whole-step flows, no chunk pipeline: without the flow engine's closed-form NVLS-tree fill
    compiled = add_plan(graph, replace(plan, fill=0.0))
    graph_members(fabric, graph, state)                 # a down link on a path: refused
    return graph, compiled


def check_graph_packet(fabric, plan, run, state=None) -> float:
    """Packet hops of a planned collective run as its task graph; beyond ``run.max_packets``
    an :class:`~hpnsim.errors.InputError` named ``max_packets``.

    >>> from hpnsim.collectives.packet.run import PacketRun
    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> plan = plan_collective(f, "allreduce", range(16), 2**30, algo="tree")
    >>> check_graph_packet(f, plan, PacketRun(max_packets=1e5))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: max_packets: the tree allreduce would simulate ~1.57e+07 packet hops, over the limit 1e+05: raise --max-packets
    """
    graph, _ = _compiled(fabric, plan, state)
    return check_graph_work(fabric, graph, run, state=state,
                            what=f"the {plan.algo} {plan.schedule.op}").flows.packet_hops


def run_collective_graph_packet(fabric, plan, size: float, routing: str, run,
                                state=None):
    """A planned collective run as packets through its compiled task graph (the flow
    engine's whole-step transfers, or its chunks where the plan has them; not NCCL's
    per-chunk pipeline): a :class:`~hpnsim.collectives.packet.result.PacketCollectiveResult`
    whose ``network_time`` is the run less :func:`chain_latency` (``nccl_latency``).

    >>> from hpnsim.collectives.packet.run import PacketRun
    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> plan = plan_collective(f, "alltoall", range(16), 2**24)
    >>> r = run_collective_graph_packet(f, plan, 2**24, "ecmp", PacketRun())
    >>> r.algo, r.engine, r.extrapolated, bool(r.network_time > 0)
    ('direct', 'packet', 0.0, True)
    """
    from hpnsim.collectives.packet.result import packet_collective_result
    from hpnsim.collectives.planning.run import concurrent_link_flows
    from hpnsim.engine import simulate

    graph, compiled = _compiled(fabric, plan, state)
    work = check_graph_work(fabric, graph, run, state=state,
                            what=f"the {plan.algo} {plan.schedule.op}")
    flow = simulate(graph, fabric.link_capacity if state is None else state.capacity)
    horizon = 2 * float(flow.finish[compiled.final].max())
    out = run_graph_packet(fabric, graph, plan.nccl, run, state=state, horizon=horizon,
                           work=work)
    res = out.run.result
    time = float(out.run.finish[compiled.final].max())
    latency = chain_latency(plan)
    max_flows, collisions = concurrent_link_flows(compiled, fabric, state)
    steps = len(plan.schedule.stages)
    return packet_collective_result(
        fabric, res, op=plan.schedule.op, size=size, time=time, busy_time=time,
        link_bytes=res.tx_bytes, capacity=out.capacity, switch_of=out.switch_of,
        watch=out.watch, watch_chosen=bool(run.watch), state=state, algo=plan.algo,
        protocol=plan.protocol, routing=routing, n_gpus=plan.schedule.gpus.size,
        max_link_flows=max_flows, hash_collisions=collisions, n_groups=len(graph),
        network_time=time - latency, nccl_latency=latency, steps=steps,
        steps_simulated=steps, extrapolated=0.0, stable=True,
        packets_estimated=out.packets_estimated)
