"""Run one collective alone on a fabric and report it the way nccl-tests does."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.collectives.ops import busbw_factor
from hpnsim.collectives.planning.compile import compile_into
from hpnsim.collectives.planning.options import CollectiveOptions


@dataclass
class CollectiveResult:
    """Outcome of :func:`run_collective` (SI units: seconds, bytes, bytes/s).

    Attributes
    ----------
    op, algo, protocol, routing : str
        What ran (``auto`` resolved to the algorithm and protocol chosen).
    n_gpus : int
    size : float
        Bytes, nccl-tests convention.
    time, algbw, busbw : float
        ``algbw = size / time`` and ``busbw = algbw * factor`` (nccl-tests definitions,
        :func:`~hpnsim.collectives.ops.busbw_factor`).
    bottleneck, bottleneck_utilization : str, float
        The link with the highest bytes/capacity and its busy fraction of ``time``.
    max_link_flows : float
        The most member flows of concurrently running stages on one network link (NIC port
        or switch-to-switch).
    hash_collisions : int
        How many of those flows sit above the ideal spread over their link's alternatives
        (two flows on one NIC port while the other port idles is one;
        :func:`hpnsim.routing.diagnostics.excess_over_ideal`).
    n_groups : int
        Engine tasks the collective compiled into.
    link_bytes : numpy.ndarray
        Bytes every link carried; ``top_links`` the ten busiest (name, bytes).
    port_imbalance : dict
        Per tier (``nic_send``, ``nic_receive``, ``tor_uplinks``, ``agg_downlinks``) the
        distribution of ``max / min`` bytes over a device's ports (infinite when one port
        idles while another carries bytes; :func:`hpnsim.routing.diagnostics.port_imbalance`).

    Examples
    --------
    >>> from hpnsim.fabrics import fat_tree
    >>> r = run_collective(fat_tree(4), "allreduce", range(16), 2**24, algo="ring")
    >>> r.op, r.algo, r.n_gpus, bool(r.busbw == r.algbw * 2 * 15 / 16)
    ('allreduce', 'ring', 16, True)
    """

    op: str
    algo: str
    protocol: str
    routing: str
    n_gpus: int
    size: float
    time: float
    algbw: float
    busbw: float
    bottleneck: str
    bottleneck_utilization: float
    max_link_flows: float
    hash_collisions: int
    n_groups: int
    link_bytes: np.ndarray = field(repr=False)
    top_links: list[tuple[str, float]] = field(default_factory=list, repr=False)
    port_imbalance: dict = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        """JSON-ready summary; bandwidths in GB/s and time also in µs, like nccl-tests;
        infinite port-imbalance ratios as ``"inf"``.

        Returns
        -------
        dict
            The fields of :data:`ROW_FIELDS` (``algbw``/``busbw`` in GB/s) plus ``time_us``,
            ``top_links`` and ``port_imbalance``.

        Examples
        --------
        >>> from hpnsim.fabrics import fat_tree
        >>> d = run_collective(fat_tree(4), "allgather", range(4), 2**20).to_dict()
        >>> d["op"], d["n_gpus"], d["time_us"] == d["time"] * 1e6
        ('allgather', 4, True)
        """
        from hpnsim.routing.imbalance import jsonable

        return {
            "op": self.op, "algo": self.algo, "protocol": self.protocol,
            "routing": self.routing, "n_gpus": self.n_gpus, "size": self.size,
            "time": self.time, "time_us": self.time * 1e6,
            "algbw": self.algbw / 1e9, "busbw": self.busbw / 1e9,
            "bottleneck": self.bottleneck,
            "bottleneck_utilization": self.bottleneck_utilization,
            "max_link_flows": self.max_link_flows, "hash_collisions": self.hash_collisions,
            "n_groups": self.n_groups,
            "top_links": [{"link": name, "bytes": b} for name, b in self.top_links],
            "port_imbalance": jsonable(self.port_imbalance),
        }

    def rows(self) -> list[dict]:
        """One row: the figures of the collective in SI units (seconds, bytes, bytes/s; unlike
        :meth:`to_dict`, whose bandwidths are in GB/s), without the per-link arrays.

        Examples
        --------
        >>> from hpnsim.fabrics import build_fabric
        >>> f = build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0})
        >>> r = run_collective(f, "allreduce", range(16), 2**20, algo="ring")
        >>> row, = r.rows()
        >>> row["op"], row["n_gpus"], row["busbw"] == r.busbw
        ('allreduce', 16, True)
        """
        return [{name: getattr(self, name) for name in ROW_FIELDS}]

    def to_frame(self):
        """:meth:`rows` as a pandas DataFrame (pandas: the optional ``frames`` extra).

        Examples
        --------
        >>> from hpnsim.fabrics import fat_tree
        >>> r = run_collective(fat_tree(4), "allreduce", range(4), 2**20)
        >>> r.to_frame().shape == (1, len(ROW_FIELDS))
        True
        """
        from hpnsim.frames import to_frame

        return to_frame(self.rows(), columns=list(ROW_FIELDS))


#: the columns of :meth:`CollectiveResult.rows` (every field but the per-link ones)
ROW_FIELDS = ("op", "algo", "protocol", "routing", "n_gpus", "size", "time", "algbw", "busbw",
              "bottleneck", "bottleneck_utilization", "max_link_flows", "hash_collisions",
              "n_groups")


def concurrent_link_flows(compiled, fabric, state=None) -> tuple[float, int]:
    """(most flows on one network link, hash collisions) over waves of stages that start
    together (same dependencies); network links are NIC ports and switch-to-switch links
    (under ``state``, down links are no alternatives)."""
    from hpnsim.routing.diagnostics import alternative_groups, excess_over_ideal

    network = alternative_groups(fabric) >= 0
    waves: dict[tuple[int, ...], list[int]] = {}
    for i, stage in enumerate(compiled.schedule.stages):
        waves.setdefault(stage.deps, []).append(i)
    worst, collisions = 0.0, 0.0
    for members in waves.values():
        load = np.zeros(fabric.n_links)
        whole_flows = True
        for i in members:
            paths = compiled.paths[i]
            load += np.bincount(paths.links, weights=paths.weight, minlength=fabric.n_links)
            whole_flows &= bool(np.all(paths.weight == 1.0))
        if network.any():
            worst = max(worst, float(load[network].max()))
        collisions += float(excess_over_ideal(fabric, load, integral=whole_flows,
                                              state=state).sum())
    return worst, int(round(collisions))


def run_collective(fabric, op: str, gpus, size: float,
                   options: CollectiveOptions | None = None, *, state=None,
                   **keywords) -> CollectiveResult:
    """Simulate one collective alone on ``fabric`` and measure it the way nccl-tests does.

    Parameters
    ----------
    fabric : hpnsim.fabrics.Fabric
    op : str
        allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, send.
    gpus : sequence of int
        GPU indices of the group, in rank order.
    size : float
        Bytes, nccl-tests convention (see :func:`compile_collective`).
    options : CollectiveOptions, optional
        How it runs (:class:`~hpnsim.collectives.planning.options.CollectiveOptions`; default: every
        default).
    state : hpnsim.fabrics.FabricState, optional
        Routing avoids its down links where it can and the links run at
        ``state.capacity``; a transfer left on a dead link never finishes (``time`` is
        infinite).
    **keywords
        Fields of ``CollectiveOptions`` replacing those of ``options`` (``algo="ring"``,
        ``routing="hpn_dual_plane"``, ``nccl=...``, ...).

    Returns
    -------
    CollectiveResult

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fabric = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...               aggs_per_plane=2)
    >>> ecmp = run_collective(fabric, "allreduce", range(16), 2**30, algo="hier")
    >>> hpn = run_collective(fabric, "allreduce", range(16), 2**30, algo="hier",
    ...                      routing="hpn_dual_plane")
    >>> ecmp.hash_collisions > 0, hpn.hash_collisions, ecmp.time >= hpn.time
    (True, 0, True)
    """
    from hpnsim.engine import TaskGraph, simulate

    options = CollectiveOptions.build(options, **keywords)
    graph = TaskGraph()
    compiled = compile_into(graph, fabric, op, gpus, size, options, state=state)
    capacity = fabric.link_capacity if state is None else state.capacity
    sim = simulate(graph, capacity)
    time = float(sim.finish[compiled.final].max())
    n = compiled.schedule.gpus.size
    algbw = size / time if time > 0 else np.inf
    busbw = algbw * busbw_factor(op, n)
    link_bytes = np.asarray(sim.link_bytes, dtype=np.float64)
    ratio = np.divide(link_bytes, capacity, out=np.zeros_like(link_bytes),
                      where=capacity > 0)
    worst = int(np.argmax(ratio)) if ratio.size else -1
    utilization = float(ratio[worst] / time) if worst >= 0 and time > 0 else 0.0
    top = np.argsort(-ratio, kind="stable")[:10]
    top_links = [(fabric.link_name(int(k)), float(link_bytes[k])) for k in top
                 if link_bytes[k] > 0]
    max_flows, collisions = concurrent_link_flows(compiled, fabric, state)
    from hpnsim.routing.diagnostics import port_imbalance

    return CollectiveResult(
        op=compiled.schedule.op, algo=compiled.algo, protocol=compiled.protocol,
        routing=options.routing, n_gpus=n, size=float(size), time=time, algbw=algbw, busbw=busbw,
        bottleneck=fabric.link_name(worst) if worst >= 0 and link_bytes[worst] > 0 else "-",
        bottleneck_utilization=utilization, max_link_flows=max_flows,
        hash_collisions=collisions, n_groups=len(graph), link_bytes=link_bytes,
        top_links=top_links, port_imbalance=port_imbalance(fabric, link_bytes, state=state))
