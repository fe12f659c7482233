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

from hpnsim.collectives.algorithms import build_schedule
from hpnsim.collectives.model import GroupShape, choose_algorithm, choose_protocol
from hpnsim.collectives.nccl import NcclParams, resolve_nccl
from hpnsim.collectives.ops import normalize_algorithm, normalize_op, normalize_protocol
from hpnsim.collectives.options import AUTO, CollectiveOptions
from hpnsim.collectives.schedule import Schedule, Stage, check_group
from hpnsim.errors import InputError, check_seed


@dataclass(frozen=True)
class RoutedSchedule:
    """A collective's schedule, concrete algorithm and protocol, the member paths of every
    stage (QP-expanded: each member ``qps`` times, consecutively), the NCCL parameters it
    was planned with, and ``wire_paths``: the same paths with every link weighted by its
    wire bytes per payload byte (1/efficiency of the link kind; NVLS stages also 1/NVLS
    efficiency), which is what the engine runs."""

    schedule: Schedule
    algo: str
    protocol: str
    qps: int
    paths: tuple  # Paths per stage
    nccl: NcclParams = NcclParams()
    wire_paths: tuple = ()


def wire_paths(fabric, sch: Schedule, paths: tuple, nccl: NcclParams) -> tuple:
    """``paths`` with each entry's weight times its link's wire inflation
    (:meth:`~hpnsim.collectives.nccl.NcclParams.link_inflation`)."""
    from hpnsim.routing.paths import Paths

    inflation = nccl.link_inflation(fabric)
    out = []
    for stage, p in zip(sch.stages, paths, strict=True):
        if p is None:
            out.append(None)
            continue
        weight = p.weight * inflation[p.links]
        if stage.switch is not None:
            weight = weight / nccl.nvls_efficiency
        out.append(Paths(p.ptr, p.links, weight, src=p.src, dst=p.dst, port=p.port,
                         sport=p.sport, policy=p.policy))
    return tuple(out)


def switch_paths(fabric, stage: Stage, qps: int):
    """Paths of an NVLS stage: member i loads GPU src[i]'s link to its NVSwitch with
    ``switch[0]`` and the NVSwitch's link back with ``switch[1]`` (QP-expanded)."""
    from hpnsim.fabrics.fabric import LinkKind
    from hpnsim.routing.paths import Paths

    up, down = [], []
    for g in np.repeat(stage.src, qps):
        node = int(fabric.gpu_node[g])
        out = fabric.out_of(node)
        link = out[fabric.link_kind[out] == LinkKind.NVLINK]
        if link.size == 0:
            raise InputError("algo", f"nvls needs an NVSwitch; GPU {int(g)} has no NVLink")
        switch = int(fabric.link_dst[link[0]])
        up.append(int(link[0]))
        down.append(int(fabric.link_ids(np.array([switch]), np.array([node]))[0]))
    n = len(up)
    links = np.stack([up, down], axis=1).ravel().astype(np.int32)
    weight = np.tile(np.asarray(stage.switch, dtype=np.float64), n)
    return Paths(np.arange(0, 2 * n + 1, 2), links, weight)


