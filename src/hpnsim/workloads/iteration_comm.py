"""Communication helpers of the iteration simulator: collectives over sets of groups, timed
alone on the fabric or compiled into the iteration graph, with the bytes they put on the wire.

Bytes are counted from the compiled schedules (payload each member flow carries, summed over
the flows), so they are what the simulated algorithms really move — the figure
:mod:`hpnsim.workloads.traffic` derives in closed form.
"""

from __future__ import annotations

import numpy as np

from hpnsim.collectives import compile_into
from hpnsim.engine import TaskGraph, simulate


def sent_bytes(compiled) -> float:
    """Payload bytes all members of a compiled collective send (protocol overhead excluded).

    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> c = compile_into(TaskGraph(), fab, "alltoall", [0, 8], 1000.0)
    >>> sent_bytes(c)                   # each of 2 GPUs sends half its buffer to the other
    1000.0
    """
    return float(sum(stage.total_bytes for stage in compiled.schedule.stages))


def compile_groups(graph: TaskGraph, fabric, op: str, groups, size: float, *, deps=(),
                   algo: str = "auto", routing: str = "ecmp", seed: int = 0,
                   name: str = "") -> tuple[int, list[int], float]:
    """Compile ``op`` on every group (rows of ``groups``) after ``deps``.

    Returns ``(done, first_tasks, bytes)``: a zero-length task finishing with the last group,
    the tasks that start the collectives (for timelines) and the bytes they send. Groups of
    one GPU move nothing and are skipped; with none left, ``done`` is -1.

    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> g = TaskGraph()
    >>> done, first, sent = compile_groups(g, fab, "allgather", [[0, 8], [1, 9]], 2e6,
    ...                                    algo="ring")
    >>> sent                            # (n-1)/n of 2 MB from each of the 4 GPUs
    4000000.0
    """
    finals: list[int] = []
    first: list[int] = []
    total = 0.0
    for group in np.asarray(groups):
        if group.size < 2:
            continue
        compiled = compile_into(graph, fabric, op, group, size, algo=algo, routing=routing,
                                seed=seed, deps=deps, name=name)
        finals += compiled.final
        first += [int(t) for t in compiled.stage_tasks[0]] if compiled.stage_tasks else []
        total += sent_bytes(compiled)
    if not finals:
        return -1, [], 0.0
    done = finals[0] if len(finals) == 1 else graph.add_delay(0.0, deps=finals,
                                                               name=f"{name} done")
    return done, first, total


def time_groups(fabric, op: str, groups, size: float, *, algo: str = "auto",
                routing: str = "ecmp", seed: int = 0) -> tuple[float, float]:
    """``(seconds, bytes)`` of ``op`` run at once on every group of ``groups``, nothing else
    on the fabric (so collisions between the groups count).

    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> t, sent = time_groups(fab, "alltoall", [[0, 8], [1, 9]], 2**20)
    >>> bool(t > 0), sent
    (True, 2097152.0)
    """
    graph = TaskGraph()
    done, _, total = compile_groups(graph, fabric, op, groups, size, algo=algo,
                                    routing=routing, seed=seed)
    if done < 0:
        return 0.0, 0.0
    sim = simulate(graph, fabric.link_capacity)
    return float(sim.finish[done]), total
