"""Path selection by GPU intensity (Crux, SIGCOMM 2024, section 4.1; reference/crux.md).

Jobs are taken from the highest GPU intensity to the lowest (:func:`intensity_order`); each
takes the least congested of its candidates given the traffic already placed by the jobs
before it (:func:`least_congested`, the one rule both uses below share). A candidate is a
set of network links (NIC ports, uplinks, core links); its congestion is the largest, over
its links, of the bytes already placed on the link over its capacity (the seconds that link
needs to carry what is already there); ties by the sum over the links, then the lowest
candidate.

Two granularities use the rule, each with its own number of candidates:

- **per connection** (:func:`select_paths`, the scheduler policies): each connection of a
  job is a candidate path per UDP source port (connection ids ``0..candidates-1``, hashed
  exactly as the switches do: :func:`hpnsim.routing.route`), so the choice is realisable by
  picking the source port, as real RoCE deployments do; the job's own earlier connections
  count as placed. Default :data:`DEFAULT_CANDIDATES` ports.
- **per job** (the shared-cluster driver, :mod:`hpnsim.sched.cluster.decide`): a candidate is
  the job's whole iteration routed with one routing seed, because a cluster job's
  collectives are compiled once per seed; :data:`CLUSTER_CANDIDATES` seeds by default (each
  candidate is a compiled and simulated iteration, so fewer are tried).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.routing import Paths, route
from hpnsim.routing.precise import NETWORK_LINKS
from hpnsim.sched.defaults import CLUSTER_CANDIDATES
from hpnsim.sched.defaults import PATH_CANDIDATES as DEFAULT_CANDIDATES
from hpnsim.sched.jobs import SchedJob, job_array


def intensity_order(intensity) -> np.ndarray:
    """Indices from the highest GPU intensity to the lowest; ties by index.

    >>> intensity_order([1.0, 3.0, 1.0]).tolist()
    [1, 0, 2]
    """
    intensity = np.asarray(intensity, dtype=np.float64)
    return np.lexsort((np.arange(intensity.size), -intensity))


def least_congested(candidates, load: np.ndarray, capacity: np.ndarray,
                    dead=None) -> tuple[int, float]:
    """``(index, congestion)`` of the least congested candidate given ``load`` placed.

    Each candidate is an array of link ids; its congestion is ``max(load / capacity)`` over
    them, ties by the sum, then the lowest index. A candidate flagged in ``dead`` (it crosses
    a link that is down) loses to every live one. ``candidates`` may be lazy: a candidate
    with nothing placed on its links is the best possible, and the ones after it are never
    drawn (the cluster's candidates are compiled iterations).

    >>> load, cap = np.array([2.0, 1.0, 0.0]), np.ones(3)
    >>> least_congested([np.array([0, 1]), np.array([1]), np.array([0])], load, cap)
    (1, 1.0)
    >>> least_congested(iter([np.array([1]), np.array([2]), None]), load, cap)
    (1, 0.0)
    >>> least_congested([np.array([1]), np.array([2])], load, cap, dead=[False, True])
    (0, 1.0)
    """
    best = None
    for c, links in enumerate(candidates):
        level = load[links] / capacity[links]
        worst = float(level.max(initial=0.0))
        score = (bool(dead[c]) if dead is not None else False, worst, float(level.sum()), c)
        if best is None or score < best:
            best = score
        if score[:2] == (False, 0.0):      # nothing placed on its links: none is better
            break
    return best[3], best[1]


def candidate_paths(fabric, paths: Paths, candidates: int = DEFAULT_CANDIDATES, *,
                    policy: str = "ecmp", seed: int = 0, state=None) -> Paths:
    """Every flow of ``paths`` routed as connections ``0..candidates-1``.

    Row ``i * candidates + c`` is flow ``i`` as connection ``c`` (its UDP source port in
    ``sport``).

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> base = route(f, [0], [15])
    >>> cand = candidate_paths(f, base, 4)
    >>> cand.n_flows, len({tuple(cand.path(c).tolist()) for c in range(4)}) > 1
    (4, True)
    """
    if isinstance(candidates, bool) or not isinstance(candidates, int | np.integer) \
            or candidates < 1:
        raise InputError("candidates", f"must be an integer >= 1, got {candidates!r}")
    src = np.repeat(np.asarray(paths.src, dtype=np.int64), candidates)
    dst = np.repeat(np.asarray(paths.dst, dtype=np.int64), candidates)
    conn = np.tile(np.arange(candidates, dtype=np.int64), paths.n_flows)
    return route(fabric, src, dst, policy, conn=conn, seed=seed, state=state)


@dataclass(frozen=True)
class PathChoice:
    """The outcome of path selection.

    Attributes
    ----------
    jobs : the jobs with their flows on the chosen paths (input order)
    paths : per job, the chosen ``Paths`` (``sport`` holds each connection's source port)
    candidate : per job, the chosen candidate index (connection id) of every flow
    congestion : per job, the congestion of the chosen path of every flow when it chose
    order : job indices in the order they chose
    """

    jobs: list
    paths: list
    candidate: list
    congestion: list
    order: np.ndarray


def select_paths(jobs, fabric, capacity=None, *, order=None,
                 candidates: int = DEFAULT_CANDIDATES, policy: str = "ecmp", seed: int = 0,
                 state=None) -> PathChoice:
    """Give every connection of every job its least congested candidate, jobs in ``order``.

    Parameters
    ----------
    jobs : sequence of :class:`~hpnsim.sched.jobs.SchedJob` built with flows
        (:meth:`~hpnsim.sched.jobs.SchedJob.from_paths`).
    fabric : the Fabric the flows run on.
    capacity : bytes/s per link (default: the fabric's, or the state's).
    order : job indices, first chooses first (default: by GPU intensity, highest first).
    candidates, policy, seed, state : as :func:`candidate_paths`.

    Examples
    --------
    Two one-flow jobs between the same hosts of a k=4 fat-tree: the more intense job
    (8 GPUs) chooses first; the other finds only the shared NIC port loaded (1 GB over
    50 GB/s: 0.02 s) and takes another path through the switches.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> p = route(f, [0], [15])
    >>> a = SchedJob.from_paths("a", 1, 1.0, p, [1e9], f.n_links)
    >>> b = SchedJob.from_paths("b", 8, 1.0, p, [1e9], f.n_links)
    >>> choice = select_paths([a, b], f, candidates=4)
    >>> choice.order.tolist(), [c.tolist() for c in choice.congestion]
    ([1, 0], [[0.02], [0.0]])
    >>> choice.paths[0].links.tolist() != choice.paths[1].links.tolist()
    True
    """
    jobs = job_array(jobs)
    for j in jobs:
        if j.flows is None:
            raise InputError("jobs", f"job {j.name!r} has no flows to place "
                                     "(build it with SchedJob.from_paths)")
    if capacity is None:
        capacity = state.capacity if state is not None else fabric.link_capacity
    cap = np.asarray(capacity, dtype=np.float64)
    if order is None:
        order = intensity_order([j.intensity(cap) for j in jobs])
    order = np.asarray(order, dtype=np.int64)
    if sorted(order.tolist()) != list(range(len(jobs))):
        raise InputError("order", f"must list every job index 0..{len(jobs) - 1} once")
    counted = np.isin(fabric.link_kind, NETWORK_LINKS)
    safe_cap = np.where(cap > 0, cap, np.inf)      # a down link: nothing can drain; see below
    load = np.zeros(fabric.n_links)
    out_jobs, out_paths = list(jobs), [None] * len(jobs)
    out_cand, out_cong = [None] * len(jobs), [None] * len(jobs)
    for j in order.tolist():
        job = jobs[j]
        cand = candidate_paths(fabric, job.flows, candidates, policy=policy, seed=seed,
                               state=state)
        n = job.flows.n_flows
        chosen = np.zeros(n, dtype=np.int64)
        seen = np.zeros(n)
        for i in range(n):
            rows = (i * candidates + np.arange(candidates)).tolist()
            links = [cand.links[cand.ptr[r]:cand.ptr[r + 1]] for r in rows]
            dead = [bool(np.any(cap[x] == 0)) for x in links]
            best, chosen_congestion = least_congested([x[counted[x]] for x in links], load,
                                                      safe_cap, dead)
            chosen[i], seen[i] = best, chosen_congestion
            row = rows[best]
            sl = slice(cand.ptr[row], cand.ptr[row + 1])
            np.add.at(load, cand.links[sl], cand.weight[sl] * job.flow_bytes[i])
        picked = cand.subset(np.arange(n) * candidates + chosen)
        out_paths[j], out_cand[j], out_cong[j] = picked, chosen, seen
        out_jobs[j] = job.with_paths(picked, fabric.n_links)
    return PathChoice(jobs=out_jobs, paths=out_paths, candidate=out_cand,
                      congestion=out_cong, order=order)


def ecmp_jobs(jobs, fabric, *, policy: str = "ecmp", seed: int = 0, state=None) -> list:
    """The jobs with every flow on its plain ECMP path (connection 0): no selection.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> a = SchedJob.from_paths("a", 1, 1.0, route(f, [0], [15], conn=[3]), [1.0], f.n_links)
    >>> ecmp_jobs([a], f)[0].flows.sport.tolist() == route(f, [0], [15]).sport.tolist()
    True
    """
    out = []
    for job in job_array(jobs):
        if job.flows is None:
            out.append(job)
            continue
        base = candidate_paths(fabric, job.flows, 1, policy=policy, seed=seed, state=state)
        out.append(job.with_paths(base, fabric.n_links))
    return out


__all__ = ["CLUSTER_CANDIDATES", "DEFAULT_CANDIDATES", "PathChoice", "SchedJob",
           "candidate_paths", "ecmp_jobs", "intensity_order", "least_congested",
           "select_paths"]
