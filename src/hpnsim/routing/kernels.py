"""Numba kernels: hop-by-hop shortest-path ECMP walks, spraying fractions, greedy placement.

All kernels take flat arrays only. A flow enters the switch fabric at ``start`` (the ToR
behind the NIC port it leaves on) and must reach one of its destination ToRs
``dst_tors[i, :]`` (one per destination NIC port, -1 where none), then the NIC over
``dst_down[i, p]``. A switch's candidates are its out-links to switches one hop closer to
the nearest destination ToR (``distance`` is the fabric's switch hop-count matrix), so the
same code routes templated and imported topologies.

Choice at a switch with ``c > 1`` candidates: ``tier_code[tier]`` >= 0 hashes the flow's
5-tuple key with that function and the switch's seed; -1 uses a fixed per-destination
mapping (``(dst_code + switch id) % c``), as HPN's core and aggregation switches do.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.routing.hashing import hash_row

UNREACHABLE = 1 << 30


@njit(cache=True)
def max_out_degree(sw_ptr):
    best = 1
    for i in range(sw_ptr.shape[0] - 1):
        if sw_ptr[i + 1] - sw_ptr[i] > best:
            best = sw_ptr[i + 1] - sw_ptr[i]
    return best


@njit(cache=True, inline="always")
def _dist(node, targets, row, distance):
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
            lo = np.searchsorted(pair_keys, key)
            while lo < pair_keys.shape[0] and pair_keys[lo] == key:
                buf[count] = pair_links[lo]
                count += 1
                lo += 1
        return count
    for j in range(sw_ptr[cur], sw_ptr[cur + 1]):
        link = sw_links[j]
        if _dist(link_dst[link], targets, row, distance) == d - 1:
            buf[count] = link
            count += 1
    return count


CACHE_SLOTS = 4096


@njit(cache=True)
def _new_cache(n_targets, max_degree):
    tags = np.full((CACHE_SLOTS, n_targets + 2), -1, dtype=np.int64)
    counts = np.zeros(CACHE_SLOTS, dtype=np.int64)
    links = np.empty((CACHE_SLOTS, max_degree), dtype=np.int32)
    return tags, counts, links


@njit(cache=True)
def _cached_candidates(cur, d, targets, sw_ptr, sw_links, link_dst, row, distance, pair_keys,
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
def walk_one(cur, targets, down, key, dst_code, topo, tier_code, seeds, out, offset, cache):
    """Route one flow from ToR ``cur`` to its NIC, writing links into ``out[offset:]``.

    ``topo`` = ``(sw_ptr, sw_links, link_dst, row, distance, pair_keys, pair_links,
    node_tier)``; ``cache`` from :func:`_new_cache`. Returns 0 on success, 1 if the
    destination is unreachable, 2 if the path does not fit in ``out``.
    """
    sw_ptr, sw_links, link_dst, row, distance, pair_keys, pair_links, node_tier = topo
    tags, counts, cached = cache
    if cur < 0:
        return 1
    d = _dist(cur, targets, row, distance)
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
                pick = np.int64(hash_row(4, key, seeds[cur])) % count
            for p in range(targets.shape[0]):
                if targets[p] == cur:
                    if pick == 0:
                        out[k] = down[p]
                        break
                    pick -= 1
            return 0
        slot = _cached_candidates(cur, d, targets, sw_ptr, sw_links, link_dst, row, distance,
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
        link = cached[slot, pick]
        out[k] = link
        cur = link_dst[link]
        k += 1
        d -= 1


@njit(cache=True)
def new_cache(topo, n_targets):
    return _new_cache(n_targets, max_out_degree(topo[0]))


@njit(cache=True)
def ecmp_walk(start, dst_tors, dst_down, keys, dst_code, topo, tier_code, seeds, width):
    """Route every flow from its start ToR to its destination NIC (see :func:`walk_one`).

    Returns ``(table, status)``: ``table[i]`` holds flow i's link ids padded with -1;
    ``status[i]`` is 0 on success, 1 if unreachable, 2 if longer than ``width`` links.
    """
    n = start.shape[0]
    table = np.full((n, width), -1, dtype=np.int32)
    status = np.zeros(n, dtype=np.int8)
    cache = new_cache(topo, dst_tors.shape[1])
    for i in range(n):
        status[i] = walk_one(start[i], dst_tors[i], dst_down[i], keys[i], dst_code[i], topo,
                             tier_code, seeds, table[i], 0, cache)
    return table, status


@njit(cache=True)
def _spray_flow(i, start, start_frac, dst_tors, dst_down, sw_ptr, sw_links, link_dst, row,
                distance, pair_keys, pair_links, tags, counts, cached, acc, pending, out_links,
                out_weight, pos, fill):
    """Per-packet spraying of flow i: split evenly at every switch, merge at every node."""
    targets = dst_tors[i]
    n_pending = 0
    top = -1
    for p in range(start.shape[1]):
        s = start[i, p]
        if s >= 0 and start_frac[i, p] > 0.0:
            d = _dist(s, targets, row, distance)
            if d >= UNREACHABLE:
                return -1
            if acc[s] == 0.0:
                pending[n_pending] = s
                n_pending += 1
            acc[s] += start_frac[i, p]
            if d > top:
                top = d
    level = top
    while level >= 0:
        end = n_pending
        for q in range(end):
            node = pending[q]
            share = acc[node]
            if _dist(node, targets, row, distance) != level:
                continue
            if level == 0:
                count = 0
                for p in range(targets.shape[0]):
                    if targets[p] == node:
                        count += 1
                for p in range(targets.shape[0]):
                    if targets[p] == node:
                        if fill:
                            out_links[pos] = -(p + 1)   # exit port p, resolved later
                            out_weight[pos] = share / count
                        pos += 1
                continue
            slot = _cached_candidates(node, level, targets, sw_ptr, sw_links, link_dst, row,
                                      distance, pair_keys, pair_links, acc.shape[0], tags,
                                      counts, cached)
            count = counts[slot]
            buf = cached[slot]
            if count == 0:
                return -1
            for j in range(count):
                link = buf[j]
                nxt = link_dst[link]
                if fill:
                    out_links[pos] = link
                    out_weight[pos] = share / count
                pos += 1
                if acc[nxt] == 0.0:
                    pending[n_pending] = nxt
                    n_pending += 1
                acc[nxt] += share / count
        level -= 1
    for q in range(n_pending):
        acc[pending[q]] = 0.0
    return pos


@njit(cache=True)
def spray_walk(start, start_frac, dst_tors, dst_down, sw_ptr, sw_links, link_dst, row,
               distance, pair_keys, pair_links, n_nodes):
    """Fractions of every flow over all equal-cost switch paths (split evenly per hop).

    ``start[i, p]`` / ``start_frac[i, p]``: the ToRs a flow enters and the fraction entering
    each. Returns CSR ``(ptr, links, weight)`` and a per-flow ok flag. The last hop into the
    destination NIC over port p is written as ``-(p + 1)``, so flows that differ only in
    their destination NIC share one result.
    """
    n = start.shape[0]
    acc = np.zeros(n_nodes, dtype=np.float64)
    pending = np.empty(n_nodes, dtype=np.int64)
    dummy_l = np.empty(0, dtype=np.int32)
    dummy_w = np.empty(0, dtype=np.float64)
    flow_entries = np.zeros(n, dtype=np.int64)
    ok = np.ones(n, dtype=np.bool_)
    tags, counts, cached = _new_cache(dst_tors.shape[1], max_out_degree(sw_ptr))
    for i in range(n):
        c = _spray_flow(i, start, start_frac, dst_tors, dst_down, sw_ptr, sw_links, link_dst,
                        row, distance, pair_keys, pair_links, tags, counts, cached, acc,
                        pending, dummy_l,
                        dummy_w, 0, False)
        if c < 0:
            ok[i] = False
            c = 0
        flow_entries[i] = c
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        ptr[i + 1] = ptr[i] + flow_entries[i]
    links = np.empty(ptr[n], dtype=np.int32)
    weight = np.empty(ptr[n], dtype=np.float64)
    for i in range(n):
        if ok[i]:
            _spray_flow(i, start, start_frac, dst_tors, dst_down, sw_ptr, sw_links, link_dst,
                        row, distance, pair_keys, pair_links, tags, counts, cached, acc,
                        pending, links,
                        weight, ptr[i], True)
    return ptr, links, weight, ok
