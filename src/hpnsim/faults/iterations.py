"""A job's iterations in a run through faults: compiled once, appended as copies.

Each job's iteration is compiled once (routing every collective of a 1,024-GPU job takes
seconds): a :class:`Template`, frozen in its own graph and run alone on the healthy fabric
(that run is the job's nominal iteration time). Every iteration of every attempt is a copy of
its tasks (``TaskGraph.append_copy``) chained after the previous iteration's stage ends, with
its route records and accounting handles shifted to the copy's task ids (:func:`shifted`),
so a copy reroutes and is accounted exactly as a freshly compiled iteration would be.
:class:`TemplateCopies` builds iterations that way; :class:`FreshCompiles` compiles each one,
the build the copies are checked against (tests/test_faults_copies.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from hpnsim.faults.timeline import JobPlan

__all__ = ["Attempt", "FreshCompiles", "Template", "TemplateCopies", "TransferIds",
           "compile_iteration", "compile_template", "shifted", "template_of"]


@dataclass
class Template:
    """A job's iteration compiled once into its own graph (task 0: the iteration start),
    its frozen arrays, and ``nominal``: its time alone on the healthy fabric."""

    it: object
    arrays: object
    nominal: float


def compile_iteration(plan: JobPlan, fabric, routing: str, seed: int,
                      routing_options: dict | None = None) -> tuple:
    """One iteration of ``plan`` compiled into its own graph (task 0: its start) and frozen:
    ``(it, arrays)``, what :func:`template_of` times (collectives planned with
    ``routing_options``, :func:`hpnsim.routing.route`'s)."""
    from hpnsim.engine import TaskGraph
    from hpnsim.engine.taskgraph import TRANSFER
    from hpnsim.training import build_iteration_graph

    scratch = TaskGraph()
    # a release > 0 gives the iteration a start task (id 0) that copies re-anchor
    it = build_iteration_graph(plan.job, fabric, routing=routing, tp_algo=plan.tp_algo,
                               dp_algo=plan.dp_algo, gpus=plan.gpus, seed=seed,
                               graph=scratch, release=1.0, routing_options=routing_options)
    arrays = scratch.arrays(fabric.n_links)
    if np.any(arrays.priority[arrays.kind == TRANSFER] != 0):
        raise AssertionError("copies put every transfer in class 0; the compiled "
                             "iteration uses other classes")
    return it, arrays


def template_of(it, arrays, fabric) -> Template:
    """The :class:`Template` of a compiled iteration: a copy of it run alone, released at
    0, gives its nominal time."""
    from hpnsim.engine import TaskGraph, simulate
    from hpnsim.training import account

    alone = TaskGraph()
    alone.append_copy(arrays, release=0.0)
    sim = simulate(alone, fabric.link_capacity)
    return Template(it, arrays, account(it, sim.start, sim.finish).iteration_time)


def compile_template(plan: JobPlan, fabric, routing: str, seed: int,
                     routing_options: dict | None = None) -> Template:
    """Compile one iteration of ``plan`` and run a copy of it alone, released at 0."""
    return template_of(*compile_iteration(plan, fabric, routing, seed, routing_options),
                       fabric)


def shifted(it, graph, offset: int):
    """The CompiledIteration of a copy of ``it`` appended at task ``offset`` of ``graph``:
    every task id (stage ends, passes, Gantt rows, route records) moved by ``offset``."""
    from hpnsim.training.compile import Element, StagePass

    def ids(tasks):
        return [t + offset for t in tasks]

    passes = [[StagePass(p.kind, p.micro_batch, p.chunk,
                         p.recv + offset if p.recv >= 0 else -1,
                         [Element(e.first + offset, e.last + offset, e.nominal, e.category,
                                  e.wait) for e in p.elements])
               for p in stage] for stage in it.passes]
    rows = [[(kind, ids(first), ids(finals)) for kind, first, finals in stage]
            for stage in it.rows]
    routes = [replace(r, first=r.first + offset, end=r.end + offset) for r in it.routes]
    return replace(it, graph=graph, passes=passes, rows=rows, stage_end=ids(it.stage_end),
                   origin=it.origin + offset, first_task=it.first_task + offset,
                   end_task=it.end_task + offset, routes=routes)


class TransferIds:
    """``transfers_in`` of a TaskGraph that only grows: each task's kind is read once, not
    once per route record at every fault edge (the Rerouter asks for every record's)."""

    def __init__(self, graph):
        self.graph, self.ids, self.known = graph, np.zeros(0, np.int64), 0

    def transfers_in(self, first: int, end: int) -> np.ndarray:
        n = len(self.graph)
        if n > self.known:
            self.ids = np.concatenate([self.ids, self.graph.transfers_in(self.known, n)])
            self.known = n
        lo, hi = np.searchsorted(self.ids, (first, end))
        return self.ids[lo:hi]


@dataclass
class Attempt:
    """One attempt of a job: iterations ``start_iteration..`` compiled from ``base_time``."""

    job: int
    attempt: int
    start_iteration: int
    base_time: float
    first_task: int
    end_task: int = 0
    its: list = field(default_factory=list)
    checkpoints: dict = field(default_factory=dict)   # iteration index -> checkpoint task
    abandoned: bool = False


class TemplateCopies:
    """Every iteration a copy of its job's :class:`Template` (the default build)."""

    def __init__(self, templates: list[Template]):
        self.templates = templates

    def append(self, j: int, plan: JobPlan, graph, release: float, after):
        first = graph.append_copy(self.templates[j].arrays, release=release, after=after)
        it = shifted(self.templates[j].it, graph, first)
        if not release > 0 and not len(after):
            # compiled alone it would have no start task: its copy is a zero wait
            # at 0, outside the iteration's own tasks (as account counts them)
            it.origin, it.first_task = -1, it.first_task + 1
        return it


class FreshCompiles:
    """Every iteration compiled on its own, as ``simulate_iteration`` would."""

    def __init__(self, fabric, routing: str, seed: int, routing_options: dict | None = None):
        self.fabric, self.routing, self.seed = fabric, routing, seed
        self.routing_options = routing_options

    def append(self, j: int, plan: JobPlan, graph, release: float, after):
        from hpnsim.training import build_iteration_graph

        return build_iteration_graph(plan.job, self.fabric, routing=self.routing,
                                     tp_algo=plan.tp_algo, dp_algo=plan.dp_algo,
                                     gpus=plan.gpus, seed=self.seed, graph=graph,
                                     release=release, after=after,
                                     routing_options=self.routing_options)
