"""An iteration compiled on another routing seed, from its compiled graph on one seed.

A routing seed decides the paths of an iteration's transfers (every collective's member
flows and every pipeline message hash anew) and, with them, a pipeline message's
propagation latency (its longest member path). Nothing else of the graph depends on it:
the tasks, their sizes, dependencies, the collectives' NCCL latencies and schedules (the
algorithm and protocol are chosen without routes), and the collectives replayed as delays
(inside a host no flow hashes; :func:`reseeded_arrays` checks that their routes are the same).
A cluster's path selection compiles each job on several seeds, each a full compile of the
program; :func:`reseeded_arrays` gives the same frozen graph from one compile, planning
only the routes again (:func:`~hpnsim.collectives.planning.plan.plan_collective`, as the compiler
does) and merging each transfer's link entries as the graph does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hpnsim.engine.freeze import TRANSFER, GraphArrays
from hpnsim.engine.validate import merge_rows, paths_arrays
from hpnsim.training.compile import path_latency
from hpnsim.training.compiled import CompiledIteration

__all__ = ["reseeded_arrays"]


def _entries(paths, coupled: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(entries per task, links, usage)`` of the transfers built from ``paths``: one
    task for a coupled group (all members), else one per member; merged as
    :meth:`~hpnsim.engine.TaskGraph.add_transfer` and ``add_transfers`` merge them."""
    ptr, links, weight = paths_arrays(paths)
    n = 1 if coupled else ptr.size - 1
    rows = np.zeros(links.size, dtype=np.int64) if coupled \
        else np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    rows, links, usage = merge_rows(rows, links.astype(np.int64),
                                    np.asarray(weight, dtype=np.float64))
    return np.bincount(rows, minlength=n), links, usage


def reseeded_arrays(it: CompiledIteration, arrays: GraphArrays, fabric, seed: int
                    ) -> GraphArrays | None:
    """The frozen graph of ``it`` (compiled alone into a graph of its own, frozen as
    ``arrays``) as compiling its program again with routing seed ``seed`` freezes it, or
    None when that cannot be had without compiling (a collective replayed as a delay whose
    routes change with the seed, or transfers its route records do not account for).

    Parameters
    ----------
    it : CompiledIteration
        From :func:`~hpnsim.training.compile_program` into an empty graph.
    arrays : GraphArrays
        That graph, frozen on ``fabric``'s links.
    fabric : Fabric
    seed : int

    Returns
    -------
    GraphArrays or None

    Examples
    --------
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import fat_tree
    >>> from hpnsim.training import compile_program, program_from_job
    >>> from hpnsim.training.job import TrainJob
    >>> f = fat_tree(4, gpus_per_host=2)
    >>> program = program_from_job(TrainJob("llama3-8b", tp=2, pp=2, dp=2, global_batch=4))
    >>> def frozen(seed):
    ...     g = TaskGraph()
    ...     return compile_program(program, g, f, seed=seed, release=1.0), g.arrays(f.n_links)
    >>> it, base = frozen(0)
    >>> again = reseeded_arrays(it, base, f, 3)
    >>> bool(np.array_equal(again.links, frozen(3)[1].links))
    True
    """
    from hpnsim.collectives.planning.plan import plan_collective
    from hpnsim.routing import route

    for op, group, size, options in it.timed:
        # the same routes build the same graph: the same time alone
        if not _same_routes(plan_collective(fabric, op, group, size, options),
                            plan_collective(fabric, op, group, size,
                                            replace(options, seed=seed))):
            return None
    transfers = np.flatnonzero(arrays.kind == TRANSFER)
    counts = np.diff(arrays.ptr)
    if counts.sum() != counts[transfers].sum():
        return None
    latency = arrays.latency.copy()
    records = it.routes
    # the transfers of each record, as ranges of ``transfers``
    bounds = np.searchsorted(transfers, [[r.first for r in records], [r.end for r in records]])
    blocks: dict[tuple, tuple] = {}       # an iteration repeats its collectives and messages
    reseeded: dict[int, object] = {}      # the records' options (shared) on ``seed``
    new_counts, new_links, new_usage = [], [], []
    for record, lo, hi in zip(records, *bounds.tolist(), strict=True):
        if record.op == "p2p":
            src, dst = record.groups
            key = ("p2p", src.tobytes(), dst.tobytes())
            if key not in blocks:
                paths = route(fabric, src, dst, it.routing, seed=seed)
                blocks[key] = (*_entries(paths, True), path_latency(fabric, paths))
            parts = [blocks[key]]
            latency[transfers[lo:hi]] = blocks[key][3]
        else:
            parts = []
            options = reseeded.get(id(record.options))
            if options is None:
                options = reseeded[id(record.options)] = replace(record.options, seed=seed)
            for group in np.asarray(record.groups):
                if group.size < 2:
                    continue
                key = (record.op, group.tobytes(), record.size, id(record.options))
                if key not in blocks:
                    blocks[key] = _collective_entries(fabric, record.op, group, record.size,
                                                      options)
                parts.append(blocks[key])
        if sum(part[0].size for part in parts) != hi - lo:
            return None
        for part in parts:
            new_counts.append(part[0])
            new_links.append(part[1])
            new_usage.append(part[2])
    covered = [transfers[lo:hi] for lo, hi in zip(*bounds.tolist(), strict=True)]
    covered = np.concatenate(covered) if covered else np.zeros(0, np.int64)
    if not np.array_equal(covered, transfers):
        return None
    per_task = np.zeros(arrays.kind.size, dtype=np.int64)
    per_task[covered] = np.concatenate(new_counts) if new_counts else []
    ptr = np.zeros(arrays.kind.size + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(per_task)
    empty = (np.zeros(0, np.int64), np.zeros(0))
    return replace(arrays, ptr=ptr, latency=latency,
                   links=np.concatenate(new_links) if new_links else empty[0],
                   usage=np.concatenate(new_usage) if new_usage else empty[1])


def _same_routes(a, b) -> bool:
    """Whether two plans of one collective add the same transfers (the same schedule,
    algorithm, protocol and QPs, and member paths equal link for link)."""
    if (a.schedule is not b.schedule or (a.algo, a.protocol, a.qps) != (b.algo, b.protocol, b.qps)
            or len(a.paths) != len(b.paths)):
        return False
    for x, y in zip((*a.paths, *a.wire_paths), (*b.paths, *b.wire_paths), strict=True):
        if (x is None) != (y is None):
            return False
        if x is not None and not (np.array_equal(x.ptr, y.ptr) and np.array_equal(x.links, y.links)
                                  and np.array_equal(x.weight, y.weight)):
            return False
    return True


def _collective_entries(fabric, op: str, group: np.ndarray, size: float, options) -> tuple:
    """``(entries per task, links, usage)`` of one compiled collective's transfers, in the
    order :func:`~hpnsim.collectives.planning.compile.add_plan` (and a replay) adds them."""
    from hpnsim.collectives.planning.plan import plan_collective

    plan = plan_collective(fabric, op, group, size, options)
    counts, links, usage = [], [], []
    for stage, paths in zip(plan.schedule.stages, plan.wire_paths, strict=True):
        if paths is None:
            continue
        c, li, u = _entries(paths, stage.coupled)
        counts.append(c)
        links.append(li)
        usage.append(u)
    if not counts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(counts), np.concatenate(links), np.concatenate(usage)
