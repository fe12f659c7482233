"""Training through faults: jobs run iteration after iteration on one resumable
:class:`~hpnsim.engine.Simulation` while faults start and end.

At every fault edge (:func:`~hpnsim.faults.failover.fault_changes`) the engine's capacities
follow the physical :class:`~hpnsim.fabrics.state.FabricState`, and, when routing has learnt
the change, every unfinished transfer whose path changes under the routed state is moved
(``Simulation.reroute``). Where no alternative exists its transfers stall at rate 0.

A job with a GPU whose NIC has no working port (single ToR, or a stacked pair that went
dark) is cut off: it stalls, and if it is still cut off ``timeout`` seconds later it fails.
Its unfinished transfers are parked on a link of capacity 0 and it restarts from its last
checkpoint: a spare host replaces a host-level fault (an access link or NIC port) after
``restart_time``; a switch fault must be repaired first. Lost work = time since the last
checkpoint (or the job's start) + restart.

Checkpoints are taken every ``checkpoint_interval`` of fault-free training, counted in
iterations (as frameworks count them: Megatron's ``--save-interval``): every
``round(interval / T0)`` iterations, with ``T0`` the job's iteration time alone on the
healthy fabric; training stops ``checkpoint_write`` seconds while one is written.

Each job's iteration is compiled once (routing every collective of a 1,024-GPU job takes
seconds): a template, frozen in its own graph and run alone on the healthy fabric (that run
is ``T0``). Every iteration of every attempt is a copy of its tasks
(``TaskGraph.append_copy``) chained after the previous iteration's stage ends, with its
route records and accounting handles shifted to the copy's task ids, so a copy reroutes and
is accounted exactly as a freshly compiled iteration would be.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace

import numpy as np

from hpnsim.errors import InputError
from hpnsim.faults.failover import FailoverPolicy, fault_changes
from hpnsim.faults.layers import FaultLayers
from hpnsim.faults.reliability import CHECKPOINT_INTERVAL_S, CHECKPOINT_WRITE_S, RESTART_S
from hpnsim.faults.reroute import Rerouter

#: The issue's figure for the collective timeout NCCL users set (2 minutes); PyTorch's own
#: default for ProcessGroupNCCL is 10 minutes (kProcessGroupNCCLDefaultTimeout), which
#: reliability.DETECTION_S uses. Set ``timeout`` to your job's.
TIMEOUT = 120.0

__all__ = ["JobPlan", "JobTimeline", "RecoveryPolicy", "Restart", "simulate_with_faults"]


@dataclass(frozen=True)
class RecoveryPolicy:
    """What a cut-off job does: collective ``timeout``, checkpoints, restart (seconds).

    ``checkpoint_age``: how long before the job's first simulated iteration its last
    checkpoint was taken (0: the simulated window starts at a checkpoint).

    >>> RecoveryPolicy().timeout, RecoveryPolicy().restart_time
    (120.0, 100.0)
    """

    timeout: float = TIMEOUT
    checkpoint_interval: float = CHECKPOINT_INTERVAL_S
    checkpoint_write: float = CHECKPOINT_WRITE_S
    restart_time: float = RESTART_S
    checkpoint_age: float = 0.0

    def __post_init__(self):
        for key in ("timeout", "checkpoint_interval", "checkpoint_write", "restart_time",
                    "checkpoint_age"):
            value = getattr(self, key)
            if not np.isfinite(value) or value < 0:
                raise InputError(key, f"must be a time >= 0, got {value!r}")
        if self.checkpoint_interval <= 0:
            raise InputError("checkpoint_interval", "must be > 0")


@dataclass
class JobPlan:
    """A job to run through faults: its TrainJob, GPUs (rank order), iterations, arrival."""

    name: str
    job: object
    gpus: np.ndarray
    iterations: int = 1
    arrival: float = 0.0
    tp_algo: str = "auto"
    dp_algo: str = "auto"


@dataclass
class Restart:
    """One failure of a job: when it failed, the checkpoint it went back to, when it ran
    again, and the work lost (``resumed_at - last_checkpoint``: time since the checkpoint
    plus restart)."""

    failed_at: float
    last_checkpoint: float
    checkpoint_iteration: int
    iterations_lost: int
    resumed_at: float

    @property
    def lost_work(self) -> float:
        return self.resumed_at - self.last_checkpoint

    def to_dict(self) -> dict:
        return {"failed_at": self.failed_at, "last_checkpoint": self.last_checkpoint,
                "checkpoint_iteration": self.checkpoint_iteration,
                "iterations_lost": self.iterations_lost, "resumed_at": self.resumed_at,
                "lost_work": self.lost_work}


@dataclass
class JobTimeline:
    """A job's iterations through the faults: ``rows`` (one per completed iteration:
    attempt, iteration, start, end, iteration_time, samples_per_s), the accounted
    ``iterations`` that count (the last attempt of each), ``restarts``, ``nominal``
    iteration time alone on the healthy fabric, and checkpoints written."""

    name: str
    rows: list[dict]
    iterations: list
    restarts: list[Restart]
    nominal: float
    samples: int
    checkpoints: int = 0
    finish: float = 0.0
    windows: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready: ``timeline`` rows, fault ``windows``, ``restarts``, ``lost_work``
        (seconds, summed), ``nominal_iteration_time``, ``nominal_samples_per_s``."""
        return {"timeline": list(self.rows), "windows": list(self.windows),
                "restarts": [r.to_dict() for r in self.restarts],
                "lost_work": sum(r.lost_work for r in self.restarts),
                "checkpoints": self.checkpoints, "nominal_iteration_time": self.nominal,
                "nominal_samples_per_s": self.samples / self.nominal}


