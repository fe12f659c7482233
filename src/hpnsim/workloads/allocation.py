"""GPU allocators for shared clusters: which free hosts a job gets, in rank order.

Every allocator takes the fabric, a boolean mask of free hosts (host ``h`` holds GPUs
``h * gpus_per_host .. + gpus_per_host - 1``), the job's GPU count and its TP size, and
returns the job's GPU indices in rank order, or ``None`` when the job cannot be placed now
(it waits for hosts to free up). The mask is not modified: the caller marks
:func:`hosts_of` the returned GPUs busy.

By default hosts are never shared between jobs: a job smaller than a host still takes the
whole host. NCCL jobs want whole NVLink domains (their TP groups and intra-host rings assume
the host's NVSwitch and NICs are theirs), and the cluster schedulers of the Crux paper's
setting hand out whole machines to multi-GPU jobs. A cluster run may instead share hosts
(``share_hosts``): a job smaller than a host then takes free GPUs of one host
(:func:`within_host`), and jobs of a host or more still take whole free hosts.

Policies (:data:`~hpnsim.workloads.allocator_names.ALLOCATORS`):

- ``packed``: the lowest-numbered free hosts (what ``hpnsim run`` does for a single job).
- ``topology_aware``: the fewest ToR groups, then the fewest Agg groups (see
  :func:`host_groups`); hosts in rank order by Agg group, ToR group, host, so consecutive
  ranks (DP ring neighbours when TP fills a host) sit under one ToR.
- ``random``: uniformly random free hosts (seeded), in host order.
- ``given``: an explicit GPU list, validated.
"""

from __future__ import annotations

import itertools
import math
import weakref
from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import Fabric, LinkKind
from hpnsim.workloads.allocator_names import ALLOCATORS

#: Agg-group combinations tried exactly before falling back to a greedy choice; the
#: templated fabrics and Lingjun (3 aggregation groups) stay far below it.
MAX_AGG_COMBINATIONS = 4096


@dataclass(frozen=True)
class HostGroups:
    """Hosts grouped by the switches they hang off.

    ``tor_group[h]``: hosts with the same set of ToRs (one ToR in Lingjun and a plain Clos,
    a ToR pair in a dual-ToR Clos, a whole segment's rail ToRs in HPN / rail-optimized).
    ``agg_group[t]``: ToR groups whose ToRs reach the same set of Aggs (a pod, a PSW).
    Groups are numbered by their lowest host.
    """

    tor_group: np.ndarray
    agg_group: np.ndarray

    @property
    def n_tor_groups(self) -> int:
        return int(self.agg_group.size)


_GROUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def host_groups(fabric: Fabric) -> HostGroups:
    """ToR group of every host and Agg group of every ToR group (cached per fabric).

    >>> from hpnsim.fabrics import fat_tree
    >>> g = host_groups(fat_tree(4))        # 2 hosts per ToR, 2 ToRs per pod
    >>> g.tor_group.tolist()[:6], g.agg_group.tolist()
    ([0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2, 3, 3])
    """
    cached = _GROUPS.get(fabric)
    if cached is not None:
        return cached
    n_hosts, per_host = fabric.n_hosts, fabric.gpus_per_host
    tors = np.sort(fabric.gpu_tor[: n_hosts * per_host].reshape(n_hosts, -1), axis=1)
    _, tor_group = np.unique(tors, axis=0, return_inverse=True)
    tor_group = _renumber(tor_group.ravel())
    up = fabric.link_kind == LinkKind.UPLINK
    aggs_of_tor: dict[int, set] = {}
    for src, dst in zip(fabric.link_src[up].tolist(), fabric.link_dst[up].tolist(),
                        strict=True):
        aggs_of_tor.setdefault(src, set()).add(dst)
    first_host = np.unique(tor_group, return_index=True)[1]
    keys: dict[tuple, int] = {}
    agg_group = np.empty(first_host.size, dtype=np.int64)
    for t, host in enumerate(first_host):
        reach = set().union(*(aggs_of_tor.get(int(n), set()) for n in tors[host] if n >= 0))
        agg_group[t] = keys.setdefault(tuple(sorted(reach)), len(keys))
    groups = HostGroups(tor_group.astype(np.int64), agg_group)
    _GROUPS[fabric] = groups
    return groups


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Relabel so that groups are numbered in order of their first member."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


