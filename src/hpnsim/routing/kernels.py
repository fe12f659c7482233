"""Numba kernels shared by the hashing policies: hop-by-hop shortest-path walks.

All kernels take flat arrays only. A flow enters the switch fabric at ``start`` (the ToR
behind the NIC port it leaves on) and must reach one of its destination ToRs
``dst_tors[i, :]`` (one per destination NIC port, -1 where none), then the NIC over
``dst_down[i, p]``. A switch's candidates are its out-links to switches one hop closer to
the nearest destination ToR (``distance`` is the fabric's switch hop-count matrix), so the
same code routes templated and imported topologies.

Choice at a switch with ``c > 1`` candidates: ``tier_code[tier]`` >= 0 hashes the flow's
5-tuple key with that function and the switch's seed; a negative code ``-1 - h`` uses a
fixed per-destination mapping (``(dst_code + switch id) % c``), as HPN's core and
aggregation switches do, and falls back to hashing with function ``h`` when the mapped
link is down.

``topo`` is :meth:`~hpnsim.routing.tables.RoutingTables.topo`: the adjacency and distances
the walk follows (under a :class:`~hpnsim.fabrics.state.FabricState`, only the links that
are up, and distances over them). ``base`` is
:meth:`~hpnsim.routing.tables.RoutingTables.base_topo` (the all-up adjacency and
distances), consulted through its own candidate cache only when ``degraded`` is set: with
every link up the walks are exactly the all-up walks. Degraded, a switch picks among its
remaining candidates with the same hash (fewer candidates), and a fixed mapping keeps its
all-up choice whenever that link is still a candidate. (One signature for both cases, not
``base=None``: each kernel then compiles once on a fresh install, issue 21.)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.routing.hashing import hash_row

UNREACHABLE = 1 << 30

# Calls between kernels pass integers as np.int64(...): numba types a constant (or a
# variable it infers to be one) as a literal and compiles the callee once per literal and
# per int32/int64 mix, which a fresh install pays for in compile time (issue 21).


@njit(cache=True)
def max_out_degree(sw_ptr):
    best = 1
    for i in range(sw_ptr.shape[0] - 1):
        if sw_ptr[i + 1] - sw_ptr[i] > best:
            best = sw_ptr[i + 1] - sw_ptr[i]
    return best


@njit(cache=True, inline="always")
def target_distance(node, targets, row, distance):
    best = UNREACHABLE
    r = row[node]
    for p in range(targets.shape[0]):
        t = targets[p]
        if t >= 0:
            d = distance[r, row[t]]
            if d < best:
                best = d
    if best >= 32767:
        return UNREACHABLE
    return best


@njit(cache=True)
def _first_at_least(sorted_keys, key):
    """``np.searchsorted(sorted_keys, key)`` (side left) as a plain binary search: numba's
    generic one compiles comparisons for every dtype (issue 21, cold start)."""
    lo, hi = 0, sorted_keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _candidates(cur, d, targets, sw_ptr, sw_links, link_dst, row, distance, pair_keys,
                pair_links, n_nodes, buf):
    """Out-links of ``cur`` to switches one hop closer to ``targets``; fills ``buf``.

    One hop before the destination ToRs the candidates are exactly the links to them, found
    by binary search instead of scanning every port (an Agg has ~120 downlinks)."""
    count = 0
    if d == 1:
        for p in range(targets.shape[0]):
            t = targets[p]
            if t < 0:
                continue
            seen = False
            for q in range(p):
                if targets[q] == t:
                    seen = True
            if seen:
                continue
            key = np.int64(cur) * n_nodes + t
            lo = _first_at_least(pair_keys, key)
            while lo < pair_keys.shape[0] and pair_keys[lo] == key:
                buf[count] = pair_links[lo]
                count += 1
                lo += 1
        return count
    for j in range(sw_ptr[cur], sw_ptr[cur + 1]):
        link = sw_links[j]
        if target_distance(link_dst[link], targets, row, distance) == d - 1:
            buf[count] = link
            count += 1
    return count


CACHE_SLOTS = 4096


@njit(cache=True)
def candidate_cache(n_targets, max_degree, slots=CACHE_SLOTS):
    tags = np.empty((slots, n_targets + 2), dtype=np.int64)
    tags[:] = -1
    counts = np.empty(slots, dtype=np.int64)
    counts[:] = 0
    links = np.empty((slots, max_degree), dtype=np.int32)
    return tags, counts, links


@njit(cache=True)
def cached_candidates(cur, d, targets, sw_ptr, sw_links, link_dst, row, distance, pair_keys,
                       pair_links, n_nodes, tags, counts, links):
    """Candidate links of ``(cur, targets)`` memoized in a direct-mapped cache: flows
    between the same ToRs (and precise's many tries per flow) share them. Returns the slot."""
    h = np.uint64(cur) * np.uint64(0x9E3779B97F4A7C15)
    for p in range(targets.shape[0]):
        h = (h ^ np.uint64(targets[p] + 1)) * np.uint64(0xBF58476D1CE4E5B9)
    slot = np.int64(h >> np.uint64(52)) & (CACHE_SLOTS - 1)
    hit = tags[slot, 0] == cur and tags[slot, 1] == d
    if hit:
        for p in range(targets.shape[0]):
            if tags[slot, p + 2] != targets[p]:
                hit = False
                break
    if not hit:
        counts[slot] = _candidates(cur, d, targets, sw_ptr, sw_links, link_dst, row, distance,
                                   pair_keys, pair_links, n_nodes, links[slot])
        tags[slot, 0] = cur
        tags[slot, 1] = d
        for p in range(targets.shape[0]):
            tags[slot, p + 2] = targets[p]
    return slot


@njit(cache=True)
def _fixed_pick(cur, targets, dst_code, code, key, seeds, row, link_dst, cached, slot, count,
                base, base_cache):
    """Degraded fixed mapping: the all-up mapped link if still a candidate, else a hash."""
    b_ptr, b_links, b_distance, b_keys, b_pair_links = base
    b_tags, b_counts, b_cached = base_cache
    d = target_distance(cur, targets, row, b_distance)
    if d < UNREACHABLE and d > 0:
        b_slot = cached_candidates(np.int64(cur), np.int64(d), targets, b_ptr, b_links, link_dst, row,
                                   b_distance, b_keys, b_pair_links, row.shape[0], b_tags,
                                   b_counts, b_cached)
        if b_counts[b_slot] > 0:
            mapped = b_cached[b_slot, (dst_code + cur) % b_counts[b_slot]]
            for j in range(count):
                if cached[slot, j] == mapped:
                    return j
    return np.int64(hash_row(-1 - code, key, seeds[cur])) % count


@njit(cache=True)
def walk_one(cur, targets, down, key, dst_code, topo, tier_code, seeds, out, offset, cache,
             base, base_cache, degraded):
    """Route one flow from ToR ``cur`` to its NIC, writing links into ``out[offset:]``.

    ``topo`` from :meth:`~hpnsim.routing.tables.RoutingTables.topo`; ``cache`` from
    :func:`new_cache`; ``base`` / ``base_cache`` consulted only when ``degraded`` (module
    docstring). Returns 0 on success, 1 if the destination is unreachable, 2 if the path
    does not fit in ``out``.
    """
    sw_ptr, sw_links, link_dst, row, distance, pair_keys, pair_links, node_tier = topo
    tags, counts, cached = cache
    if cur < 0:
        return 1
    d = target_distance(cur, targets, row, distance)
    if d >= UNREACHABLE:
        return 1
    k = offset
    while True:
        if k >= out.shape[0]:
            return 2
        if d == 0:
            count = 0
            for p in range(targets.shape[0]):
                if targets[p] == cur:
                    count += 1
            pick = 0
            if count > 1:
                pick = np.int64(hash_row(np.int64(4), key, seeds[cur])) % count
            for p in range(targets.shape[0]):
                if targets[p] == cur:
                    if pick == 0:
                        out[k] = down[p]
                        break
                    pick -= 1
            return 0
        slot = cached_candidates(np.int64(cur), np.int64(d), targets, sw_ptr, sw_links, link_dst, row, distance,
                                 pair_keys, pair_links, row.shape[0], tags, counts, cached)
        count = counts[slot]
        if count == 0:
            return 1
        pick = 0
        if count > 1:
            code = tier_code[node_tier[cur]]
            if code >= 0:
                pick = np.int64(hash_row(code, key, seeds[cur])) % count
            else:
                # fixed mapping: no 5-tuple hash, but distinct upstream switches map
                # to distinct next hops, so the diversity of earlier hashes survives
                pick = (dst_code + cur) % count
                if degraded:
                    pick = _fixed_pick(cur, targets, dst_code, code, key, seeds, row,
                                       link_dst, cached, slot, count, base, base_cache)
        link = cached[slot, pick]
        out[k] = link
        cur = link_dst[link]
        k += 1
        d -= 1


@njit(cache=True)
def new_cache(topo, n_targets):
    """Candidate cache of a walk over ``topo`` (:func:`cached_candidates`)."""
    return candidate_cache(n_targets, max_out_degree(topo[0]))


@njit(cache=True)
def ecmp_walk(start, dst_tors, dst_down, keys, dst_code, topo, tier_code, seeds, width, base,
              degraded):
    """Route every flow from its start ToR to its destination NIC (see :func:`walk_one`).

    Returns ``(table, status)``: ``table[i]`` holds flow i's link ids padded with -1;
    ``status[i]`` is 0 on success, 1 if unreachable, 2 if longer than ``width`` links.
    """
    n = start.shape[0]
    table = np.empty((n, width), dtype=np.int32)
    table[:] = -1
    status = np.empty(n, dtype=np.int8)
    status[:] = 0
    cache = new_cache(topo, dst_tors.shape[1])
    # all up, the base cache is never read: a one-link placeholder
    base_cache = candidate_cache(dst_tors.shape[1], max_out_degree(base[0]) if degraded else 1)
    for i in range(n):
        status[i] = walk_one(start[i], dst_tors[i], dst_down[i], keys[i], dst_code[i], topo,
                             tier_code, seeds, table[i], np.int64(0), cache, base, base_cache,
                             degraded)
    return table, status
