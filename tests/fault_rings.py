"""Test helper: a ring all-reduce through faults, with every fault edge applied by the
runner's own mechanism (:class:`hpnsim.faults.layers.FaultLayers`: capacities from the
physical state, reroute under the routed one), so the closed-form tests exercise it."""

from __future__ import annotations

import numpy as np

from hpnsim.collectives.planning.compile import compile_into
from hpnsim.engine import Simulation, TaskGraph
from hpnsim.faults.failover import FailoverPolicy, fault_changes
from hpnsim.faults.layers import FaultLayers, Layer
from hpnsim.faults.reroute import Rerouter
from hpnsim.training.compile import RouteRecord


def ring(fabric, gpus, size, faults, routing, policy=FailoverPolicy(), seed=0) -> float:
    """Finish time of a ring all-reduce (Simple protocol) over ``gpus`` through ``faults``."""
    g = TaskGraph()
    c = compile_into(g, fabric, "allreduce", gpus, size, algo="ring", protocol="simple",
                     routing=routing, seed=seed)
    record = RouteRecord("allreduce", np.array([gpus]), float(size), "ring", 0, len(g))
    layers = FaultLayers(fabric)
    sim = Simulation(g, layers.physical.capacity)
    rerouter = Rerouter(fabric, g)
    for change in fault_changes(fabric, faults, policy):
        sim.run(change.time)
        layers.apply(sim, change.layer, change.links, change.up)
        if change.layer is Layer.ROUTED:
            layers.reroute(sim, rerouter, [record], routing, seed)
    sim.run()
    return float(sim.result().finish[c.final[0]])
