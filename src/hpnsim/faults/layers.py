"""What faults have done to a fabric during a run, in the two views that matter.

``physical``: the links that carry no traffic right now (the engine's capacities).
``routed``: the links routing has learnt are down (after the ToR design's detection and
convergence delay; see :mod:`hpnsim.faults.failover`). Faults may overlap on a link, so each
view counts the faults holding a link down: the link comes back when the last one ends.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from hpnsim.fabrics.state import FabricState

__all__ = ["FaultLayers", "Layer"]


class Layer(StrEnum):
    """The two views of a fabric under faults (module docstring), physical first: at one
    instant a link stops carrying traffic before routing can know it.

    >>> sorted([Layer.ROUTED, Layer.PHYSICAL], key=Layer.rank)
    [<Layer.PHYSICAL: 'physical'>, <Layer.ROUTED: 'routed'>]
    """

    PHYSICAL = "physical"
    ROUTED = "routed"

    def rank(self) -> int:
        return 0 if self is Layer.PHYSICAL else 1


class FaultLayers:
    """The physical and routed :class:`~hpnsim.fabrics.state.FabricState` of a run, and how a
    fault edge reaches a resumable :class:`~hpnsim.engine.Simulation`.

    Examples
    --------
    >>> from hpnsim.engine import Simulation, TaskGraph
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> layers = FaultLayers(f)
    >>> sim = Simulation(TaskGraph(), layers.physical.capacity)
    >>> port = np.array([f.gpu_access_link[0, 0]])
    >>> layers.apply(sim, Layer.PHYSICAL, port, up=False)    # two faults on one link
    >>> layers.apply(sim, Layer.PHYSICAL, port, up=False)
    >>> layers.apply(sim, Layer.PHYSICAL, port, up=True)     # one ends: still down
    >>> bool(layers.down(Layer.PHYSICAL)[port[0]]), float(sim.capacity[port[0]])
    (True, 0.0)
    >>> layers.routing_state is None                     # routing has learnt nothing yet
    True
    """

    def __init__(self, fabric):
        self.physical = FabricState(fabric)
        self.routed = FabricState(fabric)
        self._count = {layer: np.zeros(fabric.n_links, np.int64) for layer in Layer}

    def down(self, layer: Layer) -> np.ndarray:
        """Boolean mask of the links some fault holds down in ``layer``."""
        return self._count[layer] > 0

    @property
    def routing_state(self) -> FabricState | None:
        """The state routing works under (``None`` while it knows of no down link, so
        routes and plans are the all-up ones)."""
        return self.routed if self.routed.down_links.size else None

    def apply(self, sim, layer: Layer, links: np.ndarray, up: bool) -> None:
        """One fault edge on ``links`` in ``layer``; a physical change sets the engine's
        capacities of the links whose state flipped."""
        count = self._count[layer]
        before = count[links] > 0
        count[links] += -1 if up else 1
        np.maximum(count, 0, out=count)
        flipped = links[before != (count[links] > 0)]
        if not flipped.size:
            return
        state = self.physical if layer is Layer.PHYSICAL else self.routed
        (state.set_up if up else state.set_down)(flipped)
        if layer is Layer.PHYSICAL:
            sim.set_capacity(flipped, self.physical.capacity[flipped])

    def reroute(self, sim, rerouter, records, routing: str, seed: int, todo=None) -> list:
        """Move every unfinished transfer of ``records`` whose path changes under
        :attr:`routing_state` (``todo``: the unfinished tasks, if already known); returns
        what moved, ``(task, flows, old links, new links)`` (:attr:`Rerouter.moved`)."""
        if todo is None:
            todo = ~np.isfinite(sim.result().finish)
        for task, links, usage in rerouter.changes(records, routing, seed, self.routing_state,
                                                   todo):
            if links.size:
                sim.reroute(task, links, usage)
        return [m for m in rerouter.moved if m[3].size]
