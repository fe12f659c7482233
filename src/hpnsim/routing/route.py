"""`route()`: give every flow (GPU -> GPU) its links under a routing policy.

A path inside a host is GPU -> NVSwitch -> GPU. Across hosts it is GPU -> NIC (PCIe) ->
ToR (the ACCESS link of the NIC port used) -> switches -> ToR -> NIC -> GPU; with
``pxn=True`` a cross-rail flow first crosses NVLink to the GPU of its host on the
destination's rail (NCCL's PXN) and leaves from that GPU's NIC.

Policies
--------
``ecmp``
    The NIC bond picks the port by hashing the 5-tuple (``hash_nic``); every switch with
    several equal-cost next hops hashes the 5-tuple with its tier's function
    (``hash_tor``, ``hash_agg``, ``hash_core``) and its own seed.
``hpn_dual_plane``
    HPN 7.0: a NIC spreads its connections over its ports round-robin (port p -> plane p),
    counting only the flows that leave the host (in the order given);
    the only hash is at the ToR uplink; aggregation and core switches forward by a fixed
    per-destination mapping.
``precise``
    HPN's precise path selection: for each flow, try ``candidates`` connections (UDP source
    port, NIC port), compute where ECMP would send each, and keep the one whose busiest
    network link is least loaded so far (flows placed in order).
``spray``
    Ideal per-packet spraying: a flow is split evenly over the NIC ports and at every switch
    over all equal-cost next hops; ``weight`` holds the fractions.

Hash input: source and destination IPs are ``10.x.y.z`` numbered by NIC node, the UDP
destination port is RoCE's 4791, and the UDP source port of connection ``conn`` is
``49152 + mix(seed, src, dst, conn) % 16384`` unless ``sport`` is given.
"""

from __future__ import annotations

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import Fabric
from hpnsim.routing.hashing import five_tuple_keys, hash_code, hash_keys, mix64
from hpnsim.routing.kernels import ecmp_walk
from hpnsim.routing.paths import Paths
from hpnsim.routing.precise import DEFAULT_CANDIDATES, select_precise
from hpnsim.routing.spray import spray_policy
from hpnsim.routing.tables import RoutingTables, routing_tables

POLICIES = ("ecmp", "hpn_dual_plane", "precise", "spray")
SEED_MODES = ("per_switch", "per_tier", "same")
_HASH_DEFAULTS = {"hash_tor": "crc32_lo", "hash_agg": "crc32_hi", "hash_core": "crc16",
                  "hash_nic": "xor"}
_COMMON = {"pxn", "sport", "port"}
_OPTIONS = {
    "ecmp": _COMMON | {"hash_tor", "hash_agg", "hash_core", "hash_nic", "seed_mode"},
    "hpn_dual_plane": _COMMON | {"hash_tor", "seed_mode"},
    "precise": _COMMON | {"hash_tor", "hash_agg", "hash_core", "seed_mode", "candidates",
                          "sizes"},
    "spray": {"pxn", "port"},
}


def _gpu_array(values, n_gpus: int, field: str) -> np.ndarray:
    array = np.atleast_1d(np.asarray(values))
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise InputError(field, f"must be a 1-D array of GPU indices, got {values!r:.60}")
    array = array.astype(np.int64)
    bad = (array < 0) | (array >= n_gpus)
    if bad.any():
        raise InputError(field, f"GPU indices must be in 0..{n_gpus - 1}, "
                                f"got {int(array[bad][0])}")
    return array


