"""Ideal per-packet spraying: a flow splits evenly over NIC ports and equal-cost next hops."""

from __future__ import annotations

import numpy as np

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
    ptr, links, weight, ok = spray_walk(start, frac, t.gpu_tor[dst], t.access_down[dst],
                                        t.sw_ptr, t.sw_links, fabric.link_dst, t.row,
                                        t.distance, t.pair_keys, t.pair_links,
                                        fabric.n_nodes)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise InputError("dst", f"GPU {int(dst[i])} is unreachable from GPU {int(relay[i])}")
    # head (NVLink, PCIe, one ACCESS entry per port used) + sprayed switch links + PCIe
    head = flows.head(None)
    head_w = np.where(head >= 0, 1.0, 0.0)
    access = np.full((flows.n, t.ports), -1, dtype=np.int32)
    access_w = np.zeros((flows.n, t.ports))
    used = frac > 0
    access[out] = np.where(used, t.access_up[relay], -1)
    access_w[out] = frac
    parts = [_padded_csr(head[:, :3], head_w[:, :3]), _padded_csr(access, access_w)]
    middle_counts = np.zeros(flows.n, dtype=np.int64)
    middle_counts[out] = np.diff(ptr)
    parts.append((middle_counts, links, weight))
    tail = flows.tail()
    parts.append(_padded_csr(tail, (tail >= 0).astype(np.float64)))
    ptr_all, links_all, weight_all = _merge_csr(parts, flows.n)
    port = np.full(flows.n, -1, dtype=np.int64)
    if forced is not None:
        port[out] = forced[out]
    return Paths(ptr_all, links_all, weight_all, src=flows.src, dst=flows.dst, port=port,
                 sport=np.where(~flows.intra, flows.sport, -1), policy="spray")


def _padded_csr(table: np.ndarray, weight: np.ndarray):
    mask = table >= 0
    return mask.sum(axis=1).astype(np.int64), table[mask], weight[mask]


def _merge_csr(parts, n: int):
    """Concatenate per-flow segments: flow i gets part 0's entries, then part 1's, ..."""
    counts = np.stack([c for c, _, _ in parts], axis=1)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=1), out=ptr[1:])
    links = np.empty(ptr[-1], dtype=np.int32)
    weight = np.empty(ptr[-1], dtype=np.float64)
    offset = ptr[:-1].copy()
    for count, part_links, part_weight in parts:
        part_ptr = np.concatenate([[0], np.cumsum(count)])
        within = np.arange(part_ptr[-1]) - np.repeat(part_ptr[:-1], count)
        target = np.repeat(offset, count) + within
        links[target] = part_links
        weight[target] = part_weight
        offset += count
    return ptr, links, weight


