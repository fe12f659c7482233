"""`FlowBatch`: the endpoints of a batch of flows, as every routing policy sees them.

A policy (:mod:`~hpnsim.routing.ecmp`, :mod:`~hpnsim.routing.hpn_dual_plane`,
:mod:`~hpnsim.routing.precise`, :mod:`~hpnsim.routing.spray`) takes a FlowBatch and the
policy options and returns :class:`~hpnsim.routing.paths.Paths`; the batch holds what
does not depend on the policy: validated GPU indices, PXN relays, connection ids and UDP
source ports, 5-tuple keys, the fixed in-host links before and after the network, and
(under a :class:`~hpnsim.fabrics.state.FabricState`) which NIC ports and destination ToRs
are still usable.
"""

from __future__ import annotations

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.distances import UNREACHABLE
from hpnsim.routing.hashing import five_tuple_keys, mix64
from hpnsim.routing.tables import RoutingTables


def gpu_array(values, n_gpus: int, field: str) -> np.ndarray:
    """Validated 1-D int64 array of GPU indices (InputError naming ``field`` otherwise).

    >>> gpu_array(3, 8, "src").tolist()
    [3]
    """
    array = np.atleast_1d(np.asarray(values))
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise InputError(field, f"must be a 1-D array of GPU indices, got {values!r:.60}")
    array = array.astype(np.int64)
    bad = (array < 0) | (array >= n_gpus)
    if bad.any():
        raise InputError(field, f"GPU indices must be in 0..{n_gpus - 1}, "
                                f"got {int(array[bad][0])}")
    return array


