"""HPN 7.0 dual-plane routing: one hash decision, at the ToR uplink.

A flow that leaves its NIC on port p stays in plane p and arrives on port p of the
destination NIC, so the port choice balances both ends: each connection's port is chosen so
that every NIC's send ports *and* receive ports carry counts within one of each other
(:func:`~hpnsim.routing.port_balance.balanced_ports`: greedy in the order given, the
source's send count first and the destination's receive count on ties, then an
alternating-trail repair; only flows that leave the host count). On a fabric that is not
dual-plane the receive port is not the host's to choose and the NIC hands its connections
to its ports round-robin. The option ``lag`` replaces that port choice by another
:class:`~hpnsim.routing.lag.LagMode` of the NIC's bond (``queue_affinity``: the QPs of
each NIC alternate over its ports; ``hash``: the bond hashes each QP's 5-tuple). The ToR hashes the 5-tuple over its uplinks; aggregation and core
switches forward by a fixed per-destination mapping.

Under a :class:`~hpnsim.fabrics.state.FabricState` with links down: the port choice runs
over the ports that still work (a dead access link, or a plane that can no longer reach
the destination's ToR, sends the NIC's connections to the other port and plane); a ToR
rehashes over its remaining uplinks; an Agg or core switch keeps its mapped link while it
is up and hashes over the remaining ones when it is not. A flow with a single usable
port keeps it; the others are balanced around it.
"""

from __future__ import annotations

import numpy as np

from hpnsim.routing.ecmp import HASH_DEFAULTS, hashed_paths, switch_seeds, tier_codes
from hpnsim.routing.flows import FlowBatch, rank_within
from hpnsim.routing.lag import LagMode, lag_ports
from hpnsim.routing.paths import Paths

#: the options of :func:`dual_plane_policy` (besides the common pxn, sport, port); ``lag``
#: is the NIC's :class:`~hpnsim.routing.lag.LagMode` (default ``balanced``), ``hash_nic``
#: the bond hash of its ``hash`` mode
OPTIONS = {"hash_tor", "seed_mode", "lag", "hash_nic"}


def dual_plane_policy(flows: FlowBatch, options: dict) -> Paths:
    """HPN dual-plane paths (called by :func:`hpnsim.routing.route`; options there).

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing.tables import routing_tables
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> dual_plane_policy(FlowBatch(f, routing_tables(f), [0, 0, 0], [8, 8, 1]), {}).port
    array([ 0,  1, -1], dtype=int8)

    GPUs 0 and 1 send one connection each to GPU 8 and GPU 2 two: GPU 8 receives 2:2.

    >>> b = FlowBatch(f, routing_tables(f), [0, 1, 2, 2], [8, 8, 8, 8])
    >>> dual_plane_policy(b, {}).port.tolist()
    [0, 1, 0, 1]
    """
    port = flows.forced_port(options.get("port"))
    if port is None:
        # NVLink-only flows take no port and no turn
        out = np.flatnonzero(~flows.intra)
        port = np.zeros(flows.n, dtype=np.int64)
        mode = LagMode.parse(options.get("lag", LagMode.BALANCED))
        if flows.fabric.meta.get("dual_plane") or mode is not LagMode.BALANCED:
            port[out] = lag_ports(flows, out, mode,
                                  options.get("hash_nic", HASH_DEFAULTS["hash_nic"]))
        else:
            port[out] = flows.choose_port(out, rank_within(flows.relay[out]))
    seeds = switch_seeds(flows.fabric, flows.seed, options.get("seed_mode", "per_switch"))
    return hashed_paths(flows, port, tier_codes(options, hashed_tiers=(1,)), seeds,
                        "hpn_dual_plane")
