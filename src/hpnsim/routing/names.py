"""The routing policies by name, as data: what the YAML/CLI edge may say and what each
means in one line (:func:`hpnsim.routing.route` maps each name to its policy function).

This module imports nothing, so a scenario is validated against these names and messages
list them without loading the policies.

>>> ROUTING_POLICIES
('ecmp', 'hpn_dual_plane', 'precise', 'spray')
"""

#: policy name -> what it does, in one line
ROUTING_POLICY_DESCRIPTIONS: dict[str, str] = {
    "ecmp": "hash the 5-tuple at the NIC bond and at every switch with several next hops",
    "hpn_dual_plane": "HPN 7.0: NIC port p takes plane p; the only hash is at the ToR uplink",
    "precise": "HPN precise path selection: of several connections, the least loaded path",
    "spray": "ideal per-packet spraying over NIC ports and every equal-cost next hop",
}
#: the policy names, in the order messages list them
ROUTING_POLICIES: tuple[str, ...] = tuple(ROUTING_POLICY_DESCRIPTIONS)

__all__ = ["ROUTING_POLICIES", "ROUTING_POLICY_DESCRIPTIONS"]
