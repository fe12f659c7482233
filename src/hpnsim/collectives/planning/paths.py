"""Paths of a collective's member flows: every stage routed in one call, NVLS stages on
their fixed in-host links, and the wire weights the engine runs.

Examples
--------
>>> from hpnsim.collectives.schedules.algorithms import build_schedule
>>> from hpnsim.fabrics import hpn7
>>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
>>> sch = build_schedule("allgather", [0, 8], 2**20, "ring", channels=1)
>>> paths = route_schedule(f, sch, "ecmp", qps=1, seed=0, options={})
>>> [p.n_flows for p in paths]
[2]
"""

from __future__ import annotations

import numpy as np

from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.collectives.schedules.schedule import Schedule, Stage
from hpnsim.errors import InputError

__all__ = ["payload_paths", "route_schedule", "routing_order", "wire_paths"]


def wire_paths(fabric, sch: Schedule, paths: tuple, nccl: NcclParams) -> tuple:
    """``paths`` with each entry's weight times its link's wire inflation.

    Parameters
    ----------
    fabric : hpnsim.fabrics.Fabric
    sch : Schedule
        The schedule ``paths`` were routed for (its NVLS stages are also divided by
        ``nccl.nvls_efficiency``).
    paths : tuple of Paths or None
        Per stage, as :func:`route_schedule` returns them.
    nccl : NcclParams
        Link efficiencies (:meth:`~hpnsim.collectives.nccl.params.NcclParams.link_inflation`).

    Returns
    -------
    tuple of Paths or None
        The same paths, every link weighted by its wire bytes per payload byte.

    Examples
    --------
    >>> from hpnsim.collectives.schedules.algorithms import build_schedule
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> sch = build_schedule("allgather", [0, 8], 2**20, "ring", channels=1)
    >>> paths = route_schedule(f, sch, "ecmp", qps=1, seed=0, options={})
    >>> wired, = wire_paths(f, sch, paths, NcclParams())
    >>> bool((wired.weight > paths[0].weight).all())     # no link carries payload only
    True
    """
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


def payload_paths(sch: Schedule, paths: tuple, nccl: NcclParams) -> tuple:
    """``paths`` weighted by the bytes each member moves on a link per byte of its stage's
    size, before any link's efficiency: 1 (or the sprayed fraction), NVLS stages their
    multicast loads over ``nccl.nvls_efficiency``. What an engine that simulates every
    member on its own path (:mod:`hpnsim.packet`) sends; the link efficiencies it simulates
    or applies to the link itself.

    >>> from hpnsim.collectives.schedules.algorithms import build_schedule
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> sch = build_schedule("allgather", [0, 8], 2**20, "ring", channels=1)
    >>> payload, = payload_paths(sch, route_schedule(f, sch, "ecmp", qps=1, seed=0,
    ...                                               options={}), NcclParams())
    >>> payload.weight.tolist() == [1.0] * payload.links.size
    True
    """
    from hpnsim.routing.paths import Paths

    out = []
    for stage, p in zip(sch.stages, paths, strict=True):
        if p is None or stage.switch is None:
            out.append(p)
            continue
        out.append(Paths(p.ptr, p.links, p.weight / nccl.nvls_efficiency, src=p.src,
                         dst=p.dst, port=p.port, sport=p.sport, policy=p.policy))
    return tuple(out)


def _switch_paths(fabric, stage: Stage, qps: int):
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


def _route_members(fabric, src, dst, via, conn, routing: str, seed: int, options: dict,
                  state=None):
    """Route member flows; a flow with ``via >= 0`` is the NVLink hop to ``via`` followed by
    the network route from ``via`` (PXN).

    Every flow goes to the router in one call, so ``precise`` sees them all and a NIC's
    connections are spread over its ports together (flows that stay inside a host take no
    turn in the port round-robin).
    """
    from hpnsim.routing.dispatch import route
    from hpnsim.routing.paths import Paths

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
    port.

    Parameters
    ----------
    sch : Schedule
    qps : int
        Flows per member.

    Returns
    -------
    numpy.ndarray
        The flow indices (stage-major numbering) in routing order.

    Examples
    --------
    >>> sch = Schedule("sendrecv", "direct", np.array([0, 8]), 2.0)
    >>> from hpnsim.collectives.schedules.p2p import p2p_stages
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
    """Paths of every stage's members (QP-expanded), routed in one call.

    Parameters
    ----------
    fabric : hpnsim.fabrics.Fabric
    sch : Schedule
    routing : str
        Policy of :func:`hpnsim.routing.route`; ``precise`` gets every flow's bytes.
    qps : int
        Each member is ``qps`` flows in a row, each carrying 1/qps of its bytes.
    seed : int
        Connection ids (source ports) are drawn from it in stage order.
    options : dict
        Keywords of the routing policy (``pxn``, ...); a 1-D array with one value per flow is
        reordered with the flows (:func:`routing_order`).
    state : hpnsim.fabrics.FabricState, optional
        Routing avoids its down links where it has a choice.

    Returns
    -------
    tuple of Paths or None
        Per stage of ``sch`` (None for a stage without members).

    Examples
    --------
    >>> from hpnsim.collectives.schedules.algorithms import build_schedule
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> sch = build_schedule("alltoall", [0, 8], 2**20, "direct", channels=1)
    >>> [p.n_flows for p in route_schedule(f, sch, "ecmp", qps=2, seed=0, options={})]
    [4]
    """
    counts = [s.n_members * qps for s in sch.stages]
    empty = np.zeros(0, np.int64)
    src = np.concatenate([np.repeat(s.src, qps) for s in sch.stages] or [empty])
    dst = np.concatenate([np.repeat(s.dst, qps) for s in sch.stages] or [empty])
    via = np.concatenate([np.repeat(s.via if s.via is not None else np.full(s.n_members, -1),
                                    qps) for s in sch.stages] or [empty])
    conn = np.random.default_rng(seed).integers(0, 1 << 16, size=src.size)
    if not src.size:
        return tuple(None for _ in sch.stages)
    if any(s.switch is not None for s in sch.stages):
        # NVLS stages have fixed in-host paths; route the others as a schedule of their own
        # (precise's flow sizes are then those of the others alone)
        rest = Schedule(sch.op, sch.algo, sch.gpus, sch.size,
                        [s for s in sch.stages if s.switch is None])
        routed = iter(route_schedule(fabric, rest, routing, qps, seed, options, state)
                      if rest.stages else ())
        return tuple(_switch_paths(fabric, s, qps) if s.switch is not None else next(routed)
                     for s in sch.stages)
    if routing == "precise" and "sizes" not in options:
        options["sizes"] = np.concatenate(
            [np.full(c, s.size / qps) for c, s in zip(counts, sch.stages, strict=True)]
            or [np.zeros(0)])
    order = routing_order(sch, qps)
    per_flow = {k: np.asarray(v)[order] for k, v in options.items()
                if np.ndim(v) == 1 and np.size(v) == src.size}
    routed = _route_members(fabric, src[order], dst[order], via[order], conn[order], routing,
                           seed, {**options, **per_flow}, state)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return tuple(routed.subset(inverse[bounds[i]:bounds[i + 1]])
                 for i in range(len(sch.stages)))