def hosts_of(gpus, gpus_per_host: int) -> np.ndarray:
    """The distinct hosts that GPU indices sit on (the hosts a job holds).

    >>> hosts_of([8, 9, 24], 8).tolist()
    [1, 3]
    """
    return np.unique(np.asarray(gpus, dtype=np.int64) // gpus_per_host)


def _check(fabric: Fabric, free, n_gpus: int, tp: int) -> tuple[np.ndarray, int]:
    free = np.asarray(free, dtype=bool)
    if free.shape != (fabric.n_hosts,):
        raise InputError("free_hosts", f"needs one entry per host ({fabric.n_hosts}), "
                                       f"got shape {free.shape}")
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, int | np.integer) or n_gpus < 1:
        raise InputError("gpus", f"must be a positive integer, got {n_gpus!r}")
    per_host = fabric.gpus_per_host
    if n_gpus > fabric.n_gpus:
        raise InputError("gpus", f"the job needs {n_gpus} GPUs, the fabric has {fabric.n_gpus}")
    if isinstance(tp, bool) or not isinstance(tp, int | np.integer) or tp < 1 or (
            per_host % tp or n_gpus % tp):
        raise InputError("tp", f"must divide the GPUs per host ({per_host}) and the job's "
                               f"{n_gpus} GPUs so TP stays on NVLink, got {tp!r}")
    return free, -(-int(n_gpus) // per_host)


def _gpus(hosts: np.ndarray, per_host: int, n_gpus: int) -> np.ndarray:
    return (np.asarray(hosts, dtype=np.int64)[:, None] * per_host
            + np.arange(per_host)).ravel()[:n_gpus]


def packed(fabric: Fabric, free_hosts, n_gpus: int, tp: int = 1) -> np.ndarray | None:
    """The lowest free whole hosts, GPUs in host order; ``None`` if too few are free.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=2, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> free = np.array([False, True, True, True, True, True, True, True])
    >>> packed(f, free, 12, tp=4).tolist()
    [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    >>> packed(f, free, 64) is None
    True
    """
    free, need = _check(fabric, free_hosts, n_gpus, tp)
    hosts = np.flatnonzero(free)[:need]
    return _gpus(hosts, fabric.gpus_per_host, n_gpus) if hosts.size == need else None


def random_hosts(fabric: Fabric, free_hosts, n_gpus: int, tp: int = 1,
                 seed: int | np.random.Generator = 0) -> np.ndarray | None:
    """Uniformly random free hosts (seeded), GPUs in host order; ``None`` if too few are free.

    ``seed`` is an integer or a ``numpy.random.Generator`` (a cluster run passes one generator
    for all its allocations, so the whole run is reproducible from one seed).

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> a = random_hosts(f, np.ones(16, bool), 4, seed=3)
    >>> a.tolist() == random_hosts(f, np.ones(16, bool), 4, seed=3).tolist()
    True
    """
    free, need = _check(fabric, free_hosts, n_gpus, tp)
    candidates = np.flatnonzero(free)
    if candidates.size < need:
        return None
    rng = np.random.default_rng(seed)
    hosts = np.sort(rng.choice(candidates, size=need, replace=False))
    return _gpus(hosts, fabric.gpus_per_host, n_gpus)


def given(fabric: Fabric, free_hosts, gpus, tp: int = 1) -> np.ndarray | None:
    """Validate an explicit placement (GPU indices in rank order); ``None`` if a host is busy.

    Raises :class:`InputError` for GPU indices outside the fabric, repeated GPUs, or a TP
    group (``tp`` consecutive ranks) that spans hosts.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> given(f, np.ones(16, bool), [5, 2]).tolist()
    [5, 2]
    >>> given(f, np.ones(16, bool), [5, 5])
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: gpus: GPU 5 appears twice
    """
    gpus = np.asarray(gpus, dtype=np.int64).ravel()
    free, _ = _check(fabric, free_hosts, max(int(gpus.size), 1), tp)
    if gpus.size == 0:
        raise InputError("gpus", "needs at least one GPU index")
    bad = gpus[(gpus < 0) | (gpus >= fabric.n_gpus)]
    if bad.size:
        raise InputError("gpus", f"GPU {int(bad[0])} is not in the fabric (0..{fabric.n_gpus - 1})")
    values, counts = np.unique(gpus, return_counts=True)
    if (counts > 1).any():
        raise InputError("gpus", f"GPU {int(values[counts > 1][0])} appears twice")
    per_host = fabric.gpus_per_host
    groups = (gpus // per_host).reshape(-1, tp)
    split = np.flatnonzero((groups != groups[:, :1]).any(axis=1))
    if split.size:
        members = gpus.reshape(-1, tp)[split[0]].tolist()
        raise InputError("tp", f"TP group {members} spans hosts; a TP group must sit in one host")
    return gpus if free[hosts_of(gpus, per_host)].all() else None


def topology_aware(fabric: Fabric, free_hosts, n_gpus: int, tp: int = 1) -> np.ndarray | None:
    """The fewest ToR groups, then the fewest Agg groups; ``None`` if too few hosts are free.

    Ties go to the tightest fit (keeping large free ToR groups for later, larger jobs), then
    to the lowest group. Ranks run Agg group by Agg group, ToR group by ToR group, so
    neighbouring ranks share a ToR.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=2, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> free = np.array([False, True, True, True, True, True, True, True])
    >>> hosts_of(topology_aware(f, free, 32), 8).tolist()   # segment 1, not hosts 1-4
    [4, 5, 6, 7]
    >>> hosts_of(packed(f, free, 32), 8).tolist()
    [1, 2, 3, 4]
    """
    free, need = _check(fabric, free_hosts, n_gpus, tp)
    groups = host_groups(fabric)
    hosts = choose_hosts(groups.tor_group, groups.agg_group, free, need)
    return None if hosts is None else _gpus(hosts, fabric.gpus_per_host, n_gpus)


def choose_hosts(tor_group: np.ndarray, agg_group: np.ndarray, free: np.ndarray,
                 need: int) -> np.ndarray | None:
    """``need`` free hosts in the fewest ToR groups, then the fewest Agg groups, rank order.

    The array core of :func:`topology_aware`: ``tor_group[h]`` per host, ``agg_group[t]`` per
    ToR group.

    >>> choose_hosts(np.array([0, 0, 1, 1, 1]), np.array([0, 1]),
    ...              np.array([True, True, True, False, True]), 2).tolist()
    [0, 1]
    """
    free_count = np.bincount(tor_group[free], minlength=agg_group.size)
    if free_count.sum() < need:
        return None
    k = int(np.searchsorted(np.cumsum(np.sort(free_count)[::-1]), need)) + 1  # fewest ToRs
    if k == 1:
        fits = np.flatnonzero(free_count >= need)
        chosen = [int(fits[np.argmin(free_count[fits])])]   # tightest fit, lowest first
    else:
        chosen = _tors_in_fewest_aggs(free_count, agg_group, need, k)
    take = []
    for t in sorted(chosen, key=lambda t: (agg_group[t], t)):
        take.append(np.flatnonzero(free & (tor_group == t)))
    # the last-chosen ToR group (the tight one) is the one taken partially
    short = sum(a.size for a in take) - need
    partial = sorted(chosen, key=lambda t: (agg_group[t], t)).index(chosen[-1])
    take[partial] = take[partial][: take[partial].size - short]
    return np.concatenate(take)


def _top_sum(counts: np.ndarray, k: int) -> int:
    return int(np.sort(counts)[::-1][:k].sum())


def _tors_in_fewest_aggs(free_count: np.ndarray, agg_group: np.ndarray, need: int,
                         k: int) -> list[int]:
    """``k`` ToR groups holding ``need`` free hosts within the fewest Agg groups."""
    aggs = np.unique(agg_group)
    best = None
    for m in range(1, aggs.size + 1):
        if math.comb(aggs.size, m) > MAX_AGG_COMBINATIONS:
            break
        for combo in itertools.combinations(aggs.tolist(), m):
            inside = np.isin(agg_group, combo)
            slack = _top_sum(np.where(inside, free_count, 0), k) - need
            if slack >= 0 and (best is None or slack < best[0]):
                best = (slack, inside)
        if best is not None:
            return _tightest(free_count, best[1], need, k)
    # too many combinations: add Agg groups in order of their own k-ToR capacity
    per_agg = {a: _top_sum(free_count[agg_group == a], k) for a in aggs.tolist()}
    inside = np.zeros(agg_group.size, dtype=bool)
    for a in sorted(per_agg, key=lambda a: (-per_agg[a], a)):
        inside |= agg_group == a
        if _top_sum(np.where(inside, free_count, 0), k) >= need:
            break
    return _tightest(free_count, inside, need, k)


def _tightest(free_count: np.ndarray, inside: np.ndarray, need: int, k: int) -> list[int]:
    """The ``k - 1`` fullest ToR groups inside, then the smallest one that completes ``need``
    (listed last: it is the one taken partially)."""
    order = sorted(np.flatnonzero(inside).tolist(), key=lambda t: (-free_count[t], t))
    head = order[: k - 1]
    missing = need - int(free_count[head].sum())
    rest = [t for t in order[k - 1:] if free_count[t] >= missing]
    return head + [min(rest, key=lambda t: (free_count[t], t))]


def within_host(fabric: Fabric, free_gpus, n_gpus: int) -> np.ndarray | None:
    """``n_gpus`` (fewer than a host's) free GPUs of one host, the lowest of the host whose
    free GPUs fit the job most tightly (ties: the lowest host), so partly used hosts fill up
    before whole ones are broken; ``None`` when no host has that many free.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(8, gpus_per_host=4)          # 32 hosts of 4 GPUs
    >>> free = np.ones(128, bool); free[[0, 1, 2, 5]] = False
    >>> within_host(f, free, 1).tolist()          # host 0 has one GPU left: the tightest
    [3]
    >>> within_host(f, free, 2).tolist()          # host 1 has three
    [4, 6]
    """
    per_host = fabric.gpus_per_host
    free = np.asarray(free_gpus, dtype=bool)
    if free.shape != (fabric.n_gpus,):
        raise InputError("free_gpus", f"needs one entry per GPU ({fabric.n_gpus}), "
                                      f"got shape {free.shape}")
    if not 1 <= n_gpus < per_host:
        raise InputError("gpus", f"a job within a host takes 1..{per_host - 1} GPUs, "
                                 f"got {n_gpus!r}")
    count = free[: fabric.n_hosts * per_host].reshape(fabric.n_hosts, per_host).sum(axis=1)
    fits = np.flatnonzero(count >= n_gpus)
    if not fits.size:
        return None
    host = int(fits[np.argmin(count[fits])])
    return host * per_host + np.flatnonzero(free[host * per_host:(host + 1) * per_host])[
        :n_gpus]


def allocate(policy: str, fabric: Fabric, free_hosts, n_gpus: int, *, tp: int = 1,
             seed: int | np.random.Generator = 0, gpus=None) -> np.ndarray | None:
    """Dispatch to one allocator by name (:data:`ALLOCATORS`); ``gpus`` is for ``given``.

    >>> from hpnsim.fabrics import fat_tree
    >>> allocate("packed", fat_tree(4), np.ones(16, bool), 3).tolist()
    [0, 1, 2]
    >>> allocate("best", fat_tree(4), np.ones(16, bool), 3)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: allocator: one of packed, topology_aware, random, given; got 'best'
    """
    if policy == "packed":
        return packed(fabric, free_hosts, n_gpus, tp)
    if policy == "topology_aware":
        return topology_aware(fabric, free_hosts, n_gpus, tp)
    if policy == "random":
        return random_hosts(fabric, free_hosts, n_gpus, tp, seed)
    if policy == "given":
        if gpus is None:
            raise InputError("gpus", "the given allocator needs the job's GPU list")
        if len(gpus) != n_gpus:
            raise InputError("gpus", f"need exactly {n_gpus} GPU indices, got {len(gpus)}")
        return given(fabric, free_hosts, gpus, tp)
    raise InputError("allocator", f"one of {', '.join(ALLOCATORS)}; got {policy!r}")

#: old names kept for one release (each said several things: routing policies, allocators
#: and AICB parallel policies were all ``POLICIES``)
_RENAMED = {"POLICIES": "ALLOCATORS"}


def __getattr__(name: str):
    if name in _RENAMED:
        import warnings

        warnings.warn(f"{__name__}.{name} is now {_RENAMED[name]}; the old name goes in "
                      "the next release", DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
