"""Communication helpers of the training compiler: collectives over sets of groups, timed
alone on the fabric or compiled into the iteration graph, with the bytes they put on the wire.

Bytes are counted from the compiled schedules (payload each member flow carries, summed over
the flows), so they are what the simulated algorithms really move — the figure
:mod:`hpnsim.workloads.traffic` derives in closed form.

An iteration repeats the same collective (same group, size, algorithm) many times: every
ZeRO-3 unit every micro-batch, every full gradient bucket. Compiling (scheduling and routing)
it once and *replaying* its transfer groups with new dependencies gives the same tasks for a
fraction of the cost; :func:`replay` mirrors how
:func:`hpnsim.collectives.planning.compile.compile_into` turns a schedule into tasks.
"""

from __future__ import annotations

import numpy as np

from hpnsim.collectives import CollectiveOptions, compile_into
from hpnsim.collectives.closed_form.cost import schedule_latencies
from hpnsim.engine import TaskGraph, simulate
from hpnsim.engine.fragment import GraphFragment


def replay(graph: TaskGraph, compiled, deps=(), name: str = "") -> list[int]:
    """Add the transfer groups of an already compiled collective to ``graph`` again, after
    ``deps``.

    The routes, schedule, protocol and latencies are those of ``compiled`` (one connection
    per peer, priority 0, weight 1, as the iteration compiles them).

    Parameters
    ----------
    graph : TaskGraph
    compiled : CompiledCollective
        From :func:`~hpnsim.collectives.compile_into` (on any graph of the same fabric).
    deps : sequence of int
        The copy starts after these tasks.
    name : str
        Label of its tasks (default ``op/algo``).

    Returns
    -------
    list of int
        Its final task ids (as :func:`~hpnsim.collectives.compile_collective`).

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> g = TaskGraph()
    >>> c = compile_into(g, fab, "allgather", [0, 8], 2e6, algo="ring")
    >>> again = replay(g, c, deps=c.final)
    >>> sim = simulate(g, fab.link_capacity)
    >>> bool(abs(sim.finish[again[0]] - 2 * sim.finish[c.final[0]]) < 1e-15)
    True
    """
    base, nvlink_hop, net_hop = schedule_latencies(compiled.schedule, compiled.algo,
                                                   compiled.protocol, compiled.nccl)
    efficiency = compiled.nccl.protocol_efficiency(compiled.protocol) * compiled.qps
    from hpnsim.collectives.planning.paths import payload_paths

    paths = compiled.wire_paths     # links weighted by wire bytes per payload byte
    payload = payload_paths(compiled.schedule, compiled.paths, compiled.nccl)
    label = name or f"{compiled.schedule.op}/{compiled.algo}"
    deps = [int(d) for d in deps]
    stage_tasks: list[list[int]] = []
    for i, stage in enumerate(compiled.schedule.stages):
        latency = stage.intra_steps * nvlink_hop + stage.inter_steps * net_hop
        if stage.deps:
            stage_deps = [t for d in stage.deps for t in stage_tasks[d]]
        else:
            latency += base + compiled.fill
            stage_deps = deps
        wire = stage.size / efficiency
        if stage.coupled:
            stage_tasks.append([graph.add_transfer_paths(paths[i], wire, deps=stage_deps,
                                                         latency=latency, members=payload[i],
                                                         name=f"{label}/{stage.name}",
                                                         channel=stage.channel)])
            continue
        tasks = graph.add_transfers(paths[i], wire, latency=latency,
                                    members=payload[i]).tolist()
        if len(stage_deps) > 1:
            stage_deps = [graph.add_delay(0.0, deps=stage_deps, name=f"{label}/sync{i}")]
        for t in tasks:
            for d in stage_deps:
                graph.add_dependency(t, d)
        stage_tasks.append(tasks)
    final = [t for i in compiled.schedule.final for t in stage_tasks[i]]
    if len(final) > 1:
        final = [graph.add_delay(0.0, deps=final, name=f"{label}/done")]
    return final


def sent_bytes(compiled) -> float:
    """Payload bytes all members of a compiled collective send (protocol overhead excluded).

    Parameters
    ----------
    compiled : CompiledCollective

    Returns
    -------
    float

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> c = compile_into(TaskGraph(), fab, "alltoall", [0, 8], 1000.0)
    >>> sent_bytes(c)                   # each of 2 GPUs sends half its buffer to the other
    1000.0
    """
    return float(sum(stage.total_bytes for stage in compiled.schedule.stages))


