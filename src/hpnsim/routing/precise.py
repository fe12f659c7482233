"""HPN's precise path selection: find source ports whose ECMP paths are disjoint.

The switches still hash as in ECMP; the host picks *which* connections to use. For each
flow in order, candidate connection ``c = 0, 1, 2, ...`` (UDP source port derived from
``c``, NIC port ``c mod ports``) is routed exactly as the switches would hash it; the flow
takes the candidate whose busiest network link is least loaded so far (ties: least total
load), stopping early at a path whose network links are all idle. The chosen source ports
reproduce the same paths under plain ``ecmp`` routing. A path ends with the ToR -> NIC
link into the destination's port, so the receive port's load counts as much as the send
port's (on a dual-plane fabric a candidate's NIC port fixes both).

Under a :class:`~hpnsim.fabrics.state.FabricState` with links down, candidates leave only
on ports that still reach the destination and walk only links that are up (as ECMP would
rehash them); a flow no such candidate can carry keeps its all-up choice (it stalls).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import LinkKind
from hpnsim.routing.ecmp import switch_seeds, tier_codes
from hpnsim.routing.flows import FlowBatch
from hpnsim.routing.hashing import KEY_BYTES, ROCE_DPORT, UDP_PROTO
from hpnsim.routing.kernels import new_cache, walk_one
from hpnsim.routing.paths import Paths

#: links whose load precise path selection balances (in-host links are fixed by the endpoints)
NETWORK_LINKS = (LinkKind.ACCESS, LinkKind.UPLINK, LinkKind.CORE, LinkKind.PEER)
DEFAULT_CANDIDATES = 256
#: the options of :func:`precise_policy` (besides the common pxn, sport, port)
OPTIONS = {"hash_tor", "hash_agg", "hash_core", "seed_mode", "candidates", "sizes"}


@njit(cache=True, inline="always")
def _mix_step(h, value):
    x = np.uint64(np.int64(value)) + h
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def source_port(seed, relay, dst, conn):
    """Same as ``49152 + mix64(seed, relay, dst, conn) % 16384`` (hashing.mix64)."""
    h = np.uint64(0x9E3779B97F4A7C15)
    h = _mix_step(h, seed)
    h = _mix_step(h, relay)
    h = _mix_step(h, dst)
    h = _mix_step(h, conn)
    return 49152 + np.int64(h % np.uint64(16384))


@njit(cache=True)
def _fill_key(key, sip, dip, sport):
    for b in range(4):
        key[b] = (sip >> (8 * (3 - b))) & 0xFF
        key[4 + b] = (dip >> (8 * (3 - b))) & 0xFF
    key[8] = (sport >> 8) & 0xFF
    key[9] = sport & 0xFF
    key[10] = (ROCE_DPORT >> 8) & 0xFF
    key[11] = ROCE_DPORT & 0xFF
    key[12] = UDP_PROTO


@njit(cache=True)
def precise_select(relay, dst, seed, base_sport, forced_port, ports, targets, gpu_tor,
                   access_up, access_down, ip, topo, tier_code, seeds, counted, sizes, n_links,
                   max_candidates, width):
    """Greedy least-loaded choice among candidate connections, flows in order.

    ``base_sport[i] >= 0`` makes candidate c use source port ``base + c``; ``forced_port[i]
    >= 0`` pins the NIC port, else candidate c leaves on ``ports[i, c mod m]`` (the flow's
    ``m`` usable ports, padded with -1); ``targets[i]`` are the destination ToRs. Returns
    ``(table, sport, port, ok)``; ``table[i]`` starts with the ACCESS link, then the switch
    links.
    """
    n = relay.shape[0]
    table = np.empty((n, width), dtype=np.int32)
    table[:] = -1
    sport_out = np.empty(n, dtype=np.int64)
    sport_out[:] = 0
    port_out = np.empty(n, dtype=np.int64)
    port_out[:] = 0
    ok = np.empty(n, dtype=np.bool_)
    ok[:] = False
    load = np.empty(n_links, dtype=np.float64)
    load[:] = 0.0
    cache = new_cache(topo, gpu_tor.shape[1])
    # walk_one's all-up base (never consulted: not degraded); topo's own arrays
    base = (topo[0], topo[1], topo[4], topo[5], topo[6])
    row = np.empty(width, dtype=np.int32)
    key = np.empty(KEY_BYTES, dtype=np.uint8)
    for i in range(n):
        r, d = relay[i], dst[i]
        usable = 0
        for p in range(ports.shape[1]):
            if ports[i, p] >= 0:
                usable += 1
        best_worst = np.inf
        best_total = np.inf
        for c in range(max_candidates):
            if base_sport[i] >= 0:
                sport = (base_sport[i] + c) & 0xFFFF
            else:
                sport = source_port(seed, r, d, c)
            port = forced_port[i] if forced_port[i] >= 0 else ports[i, c % max(usable, 1)]
            _fill_key(key, ip[r], ip[d], sport)
            row[:] = -1
            row[0] = access_up[r, port]
            status = walk_one(gpu_tor[r, port], targets[i], access_down[d], key, d, topo,
                              tier_code, seeds, row, np.int64(1), cache, base, cache,
                              np.bool_(False))
            if status != 0:
                continue
            worst = 0.0
            total = 0.0
            for k in range(width):
                link = row[k]
                if link >= 0 and counted[link]:
                    total += load[link]
                    if load[link] > worst:
                        worst = load[link]
            if worst < best_worst or (worst == best_worst and total < best_total):
                best_worst, best_total = worst, total
                # a loop: a slice assignment compiles its shape-mismatch message (issue 21)
                for k in range(width):
                    table[i, k] = row[k]
                sport_out[i], port_out[i], ok[i] = sport, port, True
                if worst == 0.0:
                    break       # every network link of this path is idle: cannot do better
        if ok[i]:
            for k in range(width):
                if table[i, k] >= 0:
                    load[table[i, k]] += sizes[i]
    return table, sport_out, port_out, ok


def _port_lists(usable: np.ndarray) -> np.ndarray:
    """Per row of a bool ``(n, ports)`` mask, its True columns first, padded with -1."""
    cols = np.broadcast_to(np.arange(usable.shape[1]), usable.shape)
    order = np.argsort(~usable, axis=1, kind="stable")
    lists = np.where(np.take_along_axis(usable, order, 1), np.take_along_axis(cols, order, 1),
                     -1).astype(np.int64)
    lists[:, 0] = np.maximum(lists[:, 0], 0)     # no usable port: port 0 (then unreachable)
    return lists


def select_precise(flows: FlowBatch, subset: np.ndarray, base_sport, forced_port, codes,
                   seeds, sizes, candidates, *, base: bool = False) -> tuple:
    """Run :func:`precise_select` on the flows in ``subset`` (flows leaving their host).

    ``base`` walks the all-up fabric. Returns ``(table, sport, port, ok)``.
    """
    t = flows.t.base if base else flows.t
    relay, dst = flows.relay[subset], flows.dst[subset]
    n = relay.size
    sport = np.full(n, -1, np.int64) if base_sport is None else np.asarray(base_sport, np.int64)
    forced = np.full(n, -1, np.int64) if forced_port is None else np.asarray(forced_port,
                                                                              np.int64)
    usable = flows.wired_ports(subset) if base else flows.port_options(subset)
    if not base and flows.degraded:     # cut off: try the all-up ports (and stall)
        usable = np.where(usable.any(axis=1)[:, None], usable, flows.wired_ports(subset))
    counted = np.isin(flows.fabric.link_kind, NETWORK_LINKS)
    return precise_select(
        relay.astype(np.int64), dst.astype(np.int64), np.int64(flows.seed), sport, forced,
        _port_lists(usable), flows.targets(subset, base=base), t.gpu_tor, t.access_up,
        t.access_down, t.ip, t.topo(flows.fabric), codes, seeds, counted,
        np.asarray(sizes, np.float64), flows.fabric.n_links, int(candidates),
        flows.t.max_hops + 3)


def precise_policy(flows: FlowBatch, options: dict) -> Paths:
    """Precise paths (called by :func:`hpnsim.routing.route`; options there).

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing.tables import routing_tables
    >>> f = hpn7(segments=2, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> p = precise_policy(FlowBatch(f, routing_tables(f), [0, 0], [16, 16]), {})
    >>> len({int(p.path(0)[2]), int(p.path(1)[2])})     # two disjoint uplinks
    2
    """
    candidates = options.get("candidates", DEFAULT_CANDIDATES)
    if isinstance(candidates, bool) or not isinstance(candidates, int | np.integer) \
            or candidates < 1:
        raise InputError("candidates", f"must be an integer >= 1, got {candidates!r}")
    forced = flows.forced_port(options.get("port"))
    sizes = np.broadcast_to(np.asarray(options.get("sizes", 1.0), dtype=np.float64),
                            (flows.n,))
    seeds = switch_seeds(flows.fabric, flows.seed, options.get("seed_mode", "per_switch"))
    codes = tier_codes(options)
    out = np.flatnonzero(~flows.intra)
    base_sport = None if options.get("sport") is None else flows.sport[out]
    pinned = None if forced is None else forced[out]
    table, sport, port_out, ok = select_precise(flows, out, base_sport, pinned, codes, seeds,
                                                sizes[out], candidates)
    stuck = np.flatnonzero(~ok)
    if stuck.size and flows.degraded:   # no route avoids the dead links: the all-up one
        table[stuck], sport[stuck], port_out[stuck], ok[stuck] = select_precise(
            flows, out[stuck], None if base_sport is None else base_sport[stuck],
            None if pinned is None else pinned[stuck], codes, seeds, sizes[out[stuck]],
            candidates, base=True)
    if not ok.all():
        i = int(out[np.flatnonzero(~ok)[0]])
        raise InputError("dst", f"GPU {int(flows.dst[i])} is unreachable from GPU "
                                f"{int(flows.relay[i])}")
    port = np.zeros(flows.n, dtype=np.int64)
    port[out] = port_out
    flows.sport = flows.sport.copy()
    flows.sport[out] = sport
    walk = np.full((flows.n, table.shape[1] - 1), -1, dtype=np.int32)
    walk[out] = table[:, 1:]
    return Paths.from_padded(np.hstack([flows.head(port), walk, flows.tail()]),
                             src=flows.src, dst=flows.dst,
                             port=np.where(~flows.intra, port, -1),
                             sport=np.where(~flows.intra, flows.sport, -1), policy="precise")
