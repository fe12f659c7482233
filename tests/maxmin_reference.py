"""Reference max-min solver (test oracle): plain progressive filling, one bottleneck at a time.

Dense numpy, deliberately simple: raise every unfrozen variable of the current priority class
at the same weighted level until the first link saturates, freeze the variables on it, repeat.
Classes are filled in priority order on what the earlier ones leave.
"""

from __future__ import annotations

import numpy as np


def reference_maxmin(capacity, usage, priority=None, weight=None) -> np.ndarray:
    """Rates per variable; ``usage`` is a dense (n_vars x n_links) array."""
    usage = np.asarray(usage, dtype=float)
    n_vars = usage.shape[0]
    prio = np.zeros(n_vars, dtype=int) if priority is None else np.asarray(priority)
    w = np.ones(n_vars) if weight is None else np.asarray(weight, dtype=float)
    rem = np.asarray(capacity, dtype=float).copy()
    rate = np.zeros(n_vars)
    uses_any = (usage > 0).any(axis=1)
    rate[~uses_any] = np.inf
    for cls in np.unique(prio):
        unfrozen = (prio == cls) & uses_any
        level = np.zeros(n_vars)
        while unfrozen.any():
            load = (usage[unfrozen] * w[unfrozen, None]).sum(axis=0)
            active = load > 0
            headroom = np.full(rem.shape, np.inf)
            headroom[active] = np.maximum(rem[active], 0) / load[active]
            step = headroom.min()
            # raise all unfrozen variables by `step` in level
            level[unfrozen] += step
            rem -= step * load
            saturated = active & (headroom <= step)
            frozen_now = unfrozen & (usage[:, saturated] > 0).any(axis=1)
            rate[frozen_now] = w[frozen_now] * level[frozen_now]
            unfrozen &= ~frozen_now
    return rate


def reference_run_flows(capacity, paths, sizes, starts=None):
    """Finish times of plain flows by stepping from event to event, re-solving from scratch."""
    n_links = len(capacity)
    n = len(paths)
    usage = np.zeros((n, n_links))
    for i, path in enumerate(paths):
        for link in path:
            usage[i, link] += 1.0
    starts = np.zeros(n) if starts is None else np.asarray(starts, dtype=float)
    left = np.asarray(sizes, dtype=float).copy()
    finish = np.full(n, np.inf)
    t = 0.0
    while np.isinf(finish).any():
        active = (starts <= t) & np.isinf(finish)
        rate = np.zeros(n)
        if active.any():
            rate[active] = reference_maxmin(capacity, usage[active])
        done_now = active & ((left <= 0) | np.isinf(rate))
        finish[done_now] = t
        active &= ~done_now
        if done_now.any():
            continue
        upcoming = starts[starts > t]
        t_next = upcoming.min() if upcoming.size else np.inf
        with np.errstate(divide="ignore"):
            t_done = np.where(active & (rate > 0), t + left / np.where(rate > 0, rate, 1), np.inf)
        t_next = min(t_next, t_done.min())
        if not np.isfinite(t_next):
            break
        left[active] -= rate[active] * (t_next - t)
        ending = active & (t_done <= t_next * (1 + 1e-12))
        left[ending] = 0.0
        t = t_next
    return finish


def reference_simulate(capacity, tasks, capacity_events=()):
    """Finish time of each task, by stepping from event to event and re-solving from scratch.

    ``tasks`` is a list of dicts: ``kind`` ("transfer" or "delay"), ``amount`` (bytes or
    seconds), ``usage`` (dense per-link row, transfers), ``priority``, ``weight``,
    ``latency``, ``release``, ``deps`` (task indices). Unfinished tasks get ``inf``.
    """
    cap = np.asarray(capacity, dtype=float).copy()
    events = sorted(capacity_events, key=lambda ev: ev[0])
    n = len(tasks)
    start = np.full(n, np.nan)
    begin = np.full(n, np.nan)
    finish = np.full(n, np.inf)
    known = np.zeros(n, dtype=bool)          # finish time decided
    left = np.array([task["amount"] for task in tasks], dtype=float)
    t = 0.0
    while True:
        progress = True
        while progress:                       # schedule everything decidable
            progress = False
            for i, task in enumerate(tasks):
                if np.isnan(start[i]) and all(known[d] for d in task["deps"]):
                    start[i] = max([task["release"]] + [finish[d] for d in task["deps"]])
                    if task["kind"] == "delay":
                        finish[i], known[i] = start[i] + task["amount"], True
                    else:
                        begin[i] = start[i] + task["latency"]
                        if task["amount"] == 0 or not np.any(np.asarray(task["usage"]) > 0):
                            finish[i], known[i] = begin[i], True
                    progress = True
        while events and events[0][0] <= t:
            _, link, value = events.pop(0)
            cap[link] = value
        active = [i for i in range(n) if not known[i] and not np.isnan(begin[i])
                  and begin[i] <= t]
        rate = np.zeros(n)
        if active:
            rate[active] = reference_maxmin(
                cap, np.array([tasks[i]["usage"] for i in active], dtype=float),
                priority=[tasks[i]["priority"] for i in active],
                weight=[tasks[i]["weight"] for i in active])
        future = [x for x in begin if not np.isnan(x) and x > t]
        future += [x for x, k in zip(finish, known, strict=True) if k and x > t]
        future += [ev[0] for ev in events]
        future += [t + left[i] / rate[i] for i in active if rate[i] > 0]
        if not future:
            return finish
        t_next = min(future)
        for i in active:
            if rate[i] > 0 and t + left[i] / rate[i] <= t_next * (1 + 1e-12):
                finish[i], known[i], left[i] = t + left[i] / rate[i], True, 0.0
            else:
                left[i] -= rate[i] * (t_next - t)
        t = t_next
