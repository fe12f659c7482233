"""Ideal per-packet spraying: a flow splits evenly over NIC ports and equal-cost next hops.

Under a :class:`~hpnsim.fabrics.state.FabricState` with links down, a flow splits over the
ports that still reach its destination and, at every switch, over the next hops whose
links are up (distances over the links that are up); a flow with no such route keeps its
all-up spread (it stalls on the dead links).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.errors import InputError
from hpnsim.routing.flows import FlowBatch
from hpnsim.routing.kernels import (
    UNREACHABLE,
    cached_candidates,
    candidate_cache,
    max_out_degree,
    target_distance,
)
from hpnsim.routing.paths import Paths

#: the options of :func:`spray_policy`
OPTIONS = {"pxn", "port"}


def _patterns(fabric, t, start, frac, targets, down):
    """Sprayed switch patterns, one per distinct (start ToRs, fractions, targets):
    ``(ptr, links, weight, ok, inverse)``; ``inverse`` maps each flow to its pattern."""
    pattern = np.hstack([start, frac.view(np.int64), targets])
    _, first, inverse = np.unique(pattern, axis=0, return_index=True, return_inverse=True)
    rep = first.astype(np.int64)
    uptr, ulinks, uweight, ok = spray_walk(start[rep], frac[rep], targets[rep], down[rep],
                                           t.sw_ptr, t.sw_links, fabric.link_dst, t.row,
                                           t.distance, t.pair_keys, t.pair_links,
                                           fabric.n_nodes)
    return uptr, ulinks, uweight, ok[inverse.ravel()], inverse.ravel()


def spray_policy(flows: FlowBatch, options: dict) -> Paths:
    """Paths with fractional weights (called by :func:`hpnsim.routing.route`).

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing.tables import routing_tables
    >>> f = hpn7(segments=2, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> p = spray_policy(FlowBatch(f, routing_tables(f), [0], [16]), {})
    >>> sorted(set(p.weight.tolist()))      # 2 ports, then 2 uplinks per ToR
    [0.25, 0.5, 1.0]
    """
    t, fabric = flows.t, flows.fabric
    forced = flows.forced_port(options.get("port"))
    out = np.flatnonzero(~flows.intra)
    relay, dst = flows.relay[out], flows.dst[out]
    start = t.gpu_tor[relay]
    if forced is not None:
        frac = (np.arange(t.ports)[None, :] == forced[out][:, None]).astype(np.float64)
    else:
        usable = flows.port_options(out)
        if flows.degraded:          # cut off: the all-up split (the flow stalls)
            usable = np.where(usable.any(axis=1)[:, None], usable, flows.wired_ports(out))
        frac = usable.astype(np.float64)
        frac /= np.maximum(frac.sum(axis=1, keepdims=True), 1.0)
    frac[start < 0] = 0.0
    # flows entering and leaving through the same ToRs spray identically: solve each once
    down = t.access_down[dst]
    uptr, ulinks, uweight, ok, pattern_out = _patterns(fabric, t, start, frac,
                                                       flows.targets(out), down)
    stuck = np.flatnonzero(~ok)
    if stuck.size and flows.degraded:
        bptr, blinks, bweight, bok, binverse = _patterns(
            fabric, t.base, start[stuck], frac[stuck], flows.targets(out[stuck], base=True),
            down[stuck])
        uptr = np.concatenate([uptr, bptr[1:] + uptr[-1]])
        ulinks, uweight = np.concatenate([ulinks, blinks]), np.concatenate([uweight, bweight])
        pattern_out[stuck] = binverse + (uptr.size - bptr.size)
        ok[stuck] = bok
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise InputError("dst", f"GPU {int(dst[i])} is unreachable from GPU {int(relay[i])}")
    # per flow: NVLink/PCIe head, one ACCESS entry per port used, its pattern, PCIe tail
    head = flows.head(None)[:, :4]
    access = np.full((flows.n, t.ports), -1, dtype=np.int32)
    access_w = np.zeros((flows.n, t.ports))
    access[out] = np.where(frac > 0, t.access_up[relay], -1)
    access_w[out] = frac
    pattern_of = np.full(flows.n, -1, dtype=np.int64)
    pattern_of[out] = pattern_out
    exit_down = np.full((flows.n, t.ports), -1, dtype=np.int32)
    exit_down[out] = down
    ptr_all, links_all, weight_all = assemble(head, access, access_w, pattern_of, uptr, ulinks,
                                              uweight, exit_down, flows.tail())
    port = np.full(flows.n, -1, dtype=np.int64)
    if forced is not None:
        port[out] = forced[out]
    return Paths(ptr_all, links_all, weight_all, src=flows.src, dst=flows.dst, port=port,
                 sport=np.where(~flows.intra, flows.sport, -1), policy="spray")


@njit(cache=True)
def assemble(head, access, access_w, pattern_of, uptr, ulinks, uweight, exit_down, tail):
    """Concatenate each flow's head links, ACCESS entries, sprayed pattern and tail."""
    n = head.shape[0]
    ptr = np.empty(n + 1, dtype=np.int64)
    ptr[:] = 0
    for i in range(n):
        count = 0
        for k in range(head.shape[1]):
            count += head[i, k] >= 0
        for k in range(access.shape[1]):
            count += access[i, k] >= 0
        if pattern_of[i] >= 0:
            count += uptr[pattern_of[i] + 1] - uptr[pattern_of[i]]
        for k in range(tail.shape[1]):
            count += tail[i, k] >= 0
        ptr[i + 1] = ptr[i] + count
    links = np.empty(ptr[n], dtype=np.int32)
    weight = np.empty(ptr[n], dtype=np.float64)
    for i in range(n):
        pos = ptr[i]
        for k in range(head.shape[1]):
            if head[i, k] >= 0:
                links[pos], weight[pos] = head[i, k], 1.0
                pos += 1
        for k in range(access.shape[1]):
            if access[i, k] >= 0:
                links[pos], weight[pos] = access[i, k], access_w[i, k]
                pos += 1
        u = pattern_of[i]
        if u >= 0:
            for e in range(uptr[u], uptr[u + 1]):
                link = ulinks[e]
                links[pos] = exit_down[i, -link - 1] if link < 0 else link
                weight[pos] = uweight[e]
                pos += 1
        for k in range(tail.shape[1]):
            if tail[i, k] >= 0:
                links[pos], weight[pos] = tail[i, k], 1.0
                pos += 1
    return ptr, links, weight


@njit(cache=True)
def _spray_flow(i, start, start_frac, dst_tors, dst_down, sw_ptr, sw_links, link_dst, row,
                distance, pair_keys, pair_links, tags, counts, cached, acc, pending, out_links,
                out_weight, pos, fill):
    """Per-packet spraying of flow i: split evenly at every switch, merge at every node.

    ``pos`` and ``fill`` come as np.int64 and np.bool_ (not literals: one compile).
    """
    targets = dst_tors[i]
    n_pending = 0
    top = -1
    for p in range(start.shape[1]):
        s = start[i, p]
        if s >= 0 and start_frac[i, p] > 0.0:
            d = target_distance(s, targets, row, distance)
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
            if target_distance(node, targets, row, distance) != level:
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
            slot = cached_candidates(np.int64(node), np.int64(level), targets, sw_ptr, sw_links, link_dst, row,
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
    acc = np.empty(n_nodes, dtype=np.float64)
    acc[:] = 0.0
    pending = np.empty(n_nodes, dtype=np.int64)
    dummy_l = np.empty(0, dtype=np.int32)
    dummy_w = np.empty(0, dtype=np.float64)
    flow_entries = np.empty(n, dtype=np.int64)
    flow_entries[:] = 0
    ok = np.empty(n, dtype=np.bool_)
    ok[:] = True
    tags, counts, cached = candidate_cache(dst_tors.shape[1], max_out_degree(sw_ptr))
    for i in range(n):
        c = _spray_flow(i, start, start_frac, dst_tors, dst_down, sw_ptr, sw_links, link_dst,
                        row, distance, pair_keys, pair_links, tags, counts, cached, acc,
                        pending, dummy_l,
                        dummy_w, np.int64(0), np.bool_(False))
        if c < 0:
            ok[i] = False
            c = 0
        flow_entries[i] = c
    ptr = np.empty(n + 1, dtype=np.int64)
    ptr[:] = 0
    for i in range(n):
        ptr[i + 1] = ptr[i] + flow_entries[i]
    links = np.empty(ptr[n], dtype=np.int32)
    weight = np.empty(ptr[n], dtype=np.float64)
    for i in range(n):
        if ok[i]:
            _spray_flow(i, start, start_frac, dst_tors, dst_down, sw_ptr, sw_links, link_dst,
                        row, distance, pair_keys, pair_links, tags, counts, cached, acc,
                        pending, links,
                        weight, ptr[i], np.bool_(True))
    return ptr, links, weight, ok
