"""Cluster schedulers as policies: jobs in, a path per connection and a class per job out.

Every policy is ``(jobs, fabric, capacity, K, seed) -> Decision``: the jobs with their
flows on the chosen paths (source ports in ``job.flows.sport``), an engine priority class
per job (0 is served first) and a start offset per job. The policies (reference/crux.md):

``none``        ECMP paths, one class (max-min sharing).
``crux-pa``     Crux priority assignment only: ECMP paths, one class per job by ``P_j``.
``crux-ps-pa``  + path selection by intensity, then priorities on the chosen paths.
``crux``        + compression of the order into ``K`` classes (max-K-cut DP).
``sincronia``   Sincronia's BSSI order (bottleneck link, largest job there goes last),
                top ``K-1`` jobs a class each, the rest the lowest.
``varys``       smallest effective bottleneck (``t_j``) first, cut into ``K`` equal blocks.
``taccl``       TACCL*: least congested paths in arrival order (no intensity order);
                traffic travelling farther (more network hops) gets a higher class.
``cassini``     ECMP paths, one class; per-job time offsets chosen greedily so that
                communication phases on shared links interleave.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.routing.precise import NETWORK_LINKS
from hpnsim.sched.compression import (
    check_levels,
    contention_dag,
    max_k_cut,
    sharing_matrix,
    sincronia_levels,
    varys_levels,
)
from hpnsim.sched.jobs import job_array
from hpnsim.sched.names import SCHEDULERS
from hpnsim.sched.paths import DEFAULT_CANDIDATES, ecmp_jobs, select_paths
from hpnsim.sched.priority import assign_priorities

#: offsets CASSINI tries per job: this many evenly spaced shifts within its iteration
CASSINI_SHIFTS = 16
#: longest stretch of a job's period that joining its group's circle may cost; a job the
#: circle would slow more keeps its own period (CASSINI leaves incompatible jobs unshifted:
#: its compatibility score; the threshold is ours, a 5% rate loss, not a published figure)
CASSINI_MAX_STRETCH = 0.05


@dataclass(frozen=True)
class Decision:
    """A scheduler's decision for the current set of jobs.

    Attributes
    ----------
    scheduler : str
    jobs : the jobs on their chosen paths (input order)
    priority : int array, engine class per job (0 first)
    offsets : float array, start offset per job (seconds; CASSINI only, else 0)
    gates : float array, per job the period its iterations are held to (iteration ``k``
        starts no earlier than ``offset + k * gate``; CASSINI only, else 0)
    """

    scheduler: str
    jobs: list
    priority: np.ndarray
    offsets: np.ndarray
    gates: np.ndarray | None = None


def check_scheduler(name) -> str:
    """The scheduler name, else an InputError naming ``scheduler``.

    >>> check_scheduler("crux")
    'crux'
    """
    if name not in SCHEDULERS:
        raise InputError("scheduler", f"choose one of {', '.join(SCHEDULERS)}, got {name!r}")
    return name


def _classes_from_order(order, n) -> np.ndarray:
    classes = np.empty(n, dtype=np.int64)
    classes[np.asarray(order, dtype=np.int64)] = np.arange(n)
    return classes


def _with_paths(jobs, fabric, seed):
    if fabric is None or all(j.flows is None for j in jobs):
        return jobs
    return ecmp_jobs(jobs, fabric, seed=seed)


def bssi_order(jobs, capacity) -> np.ndarray:
    """Sincronia's Bottleneck-Select-Scale-Iterate order (unit weights), first = highest.

    Repeatedly: the most loaded link among unordered jobs is the bottleneck; the job with
    the smallest weight per byte there goes last; the others' weights drop by its weight
    times their share of its bytes there.

    >>> from hpnsim.sched.jobs import SchedJob
    >>> js = [SchedJob("big", 1, 1.0, [0], [4.0]), SchedJob("small", 1, 1.0, [0], [1.0])]
    >>> bssi_order(js, [1.0]).tolist()
    [1, 0]
    """
    cap = np.asarray(capacity, dtype=np.float64)
    n = len(jobs)
    weight = np.ones(n)
    left = list(range(n))
    tail = []
    # seconds per job on the links the jobs use (in link order: the bottleneck, the first
    # most loaded, is the one the whole fabric's columns would give)
    used = np.unique(np.concatenate([np.asarray(j.links, dtype=np.int64) for j in jobs]
                                    or [np.zeros(0, np.int64)]))
    time = np.zeros((n, used.size))
    for j, job in enumerate(jobs):
        time[j, np.searchsorted(used, job.links)] = job.link_bytes / cap[job.links]
    while left:
        load = time[left].sum(axis=0)
        if not load.size or load.max() == 0:
            break                             # the rest send nothing: they go first
        b = int(np.argmax(load))
        on_b = [j for j in left if time[j, b] > 0]
        last = min(on_b, key=lambda j: (weight[j] / time[j, b], -j))
        for j in on_b:
            weight[j] -= weight[last] * time[j, b] / time[last, b]
        left.remove(last)
        tail.append(last)
    return np.asarray(left + tail[::-1], dtype=np.int64)


def mean_network_hops(links, link_bytes, fabric) -> float:
    """Network links a byte of the job crosses on average: its bytes summed over network
    links over its bytes entering the network (every network path starts with exactly one
    NIC -> ToR link); 0 for a job that sends nothing through the network.

    TACCL*'s "longer-distance traffic first" ranks jobs by this: 2 within a ToR, 4 through
    an aggregation switch, 6 through the core of a 3-tier Clos.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4, gpus_per_host=1)
    >>> up = int(f.gpu_access_link[0, 0]); down = up ^ 1
    >>> mean_network_hops([up, down], [8.0, 8.0], f)       # NIC -> ToR -> NIC
    2.0
    """
    from hpnsim.fabrics import NodeKind

    links = np.asarray(links, dtype=np.int64)
    load = np.asarray(link_bytes, dtype=np.float64)
    network = np.isin(fabric.link_kind[links], NETWORK_LINKS)
    entering = network & (fabric.node_kind[fabric.link_src[links]] == NodeKind.NIC)
    sent = float(load[entering].sum())
    return float(load[network].sum()) / sent if sent > 0 else 0.0


def _network_hops(job, fabric) -> float:
    if job.flows is None or fabric is None:
        return float(job.links.size)
    counted = np.isin(fabric.link_kind, NETWORK_LINKS)
    return float(np.mean([counted[job.flows.path(i)].sum() for i in range(job.flows.n_flows)]))


def cassini_gates(periods, share) -> np.ndarray:
    """CASSINI's unified circle: jobs that share links (``share``, a boolean matrix; its
    connected groups) run on one perimeter ``L``, each job ``m_j`` iterations per turn
    (``m_j`` = its group's longest period over its own, rounded, at least 1), its gate
    ``L / m_j``; ``L = max_j m_j p_j``, so no gate is shorter than the job's period. Gates
    of one group divide ``L``: their phases recur every turn and cannot drift apart. A job
    the circle would stretch by more than :data:`CASSINI_MAX_STRETCH` keeps its own period.

    >>> cassini_gates([0.0504, 0.1004], np.ones((2, 2), dtype=bool)).tolist()
    [0.0504, 0.1008]
    >>> cassini_gates([0.0504, 0.1004], np.eye(2, dtype=bool)).tolist()
    [0.0504, 0.1004]
    >>> cassini_gates([1.0, 1.4], np.ones((2, 2), dtype=bool)).tolist()   # 40% off: own
    [1.0, 1.4]
    """
    p = np.asarray(periods, dtype=np.float64)
    share = np.asarray(share, dtype=bool)
    group = np.arange(p.size)
    for i in range(p.size):                     # label propagation to connected groups
        for j in np.flatnonzero(share[i]):
            a, b = group[i], group[j]
            group[group == max(a, b)] = min(a, b)
    gates = p.copy()
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        turns = np.maximum(1, np.round(p[members].max() / p[members]))
        circle = (turns * p[members]).max() / turns
        fits = circle <= (1 + CASSINI_MAX_STRETCH) * p[members]
        if fits.sum() > 1:      # a circle of compatible jobs (the rest keep their periods)
            turns = turns[fits]
            gates[members[fits]] = (turns * p[members[fits]]).max() / turns
    return gates


def cassini_offsets(jobs, capacity, shifts: int = CASSINI_SHIFTS,
                    periods=None) -> np.ndarray:
    """Greedy time offsets: each job in turn takes the shift (of ``shifts`` within its
    period) whose communication phases overlap least with the phases of the jobs already
    placed that share a link with it (over a common window). ``periods``: per job the
    period it runs at (:func:`cassini_gates`; default its uncontended iteration time).

    >>> from hpnsim.sched.jobs import SchedJob
    >>> js = [SchedJob("a", 1, 1.0, [0], [1.0]), SchedJob("b", 1, 1.0, [0], [1.0])]
    >>> cassini_offsets(js, [1.0], shifts=4).tolist()
    [0.0, 1.0]
    """
    cap = np.asarray(capacity, dtype=np.float64)
    period = np.array([j.iteration_time(cap) for j in jobs]) if periods is None \
        else np.asarray(periods, dtype=np.float64)
    window = 4 * period.max()
    grid = np.linspace(0.0, window, 64 * shifts, endpoint=False)
    share = sharing_matrix([j.links for j in jobs])
    offsets = np.zeros(len(jobs))
    busy = np.zeros((len(jobs), grid.size), dtype=bool)

    def phases(job, t0, p, sending):
        start = job.comm_start * job.compute_time
        phase = np.mod(grid - t0, p)
        return (phase >= start) & (phase < start + sending)

    for j, job in enumerate(jobs):
        others = [k for k in range(j) if share[j, k]]
        sending = job.transfer_time(cap)
        best, best_overlap = 0.0, np.inf
        for s in range(shifts):
            t0 = s * period[j] / shifts
            mine = phases(job, t0, period[j], sending)
            overlap = sum(int(np.count_nonzero(mine & busy[k])) for k in others)
            if overlap < best_overlap:
                best, best_overlap = t0, overlap
        offsets[j] = best
        busy[j] = phases(job, best, period[j], sending)
    return offsets


def schedule(scheduler: str, jobs, fabric=None, capacity=None, *, K: int = 8, seed: int = 0,
             samples: int = 10, candidates: int = DEFAULT_CANDIDATES,
             horizon: float | None = None, hops=None, periods=None) -> Decision:
    """Apply a scheduler to the current jobs (module docstring for each policy).

    Parameters
    ----------
    scheduler : one of ``SCHEDULERS``
    jobs : sequence of :class:`~hpnsim.sched.jobs.SchedJob`
    fabric : the Fabric (for path choices); None keeps the jobs' links as given
    capacity : bytes/s per link (default: the fabric's)
    K : priority classes available (switch queues)
    seed : seeds ECMP hashing and the sampled topological orders
    samples : topological orders tried by Crux's compression
    candidates : source ports tried per connection by path selection
    horizon : seconds of Crux's pairwise simulations (default: ten iterations)
    hops : per job the network links its bytes cross on average
        (:func:`mean_network_hops`; TACCL*'s distance); default from the jobs' flows on
        ``fabric``, else (no fabric) their number of links
    periods : per job its iteration time alone (CASSINI's circle; default the jobs'
        uncontended iteration time from their compute and bottleneck transfer)

    Examples
    --------
    >>> from hpnsim.sched.periodic import worked_example
    >>> schedule("crux", worked_example(1), capacity=[1.0], K=2).priority.tolist()
    [1, 0]
    >>> schedule("fifo", worked_example(1), capacity=[1.0])
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: scheduler: choose one of none, crux-pa, crux-ps-pa, crux, sincronia, taccl, cassini, varys, got 'fifo'
    """
    check_scheduler(scheduler)
    k = check_levels(K)
    jobs = job_array(jobs)
    if capacity is None:
        if fabric is None:
            raise InputError("capacity", "give the link capacities or the fabric")
        capacity = fabric.link_capacity
    cap = np.asarray(capacity, dtype=np.float64)
    n = len(jobs)
    offsets = np.zeros(n)
    gates = np.zeros(n)
    if scheduler in ("crux-ps-pa", "crux", "taccl") and fabric is not None \
            and all(j.flows is not None for j in jobs):
        order = np.arange(n) if scheduler == "taccl" else None
        jobs = select_paths(jobs, fabric, cap, order=order, candidates=candidates,
                            seed=seed).jobs
    else:
        jobs = _with_paths(jobs, fabric, seed)
    if scheduler == "none":
        prio = np.zeros(n, dtype=np.int64)
    elif scheduler == "cassini":
        prio = np.zeros(n, dtype=np.int64)
        own = np.array([j.iteration_time(cap) for j in jobs]) if periods is None \
            else np.asarray(periods, dtype=np.float64)
        gates = cassini_gates(own, sharing_matrix([j.links for j in jobs]))
        offsets = cassini_offsets(jobs, cap, periods=gates)
    elif scheduler in ("crux-pa", "crux-ps-pa", "crux"):
        p = assign_priorities(jobs, cap, horizon=horizon)
        if scheduler == "crux":
            dag = contention_dag(sharing_matrix([j.links for j in jobs]), p.order,
                                 p.intensity)
            _, levels = max_k_cut(dag, p.order, k, samples=samples, seed=seed)
            prio = (k - 1 - levels).astype(np.int64)
        else:
            prio = _classes_from_order(p.order, n)
    elif scheduler == "sincronia":
        prio = (k - 1 - sincronia_levels(bssi_order(jobs, cap), k)).astype(np.int64)
    elif scheduler == "varys":
        t = np.array([j.transfer_time(cap) for j in jobs])
        order = np.lexsort((np.arange(n), t))
        prio = (k - 1 - varys_levels(order, k)).astype(np.int64)
    else:  # taccl
        hops = np.array([_network_hops(j, fabric) for j in jobs] if hops is None else hops,
                        dtype=np.float64)
        distinct = np.unique(hops)[::-1]
        prio = np.minimum(np.searchsorted(-distinct, -hops), k - 1).astype(np.int64)
    return Decision(scheduler=scheduler, jobs=jobs, priority=prio, offsets=offsets,
                    gates=gates)
