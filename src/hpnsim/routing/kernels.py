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
def ecmp_walk(start, dst_tors, dst_down, keys, dst_code, sw_ptr, sw_links, link_dst, row,
              distance, pair_keys, pair_links, node_tier, tier_code, seeds, width):
    """Route every flow from its start ToR to its destination NIC.

    Returns ``(table, status)``: ``table[i]`` holds flow i's link ids padded with -1;
    ``status[i]`` is 0 on success, 1 if unreachable, 2 if longer than ``width`` links.
    """
    n = start.shape[0]
    table = np.full((n, width), -1, dtype=np.int32)
    status = np.zeros(n, dtype=np.int8)
    n_nodes = row.shape[0]
    tags, counts, cached = _new_cache(dst_tors.shape[1], max_out_degree(sw_ptr))
    for i in range(n):
        targets = dst_tors[i]
        cur = start[i]
        if cur < 0:
            status[i] = 1
            continue
        d = _dist(cur, targets, row, distance)
        if d >= UNREACHABLE:
            status[i] = 1
            continue
        k = 0
        while True:
            if k >= width:
                status[i] = 2
                break
            if d == 0:
                count = 0
                for p in range(targets.shape[0]):
                    if targets[p] == cur:
                        count += 1
                pick = 0
                if count > 1:
                    pick = np.int64(hash_row(4, keys[i], seeds[cur])) % count
                for p in range(targets.shape[0]):
                    if targets[p] == cur:
                        if pick == 0:
                            table[i, k] = dst_down[i, p]
                            break
                        pick -= 1
                break
            slot = _cached_candidates(cur, d, targets, sw_ptr, sw_links, link_dst, row,
                                      distance, pair_keys, pair_links, n_nodes, tags, counts,
                                      cached)
            count = counts[slot]
            buf = cached[slot]
            if count == 0:
                status[i] = 1
                break
            pick = 0
            if count > 1:
                code = tier_code[node_tier[cur]]
                if code >= 0:
                    pick = np.int64(hash_row(code, keys[i], seeds[cur])) % count
                else:
                    # fixed mapping: no 5-tuple hash, but distinct upstream switches map
                    # to distinct next hops, so the diversity of earlier hashes survives
                    pick = (dst_code[i] + cur) % count
            table[i, k] = buf[pick]
            cur = link_dst[buf[pick]]
            k += 1
            d -= 1
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
                            out_links[pos] = dst_down[i, p]
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
    each. Returns CSR ``(ptr, links, weight)`` and a per-flow ok flag.
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


@njit(cache=True)
def greedy_least_loaded(candidates, n_candidates, counted, sizes, n_links):
    """Place flows in order, each on the candidate path whose busiest counted link is least
    loaded (ties: least total load on counted links, then lowest candidate index).

    ``candidates``: ``(n_flows * n_candidates, width)`` padded link tables, flow-major;
    rows whose first entry is -2 are invalid. Returns the chosen candidate per flow.
    """
    n = sizes.shape[0]
    load = np.zeros(n_links, dtype=np.float64)
    choice = np.full(n, -1, dtype=np.int64)
    width = candidates.shape[1]
    for i in range(n):
        best_max = np.inf
        best_sum = np.inf
        for c in range(n_candidates):
            r = i * n_candidates + c
            if candidates[r, 0] == -2:
                continue
            worst = 0.0
            total = 0.0
            for k in range(width):
                link = candidates[r, k]
                if link < 0:
                    continue
                if counted[link]:
                    value = load[link]
                    total += value
                    if value > worst:
                        worst = value
            if worst < best_max or (worst == best_max and total < best_sum):
                best_max = worst
                best_sum = total
                choice[i] = c
        if choice[i] >= 0:
            r = i * n_candidates + choice[i]
            for k in range(width):
                link = candidates[r, k]
                if link >= 0:
                    load[link] += sizes[i]
    return choice
