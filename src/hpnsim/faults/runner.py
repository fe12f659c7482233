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

Each job's iteration is compiled once and every iteration of every attempt is a copy of it
(:mod:`hpnsim.faults.iterations`); the template's alone run is ``T0``.

The driver (:class:`FaultRun`) keeps typed events in time order
(:class:`~hpnsim.engine.events.EventQueue`): a :class:`FaultEdge` (a fault starts or ends in
one :class:`~hpnsim.faults.layers.Layer`), a :class:`SpareHost` (a spare replaces a host
for good), a :class:`CollectiveTimeout` (a cut-off job's collectives give up). At each
instant it applies the fabric events first, then sees which jobs are cut off, reroutes if
routing learnt something, and only then lets the timeouts fire.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.engine.events import EventQueue, dispatch
from hpnsim.faults.failover import Change, FailoverPolicy, fault_changes
from hpnsim.faults.iterations import (
    Attempt,
    FreshCompiles,
    TemplateCopies,
    TransferIds,
    compile_template,
)
from hpnsim.faults.layers import FaultLayers, Layer
from hpnsim.faults.reroute import Rerouter
from hpnsim.faults.timeline import (
    TIMEOUT,
    JobPlan,
    JobTimeline,
    RecoveryPolicy,
    Restart,
    job_timeline,
)

__all__ = ["TIMEOUT", "CollectiveTimeout", "FaultEdge", "FaultRun", "JobPlan", "JobTimeline",
           "RecoveryPolicy", "Restart", "SpareHost", "simulate_with_faults"]


@dataclass(frozen=True, slots=True)
class FaultEdge:
    """A fault starts or ends in one layer (:class:`~hpnsim.faults.failover.Change`)."""

    change: Change


@dataclass(frozen=True, slots=True)
class SpareHost:
    """A spare host replaces the one fault ``fault`` hit, for good."""

    fault: int


@dataclass(frozen=True, slots=True)
class CollectiveTimeout:
    """Job ``job``'s collectives time out, unless it was reconnected since (``token``: the
    job's watch when the timeout was armed)."""

    job: int
    token: int


def simulate_with_faults(fabric, jobs: list[JobPlan], faults, *, routing: str = "ecmp",
                         seed: int = 0, failover: FailoverPolicy | None = None,
                         recovery: RecoveryPolicy | None = None,
                         routing_options: dict | None = None,
                         templates: list | None = None) -> list[JobTimeline]:
    """Run ``jobs`` together through ``faults`` (see the module docstring). ``templates``:
    each job's iteration already compiled (:func:`~hpnsim.faults.iterations.compile_template`),
    else compiled here.

    ``routing_options`` are options of :func:`hpnsim.routing.route` the jobs' collectives
    are planned with, before and after every fault (e.g. ``{"lag": "queue_affinity"}``:
    how each bonded NIC puts its QPs on its ports, :mod:`hpnsim.routing.lag`).

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
    return FaultRun(fabric, jobs, faults, routing=routing, seed=seed, failover=failover,
                    recovery=recovery, routing_options=routing_options,
                    templates=templates).run()


#: links named per side of a move (the rest counted)
MOVE_LINKS = 4


def move_summary(fabric, now: float, moved) -> dict:
    """One reroute of a job: when, how many transfers and member flows (QPs) moved, and the
    links they left and the links they took (named, most used first, :data:`MOVE_LINKS`
    each; counts of the rest).

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> a, b = int(f.gpu_access_link[0, 0]), int(f.gpu_access_link[0, 1])
    >>> m = move_summary(f, 1.5, [(7, 2, np.array([a, 5]), np.array([b, 5]))])
    >>> m["time"], m["transfers"], m["flows"], m["left"], m["took"]
    (1.5, 1, 2, ['pod0/seg0/host0/nic-r0->pod0/seg0/tor-r0-p0[port0]'], ['pod0/seg0/host0/nic-r0->pod0/seg0/tor-r0-p1[port1]'])
    """
    left: dict[int, int] = {}
    took: dict[int, int] = {}
    for _, _, old, new in moved:
        for k in np.setdiff1d(old, new):
            left[int(k)] = left.get(int(k), 0) + 1
        for k in np.setdiff1d(new, old):
            took[int(k)] = took.get(int(k), 0) + 1

    def names(counts: dict[int, int]) -> list[str]:
        ranked = sorted(counts, key=lambda k: (-counts[k], k))
        return [fabric.link_name(k) for k in ranked[:MOVE_LINKS]]

    return {"time": float(now), "transfers": len(moved),
            "flows": int(sum(m[1] for m in moved)), "left": names(left), "took": names(took),
            "links_left": len(left), "links_taken": len(took)}


class FaultRun:
    """One run of jobs through faults (:func:`simulate_with_faults`).

    Parameters
    ----------
    fabric, jobs, faults, routing, seed, failover, recovery, routing_options : as
        :func:`simulate_with_faults`
    copy_iterations : build every iteration as a copy of its job's template (False: compile
        each one, the build the copies are checked against)
    templates : each job's :class:`~hpnsim.faults.iterations.Template`, when already
        compiled (the scenario driver compiles them to check the work first)
    """

    def __init__(self, fabric, jobs: list[JobPlan], faults, *, routing: str = "ecmp",
                 seed: int = 0, failover: FailoverPolicy | None = None,
                 recovery: RecoveryPolicy | None = None, copy_iterations: bool = True,
                 routing_options: dict | None = None, templates: list | None = None):
        from hpnsim.engine import Simulation, TaskGraph

        self.fabric, self.jobs, self.routing, self.seed = fabric, jobs, routing, seed
        self.recovery = recovery or RecoveryPolicy()
        self.faults = list(faults)
        changes = fault_changes(fabric, self.faults, failover or FailoverPolicy(seed=seed))
        self.graph = TaskGraph()
        self.transfers = TransferIds(self.graph)
        self.rerouter = Rerouter(fabric, self.transfers)
        self.layers = FaultLayers(fabric)
        #: per layer, the faults currently holding their links down there
        self.held: dict[Layer, set[int]] = {layer: set() for layer in Layer}
        self.retired: set[int] = set()         # faults whose host a spare replaced
        self.park = fabric.n_links             # a link of capacity 0: abandoned transfers
        self.access = np.asarray(fabric.gpu_access_link)
        self.fault_links = {i: None for i in range(len(self.faults))}
        for change in changes:
            self.fault_links[change.fault] = change.links
        self.fault_end = {i: max(c.time for c in changes if c.fault == i)
                          for i in self.fault_links}
        self.host_level = {c.fault: c.host_level for c in changes}

        if templates is None:
            templates = [compile_template(plan, fabric, routing, seed, routing_options)
                         for plan in jobs]
        self.nominal = [t.nominal for t in templates]
        self.save_every = [max(1, round(self.recovery.checkpoint_interval / t0))
                           for t0 in self.nominal]
        self.build = TemplateCopies(templates) if copy_iterations \
            else FreshCompiles(fabric, routing, seed, routing_options)
        self.attempts: list[Attempt] = []
        self.live: dict[int, Attempt] = {}
        for j, plan in enumerate(jobs):
            self._compile_attempt(j, 0, plan.arrival,
                                  plan.arrival - self.recovery.checkpoint_age)
        self.sim = Simulation(self.graph, np.append(self.layers.physical.capacity, 0.0))

        self.events = EventQueue()
        for change in changes:
            self.events.push(change.time, FaultEdge(change))
        self.blocked: set[int] = set()         # jobs cut off now
        self.cut_since: dict[int, float] = {}  # when each job now cut off was cut
        self.stalls: list[list[tuple[float, float]]] = [[] for _ in jobs]  # cut-off spans
        self.token = [0] * len(jobs)           # a job's watch: bumped when it is cut or not
        self.restarts: list[list[Restart]] = [[] for _ in jobs]
        #: per job, each reroute that moved its transfers (:func:`move_summary`)
        self.moves: list[list[dict]] = [[] for _ in jobs]
        self.now = 0.0                         # the time of the events being handled
        self.routes_stale = False              # routing learnt a change at this instant
        self.handlers = {FaultEdge: self._on_fault_edge, SpareHost: self._on_spare_host,
                         CollectiveTimeout: self._on_timeout}

    def run(self) -> list[JobTimeline]:
        while self.events:
            now, batch = self.events.pop_batch()
            self.now = now
            self.sim.run(until=now)
            self.routes_stale = False
            for event in batch:
                if not isinstance(event, CollectiveTimeout):
                    dispatch(self.handlers, event, now)
            self._watch_cut_off(now)
            if self.routes_stale:
                self._reroute()
            for event in batch:                # after the reroute: a job may be back
                if isinstance(event, CollectiveTimeout):
                    dispatch(self.handlers, event, now)
        self.sim.run()
        result = self.sim.result()
        return [job_timeline(plan, [c for c in self.attempts if c.job == j], result,
                             self.restarts[j], self.nominal[j], self.faults, self.stalls[j],
                             self.moves[j])
                for j, plan in enumerate(self.jobs)]

    # --- handlers -------------------------------------------------------------------------

    def _on_fault_edge(self, event: FaultEdge, now: float) -> None:
        change = event.change
        if change.fault in self.retired:
            return
        self.layers.apply(self.sim, change.layer, change.links, change.up)
        if change.up:
            self.held[change.layer].discard(change.fault)
        else:
            self.held[change.layer].add(change.fault)
        self.routes_stale |= change.layer is Layer.ROUTED

    def _on_spare_host(self, event: SpareHost, now: float) -> None:
        if event.fault in self.retired:
            return
        self.retired.add(event.fault)
        for layer in Layer:
            if event.fault in self.held[layer]:
                self.held[layer].discard(event.fault)
                self.layers.apply(self.sim, layer, self.fault_links[event.fault], True)
        self.routes_stale = True

    def _on_timeout(self, event: CollectiveTimeout, now: float) -> None:
        j = event.job
        finish = self.sim.result().finish
        its = self.live[j].its
        ended = all(np.isfinite(finish[t]) for t in its[-1].stage_end) if its else True
        if event.token == self.token[j] and j in self.blocked and not ended:
            self.blocked.discard(j)
            self.stalls[j].append((self.cut_since.pop(j), now))
            self.token[j] += 1
            self._fail(j, now)

    # --- steps ----------------------------------------------------------------------------

    def _watch_cut_off(self, now: float) -> None:
        """Arm a timeout for every job newly cut off; disarm those reconnected."""
        cut = self._cut_jobs()
        for j in cut - self.blocked:
            self.blocked.add(j)
            self.cut_since[j] = now
            self.token[j] += 1
            self.events.push(now + self.recovery.timeout, CollectiveTimeout(j, self.token[j]))
        for j in self.blocked - cut:
            self.blocked.discard(j)
            self.stalls[j].append((self.cut_since.pop(j), now))
            self.token[j] += 1

    def _cut_jobs(self) -> set[int]:
        """Jobs with a GPU whose NIC has no working port."""
        cut = self.layers.down(Layer.PHYSICAL)[self.access].all(axis=1)
        return {j for j, plan in enumerate(self.jobs) if cut[plan.gpus].any()}

    def _compile_attempt(self, j: int, start: int, release: float, base: float) -> Attempt:
        """Append iterations ``start..`` of job ``j``, the first released at ``release``,
        with a checkpoint every ``save_every`` iterations; ``base``: its last checkpoint."""
        plan = self.jobs[j]
        attempt = Attempt(j, sum(c.job == j for c in self.attempts), start, base,
                          len(self.graph))
        after = ()
        for k in range(start, plan.iterations):
            it = self.build.append(j, plan, self.graph, release, after)
            attempt.its.append(it)
            after = it.stage_end
            if (k + 1) % self.save_every[j] == 0 and k + 1 < plan.iterations:
                after = [self.graph.add_delay(self.recovery.checkpoint_write, deps=after,
                                              name=f"{plan.name} checkpoint {k + 1}")]
                attempt.checkpoints[k + 1] = after[0]
        attempt.end_task = len(self.graph)
        self.attempts.append(attempt)
        self.live[j] = attempt
        return attempt

    def _reroute(self, attempts=None) -> None:
        """Move the unfinished transfers of ``attempts`` (default: every one not abandoned)
        onto their paths under the routed state."""
        todo = ~np.isfinite(self.sim.result().finish)
        for attempt in (attempts or [c for c in self.attempts if not c.abandoned]):
            records = [r for it in attempt.its for r in it.routes]
            moved = self.layers.reroute(self.sim, self.rerouter, records, self.routing,
                                        self.seed, todo)
            if moved:
                self.moves[attempt.job].append(move_summary(self.fabric, self.now, moved))

    def _faults_cutting(self, j: int) -> list[int]:
        """The faults physically down now on job ``j``'s access links."""
        links = self.access[self.jobs[j].gpus].ravel()
        return sorted(i for i in self.held[Layer.PHYSICAL]
                      if np.isin(links, self.fault_links[i]).any())

    def _fail(self, j: int, now: float) -> None:
        """Job ``j`` timed out: abandon its attempt and restart from its last checkpoint
        after a spare host (host-level faults) or the repair (switch faults)."""
        attempt = self.live[j]
        finish = self.sim.result().finish
        ckpt_k, ckpt_t = attempt.start_iteration, attempt.base_time
        for k, task in attempt.checkpoints.items():
            if np.isfinite(finish[task]) and finish[task] <= now and k > ckpt_k:
                ckpt_k, ckpt_t = k, float(finish[task])
        done = sum(1 for i, it in enumerate(attempt.its)
                   if attempt.start_iteration + i >= ckpt_k
                   and np.isfinite(finish[it.stage_end]).all())
        for task in self.transfers.transfers_in(attempt.first_task, attempt.end_task).tolist():
            if not np.isfinite(finish[task]):
                self.sim.reroute(task, [self.park])
        attempt.abandoned = True
        causes = self._faults_cutting(j)
        resume = now + self.recovery.restart_time
        for i in causes:
            if not self.host_level[i]:
                resume = max(resume, self.fault_end[i])
        self.restarts[j].append(Restart(now, ckpt_t, ckpt_k, done, resume))
        self._compile_attempt(j, ckpt_k, resume, resume)
        self._reroute([self.live[j]])
        for i in causes:
            if self.host_level[i]:
                self.events.push(resume, SpareHost(i))
