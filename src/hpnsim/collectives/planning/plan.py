"""Plan a collective on a fabric: choose the algorithm, build its schedule, route its members.

A :class:`RoutedSchedule` is everything about a collective that does not depend on the task
graph it goes into: workloads compile the same collective (same group, size, algorithm,
routing, seed) thousands of times per iteration, so plans are cached
(:class:`PlanCache`, keyed on the fabric object, the parameters and the fingerprint of the
:class:`~hpnsim.fabrics.state.FabricState` routed under, so a failure or a recovery never
gets a stale plan); adding a cached plan to a graph only adds tasks. Plans are shared: do
not mutate them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from hpnsim.collectives.closed_form.model import choose_algorithm, choose_protocol
from hpnsim.collectives.closed_form.shape import GroupShape
from hpnsim.collectives.nccl.params import NcclParams, resolve_nccl
from hpnsim.collectives.ops import AUTO, normalize_algorithm, normalize_op, normalize_protocol
from hpnsim.collectives.planning.options import CollectiveOptions
from hpnsim.collectives.planning.paths import route_schedule, wire_paths
from hpnsim.collectives.schedules.algorithms import build_schedule
from hpnsim.collectives.schedules.schedule import Schedule, check_group
from hpnsim.errors import InputError, check_seed


@dataclass(frozen=True)
class RoutedSchedule:
    """Everything about a collective that does not depend on the graph it goes into.

    Attributes
    ----------
    schedule : Schedule
    algo, protocol : str
        The concrete algorithm and protocol (``auto`` resolved).
    qps : int
        Queue pairs per connection.
    paths : tuple of Paths or None
        Member paths of every stage (QP-expanded: each member ``qps`` times, consecutively).
    nccl : NcclParams
        The NCCL parameters it was planned with.
    wire_paths : tuple of Paths or None
        The same paths with every link weighted by its wire bytes per payload byte
        (1/efficiency of the link kind; NVLS stages also 1/NVLS efficiency): what the engine
        runs (:func:`~hpnsim.collectives.planning.paths.wire_paths`).
    fill : float
        Seconds NCCL's chunk pipeline adds to the stages' steady rate, charged on the stages
        that start the collective: the NVLS-tree fill over the tree's depth at the fabric's
        nominal rates (:func:`~hpnsim.collectives.closed_form.nvlstree.nvlstree_fill`; 0 for
        the others, whose pipelines the flow engine's rates and NCCL's per-step latencies
        cover).

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> plan = plan_collective(f, "allreduce", [0, 8], 2**20, algo="ring", qps=2)
    >>> plan.algo, plan.qps, len(plan.paths) == len(plan.schedule.stages)
    ('ring', 2, True)
    """

    schedule: Schedule
    algo: str
    protocol: str
    qps: int
    paths: tuple  # Paths per stage
    nccl: NcclParams = NcclParams()
    wire_paths: tuple = ()
    fill: float = 0.0


def _pipeline_fill(fabric, gpus: np.ndarray, size: float, algo: str, pxn: bool,
                   nccl: NcclParams) -> float:
    """:attr:`RoutedSchedule.fill` of a planned collective."""
    if algo != "nvlstree":
        return 0.0
    from hpnsim.collectives.closed_form.nvlstree import nvlstree_fill

    return nvlstree_fill(GroupShape.from_fabric(fabric, gpus, pxn, nccl=nccl), size, nccl)


def resolve_algorithm(fabric, op: str, gpus: np.ndarray, size: float,
                      options: CollectiveOptions) -> tuple[str, str]:
    """Concrete (algorithm, protocol) of ``options`` on the actual group: an ``auto`` choice
    is the smallest predicted time (:func:`~hpnsim.collectives.closed_form.model.choose_algorithm`).

    Parameters
    ----------
    fabric : Fabric
    op : str
        Canonical operation.
    gpus : numpy.ndarray
        The group, rank order.
    size : float
        Bytes, nccl-tests convention.
    options : CollectiveOptions
        Its ``algo``, ``protocol``, ``channels``, ``pxn`` and ``nccl`` are read.

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> resolve_algorithm(f, "allreduce", np.arange(16), 4096.0, CollectiveOptions())
    ('hier', 'll')
    >>> resolve_algorithm(f, "allreduce", np.arange(16), 2.0**30, CollectiveOptions())
    ('hier', 'simple')
    """
    algo, protocol = normalize_algorithm(options.algo), normalize_protocol(options.protocol)
    if algo != AUTO and protocol != AUTO:
        return algo, protocol
    nccl = resolve_nccl(options.nccl)
    channels = options.channels
    shape = GroupShape.from_fabric(fabric, gpus, options.pxn, nccl=nccl)
    if algo == AUTO:
        chosen, best_protocol = choose_algorithm(op, shape, size, channels=channels, nccl=nccl)
        return chosen, (best_protocol if protocol == AUTO else protocol)
    return algo, choose_protocol(op, algo, shape, size, channels=channels, nccl=nccl)


def _option_key(options: dict) -> tuple | None:
    """Hashable form of routing options (arrays by content), or None when not hashable."""
    out = []
    for name in sorted(options):
        value = options[name]
        if isinstance(value, np.ndarray | list | tuple):
            array = np.asarray(value)
            value = (array.dtype.str, array.shape, array.tobytes())
        try:
            hash(value)
        except TypeError:
            return None
        out.append((name, value))
    return tuple(out)


class PlanCache:
    """Least-recently-used plans per fabric object (dropped with the fabric).

    Parameters
    ----------
    maxsize : int
        Plans kept per fabric; the least recently used one goes first.

    Examples
    --------
    >>> from hpnsim.fabrics import fat_tree
    >>> cache, f = PlanCache(maxsize=2), fat_tree(4)
    >>> cache.get(f, "a") is None
    True
    >>> cache.put(f, "a", "plan a"); cache.get(f, "a")
    'plan a'
    >>> cache.info()
    {'enabled': True, 'entries': 1, 'hits': 1, 'misses': 1, 'maxsize': 2}
    """

    def __init__(self, maxsize: int = 1024):
        self.maxsize = int(maxsize)
        self.enabled = True
        self.hits = self.misses = 0
        self._plans: WeakKeyDictionary = WeakKeyDictionary()

    def get(self, fabric, key):
        """The plan stored under ``key`` for ``fabric`` (None: a miss; a None key never
        hits).

        Examples
        --------
        >>> from hpnsim.fabrics import fat_tree
        >>> PlanCache().get(fat_tree(4), None) is None
        True
        """
        plans = self._plans.get(fabric) if self.enabled and key is not None else None
        plan = plans.get(key) if plans is not None else None
        if plan is None:
            self.misses += 1
        else:
            self.hits += 1
            plans.move_to_end(key)
        return plan

    def put(self, fabric, key, plan) -> None:
        """Keep ``plan`` under ``key`` for ``fabric`` (not when disabled or ``key`` is
        None); the least recently used plan goes beyond ``maxsize``.

        Examples
        --------
        >>> from hpnsim.fabrics import fat_tree
        >>> cache, f = PlanCache(maxsize=1), fat_tree(4)
        >>> cache.put(f, "a", 1); cache.put(f, "b", 2)
        >>> cache.get(f, "a"), cache.get(f, "b")
        (None, 2)
        """
        if not self.enabled or key is None:
            return
        plans = self._plans.setdefault(fabric, OrderedDict())
        plans[key] = plan
        while len(plans) > self.maxsize:
            plans.popitem(last=False)

    def clear(self) -> None:
        """Forget every plan and reset the counters.

        Examples
        --------
        >>> from hpnsim.fabrics import fat_tree
        >>> cache = PlanCache()
        >>> cache.put(fat_tree(4), "a", 1); cache.clear(); cache.info()["entries"]
        0
        """
        self._plans = WeakKeyDictionary()
        self.hits = self.misses = 0

    def info(self) -> dict:
        """Whether it is enabled, its entries, hits, misses and maxsize.

        Examples
        --------
        >>> PlanCache(maxsize=8).info()["maxsize"]
        8
        """
        entries = sum(len(p) for p in self._plans.values())
        return {"enabled": self.enabled, "entries": entries, "hits": self.hits,
                "misses": self.misses, "maxsize": self.maxsize}


#: the process-wide plan cache :func:`plan_collective` uses
PLAN_CACHE = PlanCache()
#: the algorithm, protocol and schedule of a collective, which its routing seed, routing
#: policy and fabric state do not change: the candidates of a job's path selection (one
#: routing seed each) schedule every collective once (switched and cleared with
#: :data:`PLAN_CACHE` by :func:`plan_cache`)
SCHEDULE_CACHE = PlanCache()


def plan_cache(enabled: bool | None = None, *, clear: bool = False) -> dict:
    """Turn the plan cache on or off, or clear it.

    Results are the same with and without it; only compile time changes.

    Parameters
    ----------
    enabled : bool, optional
        Turn it on or off (None: leave it).
    clear : bool
        Forget every plan and reset the counters.

    Returns
    -------
    dict
        Its statistics (:meth:`PlanCache.info`).

    Examples
    --------
    >>> plan_cache(clear=True)["entries"]
    0
    """
    if clear:
        PLAN_CACHE.clear()
        SCHEDULE_CACHE.clear()
    if enabled is not None:
        PLAN_CACHE.enabled = SCHEDULE_CACHE.enabled = bool(enabled)
    return PLAN_CACHE.info()


def plan_collective(fabric, op: str, gpus, size: float,
                    options: CollectiveOptions | None = None, *, state=None,
                    **keywords) -> RoutedSchedule:
    """Validated, scheduled and routed collective, from :data:`PLAN_CACHE` when the same one
    was planned before on this fabric object with equal options under an equal ``state``.

    Parameters
    ----------
    fabric : hpnsim.fabrics.Fabric
    op, gpus, size
        As :func:`~hpnsim.collectives.planning.compile.compile_collective`.
    options : CollectiveOptions, optional
        How it runs (default: every default); ``qps`` None is ``nccl.qps_per_connection``.
    state : hpnsim.fabrics.FabricState, optional
        Routing avoids its down links where it has a choice (None: every link up).
    **keywords
        Fields of :class:`~hpnsim.collectives.planning.options.CollectiveOptions` replacing those of
        ``options`` (``algo="ring"``, ``routing="spray"``, ...).

    Returns
    -------
    RoutedSchedule
        Shared with later calls: do not mutate it.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> a = plan_collective(f, "allreduce", range(16), 2**20, algo="hier")
    >>> a is plan_collective(f, "allreduce", range(16), 2**20, CollectiveOptions(algo="hier"))
    True
    >>> from hpnsim.fabrics import FabricState
    >>> s = FabricState(f).set_down(f.gpu_access_link[0, 0])
    >>> plan_collective(f, "allreduce", range(16), 2**20, algo="hier", state=s) is a
    False
    """
    from hpnsim.routing.names import ROUTING_POLICIES
    from hpnsim.routing.tables import state_key

    options = CollectiveOptions.build(options, **keywords)
    op = normalize_op(op)
    routing = options.routing
    if routing not in ROUTING_POLICIES:
        raise InputError("routing", f"must be one of {', '.join(ROUTING_POLICIES)}, got {routing!r}")
    gpus = check_group(gpus, fabric.n_gpus)
    if not (isinstance(size, int | float | np.number) and np.isfinite(size) and size > 0):
        raise InputError("size", f"must be a finite number of bytes > 0, got {size!r}")
    nccl = resolve_nccl(options.nccl)
    qps = nccl.qps_per_connection if options.qps is None else options.qps
    if isinstance(qps, bool) or int(qps) != qps or qps < 1:
        raise InputError("qps", f"must be an integer >= 1, got {qps!r}")
    seed = options.seed
    check_seed(seed)
    routing_options = dict(options.routing_options or {})
    routing_options.setdefault("pxn", bool(options.pxn))
    option_key = _option_key(routing_options)
    key = None if option_key is None else (
        state_key(fabric, state), op, gpus.tobytes(), float(size), str(options.algo),
        str(options.protocol), routing, options.channels, int(qps), seed, options.root,
        bool(options.pxn), option_key, nccl)
    plan = PLAN_CACHE.get(fabric, key)
    if plan is not None:
        return plan
    # what resolve_algorithm and build_schedule read (the fabric is the cache's)
    scheduled_key = None if key is None else (
        op, gpus.tobytes(), float(size), str(options.algo), str(options.protocol),
        options.channels, options.root, bool(options.pxn), nccl)
    scheduled = SCHEDULE_CACHE.get(fabric, scheduled_key)
    if scheduled is None:
        algo, protocol = resolve_algorithm(fabric, op, gpus, float(size), options)
        relay = bool(options.pxn) and bool(fabric.meta.get("rail_optimized", False))
        per_nic = nccl.channels_per_nic or int(fabric.ports_per_nic)
        channels = options.channels
        if channels is None and op in ("send", "sendrecv"):
            channels = nccl.channels_per_net_peer   # NCCL_NCHANNELS_PER_NET_PEER
        sch = build_schedule(op, gpus, size, algo, gpus_per_host=fabric.gpus_per_host,
                             channels=channels, root=options.root, pxn=relay,
                             nic_ports=per_nic)
        fill = _pipeline_fill(fabric, gpus, float(size), algo, bool(options.pxn), nccl)
        scheduled = (algo, protocol, sch, fill)
        SCHEDULE_CACHE.put(fabric, scheduled_key, scheduled)
    algo, protocol, sch, fill = scheduled
    paths = route_schedule(fabric, sch, routing, int(qps), seed, routing_options, state)
    plan = RoutedSchedule(sch, algo, protocol, int(qps), paths, nccl,
                          wire_paths(fabric, sch, paths, nccl), fill)
    PLAN_CACHE.put(fabric, key, plan)
    return plan