def rank_within(groups: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... for the successive occurrences of each value of ``groups``.

    >>> rank_within(np.array([5, 7, 5, 5, 7])).tolist()
    [0, 0, 1, 2, 1]
    """
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    run = np.arange(groups.size) - np.repeat(starts, np.diff(np.r_[starts, groups.size]))
    rank = np.empty(groups.size, dtype=np.int64)
    rank[order] = run
    return rank


def nth_true(mask: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per row of a boolean ``mask``, the column of its ``k``-th True (0-based).

    >>> nth_true(np.array([[True, True], [False, True]]), np.array([1, 0])).tolist()
    [1, 1]
    """
    if mask.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    rank = np.cumsum(mask, axis=1) - 1
    hit = mask & (rank == np.asarray(k)[:, None])
    return np.argmax(hit, axis=1).astype(np.int64)


class FlowBatch:
    """Endpoints of flows ``src[i] -> dst[i]`` (GPU indices) prepared for routing.

    Parameters
    ----------
    fabric : the :class:`~hpnsim.fabrics.fabric.Fabric`.
    tables : its :class:`~hpnsim.routing.tables.RoutingTables` (under a state: the state's).
    src, dst : GPU indices (validated here).
    conn : connection id per flow; default: the k-th flow between the same relay and
        destination is connection k.
    seed : seeds the UDP source ports.
    pxn : with a rail-optimized fabric, a cross-rail flow relays over NVLink to its host's
        GPU on the destination's rail and leaves from that GPU's NIC.
    sport : explicit UDP source ports (otherwise derived from ``seed`` and ``conn``).

    Attributes
    ----------
    n : number of flows. intra : flows that stay inside one host.
    relay : the GPU whose NIC a flow leaves from (``src`` unless relayed by PXN).
    conn, sport : connection id and UDP source port of every flow.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.routing.tables import routing_tables
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> b = FlowBatch(f, routing_tables(f), [0, 0, 1], [9, 9, 8], pxn=True)
    >>> b.intra.tolist(), b.relay.tolist(), b.conn.tolist()   # PXN: via the same rail
    ([False, False, False], [1, 1, 0], [0, 1, 0])
    >>> b.port_options()[0].tolist()          # both NIC ports usable
    [True, True]
    """

    def __init__(self, fabric, tables: RoutingTables, src, dst, conn=None, seed: int = 0,
                 pxn: bool = False, sport=None):
        n_gpus = fabric.n_gpus
        self.fabric = fabric
        self.t = tables
        self.src = gpu_array(src, n_gpus, "src")
        self.dst = gpu_array(dst, n_gpus, "dst")
        if self.src.shape != self.dst.shape:
            raise InputError("dst", f"needs one destination per source: {self.src.size} "
                                    f"sources, {self.dst.size} destinations")
        t = tables
        self.n = n = self.src.size
        self.intra = t.gpu_host[self.src] == t.gpu_host[self.dst]
        self.relay = self.src.copy()
        if pxn and fabric.meta.get("rail_optimized", False):
            cross = (~self.intra & (t.gpu_rail[self.src] != t.gpu_rail[self.dst])
                     & (t.gpu_rail[self.dst] >= 0))
            relay = t.host_rail_gpu[t.gpu_host[self.src[cross]], t.gpu_rail[self.dst[cross]]]
            self.relay[cross] = np.where(relay >= 0, relay, self.src[cross])
        self.via_relay = self.relay != self.src
        if conn is None:
            self.conn = rank_within(self.relay * n_gpus + self.dst)
        else:
            self.conn = np.broadcast_to(np.asarray(conn, dtype=np.int64), (n,)).copy()
        self.seed = int(seed)
        if sport is None:
            self.sport = self.sport_of(self.conn)
        else:
            self.sport = np.broadcast_to(np.asarray(sport, dtype=np.int64), (n,)) & 0xFFFF

    @property
    def degraded(self) -> bool:
        """Whether some link is down (the tables are those of a degraded state)."""
        return self.t.link_up is not None

    def sport_of(self, conn: np.ndarray) -> np.ndarray:
        """UDP source port of each flow's connection ``conn``."""
        return (49152 + mix64(self.seed, self.relay, self.dst, conn)
                % np.uint64(16384)).astype(np.int64)

    def keys(self, sport: np.ndarray) -> np.ndarray:
        """``(n, 13)`` 5-tuple keys (relay NIC IP, destination NIC IP, ``sport``)."""
        return five_tuple_keys(self.t.ip[self.relay], self.t.ip[self.dst], sport)

    def forced_port(self, port) -> np.ndarray | None:
        """The ``port`` option as one NIC port per flow (None when not given)."""
        if port is None:
            return None
        ports = self.t.ports
        array = np.broadcast_to(np.asarray(port, dtype=np.int64), (self.n,)).copy()
        if ((array < 0) | (array >= ports)).any():
            raise InputError("port", f"NIC ports are 0..{ports - 1}, got {port!r:.40}")
        return array

    def wired_ports(self, flows=slice(None)) -> np.ndarray:
        """``(k, ports)`` bool: the relay's NIC ports that have a ToR (all links up or not)."""
        return self.t.gpu_tor[self.relay[flows]] >= 0

    def port_options(self, flows=slice(None)) -> np.ndarray:
        """``(k, ports)`` bool: NIC ports a flow can leave on.

        A port needs a ToR; under a degraded state also an up ACCESS link and a route from
        its ToR to one of the destination's usable ToRs (:meth:`targets`).
        """
        wired = self.wired_ports(flows)
        if not self.degraded:
            return wired
        t = self.t
        up_links = t.link_up[np.maximum(t.access_up[self.relay[flows]], 0)]
        start = t.gpu_tor[self.relay[flows]]
        targets = self.targets(flows)
        dist = t.distance[np.maximum(t.row[start], 0)[:, :, None],
                          np.maximum(t.row[targets], 0)[:, None, :]]
        reach = ((dist < UNREACHABLE) & (targets[:, None, :] >= 0)).any(axis=2)
        return wired & up_links & reach

    def targets(self, flows=slice(None), *, base: bool = False) -> np.ndarray:
        """``(k, ports)`` destination ToR per port of the destination NIC, -1 where none.

        Under a degraded state, a ToR whose ACCESS link down to the NIC is down is no
        target (it withdraws the NIC's route), unless ``base`` asks for the all-up view.
        """
        t = self.t
        tors = t.gpu_tor[self.dst[flows]]
        if base or not self.degraded:
            return tors
        down = t.access_down[self.dst[flows]]
        return np.where((down >= 0) & t.link_up[np.maximum(down, 0)], tors, -1).astype(np.int32)

    def usable_ports(self, flows=slice(None)) -> np.ndarray:
        """``(k, ports)`` bool: the ports :meth:`choose_port` chooses among (the
        :meth:`port_options`, or the wired ports when none is usable: the host is cut off)."""
        usable = self.port_options(flows)
        cut_off = ~usable.any(axis=1)
        return np.where(cut_off[:, None], self.wired_ports(flows), usable)

    def choose_port(self, flows, choice: np.ndarray) -> np.ndarray:
        """NIC port of each flow in ``flows`` from a per-flow integer ``choice`` (a hash or a
        round-robin rank): the ``choice mod m``-th of its ``m`` usable ports.

        With every link up the usable ports are the wired ones, so this is exactly the
        all-up choice; when no port is usable (the host is cut off) the all-up choice is
        kept and the path crosses the dead link.
        """
        wired = self.wired_ports(flows)
        usable = self.port_options(flows)
        count = usable.sum(axis=1)
        cut_off = count == 0
        usable = np.where(cut_off[:, None], wired, usable)
        count = np.maximum(usable.sum(axis=1), 1)
        return np.where(usable.any(axis=1), nth_true(usable, choice % count), 0)

    def head(self, port: np.ndarray | None) -> np.ndarray:
        """(n, 5) in-host links before the switch walk: NVLink to relay, PCIe, PCIe switch
        -> NIC (-1 without a shared PCIe switch), ACCESS."""
        t, n = self.t, self.n
        head = np.full((n, 5), -1, dtype=np.int32)
        in_host = self.intra & (self.src != self.dst)
        nv = in_host | self.via_relay
        far = np.where(in_host, self.dst, self.relay)
        head[nv, 0] = t.nvlink_up[self.src[nv]]
        head[nv, 1] = t.nvlink_down[far[nv]]
        out = ~self.intra
        head[out, 2] = t.pcie_up[self.relay[out]]
        head[out, 3] = t.switch_up[self.relay[out]]
        if port is not None:
            head[out, 4] = t.access_up[self.relay[out], port[out]]
        return head

    def tail(self) -> np.ndarray:
        """(n, 2) in-host links after the network: NIC -> PCIe switch (-1 without one),
        PCIe to the GPU (-1 inside a host)."""
        tail = np.full((self.n, 2), -1, dtype=np.int32)
        tail[~self.intra, 0] = self.t.switch_down[self.dst[~self.intra]]
        tail[~self.intra, 1] = self.t.pcie_down[self.dst[~self.intra]]
        return tail
