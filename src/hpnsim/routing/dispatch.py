"""`route()`: give every flow (GPU -> GPU) its links under a routing policy.

A thin dispatcher: each policy lives in its own module (:mod:`.ecmp`,
:mod:`.hpn_dual_plane`, :mod:`.precise`, :mod:`.spray`) and takes a
:class:`~hpnsim.routing.flows.FlowBatch`.

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
    HPN 7.0: port p -> plane p -> port p of the destination NIC; each connection's port
    keeps every NIC's send *and* receive port counts within one of each other
    (:mod:`.port_balance`; on a fabric that is not dual-plane, a NIC's connections take its
    ports round-robin), counting only the flows that leave the host;
    the only hash is at the ToR uplink; aggregation and core switches forward by a fixed
    per-destination mapping.
``precise``
    HPN's precise path selection: for each flow, try ``candidates`` connections (UDP source
    port, NIC port), compute where ECMP would send each, and keep the one whose busiest
    network link is least loaded so far (flows placed in order).
``spray``
    Ideal per-packet spraying: a flow is split evenly over the NIC ports and at every switch
    over all equal-cost next hops; ``weight`` holds the fractions.

The contract of a policy
------------------------
A policy is a function ``(flows: FlowBatch, options: dict) -> Paths`` registered here
(:data:`_POLICY_FUNCTIONS`, its accepted options in :data:`_OPTIONS`; its name and one-line
description in :mod:`hpnsim.routing.names`, which the YAML/CLI edge reads). It receives the
validated flows (source and destination GPUs and NICs, connection ids, the fabric's
routing tables and the :class:`~hpnsim.fabrics.state.FabricState` if any) and options this
dispatcher has already checked by name; it returns one path per flow in input order as
link ids (CSR :class:`~hpnsim.routing.paths.Paths`, ``weight`` 1.0 unless it splits a flow,
``port`` the NIC port used or -1 inside a host). It must be deterministic in ``seed``,
never choose a down link where it has a choice (keeping the all-up path, dead link included,
where it has none), and give exactly the all-up paths when no link is down. Everything above
the dispatcher (collectives, training, schedulers) sees only ``route()``.

Hash input: source and destination IPs are ``10.x.y.z`` numbered by NIC node, the UDP
destination port is RoCE's 4791, and the UDP source port of connection ``conn`` is
``49152 + mix(seed, src, dst, conn) % 16384`` unless ``sport`` is given.

Under a :class:`~hpnsim.fabrics.state.FabricState` (``state=``), where a policy has a
choice it never chooses a down link: switches choose among the next hops that are up and
still on a shortest path over the links that are up, NIC ports among those whose access
link is up and whose ToR still reaches the destination (a ToR whose access link to the
destination NIC is down is no way in). Where no alternative exists the flow keeps its
all-up path, dead link included (it stalls at rate 0). With no state, or no link down,
paths are exactly the all-up paths.
"""

from __future__ import annotations

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.fabric import Fabric
from hpnsim.routing import ecmp, hpn_dual_plane, precise, spray
from hpnsim.routing.ecmp import switch_seeds
from hpnsim.routing.flows import FlowBatch
from hpnsim.routing.names import ROUTING_POLICIES
from hpnsim.routing.paths import Paths
from hpnsim.routing.tables import routing_tables

__all__ = ["ROUTING_POLICIES", "native_policy", "route", "switch_seeds"]

_COMMON = {"pxn", "sport", "port"}
_POLICY_FUNCTIONS = {"ecmp": ecmp.ecmp_policy, "hpn_dual_plane": hpn_dual_plane.dual_plane_policy,
                     "precise": precise.precise_policy, "spray": spray.spray_policy}
_OPTIONS = {"ecmp": _COMMON | ecmp.OPTIONS, "hpn_dual_plane": _COMMON | hpn_dual_plane.OPTIONS,
            "precise": _COMMON | precise.OPTIONS, "spray": spray.OPTIONS}


def _check_options(policy: str, options: dict) -> None:
    unknown = sorted(set(options) - _OPTIONS[policy])
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[policy]))
        raise InputError(unknown[0], f"not an option of policy {policy!r}; allowed: {allowed}")


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
          state=None, **options) -> Paths:
    """Route flows ``src[i] -> dst[i]`` (GPU indices) on ``fabric`` under ``policy``.

    Parameters
    ----------
    fabric : a :class:`~hpnsim.fabrics.fabric.Fabric`.
    src, dst : GPU indices (arrays of equal length, or scalars for one flow).
    policy : ``"ecmp"``, ``"hpn_dual_plane"``, ``"precise"`` or ``"spray"`` (module docstring).
    conn : connection id per flow (its UDP source port derives from it); default: the k-th
        flow between the same pair of GPUs is connection k.
    seed : seeds the switch hash initial values and the source ports.
    state : a :class:`~hpnsim.fabrics.state.FabricState` of ``fabric``: choices avoid its
        down links (module docstring); None routes on the all-up fabric.
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

    With GPU 0's port-0 access link down, its flow leaves on port 1 (plane 1):

    >>> from hpnsim.fabrics import FabricState
    >>> s = FabricState(f).set_down(f.gpu_access_link[0, 0])
    >>> f.node_name(f.link_dst[route(f, 0, 16, "hpn_dual_plane", state=s).path(0)[1]])
    'pod0/seg0/tor-r0-p1'
    """
    if policy not in ROUTING_POLICIES:
        raise InputError("policy", f"choose one of {', '.join(ROUTING_POLICIES)}, got "
                                   f"{policy!r}")
    _check_options(policy, options)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise InputError("seed", f"must be an integer, got {seed!r}")
    tables = routing_tables(fabric, state)
    flows = FlowBatch(fabric, tables, src, dst, conn, seed, bool(options.get("pxn", False)),
                      options.get("sport"))
    return _POLICY_FUNCTIONS[policy](flows, options)
