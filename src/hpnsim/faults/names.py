"""The fault kinds by name, as data: what the YAML/CLI edge may say and what each fails,
in one line (:mod:`hpnsim.faults.events` resolves each to the links it takes down).

This module imports nothing, so a scenario is validated against these names without
loading the fault machinery.

>>> FAULT_KINDS
('link', 'nic_port', 'flap', 'tor_crash', 'tor_dataplane', 'agg', 'core_link')
"""

#: fault kind -> what fails, in one line
FAULT_KIND_DESCRIPTIONS: dict[str, str] = {
    "link": "a cable, both directions (a link name, or gpuN.portP for an access link)",
    "nic_port": "a NIC port (gpuN.portP): the same cable, named by the port",
    "flap": "a link down for `down` seconds every `period` seconds, `count` times",
    "tor_crash": "a ToR (node name) and every link of it",
    "tor_dataplane": "a ToR whose data plane dies while its control plane lives",
    "agg": "an aggregation switch and every link of it",
    "core_link": "a link between an Agg and a core switch (a link name)",
}
#: the fault kinds, in the order messages list them
FAULT_KINDS: tuple[str, ...] = tuple(FAULT_KIND_DESCRIPTIONS)

__all__ = ["FAULT_KINDS", "FAULT_KIND_DESCRIPTIONS"]
