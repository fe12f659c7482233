"""Phase-level iterations: a job as Crux models it, for components too costly to probe task
by task.

A steady-state probe must run every job of a link-sharing component for about ten periods
of its slowest job. When a 0.01 s job shares links (even transitively) with an 8 s one, that
is ~10^4 iterations of the fast job, millions of tasks: more than the exact run of the
interval it is meant to shortcut. For such a component the probe runs each job's *phase-level*
iteration instead: the job reduced to what Crux (SIGCOMM 2024, reference/crux.md) schedules
by, its computation per iteration and the bytes ``M_{j,e}`` it puts on each network link, as
one coupled transfer at the speed of its bottleneck link that may start once ``comm_start``
of the compute is done (:class:`~hpnsim.sched.jobs.SchedJob`; ``comm_start`` is fitted so
that the model's alone iteration time matches the task-level one). That is 3 tasks per
iteration instead of hundreds or thousands.

The phase-level probe measures each job's *slowdown* against its phase-level alone time; its
period is its task-level alone time times that slowdown. A job much faster than the slowest
of its component runs ``merge`` iterations as one (``merge`` times the compute and the bytes):
the probe then needs about as many phase-level iterations of every job, at most
``MAX_SPREAD`` times those of the slowest. Next to a job ``MAX_SPREAD`` times slower, the
merged job's compute and communication still alternate many times within each of the slow
job's phases, so the slow job sees about the same average load, and the merged job about
the same share of time contended. What the phase model leaves out:
the order of a job's transfers within an iteration (all its bytes move at once, at the
pace of its bottleneck), so two jobs whose transfers take turns on a link in the task-level
run contend for the whole communication phase here. ``tests/test_cluster_phase.py`` checks
it against closed forms and the exact run; docs/cluster.md gives its measured gaps to
task-level probes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.engine import TaskGraph
from hpnsim.sched.jobs import SchedJob

__all__ = ["MAX_SPREAD", "PhaseTemplate", "phase_templates"]

#: a compute budget, not a physical constant: the slowest phase-level iteration of a
#: component over its fastest once fast jobs are merged (see the module docstring)
MAX_SPREAD = 20


def phase_templates(templates, capacity, *, max_spread: float = MAX_SPREAD
                    ) -> tuple[list[PhaseTemplate], np.ndarray]:
    """The phase-level iterations of a component's jobs (their
    :class:`~hpnsim.sched.cluster.jobs.IterationTemplate`), fast ones merged so no job's is
    more than ``max_spread`` times shorter than the slowest's, and the capacities to run
    them on.

    A job's phase-level transfer is its only transfer in flight, so the links no other job
    of the component crosses only cap its own rate: they are folded into one link of the
    job's own (1 B/s, carrying the seconds its slowest private link needs). The rates are
    those on the full paths, and a transfer crosses a few shared links instead of hundreds.
    The links are then numbered in their order among the links the component uses (the
    engine's state is sized by the link count: a probe of a few links on a 72,016-link
    fabric would set up the whole fabric's at every round).

    >>> from types import SimpleNamespace as T
    >>> from hpnsim.sched.jobs import SchedJob
    >>> def tpl(compute, links, bytes_):
    ...     job = SchedJob("j", 1, compute, links, bytes_)
    ...     return T(iteration_time=job.iteration_time([1.0, 1.0]), sched_job=lambda *a: job)
    >>> phases, cap = phase_templates([tpl(80.0, [0, 1], [20.0, 5.0]),
    ...                                tpl(0.1, [0], [0.1])], [1.0, 1.0])
    >>> [(p.merge, p.iteration_time) for p in phases], cap.tolist()
    ([(1, 100.0), (25, 5.0)], [1.0, 1.0])
    >>> phases[0].arrays.links.tolist(), phases[1].arrays.links.tolist()   # 1: 0's own
    ([0, 1], [0])
    """
    cap = np.asarray(capacity, dtype=np.float64)
    jobs = [t.sched_job("", 1, cap) for t in templates]
    users = np.bincount(np.concatenate([j.links for j in jobs]), minlength=cap.size)
    folded = []
    for i, job in enumerate(jobs):
        shared = users[job.links] > 1
        private = job.link_bytes[~shared] / cap[job.links[~shared]]
        links, bytes_ = job.links[shared], job.link_bytes[shared]
        if private.size:
            links = np.append(links, cap.size + i)
            bytes_ = np.append(bytes_, private.max())
        folded.append(SchedJob(job.name, job.gpus, job.compute_time, links, bytes_,
                               comm_start=job.comm_start))
    cap = np.concatenate([cap, np.ones(len(jobs))])
    used = np.unique(np.concatenate([j.links for j in folded]))
    folded = [SchedJob(j.name, j.gpus, j.compute_time, np.searchsorted(used, j.links),
                       j.link_bytes, comm_start=j.comm_start) for j in folded]
    cap = cap[used]
    own = np.array([j.iteration_time(cap) for j in folded])
    merge = np.maximum(1, np.floor(own.max() / (max_spread * np.maximum(own, 1e-300))))
    phases = [PhaseTemplate.of(j, cap, alone=t.iteration_time, merge=int(m))
              for j, t, m in zip(folded, templates, merge.tolist(), strict=True)]
    return phases, cap


@dataclass
class PhaseTemplate:
    """One job's phase-level iteration (compute; communication from ``comm_start`` on).

    It appends chains of copies to a task graph like an
    :class:`~hpnsim.sched.cluster.jobs.IterationTemplate`, each copy standing for ``merge``
    of the job's iterations; ``iteration_time`` is the copy's alone time and ``scale`` turns
    a copy's seconds into task-level seconds per iteration (the job's task-level alone time
    over the copy's alone time per merged iteration).

    Examples
    --------
    Crux's worked example 1, job 1 (2 s of compute, then 2 s of transfer on a 1 B/s link),
    whose task-level iteration would take 5 s alone:

    >>> from hpnsim.sched.jobs import SchedJob
    >>> p = PhaseTemplate.of(SchedJob("job1", 10, 2.0, [0], [2.0]), [1.0], alone=5.0)
    >>> p.iteration_time, p.scale, p.arrays.kind.size     # compute in two parts, a transfer
    (4.0, 1.25, 3)
    >>> p = PhaseTemplate.of(SchedJob("job1", 10, 2.0, [0], [2.0]), [1.0], alone=5.0,
    ...                      merge=3)
    >>> p.iteration_time, p.scale
    (12.0, 0.4166666666666667)
    """

    arrays: object
    stage_end: np.ndarray
    iteration_time: float
    scale: float
    merge: int = 1

    @classmethod
    def of(cls, job, capacity, *, alone: float, merge: int = 1) -> PhaseTemplate:
        """The phase-level iteration of ``job`` (a SchedJob) whose task-level alone
        iteration takes ``alone`` seconds, ``merge`` iterations per copy."""
        cap = np.asarray(capacity, dtype=np.float64)
        t = merge * job.transfer_time(cap)
        compute = merge * job.compute_time
        graph = TaskGraph()
        head = graph.add_delay(job.comm_start * compute)
        tail = graph.add_delay((1.0 - job.comm_start) * compute, deps=[head])
        ends = [tail]
        if t > 0:
            # amount in seconds of uncontended transfer: usage M_e / t_j gives rate 1 alone
            usage = merge * job.link_bytes / t
            ends.append(graph.add_transfer(job.links, usage, t, deps=[head]))
        own = merge * job.iteration_time(cap)
        return cls(arrays=graph.arrays(cap.size), stage_end=np.asarray(ends, dtype=np.int64),
                   iteration_time=own, scale=alone / own if own > 0 else 1.0 / merge,
                   merge=merge)

    def append_chain(self, graph: TaskGraph, count: int, *, release: float = 0.0, after=(),
                     priority: int = 0, every: float = 0.0) -> np.ndarray:
        """Append ``count`` copies one after the other (as
        :meth:`IterationTemplate.append_chain`; ``every``: a copy's gate period, ``merge``
        iterations' worth); returns their first task ids."""
        return graph.append_chain(self.arrays, count, release=release, after=after,
                                  priority=int(priority), chain=self.stage_end, every=every)
