"""HPN 7.0 dual-plane routing: one hash decision, at the ToR uplink.

A NIC spreads its connections over its ports round-robin (port p -> plane p), counting
only the flows that leave the host (in the order given); the ToR hashes the 5-tuple over
its uplinks; aggregation and core switches forward by a fixed per-destination mapping.

Under a :class:`~hpnsim.fabrics.state.FabricState` with links down: the round-robin runs
over the ports that still work (a dead access link, or a plane that can no longer reach
the destination's ToR, sends the NIC's connections to the other port and plane); a ToR
rehashes over its remaining uplinks; an Agg or core switch keeps its mapped link while it
is up and hashes over the remaining ones when it is not.
"""

from __future__ import annotations

import numpy as np

from hpnsim.routing.ecmp import hashed_paths, switch_seeds, tier_codes
from hpnsim.routing.flows import FlowBatch, rank_within
from hpnsim.routing.paths import Paths

#: the options of :func:`dual_plane_policy` (besides the common pxn, sport, port)
OPTIONS = {"hash_tor", "seed_mode"}


def dual_plane_policy(flows: FlowBatch, options: dict) -> Paths:
    """HPN dual-plane paths (called by :func:`hpnsim.routing.route`; options there).

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing.tables import routing_tables
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> dual_plane_policy(FlowBatch(f, routing_tables(f), [0, 0, 0], [8, 8, 1]), {}).port
    array([ 0,  1, -1], dtype=int8)
    """
    port = flows.forced_port(options.get("port"))
    if port is None:
        # round-robin over the flows that leave the host: NVLink-only flows take no port
        out = np.flatnonzero(~flows.intra)
        port = np.zeros(flows.n, dtype=np.int64)
        port[out] = flows.choose_port(out, rank_within(flows.relay[out]))
    seeds = switch_seeds(flows.fabric, flows.seed, options.get("seed_mode", "per_switch"))
    return hashed_paths(flows, port, tier_codes(options, hashed_tiers=(1,)), seeds,
                        "hpn_dual_plane")
