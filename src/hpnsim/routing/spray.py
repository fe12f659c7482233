"""Ideal per-packet spraying: a flow splits evenly over NIC ports and equal-cost next hops."""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.errors import InputError
from hpnsim.routing.kernels import spray_walk
from hpnsim.routing.paths import Paths


def spray_policy(fabric, flows, options) -> Paths:
    """Paths with fractional weights (called by :func:`hpnsim.routing.route`)."""
    from hpnsim.routing.route import _forced_port

    t = flows.t
    forced = _forced_port(flows, options.get("port"), t.ports)
    out = np.flatnonzero(~flows.intra)
    relay, dst = flows.relay[out], flows.dst[out]
    start = t.gpu_tor[relay]
    if forced is not None:
        frac = (np.arange(t.ports)[None, :] == forced[out][:, None]).astype(np.float64)
    else:
        frac = (start >= 0).astype(np.float64)
        frac /= np.maximum(frac.sum(axis=1, keepdims=True), 1.0)
    frac[start < 0] = 0.0
    # flows entering and leaving through the same ToRs spray identically: solve each once
    pattern = np.hstack([start, frac.view(np.int64), t.gpu_tor[dst]])
    _, first, inverse = np.unique(pattern, axis=0, return_index=True, return_inverse=True)
    rep = first.astype(np.int64)
    uptr, ulinks, uweight, ok = spray_walk(start[rep], frac[rep], t.gpu_tor[dst[rep]],
                                           t.access_down[dst[rep]], t.sw_ptr, t.sw_links,
                                           fabric.link_dst, t.row, t.distance, t.pair_keys,
                                           t.pair_links, fabric.n_nodes)
    if not ok.all():
        i = int(rep[np.flatnonzero(~ok)[0]])
        raise InputError("dst", f"GPU {int(dst[i])} is unreachable from GPU {int(relay[i])}")
    # per flow: NVLink/PCIe head, one ACCESS entry per port used, its pattern, PCIe tail
    head = flows.head(None)[:, :3]
    access = np.full((flows.n, t.ports), -1, dtype=np.int32)
    access_w = np.zeros((flows.n, t.ports))
    access[out] = np.where(frac > 0, t.access_up[relay], -1)
    access_w[out] = frac
    pattern_of = np.full(flows.n, -1, dtype=np.int64)
    pattern_of[out] = inverse.ravel()
    exit_down = np.full((flows.n, t.ports), -1, dtype=np.int32)
    exit_down[out] = t.access_down[dst]
    ptr_all, links_all, weight_all = assemble(head, access, access_w, pattern_of, uptr, ulinks,
                                              uweight, exit_down, flows.tail()[:, 0])
    port = np.full(flows.n, -1, dtype=np.int64)
    if forced is not None:
        port[out] = forced[out]
    return Paths(ptr_all, links_all, weight_all, src=flows.src, dst=flows.dst, port=port,
                 sport=np.where(~flows.intra, flows.sport, -1), policy="spray")


@njit(cache=True)
def assemble(head, access, access_w, pattern_of, uptr, ulinks, uweight, exit_down, tail):
    """Concatenate each flow's head links, ACCESS entries, sprayed pattern and tail."""
    n = head.shape[0]
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        count = 0
        for k in range(head.shape[1]):
            count += head[i, k] >= 0
        for k in range(access.shape[1]):
            count += access[i, k] >= 0
        if pattern_of[i] >= 0:
            count += uptr[pattern_of[i] + 1] - uptr[pattern_of[i]]
        count += tail[i] >= 0
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
        if tail[i] >= 0:
            links[pos], weight[pos] = tail[i], 1.0
    return ptr, links, weight
