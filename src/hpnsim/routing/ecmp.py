"""ECMP: the NIC bond hashes the 5-tuple to pick a port; every switch with several
equal-cost next hops hashes it with its tier's function and its own seed.

Also the pieces the other hashing policies share (:mod:`.hpn_dual_plane`, :mod:`.precise`):
per-switch hash seeds, per-tier hash codes, and the walk that turns a port choice into
padded link tables.

Under a :class:`~hpnsim.fabrics.state.FabricState` with links down the walk follows only
the links that are up (:func:`~hpnsim.routing.tables.routing_tables`): a switch rehashes
the same 5-tuple over its remaining equal-cost next hops, and the bond hashes over the
ports that can still reach the destination. A flow that no route avoiding the down links
can carry keeps its all-up route (it crosses a dead link and stalls).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

import numpy as np

from hpnsim.errors import InputError
from hpnsim.routing.flows import FlowBatch
from hpnsim.routing.hashing import hash_code, hash_keys, mix64
from hpnsim.routing.kernels import ecmp_walk
from hpnsim.routing.paths import Paths

SEED_MODES = ("per_switch", "per_tier", "same")
HASH_DEFAULTS = {"hash_tor": "crc32_lo", "hash_agg": "crc32_hi", "hash_core": "crc16",
                 "hash_nic": "xor"}
#: the options of :func:`ecmp_policy` (besides the common pxn, sport, port)
OPTIONS = {"hash_tor", "hash_agg", "hash_core", "hash_nic", "seed_mode"}


def switch_seeds(fabric, seed: int, mode: str = "per_switch") -> np.ndarray:
    """Hash seed (initial value) of every node's ECMP hash, derived from ``seed``.

    ``per_switch``: a different seed per switch; ``per_tier``: one per tier; ``same``: ``seed``.

    >>> from hpnsim.fabrics.hpn import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> s = switch_seeds(f, 7, "same")
    >>> int(s[0]), s.dtype.name
    (7, 'uint32')
    """
    if mode not in SEED_MODES:
        raise InputError("seed_mode", f"choose one of {', '.join(SEED_MODES)}, got {mode!r}")
    if mode == "same":
        return np.full(fabric.n_nodes, int(seed) & 0xFFFFFFFF, dtype=np.uint32)
    # every route call asks (a collective's members, a pipeline message): mixing a seed per
    # node of a large fabric is most of a small call's cost, so it is done once per seed
    known = _SEEDS.setdefault(fabric, {})
    key = (int(seed), mode)
    found = known.get(key)
    if found is None:
        ids = np.arange(fabric.n_nodes) if mode == "per_switch" else fabric.node_tier
        found = known[key] = (mix64(seed, ids, 0x5EED) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return found.copy()     # writable, as the walk kernels were compiled for


#: :func:`switch_seeds` by fabric object (dropped with it), then (seed, mode)
_SEEDS: WeakKeyDictionary = WeakKeyDictionary()


def tier_codes(options: dict, hashed_tiers=(1, 2, 3)) -> np.ndarray:
    """Per tier, the hash function code the kernels use (:mod:`.kernels`).

    Tiers in ``hashed_tiers`` hash with the function their option names (or its default);
    the others forward by a fixed mapping, coded ``-1 - h`` where ``h`` is the tier's
    default function, used only when the mapped link is down.

    >>> tier_codes({}).tolist()[:4], tier_codes({}, hashed_tiers=(1,)).tolist()[:4]
    ([-1, 2, 3, 0], [-1, 2, -4, -1])
    """
    codes = np.full(8, -1, dtype=np.int64)
    for tier, name in ((1, "hash_tor"), (2, "hash_agg"), (3, "hash_core")):
        if tier in hashed_tiers:
            codes[tier] = hash_code(options.get(name, HASH_DEFAULTS[name]), name)
        else:
            codes[tier] = -1 - hash_code(HASH_DEFAULTS[name], name)
    return codes


def _readonly(a: np.ndarray) -> np.ndarray:
    """``a`` marked read-only, as the routing tables' own arrays are: :func:`walk_one` then
    compiles once for ECMP and precise routing alike (numba types read-only arrays apart)."""
    a.flags.writeable = False
    return a


def walk(flows: FlowBatch, port: np.ndarray, keys: np.ndarray, codes: np.ndarray,
         seeds: np.ndarray, subset: np.ndarray) -> np.ndarray:
    """Switch links (padded table) of the flows in ``subset`` leaving on NIC ``port``.

    Under a degraded state, a flow with no route over up links walks the all-up fabric
    instead (its path keeps the dead link); InputError for flows unreachable even then.
    """
    t, fabric = flows.t, flows.fabric
    relay, dst, port = flows.relay[subset], flows.dst[subset], port[subset]
    table, status = ecmp_walk(t.gpu_tor[relay, port], flows.targets(subset),
                              _readonly(t.access_down[dst]), keys[subset], dst.astype(np.int64),
                              t.topo(fabric), codes, seeds, t.max_hops + 2, t.base_topo(),
                              t.base is not None and bool((codes[1:4] < 0).any()))
    stuck = np.flatnonzero(status)
    if stuck.size and flows.degraded:
        b = t.base
        table[stuck], status[stuck] = ecmp_walk(
            b.gpu_tor[relay[stuck], port[stuck]], flows.targets(subset[stuck], base=True),
            _readonly(b.access_down[dst[stuck]]), keys[subset[stuck]], dst[stuck].astype(np.int64),
            b.topo(fabric), codes, seeds, t.max_hops + 2, b.base_topo(), False)
    bad = np.flatnonzero(status)
    if bad.size:
        i = bad[0]
        raise InputError("dst", f"GPU {int(dst[i])} is unreachable from GPU {int(relay[i])} "
                                f"over NIC port {int(port[i])}")
    return table


def hashed_paths(flows: FlowBatch, port: np.ndarray, codes: np.ndarray, seeds: np.ndarray,
                 policy: str, keys: np.ndarray | None = None) -> Paths:
    """Paths of every flow: in-host head, the switch walk from ``port``'s ToR, PCIe tail
    (``keys``: the flows' 5-tuple keys when already packed)."""
    keys = flows.keys(flows.sport) if keys is None else keys
    out = ~flows.intra
    width = flows.t.max_hops + 2
    table = np.full((flows.n, width), -1, dtype=np.int32)
    table[out] = walk(flows, port, keys, codes, seeds, np.flatnonzero(out))
    table = np.hstack([flows.head(port), table, flows.tail()])
    return Paths.from_padded(table, src=flows.src, dst=flows.dst,
                             port=np.where(out, port, -1),
                             sport=np.where(out, flows.sport, -1), policy=policy)


def ecmp_policy(flows: FlowBatch, options: dict) -> Paths:
    """ECMP paths (called by :func:`hpnsim.routing.route`; options there).

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing.tables import routing_tables
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> ecmp_policy(FlowBatch(f, routing_tables(f), [0], [8]), {}).hop_counts().tolist()
    [4]
    """
    port = flows.forced_port(options.get("port"))
    keys = flows.keys(flows.sport)      # the NIC bond and the switches hash the same keys
    if port is None:
        bond = options.get("hash_nic", HASH_DEFAULTS["hash_nic"])
        hash_code(bond, "hash_nic")
        h = hash_keys(bond, keys).astype(np.int64)
        port = flows.choose_port(slice(None), h)
    seeds = switch_seeds(flows.fabric, flows.seed, options.get("seed_mode", "per_switch"))
    return hashed_paths(flows, port, tier_codes(options), seeds, "ecmp", keys)