def resolve_algorithm(fabric, op: str, gpus: np.ndarray, size: float,
                      options: CollectiveOptions) -> tuple[str, str]:
    """Concrete (algorithm, protocol) of ``options`` on the actual group: an ``auto`` choice
    is the smallest predicted time (:func:`~hpnsim.collectives.model.choose_algorithm`).

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


def _join(first, second):
    """Per flow, the links of ``first`` followed by those of ``second`` (relay + rail hop)."""
    from hpnsim.routing.paths import Paths

    la, lb = np.diff(first.ptr), np.diff(second.ptr)
    ptr = np.concatenate([[0], np.cumsum(la + lb)])
    links = np.empty(ptr[-1], dtype=np.int32)
    weight = np.empty(ptr[-1], dtype=np.float64)
    pos_a = np.repeat(ptr[:-1], la) + (np.arange(la.sum()) - np.repeat(first.ptr[:-1], la))
    pos_b = np.repeat(ptr[:-1] + la, lb) + (np.arange(lb.sum()) - np.repeat(second.ptr[:-1], lb))
    links[pos_a], weight[pos_a] = first.links, first.weight
    links[pos_b], weight[pos_b] = second.links, second.weight
    return Paths(ptr, links, weight, src=second.src, dst=second.dst, port=second.port,
                 sport=second.sport, policy=second.policy)


def route_members(fabric, src, dst, via, conn, routing: str, seed: int, options: dict,
                  state=None):
    """Route member flows; a flow with ``via >= 0`` is the NVLink hop to ``via`` followed by
    the network route from ``via`` (PXN).

    Every flow goes to the router in one call, so ``precise`` sees them all and a NIC's
    connections are spread over its ports together (flows that stay inside a host take no
    turn in the port round-robin).
    """
    from hpnsim.routing.paths import Paths
    from hpnsim.routing.route import route

    relayed = via >= 0
    start = np.where(relayed, via, src)
    main = route(fabric, start, dst, routing, conn=conn, seed=seed, state=state, **options)
    if not relayed.any():
        return main
    hop = route(fabric, src[relayed], via[relayed], routing, conn=conn[relayed], seed=seed,
                state=state, **{k: v for k, v in options.items() if k == "pxn"})
    counts = np.zeros(src.size, dtype=np.int64)
    counts[relayed] = np.diff(hop.ptr)
    prefix = Paths(np.concatenate([[0], np.cumsum(counts)]), hop.links, hop.weight)
    return _join(prefix, main)


def routing_order(sch: Schedule, qps: int) -> np.ndarray:
    """Order in which the QP-expanded members of all stages go to the router.

    Stages with the same members (the channels of one rail, a ring's copies per NIC port)
    are interleaved member by member, so a NIC that hands its connections to its ports in
    turn (``hpn_dual_plane``) puts each copy on its own port, as NCCL binds a channel to a
    port. Returns the flow indices (stage-major numbering) in routing order.

    >>> sch = Schedule("sendrecv", "direct", np.array([0, 8]), 2.0)
    >>> from hpnsim.collectives.p2p import p2p_stages
    >>> p2p_stages(sch, 8, 2)
    >>> routing_order(sch, 1).tolist()     # members of channel 0 and 1 alternate
    [0, 2, 1, 3]
    """
    families: dict[bytes, int] = {}
    keys = []
    for i, s in enumerate(sch.stages):
        via = s.via if s.via is not None else np.full(s.n_members, -1)
        ident = b"".join(np.ascontiguousarray(a, dtype=np.int64).tobytes()
                         for a in (s.src, s.dst, via))
        family = families.setdefault(ident, i)
        member = np.arange(s.n_members * qps)
        keys.append(np.stack([np.full(member.size, family), member,
                              np.full(member.size, i)]))
    if not keys:
        return np.zeros(0, dtype=np.int64)
    family, member, stage = np.concatenate(keys, axis=1)
    return np.lexsort((stage, member, family))


def route_schedule(fabric, sch: Schedule, routing: str, qps: int, seed: int,
                   options: dict, state=None) -> tuple:
    """Paths of every stage's members (QP-expanded), routed in one call (see
    :func:`routing_order`); connection ids are drawn from ``seed`` in stage order."""
    counts = [s.n_members * qps for s in sch.stages]
    empty = np.zeros(0, np.int64)
    src = np.concatenate([np.repeat(s.src, qps) for s in sch.stages] or [empty])
    dst = np.concatenate([np.repeat(s.dst, qps) for s in sch.stages] or [empty])
    via = np.concatenate([np.repeat(s.via if s.via is not None else np.full(s.n_members, -1),
                                    qps) for s in sch.stages] or [empty])
    conn = np.random.default_rng(seed).integers(0, 1 << 16, size=src.size)
    if routing == "precise" and "sizes" not in options:
        options["sizes"] = np.concatenate(
            [np.full(c, s.size / qps) for c, s in zip(counts, sch.stages, strict=True)]
            or [np.zeros(0)])
    if not src.size:
        return tuple(None for _ in sch.stages)
    if any(s.switch is not None for s in sch.stages):
        # NVLS stages have fixed in-host paths; route the others as a schedule of their own
        rest = Schedule(sch.op, sch.algo, sch.gpus, sch.size,
                        [s for s in sch.stages if s.switch is None])
        routed = iter(route_schedule(fabric, rest, routing, qps, seed, options, state)
                      if rest.stages else ())
        return tuple(switch_paths(fabric, s, qps) if s.switch is not None else next(routed)
                     for s in sch.stages)
    order = routing_order(sch, qps)
    per_flow = {k: np.asarray(v)[order] for k, v in options.items()
                if np.ndim(v) == 1 and np.size(v) == src.size}
    routed = route_members(fabric, src[order], dst[order], via[order], conn[order], routing,
                           seed, {**options, **per_flow}, state)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return tuple(routed.subset(inverse[bounds[i]:bounds[i + 1]])
                 for i in range(len(sch.stages)))


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

    >>> cache = PlanCache(maxsize=2)
    >>> cache.info()
    {'enabled': True, 'entries': 0, 'hits': 0, 'misses': 0, 'maxsize': 2}
    """

    def __init__(self, maxsize: int = 1024):
        self.maxsize = int(maxsize)
        self.enabled = True
        self.hits = self.misses = 0
        self._plans: WeakKeyDictionary = WeakKeyDictionary()

    def get(self, fabric, key):
        plans = self._plans.get(fabric) if self.enabled and key is not None else None
        plan = plans.get(key) if plans is not None else None
        if plan is None:
            self.misses += 1
        else:
            self.hits += 1
            plans.move_to_end(key)
        return plan

    def put(self, fabric, key, plan) -> None:
        if not self.enabled or key is None:
            return
        plans = self._plans.setdefault(fabric, OrderedDict())
        plans[key] = plan
        while len(plans) > self.maxsize:
            plans.popitem(last=False)

    def clear(self) -> None:
        self._plans = WeakKeyDictionary()
        self.hits = self.misses = 0

    def info(self) -> dict:
        entries = sum(len(p) for p in self._plans.values())
        return {"enabled": self.enabled, "entries": entries, "hits": self.hits,
                "misses": self.misses, "maxsize": self.maxsize}


