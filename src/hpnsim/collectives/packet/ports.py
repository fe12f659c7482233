"""What the collective runs of the packet engine share: which operations run as NCCL's
chunked rings (:data:`PACKET_OPS`), the link rates packets run at
(:func:`packet_capacity`) and the fullest ports of a run (:func:`top_ports`)."""

from __future__ import annotations

import numpy as np

__all__ = ["PACKET_OPS", "TOP_PORTS", "packet_capacity", "top_ports"]

#: the operations the packet engine builds as NCCL rings (chunked, pipelined steps)
PACKET_OPS = ("allreduce", "allgather", "reducescatter")
#: ports listed per result, the fullest queues first
TOP_PORTS = 10


def packet_capacity(fabric, nccl, params, state=None) -> np.ndarray:
    """Link capacities the packet engine runs: NVLink (and PCIe) at the payload rate NCCL
    reaches (``nvlink_efficiency``), grown by the packet header the engine adds; network
    links at their line rate (their headers are simulated)."""
    from hpnsim.fabrics.fabric import LinkKind

    cap = np.array(fabric.link_capacity if state is None else state.capacity,
                   dtype=np.float64)
    cap[cap <= 0] = 1.0         # down links carry no path (checked); the engine needs C > 0
    grow = (params.mtu_bytes + params.header_bytes) / params.mtu_bytes
    kind = np.asarray(fabric.link_kind)
    cap[kind == LinkKind.NVLINK] *= nccl.nvlink_efficiency * grow
    cap[kind == LinkKind.PCIE] *= nccl.pcie_efficiency * grow
    return cap


def top_ports(fabric, res, switch_of) -> list[dict]:
    """The switch ports with the fullest queues (then the most pauses), as dicts."""
    candidates = np.flatnonzero((switch_of >= 0) & ((res.q_max > 0) | (res.pauses > 0)))
    order = candidates[np.lexsort((-res.pauses[candidates], -res.q_max[candidates]))]
    return [{"port": fabric.link_name(int(k)), "link": int(k), "q_max": float(res.q_max[k]),
             "q_mean": float(res.q_mean[k]), "q_p99": float(res.q_pct[k, 0]),
             "marks": int(res.marks[k]), "pauses": int(res.pauses[k]),
             "paused_time": float(res.paused_time[k])} for k in order[:TOP_PORTS]]