def _rank_within(groups: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... for the successive occurrences of each value of ``groups``."""
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    run = np.arange(groups.size) - np.repeat(starts, np.diff(np.r_[starts, groups.size]))
    rank = np.empty(groups.size, dtype=np.int64)
    rank[order] = run
    return rank


class _Flows:
    """Endpoints of a batch of flows: relays, NICs, 5-tuple keys, fixed in-host links."""

    def __init__(self, fabric: Fabric, t: RoutingTables, src, dst, conn, seed: int,
                 pxn: bool, sport):
        n_gpus = fabric.n_gpus
        self.src = _gpu_array(src, n_gpus, "src")
        self.dst = _gpu_array(dst, n_gpus, "dst")
        if self.src.shape != self.dst.shape:
            raise InputError("dst", f"needs one destination per source: {self.src.size} "
                                    f"sources, {self.dst.size} destinations")
        n = self.src.size
        self.n = n
        self.intra = t.gpu_host[self.src] == t.gpu_host[self.dst]
        self.relay = self.src.copy()
        if pxn and fabric.meta.get("rail_optimized", False):
            cross = (~self.intra & (t.gpu_rail[self.src] != t.gpu_rail[self.dst])
                     & (t.gpu_rail[self.dst] >= 0))
            relay = t.host_rail_gpu[t.gpu_host[self.src[cross]], t.gpu_rail[self.dst[cross]]]
            self.relay[cross] = np.where(relay >= 0, relay, self.src[cross])
        self.via_relay = self.relay != self.src
        if conn is None:
            self.conn = _rank_within(self.relay * n_gpus + self.dst)
        else:
            self.conn = np.broadcast_to(np.asarray(conn, dtype=np.int64), (n,)).copy()
        self.seed = int(seed)
        if sport is None:
            self.sport = self.sport_of(self.conn)
        else:
            self.sport = np.broadcast_to(np.asarray(sport, dtype=np.int64), (n,)) & 0xFFFF
        self.t = t

    def sport_of(self, conn: np.ndarray) -> np.ndarray:
        """UDP source port of each flow's connection ``conn``."""
        return (49152 + mix64(self.seed, self.relay, self.dst, conn)
                % np.uint64(16384)).astype(np.int64)

    def keys(self, sport: np.ndarray) -> np.ndarray:
        return five_tuple_keys(self.t.ip[self.relay], self.t.ip[self.dst], sport)

    def head(self, port: np.ndarray) -> np.ndarray:
        """(n, 4) in-host links before the switch walk: NVLink to relay, PCIe, ACCESS."""
        t, n = self.t, self.n
        head = np.full((n, 4), -1, dtype=np.int32)
        in_host = self.intra & (self.src != self.dst)
        nv = in_host | self.via_relay
        far = np.where(in_host, self.dst, self.relay)
        head[nv, 0] = t.nvlink_up[self.src[nv]]
        head[nv, 1] = t.nvlink_down[far[nv]]
        out = ~self.intra
        head[out, 2] = t.pcie_up[self.relay[out]]
        if port is not None:
            head[out, 3] = t.access_up[self.relay[out], port[out]]
        return head

    def tail(self) -> np.ndarray:
        tail = np.full((self.n, 1), -1, dtype=np.int32)
        tail[~self.intra, 0] = self.t.pcie_down[self.dst[~self.intra]]
        return tail


def _check_options(policy: str, options: dict) -> None:
    unknown = sorted(set(options) - _OPTIONS[policy])
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[policy]))
        raise InputError(unknown[0], f"not an option of policy {policy!r}; allowed: {allowed}")


