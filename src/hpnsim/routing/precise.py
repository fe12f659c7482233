"""HPN's precise path selection: find source ports whose ECMP paths are disjoint.

The switches still hash as in ECMP; the host picks *which* connections to use. For each
flow in order, candidate connection ``c = 0, 1, 2, ...`` (UDP source port derived from
``c``, NIC port ``c mod ports``) is routed exactly as the switches would hash it; the flow
takes the candidate whose busiest network link is least loaded so far (ties: least total
load), stopping early at a path whose network links are all idle. The chosen source ports
reproduce the same paths under plain ``ecmp`` routing.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import Fabric, LinkKind
from hpnsim.routing.hashing import KEY_BYTES, ROCE_DPORT, UDP_PROTO
from hpnsim.routing.kernels import new_cache, walk_one

#: links whose load precise path selection balances (in-host links are fixed by the endpoints)
NETWORK_LINKS = (LinkKind.ACCESS, LinkKind.UPLINK, LinkKind.CORE, LinkKind.PEER)
DEFAULT_CANDIDATES = 256


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
def precise_select(relay, dst, seed, base_sport, forced_port, gpu_tor, access_up, access_down,
                   ip, topo, tier_code, seeds, counted, sizes, n_links, max_candidates, width):
    """Greedy least-loaded choice among candidate connections, flows in order.

    ``base_sport[i] >= 0`` makes candidate c use source port ``base + c``; ``forced_port[i]
    >= 0`` pins the NIC port. Returns ``(table, sport, port, ok)``; ``table[i]`` starts
    with the ACCESS link, then the switch links.
    """
    n = relay.shape[0]
    table = np.full((n, width), -1, dtype=np.int32)
    sport_out = np.zeros(n, dtype=np.int64)
    port_out = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=np.bool_)
    load = np.zeros(n_links, dtype=np.float64)
    cache = new_cache(topo, gpu_tor.shape[1])
    row = np.empty(width, dtype=np.int32)
    key = np.empty(KEY_BYTES, dtype=np.uint8)
    for i in range(n):
        r, d = relay[i], dst[i]
        usable = 0
        for p in range(gpu_tor.shape[1]):
            if gpu_tor[r, p] >= 0:
                usable += 1
        best_worst = np.inf
        best_total = np.inf
        for c in range(max_candidates):
            if base_sport[i] >= 0:
                sport = (base_sport[i] + c) & 0xFFFF
            else:
                sport = source_port(seed, r, d, c)
            port = forced_port[i] if forced_port[i] >= 0 else c % max(usable, 1)
            _fill_key(key, ip[r], ip[d], sport)
            row[:] = -1
            row[0] = access_up[r, port]
            status = walk_one(gpu_tor[r, port], gpu_tor[d], access_down[d], key, d, topo,
                              tier_code, seeds, row, 1, cache)
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
                table[i, :] = row
                sport_out[i], port_out[i], ok[i] = sport, port, True
                if worst == 0.0:
                    break       # every network link of this path is idle: cannot do better
        if ok[i]:
            for k in range(width):
                if table[i, k] >= 0:
                    load[table[i, k]] += sizes[i]
    return table, sport_out, port_out, ok


def select_precise(fabric: Fabric, tables, relay, dst, seed: int, base_sport, forced_port,
                   tier_codes, seeds, sizes, candidates) -> tuple:
    """Run :func:`precise_select` on flows leaving the host (see module docstring).

    Returns ``(table, sport, port)``; raises InputError for unreachable destinations.
    """
    if isinstance(candidates, bool) or not isinstance(candidates, int | np.integer) \
            or candidates < 1:
        raise InputError("candidates", f"must be an integer >= 1, got {candidates!r}")
    n = relay.size
    base = np.full(n, -1, np.int64) if base_sport is None else np.asarray(base_sport, np.int64)
    forced = np.full(n, -1, np.int64) if forced_port is None else np.asarray(forced_port,
                                                                              np.int64)
    counted = np.isin(fabric.link_kind, NETWORK_LINKS)
    width = tables.max_hops + 3
    table, sport, port, ok = precise_select(
        relay.astype(np.int64), dst.astype(np.int64), np.int64(seed), base, forced,
        tables.gpu_tor, tables.access_up, tables.access_down, tables.ip, tables.topo(fabric),
        tier_codes, seeds, counted, np.asarray(sizes, np.float64), fabric.n_links,
        int(candidates), width)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise InputError("dst", f"GPU {int(dst[i])} is unreachable from GPU {int(relay[i])}")
    return table, sport, port
