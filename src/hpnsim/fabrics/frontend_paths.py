"""Paths on the frontend network: from a GPU (through its host's CPU) to a storage host.

For checkpoint and dataset traffic. A path is GPU -> HOST (PCIe) -> frontend NIC (PCIe) ->
frontend ToR (the ACCESS link of the NIC port used) -> switches -> storage ToR -> STORAGE.
The switch part is a shortest path over :attr:`Fabric.switch_graph`; where several next hops
are equally short, a deterministic hash of ``(seed, gpu, storage, hop)`` picks one (ECMP
with a per-flow hash), and likewise the NIC port and the storage host's port.
"""

from __future__ import annotations

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import UNREACHABLE, Fabric, LinkKind, NodeKind

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(*parts) -> np.ndarray:
    """splitmix64 finaliser over a sequence of integer arrays (uint64 result)."""
    with np.errstate(over="ignore"):
        h = np.uint64(0)
        for part in parts:
            h = (h ^ np.asarray(part).astype(np.uint64)) * _GOLDEN
            h ^= h >> np.uint64(31)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
        return np.asarray(h, dtype=np.uint64)


def _storage_ports(fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """(storage node per storage index, (n_storage, 2) ACCESS link STORAGE -> ToR per port)."""
    store = fabric.nodes_where(kind=NodeKind.STORAGE)
    store = store[np.argsort(fabric.node_index[store], kind="stable")]
    access = np.flatnonzero((fabric.link_kind == LinkKind.ACCESS)
                            & (fabric.node_kind[fabric.link_src] == NodeKind.STORAGE))
    row = np.full(fabric.n_nodes, -1, dtype=np.int64)
    row[store] = np.arange(len(store))
    links = np.full((len(store), 2), -1, dtype=np.int64)
    links[row[fabric.link_src[access]], fabric.link_port[access]] = access
    return store, links


def _switch_out_csr(fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    rows = fabric.switch_row
    between = np.flatnonzero((rows[fabric.link_src] >= 0) & (rows[fabric.link_dst] >= 0))
    order = between[np.argsort(fabric.link_src[between], kind="stable")]
    ptr = np.zeros(fabric.n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(fabric.link_src[order], minlength=fabric.n_nodes), out=ptr[1:])
    return ptr, order


def storage_paths(fabric: Fabric, gpus, storage, *, seed: int = 0,
                  from_gpu: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Frontend paths from each GPU's host to a storage host, as CSR ``(ptr, links)``.

    Parameters
    ----------
    gpus, storage : GPU indices and storage host indices (0..storage_hosts-1), one pair per
        flow (broadcast against each other).
    seed : changes the hash that picks NIC ports and equal-cost next hops.
    from_gpu : start at the GPU (its PCIe link to the CPU first); else at the host's CPU.

    Returns
    -------
    ptr : int64 (n_flows + 1); links : int32 link ids, flow ``i`` is ``links[ptr[i]:ptr[i+1]]``.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, frontend=True,
    ...          storage_hosts=2)
    >>> ptr, links = storage_paths(f, [0, 9], [1, 0])
    >>> [f.node_name(n) for n in f.link_dst[links[ptr[0]:ptr[1]]]][:3]
    ['fe/pod0/seg0/host0/host', 'fe/pod0/seg0/host0/nic', 'fe/pod0/seg0/tor-p0-0']
    >>> f.node_name(f.link_dst[links[ptr[1] - 1]]), int(ptr[1])   # 8 links, via the core
    ('fe/pod1/storage-1', 8)
    """
    if not fabric.has_frontend:
        raise InputError("frontend", "the fabric has no frontend network; build it with "
                                     "frontend=True")
    gpus, storage = np.broadcast_arrays(np.atleast_1d(np.asarray(gpus, dtype=np.int64)),
                                        np.atleast_1d(np.asarray(storage, dtype=np.int64)))
    store, store_access = _storage_ports(fabric)
    if gpus.size and (gpus.min() < 0 or gpus.max() >= fabric.n_gpus):
        raise InputError("gpus", f"GPU indices must be in 0..{fabric.n_gpus - 1}")
    if storage.size and (storage.min() < 0 or storage.max() >= len(store)):
        raise InputError("storage", f"storage indices must be in 0..{len(store) - 1}")
    n = gpus.size
    gpu_node = fabric.gpu_node[gpus]
    host_of = fabric.nodes_where(kind=NodeKind.HOST)
    host_node = host_of[fabric.node_host[gpu_node]]
    to_host = fabric.link_ids(gpu_node, host_node)
    nic_links = np.flatnonzero((fabric.link_kind == LinkKind.PCIE)
                               & (fabric.node_kind[fabric.link_src] == NodeKind.HOST)
                               & (fabric.node_kind[fabric.link_dst] == NodeKind.NIC))
    host_nic_link = np.full(fabric.n_nodes, -1, dtype=np.int64)
    host_nic_link[fabric.link_src[nic_links]] = nic_links
    to_nic = host_nic_link[host_node]
    nic_node = fabric.link_dst[to_nic]
    h = _mix(seed, gpus, storage)
    port = (h & np.uint64(1)).astype(np.int64)
    nic_access = np.flatnonzero((fabric.link_kind == LinkKind.ACCESS)
                                & (fabric.node_kind[fabric.link_src] == NodeKind.NIC)
                                & (fabric.node_network[fabric.link_src] == 1))
    nic_port_link = np.full((fabric.n_nodes, 2), -1, dtype=np.int64)
    nic_port_link[fabric.link_src[nic_access], fabric.link_port[nic_access]] = nic_access
    up_access = nic_port_link[nic_node, port]
    store_port = ((h >> np.uint64(1)) & np.uint64(1)).astype(np.int64)
    down_access = store_access[storage, store_port] ^ 1  # ToR -> STORAGE
    src_tor = fabric.link_dst[up_access]
    dst_tor = fabric.link_src[down_access]

    walk = _walk(fabric, src_tor.astype(np.int64), dst_tor.astype(np.int64), h)
    head = [to_host, to_nic, up_access] if from_gpu else [to_nic, up_access]
    parts = [np.stack(head, axis=1), walk, down_access[:, None]]
    table = np.concatenate(parts, axis=1)
    keep = table >= 0
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=ptr[1:])
    return ptr, table[keep].astype(np.int32)


def _walk(fabric: Fabric, src: np.ndarray, dst: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(n, hops) switch-to-switch links of a hashed shortest path per flow, -1 padded."""
    rows = fabric.switch_row
    targets, target_of = np.unique(dst, return_inverse=True)
    dist = np.stack([fabric.switch_distance_from(int(t)) for t in targets]).astype(np.int64)
    d = dist[target_of, rows[src]]
    if (d >= UNREACHABLE).any():
        raise InputError("storage", "a storage host is unreachable from a host's frontend ToR")
    hops = int(d.max()) if d.size else 0
    out = np.full((len(src), hops), -1, dtype=np.int64)
    ptr, links = _switch_out_csr(fabric)
    here = src.copy()
    for hop in range(hops):
        active = np.flatnonzero(d > hop)
        if active.size == 0:
            break
        # candidates once per distinct (switch, target), then each flow hashes into its list
        key = here[active] * len(targets) + target_of[active]
        uniq, inv = np.unique(key, return_inverse=True)
        at, goal = uniq // len(targets), uniq % len(targets)
        start, count = ptr[at], np.diff(ptr)[at]
        owner = np.repeat(np.arange(uniq.size), count)
        offset = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        cand = links[np.repeat(start, count) + offset]
        remaining = dist[goal, rows[at]]
        nearer = dist[goal[owner], rows[fabric.link_dst[cand]]] == remaining[owner] - 1
        owner, cand = owner[nearer], cand[nearer]
        choices = np.bincount(owner, minlength=uniq.size)
        first = np.cumsum(choices) - choices
        pick = (_mix(h[active], hop) % choices[inv].astype(np.uint64)).astype(np.int64)
        chosen = cand[first[inv] + pick]
        out[active, hop] = chosen
        here[active] = fabric.link_dst[chosen]
    return out


def storage_path(fabric: Fabric, gpu: int, storage: int, *, seed: int = 0,
                 from_gpu: bool = True) -> np.ndarray:
    """Link ids of the frontend path from GPU ``gpu`` (its host) to storage host ``storage``.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, frontend=True,
    ...          storage_hosts=2)
    >>> len(storage_path(f, 3, 0)), len(storage_path(f, 3, 0, from_gpu=False))
    (8, 7)
    """
    ptr, links = storage_paths(fabric, [gpu], [storage], seed=seed, from_gpu=from_gpu)
    return links[ptr[0]:ptr[1]]