def switch_seeds(fabric: Fabric, seed: int, mode: str = "per_switch") -> np.ndarray:
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
    ids = np.arange(fabric.n_nodes) if mode == "per_switch" else fabric.node_tier
    return (mix64(seed, ids, 0x5EED) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _tier_codes(options: dict, hashed_tiers=(1, 2, 3)) -> np.ndarray:
    codes = np.full(8, -1, dtype=np.int64)
    for tier, name in ((1, "hash_tor"), (2, "hash_agg"), (3, "hash_core")):
        if tier in hashed_tiers:
            codes[tier] = hash_code(options.get(name, _HASH_DEFAULTS[name]), name)
    return codes


def _forced_port(flows: _Flows, port, ports: int) -> np.ndarray | None:
    if port is None:
        return None
    array = np.broadcast_to(np.asarray(port, dtype=np.int64), (flows.n,)).copy()
    if ((array < 0) | (array >= ports)).any():
        raise InputError("port", f"NIC ports are 0..{ports - 1}, got {port!r:.40}")
    return array


def _walk_table(fabric: Fabric, t: RoutingTables, relay, dst, port, keys, tier_codes,
                seeds) -> tuple[np.ndarray, np.ndarray]:
    """Switch links (padded table) and status of flows leaving ``relay`` on NIC ``port``."""
    return ecmp_walk(t.gpu_tor[relay, port], t.gpu_tor[dst], t.access_down[dst], keys,
                     dst.astype(np.int64), t.topo(fabric), tier_codes, seeds, t.max_hops + 2)


def _unreachable(relay, dst, port, i) -> InputError:
    return InputError("dst", f"GPU {int(dst[i])} is unreachable from GPU {int(relay[i])} "
                             f"over NIC port {int(port[i])}")


def _walk(fabric: Fabric, flows: _Flows, port: np.ndarray, keys: np.ndarray,
          tier_codes: np.ndarray, seeds: np.ndarray, subset: np.ndarray) -> np.ndarray:
    """Switch links of the flows in ``subset`` (padded table), raising on unreachable ones."""
    relay, dst, port = flows.relay[subset], flows.dst[subset], port[subset]
    table, status = _walk_table(fabric, flows.t, relay, dst, port, keys[subset], tier_codes,
                                seeds)
    bad = np.flatnonzero(status)
    if bad.size:
        raise _unreachable(relay, dst, port, bad[0])
    return table


def _hashed_paths(fabric, flows, port, tier_codes, seeds, policy) -> Paths:
    keys = flows.keys(flows.sport)
    out = ~flows.intra
    width = flows.t.max_hops + 2
    walk = np.full((flows.n, width), -1, dtype=np.int32)
    walk[out] = _walk(fabric, flows, port, keys, tier_codes, seeds, np.flatnonzero(out))
    table = np.hstack([flows.head(port), walk, flows.tail()])
    return Paths.from_padded(table, src=flows.src, dst=flows.dst,
                             port=np.where(out, port, -1),
                             sport=np.where(out, flows.sport, -1), policy=policy)


def _usable_ports(t: RoutingTables, gpus: np.ndarray) -> np.ndarray:
    count = (t.gpu_tor[gpus] >= 0).sum(axis=1)
    return np.maximum(count, 1)


def _ecmp(fabric, flows, options) -> Paths:
    t = flows.t
    port = _forced_port(flows, options.get("port"), t.ports)
    if port is None:
        bond = options.get("hash_nic", _HASH_DEFAULTS["hash_nic"])
        hash_code(bond, "hash_nic")
        h = hash_keys(bond, flows.keys(flows.sport))
        port = (h.astype(np.int64) % _usable_ports(t, flows.relay))
    seeds = switch_seeds(fabric, flows.seed, options.get("seed_mode", "per_switch"))
    return _hashed_paths(fabric, flows, port, _tier_codes(options), seeds, "ecmp")


def _hpn_dual_plane(fabric, flows, options) -> Paths:
    t = flows.t
    port = _forced_port(flows, options.get("port"), t.ports)
    if port is None:
        # round-robin over the flows that leave the host: NVLink-only flows take no port
        out = ~flows.intra
        port = np.zeros(flows.n, dtype=np.int64)
        port[out] = _rank_within(flows.relay[out]) % _usable_ports(t, flows.relay[out])
    seeds = switch_seeds(fabric, flows.seed, options.get("seed_mode", "per_switch"))
    codes = _tier_codes(options, hashed_tiers=(1,))
    return _hashed_paths(fabric, flows, port, codes, seeds, "hpn_dual_plane")


def _precise(fabric, flows, options) -> Paths:
    t = flows.t
    forced = _forced_port(flows, options.get("port"), t.ports)
    sizes = np.broadcast_to(np.asarray(options.get("sizes", 1.0), dtype=np.float64),
                            (flows.n,))
    seeds = switch_seeds(fabric, flows.seed, options.get("seed_mode", "per_switch"))
    out = np.flatnonzero(~flows.intra)
    base = None if options.get("sport") is None else flows.sport[out]
    table, sport, port_out = select_precise(
        fabric, t, flows.relay[out], flows.dst[out], flows.seed, base,
        None if forced is None else forced[out], _tier_codes(options), seeds, sizes[out],
        options.get("candidates", DEFAULT_CANDIDATES))
    port = np.zeros(flows.n, dtype=np.int64)
    port[out] = port_out
    flows.sport = flows.sport.copy()
    flows.sport[out] = sport
    walk = np.full((flows.n, table.shape[1] - 1), -1, dtype=np.int32)
    walk[out] = table[:, 1:]
    return Paths.from_padded(np.hstack([flows.head(port), walk, flows.tail()]),
                             src=flows.src, dst=flows.dst,
                             port=np.where(~flows.intra, port, -1),
                             sport=np.where(~flows.intra, flows.sport, -1), policy="precise")


_POLICY_FUNCTIONS = {"ecmp": _ecmp, "hpn_dual_plane": _hpn_dual_plane, "precise": _precise,
                     "spray": spray_policy}


def native_policy(fabric) -> str:
    """The routing a fabric is built for: ``hpn_dual_plane`` on a dual-plane fabric (HPN
    7.0: port p stays in plane p, one hash at the ToR uplink), ``ecmp`` elsewhere (NIC bond
    hash and a hash at every switch with a choice).

    >>> from hpnsim.fabrics import dcn_plus, hpn7
    >>> native_policy(hpn7(segments=1)), native_policy(dcn_plus(pods=1))
    ('hpn_dual_plane', 'ecmp')
    """
    return "hpn_dual_plane" if fabric.meta.get("dual_plane") else "ecmp"


def route(fabric: Fabric, src, dst, policy: str = "ecmp", *, conn=None, seed: int = 0,
          **options) -> Paths:
    """Route flows ``src[i] -> dst[i]`` (GPU indices) on ``fabric`` under ``policy``.

    Parameters
    ----------
    fabric : a :class:`~hpnsim.fabrics.fabric.Fabric`.
    src, dst : GPU indices (arrays of equal length, or scalars for one flow).
    policy : ``"ecmp"``, ``"hpn_dual_plane"``, ``"precise"`` or ``"spray"`` (module docstring).
    conn : connection id per flow (its UDP source port derives from it); default: the k-th
        flow between the same pair of GPUs is connection k.
    seed : seeds the switch hash initial values and the source ports.
    **options :
        ``pxn`` (bool): cross-rail flows first cross NVLink to the destination's rail.
        ``sport``: explicit UDP source ports (ECMP, dual-plane; precise uses them as a base).
        ``port``: force the NIC port (int or one per flow).
        ``hash_tor``, ``hash_agg``, ``hash_core``: per-tier hash functions (default
        ``crc32_lo``, ``crc32_hi``, ``crc16``: decorrelated); ``hash_nic``: bond hash
        (``xor``). ``seed_mode``: ``per_switch`` (default), ``per_tier``, ``same``.
        ``candidates`` (precise, default 256): most connections tried per flow; ``sizes``
        (precise): flow sizes used as load.

    Returns
    -------
    :class:`~hpnsim.routing.paths.Paths`, flows in input order.

    Examples
    --------
    >>> from hpnsim.fabrics.hpn import hpn7
    >>> f = hpn7(segments=2, hosts_per_segment=2, backup_hosts=0, tor_uplinks=4,
    ...          aggs_per_plane=4)
    >>> p = route(f, [0, 0], [16, 1], "hpn_dual_plane")
    >>> [f.node_name(f.link_dst[l]) for l in p.path(0)]     # doctest: +NORMALIZE_WHITESPACE
    ['pod0/seg0/host0/nic-r0', 'pod0/seg0/tor-r0-p0', 'pod0/agg-p0-0', 'pod0/seg1/tor-r0-p0',
     'pod0/seg1/host2/nic-r0', 'pod0/seg1/host2/gpu-r0']
    >>> p.hop_counts().tolist()      # GPU 0 -> GPU 1 stays on NVLink
    [6, 2]
    """
    if policy not in POLICIES:
        raise InputError("policy", f"choose one of {', '.join(POLICIES)}, got {policy!r}")
    _check_options(policy, options)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise InputError("seed", f"must be an integer, got {seed!r}")
    tables = routing_tables(fabric)
    flows = _Flows(fabric, tables, src, dst, conn, seed, bool(options.get("pxn", False)),
                   options.get("sport"))
    return _POLICY_FUNCTIONS[policy](fabric, flows, options)