@dataclass
class _Template:
    """A job's iteration compiled once into its own graph (task 0: the iteration start),
    its frozen arrays, and ``nominal``: its time alone on the healthy fabric."""

    it: object
    arrays: object
    nominal: float


def _template(plan: JobPlan, fabric, routing: str, seed: int) -> _Template:
    """Compile one iteration of ``plan`` and run a copy of it alone, released at 0."""
    from hpnsim.engine import TaskGraph, simulate
    from hpnsim.engine.taskgraph import TRANSFER
    from hpnsim.training import account, build_iteration_graph

    scratch = TaskGraph()
    # a release > 0 gives the iteration a start task (id 0) that copies re-anchor
    it = build_iteration_graph(plan.job, fabric, routing=routing, tp_algo=plan.tp_algo,
                               dp_algo=plan.dp_algo, gpus=plan.gpus, seed=seed,
                               graph=scratch, release=1.0)
    arrays = scratch.arrays(fabric.n_links)
    if np.any(arrays.priority[arrays.kind == TRANSFER] != 0):
        raise AssertionError("copies put every transfer in class 0; the compiled "
                             "iteration uses other classes")
    alone = TaskGraph()
    alone.append_copy(arrays, release=0.0)
    sim = simulate(alone, fabric.link_capacity)
    return _Template(it, arrays, account(it, sim.start, sim.finish).iteration_time)


def _shifted(it, graph, offset: int):
    """The CompiledIteration of a copy of ``it`` appended at task ``offset`` of ``graph``:
    every task id (stage ends, passes, Gantt rows, route records) moved by ``offset``."""
    from hpnsim.training.compile import Element, StagePass

    def ids(tasks):
        return [t + offset for t in tasks]

    passes = [[StagePass(p.kind, p.micro_batch, p.chunk,
                         p.recv + offset if p.recv >= 0 else -1,
                         [Element(e.first + offset, e.last + offset, e.nominal, e.category)
                          for e in p.elements]) for p in stage] for stage in it.passes]
    rows = [[(kind, ids(first), ids(finals)) for kind, first, finals in stage]
            for stage in it.rows]
    routes = [replace(r, first=r.first + offset, end=r.end + offset) for r in it.routes]
    return replace(it, graph=graph, passes=passes, rows=rows, stage_end=ids(it.stage_end),
                   origin=it.origin + offset, first_task=it.first_task + offset,
                   end_task=it.end_task + offset, routes=routes)


class _TransferIds:
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


#: Build every iteration as a copy of the job's template (False: compile each one, the
#: build the copies are checked against in tests/test_faults.py).
COPY_ITERATIONS = True


@dataclass
class _Chain:
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