#: the process-wide plan cache :func:`plan_collective` uses
PLAN_CACHE = PlanCache()


def plan_cache(enabled: bool | None = None, *, clear: bool = False) -> dict:
    """Turn the plan cache on or off, or clear it; returns its statistics.

    Results are the same with and without it; only compile time changes.

    >>> plan_cache(clear=True)["entries"]
    0
    """
    if clear:
        PLAN_CACHE.clear()
    if enabled is not None:
        PLAN_CACHE.enabled = bool(enabled)
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
        As :func:`~hpnsim.collectives.compile.compile_collective`.
    options : CollectiveOptions, optional
        How it runs (default: every default); ``qps`` None is ``nccl.qps_per_connection``.
    state : hpnsim.fabrics.FabricState, optional
        Routing avoids its down links where it has a choice (None: every link up).
    **keywords
        Fields of :class:`~hpnsim.collectives.options.CollectiveOptions` replacing those of
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
    from hpnsim.routing.route import POLICIES
    from hpnsim.routing.tables import state_key

    options = CollectiveOptions.build(options, **keywords)
    op = normalize_op(op)
    routing = options.routing
    if routing not in POLICIES:
        raise InputError("routing", f"must be one of {', '.join(POLICIES)}, got {routing!r}")
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
    algo, protocol = resolve_algorithm(fabric, op, gpus, float(size), options)
    relay = bool(options.pxn) and bool(fabric.meta.get("rail_optimized", False))
    per_nic = nccl.channels_per_nic or int(fabric.ports_per_nic)
    channels = options.channels
    if channels is None and op in ("send", "sendrecv"):
        channels = nccl.channels_per_net_peer   # NCCL_NCHANNELS_PER_NET_PEER
    sch = build_schedule(op, gpus, size, algo, gpus_per_host=fabric.gpus_per_host,
                         channels=channels, root=options.root, pxn=relay, nic_ports=per_nic)
    paths = route_schedule(fabric, sch, routing, int(qps), seed, routing_options, state)
    plan = RoutedSchedule(sch, algo, protocol, int(qps), paths, nccl,
                          wire_paths(fabric, sch, paths, nccl))
    PLAN_CACHE.put(fabric, key, plan)
    return plan
