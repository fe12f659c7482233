"""The scheduler's decision at a cluster event: per running job a routing seed (its paths),
a priority class and an offset.

Path choice is per job: a job's candidates are its iteration routed with the routing seeds
``seed .. seed + candidates - 1`` (each seed re-hashes every connection of the job, as a
per-job choice of UDP source ports would), and Crux's rule (the least congested candidate,
the job's own bytes counted: :func:`least_loaded`) picks among them, jobs from the highest GPU
intensity down (TACCL*: in order of start). Per-connection choices would need a collective
compiled per combination of ports.
"""

from __future__ import annotations

import numpy as np

from hpnsim.fabrics.fabric import LinkKind
from hpnsim.sched.cluster.jobs import RunningJob, TemplateCache
from hpnsim.sched.paths import intensity_order
from hpnsim.sched.policies import mean_network_hops, schedule

__all__ = ["PATH_SELECTING", "choose_seeds", "decide", "least_loaded"]

#: schedulers that choose paths (the rest keep every job on seed ``seed``)
PATH_SELECTING = {"crux-ps-pa": "intensity", "crux": "intensity", "taccl": "arrival"}


def decide(scheduler: str, running: list[RunningJob], templates: TemplateCache, cap, *,
           K: int, seed: int, samples: int, candidates: int) -> None:
    """Set every running job's seed (path), priority class and offset."""
    net = [r for r in running if templates.of(r, seed).links.size]
    for r in running:
        r.priority, r.offset, r.gate = 0, 0.0, 0.0
    if not net:
        return
    how = PATH_SELECTING.get(scheduler)
    if how is None:
        for r in net:
            r.seed = seed
    else:
        choose_seeds(net, how, templates, cap, seed=seed, candidates=candidates)
    chosen = [templates.of(r) for r in net]
    sched = [tpl.sched_job(r.spec.name, r.spec.n_gpus, cap)
             for r, tpl in zip(net, chosen, strict=True)]
    # TACCL*'s distance: the hops of the job's bytes on its chosen paths, from the fabric
    hops = [mean_network_hops(tpl.links, tpl.link_bytes, templates.fabric)
            for tpl in chosen] if scheduler == "taccl" else None
    periods = [tpl.iteration_time for tpl in chosen] if scheduler == "cassini" else None
    decision = schedule(scheduler, sched, None, cap, K=K, seed=seed, samples=samples,
                        hops=hops, periods=periods)
    # CASSINI holds each job's shift at every iteration (gates > 0): iteration k starts no
    # earlier than offset + k x its period on the unified circle, so the interleaving the
    # shifts were chosen for cannot drift away
    for r, p, o, g in zip(net, decision.priority.tolist(), decision.offsets.tolist(),
                          decision.gates.tolist(), strict=True):
        r.priority, r.offset, r.gate = int(p), float(o), float(g)


def choose_seeds(net: list[RunningJob], order_by: str, templates: TemplateCache, cap, *,
                 seed: int, candidates: int) -> None:
    """Give each job of ``net`` the routing seed of its least congested candidate, the jobs
    in ``order_by`` ("intensity": highest first; "arrival": by start), each seeing the
    bytes per link of the jobs before it (:func:`least_loaded`). A candidate is compiled
    only when drawn."""
    if order_by == "intensity":
        base = [templates.of(r, seed).sched_job(r.spec.name, r.spec.n_gpus, cap) for r in net]
        order = intensity_order([b.intensity(cap) for b in base]).tolist()
    else:
        order = sorted(range(len(net)), key=lambda i: (net[i].start, net[i].job))
    load = np.zeros(cap.size)
    access = templates.fabric.link_kind == LinkKind.ACCESS
    for i in order:
        r = net[i]
        drawn = (templates.of(r, seed + c) for c in range(candidates))
        r.seed = seed + least_loaded(drawn, load, cap, access)
        chosen = templates.of(r)
        np.add.at(load, chosen.links, chosen.link_bytes)


def least_loaded(candidates, load: np.ndarray, cap: np.ndarray, access: np.ndarray) -> int:
    """Index of the candidate routing (templates with ``links``, ``link_bytes``) whose most
    loaded link, counting the bytes already placed *and its own*, carries the fewest bytes
    per capacity (ties: the sum, then the lowest index).

    A job's own flows count: a routing whose ring puts two of its flows on one uplink is
    slower alone, whatever else is placed (scoring only the bytes placed picked such
    routings for the second and later jobs). The search stops at a candidate with nothing
    placed on its links that loads no link more than its NIC links (``access``), which
    every routing of the job loads alike: none can do better.

    >>> from types import SimpleNamespace as T
    >>> cap, load = np.ones(3), np.zeros(3)
    >>> self_colliding = T(links=np.array([0, 1]), link_bytes=np.array([2.0, 1.0]))
    >>> spread = T(links=np.array([0, 1, 2]), link_bytes=np.array([1.0, 1.0, 1.0]))
    >>> least_loaded([self_colliding, spread], load, cap, np.zeros(3, bool))
    1
    """
    best = None
    for c, tpl in enumerate(candidates):
        placed = load[tpl.links]
        level = (placed + tpl.link_bytes) / cap[tpl.links]
        score = (float(level.max(initial=0.0)), float(level.sum()), c)
        if best is None or score < best:
            best = score
        floor = float(level[access[tpl.links]].max(initial=0.0))
        if not placed.any() and score[0] <= floor * (1 + 1e-12):
            break
    return best[2]
