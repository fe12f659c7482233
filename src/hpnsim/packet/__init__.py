"""hpnsim.packet: a packet-level discrete-event simulator of a RoCEv2 fabric (numba).

The same arrays as :mod:`hpnsim.engine` (link capacities and delays, link-id paths, sizes),
run as packets through NIC rate limiters (DCQCN), switch queues over a shared buffer (ECN,
PFC) and store-and-forward links. See docs/packet.md.
"""

from hpnsim.packet.adapter import simulate_paths
from hpnsim.packet.api import simulate_flows
from hpnsim.packet.params import PacketParams, load_params, params_dict, preset
from hpnsim.packet.result import PacketResult

__all__ = ["simulate_flows", "simulate_paths", "PacketParams", "PacketResult", "load_params", "params_dict",
           "preset"]
