"""How a bonded 2-port NIC (RoCE LAG) puts its queue pairs on its ports: a named strategy.

HPN's hosts bond the two 200G ports of each backend NIC into one device with one IP (LACP).
NCCL sees one network device per NIC and never chooses a port: each of its connections is
``NCCL_IB_QPS_PER_CONNECTION`` RC queue pairs (default 1 in NCCL 2.18.3, the version the
HPN paper ran; ``net_ib.cc`` ``ncclIbConnect``/``ncclIbAccept`` create ``nqps`` QPs on the
device's single port), and the NIC driver decides which physical port each QP transmits on.
hpnsim routes one flow per QP (``qps`` per connection, ``channels`` connections per peer),
so the strategy is a rule giving each flow a port:

``balanced`` (hpnsim's HPN default, unchanged)
    Each connection's port keeps every NIC's send *and* receive port counts within one of
    each other (:mod:`.port_balance`): a placement with knowledge of both ends, as a
    collective library setting each QP's port explicitly (``mlx5dv_modify_qp_lag_port``)
    would reach. On a ring (one peer per direction) it is exactly ``queue_affinity``.
``queue_affinity`` (mlx5 RoCE LAG in queue-affinity mode)
    The driver gives every new QP the next port of a per-context counter: ``tx_affinity =
    counter++ mod ports + 1`` (Linux ``drivers/infiniband/hw/mlx5/qp.c``,
    ``get_tx_affinity_rr``), so a NIC's QPs alternate over its ports in creation order; the
    receive side is whatever the senders chose. hpnsim counts the flows that leave each NIC
    in the order they are planned (channel by channel); a real host's counter also counts
    its receive and flush QPs, which send no data, and NCCL's proxy creates QPs in an order
    hpnsim does not follow, so a real alternation can be offset (docs/failures.md, "What is
    not modelled").
``hash`` (mlx5 RoCE LAG in hash mode)
    The port select flow table hashes each packet's headers; a QP's packets share their
    5-tuple (its UDP source port), so a QP lands on a port by hash and two QPs of a NIC can
    share a port while the other idles. Linux 6.1 made hash mode the default for RoCE LAG on
    NICs with ``port_select_flow_table`` (commit b146a7cd0a71, "net/mlx5: Lag, enable hash
    mode by default for all NICs") and stopped assigning QP affinity in it (a83bb5df2ac6);
    NVIDIA's documentation sets it with ``lag_port_select_mode`` (``queue_affinity`` or
    ``hash``). hpnsim uses the bond hash ECMP routing uses (``hash_nic``).

A port that goes down: both LAG modes remap its traffic to the port still up
(``mlx5_infer_tx_affinity_mapping`` in ``drivers/net/ethernet/mellanox/mlx5/core/lag/lag.c``
maps a disabled port to the enabled one; hash mode rewrites its buckets the same way), so
every QP of the NIC then leaves on the live port. Here that is the routing's choice among
the usable ports (:meth:`~hpnsim.routing.flows.FlowBatch.choose_port`).

Examples
--------
>>> LagMode.parse("hash"), LagMode.parse(LagMode.QUEUE_AFFINITY).value
(<LagMode.HASH: 'hash'>, 'queue_affinity')
>>> LagMode.parse("round_robin")
Traceback (most recent call last):
...
hpnsim.errors.InputError: lag: unknown LAG port selection 'round_robin'; choose one of balanced, queue_affinity, hash
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from hpnsim.errors import InputError
from hpnsim.routing.flows import FlowBatch, rank_within
from hpnsim.routing.hashing import hash_code, hash_keys
from hpnsim.routing.port_balance import balanced_ports

__all__ = ["LagMode", "lag_ports"]


class LagMode(Enum):
    """How a bonded NIC places its queue pairs on its ports (module docstring)."""

    BALANCED = "balanced"
    QUEUE_AFFINITY = "queue_affinity"
    HASH = "hash"

    @classmethod
    def parse(cls, value, field: str = "lag") -> LagMode:
        """The mode named ``value`` (a LagMode or its name); an InputError naming ``field``."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            names = ", ".join(m.value for m in cls)
            raise InputError(field, f"unknown LAG port selection {value!r}; choose one of "
                                    f"{names}") from None


def lag_ports(flows: FlowBatch, out: np.ndarray, mode: LagMode, bond_hash: str = "xor"
              ) -> np.ndarray:
    """The NIC port of every flow in ``out`` (indices of flows that leave their host).

    Parameters
    ----------
    flows : the batch being routed (its state decides which ports are usable).
    out : indices into the batch.
    mode : the :class:`LagMode`.
    bond_hash : the hash function of ``hash`` mode (ECMP's ``hash_nic``).

    Examples
    --------
    Two GPUs send three QPs each to GPU 8; GPU 0's port 0 is down:

    >>> from hpnsim.fabrics import hpn7, FabricState
    >>> from hpnsim.routing.tables import routing_tables
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> b = FlowBatch(f, routing_tables(f), [0, 0, 0, 1, 1, 1], [8] * 6)
    >>> lag_ports(b, np.arange(6), LagMode.QUEUE_AFFINITY).tolist()
    [0, 1, 0, 0, 1, 0]
    >>> l0 = int(f.gpu_access_link[0, 0])
    >>> s = FabricState(f).set_down([l0, l0 ^ 1])
    >>> b = FlowBatch(f, routing_tables(f, s), [0, 0, 0, 1, 1, 1], [8] * 6)
    >>> lag_ports(b, np.arange(6), LagMode.QUEUE_AFFINITY).tolist()
    [1, 1, 1, 0, 1, 0]
    """
    out = np.asarray(out, dtype=np.int64)
    if mode is LagMode.BALANCED:
        return balanced_ports(flows.relay[out], flows.dst[out], flows.usable_ports(out),
                              flows.fabric.n_gpus)
    if mode is LagMode.QUEUE_AFFINITY:
        return flows.choose_port(out, rank_within(flows.relay[out]))
    hash_code(bond_hash, "hash_nic")
    h = hash_keys(bond_hash, flows.keys(flows.sport)).astype(np.int64)
    return flows.choose_port(out, h[out])