def simulate_with_faults(fabric, jobs: list[JobPlan], faults, *, routing: str = "ecmp",
                         seed: int = 0, failover: FailoverPolicy | None = None,
                         recovery: RecoveryPolicy | None = None) -> list[JobTimeline]:
    """Run ``jobs`` together through ``faults`` (see the module docstring).

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.faults.events import parse_fault
    >>> from hpnsim.training.job import TrainJob
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> job = JobPlan("j", TrainJob("llama3-8b", tp=8, dp=2, global_batch=8),
    ...               np.arange(16), iterations=3)
    >>> [t] = simulate_with_faults(f, [job], [parse_fault("link:gpu0.port0@0.1s+0.5s")])
    >>> len(t.rows), t.restarts
    (3, [])
    """
    from hpnsim.engine import Simulation, TaskGraph
    from hpnsim.training import account, build_iteration_graph

    failover = failover or FailoverPolicy(seed=seed)
    recovery = recovery or RecoveryPolicy()
    faults = list(faults)
    changes = fault_changes(fabric, faults, failover)
    graph = TaskGraph()
    transfers = _TransferIds(graph)
    rerouter = Rerouter(fabric, transfers)
    layers = FaultLayers(fabric)
    held = {"physical": set(), "routed": set()}       # (fault, window start) currently down
    retired: set[int] = set()
    park = fabric.n_links
    access = np.asarray(fabric.gpu_access_link)

    templates = [_template(plan, fabric, routing, seed) for plan in jobs]
    nominal = [t.nominal for t in templates]
    save_every = [max(1, round(recovery.checkpoint_interval / t0)) for t0 in nominal]

    chains: list[_Chain] = []
    live: dict[int, _Chain] = {}

    def compile_chain(j: int, start: int, release: float, base: float) -> _Chain:
        plan = jobs[j]
        chain = _Chain(j, sum(c.job == j for c in chains), start, base, len(graph))
        after = ()
        for k in range(start, plan.iterations):
            if COPY_ITERATIONS:
                first = graph.append_copy(templates[j].arrays, release=release, after=after)
                it = _shifted(templates[j].it, graph, first)
                if not release > 0 and not len(after):
                    # compiled alone it would have no start task: its copy is a zero wait
                    # at 0, outside the iteration's own tasks (as account counts them)
                    it.origin, it.first_task = -1, it.first_task + 1
            else:
                it = build_iteration_graph(plan.job, fabric, routing=routing,
                                           tp_algo=plan.tp_algo, dp_algo=plan.dp_algo,
                                           gpus=plan.gpus, seed=seed, graph=graph,
                                           release=release, after=after)
            chain.its.append(it)
            after = it.stage_end
            if (k + 1) % save_every[j] == 0 and k + 1 < plan.iterations:
                after = [graph.add_delay(recovery.checkpoint_write, deps=after,
                                         name=f"{plan.name} checkpoint {k + 1}")]
                chain.checkpoints[k + 1] = after[0]
        chain.end_task = len(graph)
        chains.append(chain)
        live[j] = chain
        return chain

    for j, plan in enumerate(jobs):
        compile_chain(j, 0, plan.arrival, plan.arrival - recovery.checkpoint_age)
    sim = Simulation(graph, np.append(layers.physical.capacity, 0.0))

    def reroute(records_of=None) -> None:
        todo = ~np.isfinite(sim.result().finish)
        for chain in (records_of or [c for c in chains if not c.abandoned]):
            records = [r for it in chain.its for r in it.routes]
            layers.reroute(sim, rerouter, records, routing, seed, todo)

    def apply(layer: str, links: np.ndarray, up: bool) -> None:
        layers.apply(sim, layer, links, up)

    events: list = []
    seq = 0

    def push(time, kind, payload):
        nonlocal seq
        heapq.heappush(events, (time, seq, kind, payload))
        seq += 1

    for change in changes:
        push(change.time, "change", change)
    blocked: dict[int, float] = {}
    token = [0] * len(jobs)
    restarts: list[list[Restart]] = [[] for _ in jobs]

    def cut_jobs() -> set[int]:
        down = layers.down("physical")
        cut = down[access].all(axis=1)
        return {j for j, plan in enumerate(jobs) if cut[plan.gpus].any()}

    def active_faults_of(j: int) -> list[int]:
        links = access[jobs[j].gpus].ravel()
        return sorted({i for (i, _), layer in ((k, "p") for k in held["physical"])
                       if np.isin(links, _fault_links[i]).any()})

    _fault_links = {i: None for i in range(len(faults))}
    for change in changes:
        _fault_links[change.fault] = change.links
    fault_end = {i: max(c.time for c in changes if c.fault == i) for i in _fault_links}
    host_level = {c.fault: c.host_level for c in changes}

    def fail(j: int, now: float) -> None:
        chain = live[j]
        finish = sim.result().finish
        ckpt_k, ckpt_t = chain.start_iteration, chain.base_time
        for k, task in chain.checkpoints.items():
            if np.isfinite(finish[task]) and finish[task] <= now and k > ckpt_k:
                ckpt_k, ckpt_t = k, float(finish[task])
        done = sum(1 for i, it in enumerate(chain.its)
                   if chain.start_iteration + i >= ckpt_k
                   and np.isfinite(finish[it.stage_end]).all())
        for task in transfers.transfers_in(chain.first_task, chain.end_task).tolist():
            if not np.isfinite(finish[task]):
                sim.reroute(task, [park])
        chain.abandoned = True
        causes = active_faults_of(j)
        resume = now + recovery.restart_time
        for i in causes:
            if not host_level[i]:
                resume = max(resume, fault_end[i])
        restarts[j].append(Restart(now, ckpt_t, ckpt_k, done, resume))
        compile_chain(j, ckpt_k, resume, resume)
        reroute([live[j]])
        for i in causes:
            if host_level[i]:
                push(resume, "spare", i)

    while events:
        now = events[0][0]
        sim.run(until=now)
        batch = []
        while events and events[0][0] == now:
            batch.append(heapq.heappop(events))
        routed_changed = False
        for _, _, kind, payload in batch:
            if kind == "change" and payload.fault not in retired:
                key = (payload.fault, payload.layer)
                apply(payload.layer, payload.links, payload.up)
                if payload.up:
                    held[payload.layer].discard(key)
                else:
                    held[payload.layer].add(key)
                routed_changed |= payload.layer == "routed"
            elif kind == "spare" and payload not in retired:
                retired.add(payload)   # the spare host replaces the faulty one for good
                for layer in ("physical", "routed"):
                    if (payload, layer) in held[layer]:
                        held[layer].discard((payload, layer))
                        apply(layer, _fault_links[payload], True)
                routed_changed = True
        cut = cut_jobs()
        for j in cut - set(blocked):
            blocked[j] = now
            token[j] += 1
            push(now + recovery.timeout, "timeout", (j, token[j]))
        for j in set(blocked) - cut:
            del blocked[j]
            token[j] += 1
        if routed_changed:
            reroute()
        for _, _, kind, payload in batch:
            if kind == "timeout":
                j, tok = payload
                finish = sim.result().finish
                ended = all(np.isfinite(finish[t]) for t in live[j].its[-1].stage_end) \
                    if live[j].its else True
                if tok == token[j] and j in blocked and not ended:
                    del blocked[j]
                    token[j] += 1
                    fail(j, now)
    sim.run()
    result = sim.result()
    return [_timeline(j, plan, [c for c in chains if c.job == j], result, restarts[j],
                      nominal[j], faults, account) for j, plan in enumerate(jobs)]


def _timeline(j, plan, chains, result, restarts, nominal, faults, account) -> JobTimeline:
    samples = int(plan.job.layout.global_batch)
    rows, kept = [], {}
    checkpoints = 0
    for chain in chains:
        for i, it in enumerate(chain.its):
            end = float(np.max(result.finish[it.stage_end]))
            if not math.isfinite(end):
                continue
            start = float(result.finish[it.origin]) if it.origin >= 0 else 0.0
            k = chain.start_iteration + i
            rows.append({"job": plan.name, "attempt": chain.attempt, "iteration": k,
                         "start": start, "end": end, "iteration_time": end - start,
                         "samples_per_s": samples / (end - start)})
            kept[k] = (it, chain)
        checkpoints += sum(np.isfinite(result.finish[t]) for t in chain.checkpoints.values())
    iterations = [account(it, result.start, result.finish) for k, (it, _) in sorted(kept.items())]
    windows = [{"kind": f.kind, "target": f.target, "start": a, "end": b}
               for f in faults for a, b in f.windows()]
    finish = max((r["end"] for r in rows), default=0.0)
    return JobTimeline(plan.name, rows, iterations, restarts, nominal, samples,
                       int(checkpoints), finish, windows)