def compile_groups(graph: TaskGraph, fabric, op: str, groups, size: float,
                   options: CollectiveOptions = CollectiveOptions(), *, deps=(), name: str = "",
                   cache: dict | None = None) -> tuple[int, list[int], float]:
    """Compile ``op`` with ``options`` on every group (rows of ``groups``) after ``deps``.

    Returns ``(done, first_tasks, bytes)``: a zero-length task finishing with the last group,
    the tasks that start the collectives (for timelines) and the bytes they send. Groups of
    one GPU move nothing and are skipped; with none left, ``done`` is -1. With a ``cache``
    dict, a collective compiled before (same op, group, size and options) is replayed
    (:func:`replay`) instead of compiled again.

    Parameters
    ----------
    graph : TaskGraph
    fabric : Fabric
    op : str
    groups : 2-D array of int
        One group of GPUs (rank order) per row.
    size : float
        Bytes, nccl-tests convention.
    options : CollectiveOptions
        How each collective runs.
    deps : sequence of int
        Every group starts after these tasks.
    name : str
        Label of the tasks.
    cache : dict, optional
        Compiled collectives to replay, filled as it goes.

    Returns
    -------
    tuple
        ``(done, first_tasks, bytes)`` as above.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> g = TaskGraph()
    >>> done, first, sent = compile_groups(g, fab, "allgather", [[0, 8], [1, 9]], 2e6,
    ...                                    CollectiveOptions(algo="ring"))
    >>> sent                            # (n-1)/n of 2 MB from each of the 4 GPUs
    4000000.0
    """
    finals: list[int] = []
    first: list[int] = []
    total = 0.0
    for group in np.asarray(groups):
        if group.size < 2:
            continue
        key = (op, group.tobytes(), float(size), options)
        compiled = cache.get(key) if cache is not None else None
        if compiled is None:
            compiled = compile_into(graph, fabric, op, group, size, options, deps=deps,
                                    name=name)
            finals += compiled.final
            first += [int(t) for t in compiled.stage_tasks[0]] if compiled.stage_tasks else []
            if cache is not None:
                cache[key] = compiled
        else:
            first.append(len(graph))  # replay adds the first stage's transfers first
            finals += _replay_recorded(graph, compiled, deps, name, cache, key)
        total += sent_bytes(compiled)
    if not finals:
        return -1, [], 0.0
    done = finals[0] if len(finals) == 1 else graph.add_delay(0.0, deps=finals,
                                                               name=f"{name} done")
    return done, first, total


def _replay_recorded(graph: TaskGraph, compiled, deps, name: str, cache: dict,
                     key: tuple) -> list[int]:
    """:func:`replay` through a recorded fragment: the first replay of ``compiled`` with
    this ``name`` and number of ``deps`` runs on a scratch graph and is recorded
    (:class:`~hpnsim.engine.fragment.GraphFragment`, kept in ``cache``); every replay
    appends the recording, the same tasks :func:`replay` would add, without re-merging
    every path."""
    deps = [int(d) for d in deps]
    slot = ("replay", key, name, len(deps))
    found = cache.get(slot)
    if found is None:
        scratch = TaskGraph()
        outside = [scratch.add_delay(0.0) for _ in deps]
        final = replay(scratch, compiled, outside, name)
        found = (GraphFragment.record(scratch, len(outside), outside),
                 [t - len(outside) for t in final])
        cache[slot] = found
    fragment, final = found
    base = fragment.append_to(graph, deps)
    return [base + t for t in final]


def time_groups(fabric, op: str, groups, size: float,
                options: CollectiveOptions = CollectiveOptions()) -> tuple[float, float]:
    """``(seconds, bytes)`` of ``op`` run with ``options`` at once on every group of
    ``groups``, nothing else on the fabric (so collisions between the groups count).

    Parameters
    ----------
    fabric : Fabric
    op : str
    groups : 2-D array of int
        One group of GPUs per row.
    size : float
        Bytes, nccl-tests convention.
    options : CollectiveOptions
        How each collective runs.

    Returns
    -------
    tuple of float
        ``(seconds, bytes)``; ``(0, 0)`` when every group has one GPU.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> t, sent = time_groups(fab, "alltoall", [[0, 8], [1, 9]], 2**20)
    >>> bool(t > 0), sent
    (True, 2097152.0)
    """
    graph = TaskGraph()
    done, _, total = compile_groups(graph, fabric, op, groups, size, options)
    if done < 0:
        return 0.0, 0.0
    sim = simulate(graph, fabric.link_capacity)
    return float(sim.finish[done]), total
