"""Route compiled iterations again under a new :class:`~hpnsim.fabrics.state.FabricState`.

Each :class:`~hpnsim.training.compile.RouteRecord` of an iteration says how its transfer
tasks were routed (a collective on groups, or a pipeline message); :class:`Rerouter` plans
them again under the routed state (the collective plan cache keys on the state's
fingerprint, so nothing planned under another state is reused) and returns the new path of
every transfer whose members' paths changed, for ``Simulation.reroute``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Rerouter"]


def _same(a, b) -> bool:
    return a is b or (np.array_equal(a.ptr, b.ptr) and np.array_equal(a.links, b.links)
                      and np.array_equal(a.weight, b.weight))


class Rerouter:
    """Remembers the paths applied to every record and yields the changes under a new state.

    Parameters
    ----------
    fabric, graph : the fabric and the TaskGraph the iterations were compiled into.

    Examples
    --------
    >>> from hpnsim.engine import TaskGraph
    >>> from hpnsim.fabrics import hpn7, FabricState
    >>> from hpnsim.training import compile_program
    >>> from hpnsim.training.program import Collective, Layout, Pass, Program
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> prog = Program(Layout(dp=2), [[Pass("F", 0, 0), Collective("allreduce", "dp", 2**20)]])
    >>> g = TaskGraph()
    >>> it = compile_program(prog, g, f, gpus=[0, 8], routing="hpn_dual_plane")
    >>> r = Rerouter(f, g)
    >>> r.changes(it.routes, it.routing, it.seed, None)
    []
    >>> l0 = int(f.gpu_access_link[0, 0]); s = FabricState(f).set_down([l0, l0 ^ 1])
    >>> len(r.changes(it.routes, it.routing, it.seed, s)) > 0
    True
    """

    def __init__(self, fabric, graph):
        self.fabric, self.graph = fabric, graph
        self._applied: dict[int, list] = {}   # id(record) -> paths per task (kept alive)
        self._records: dict[int, object] = {}
        # Every iteration repeats the same collectives and messages: their paths are a
        # function of what they are (not of their task ids) and of the set of links down,
        # so one planning per distinct record and state serves all iterations.
        self._memo: dict[tuple, list] = {}
        #: what the last :meth:`changes` moved: ``(task, flows, old links, new links)``
        self.moved: list[tuple[int, int, np.ndarray, np.ndarray]] = []

    def _paths(self, record, routing: str, seed: int, state) -> list:
        """The paths of every transfer task of ``record`` under ``state``, in task order:
        per task a ``Paths`` (a coupled group: all members) or ``(Paths, member)``."""
        groups = np.asarray(record.groups)
        key = (record.op, groups.shape, groups.tobytes(), float(record.size), record.algo,
               id(record.options), routing, seed,
               None if state is None else state.fingerprint)
        paths = self._memo.get(key)
        if paths is None:
            paths = self._memo[key] = self._plan(record, routing, seed, state)
        return paths

    def _plan(self, record, routing: str, seed: int, state) -> list:
        from hpnsim.collectives.planning.plan import plan_collective
        from hpnsim.routing import route

        if record.op == "p2p":
            src, dst = record.groups
            return [(route(self.fabric, src, dst, routing, seed=seed, state=state), None)]
        out = []
        for group in record.groups:
            if group.size < 2:
                continue
            # the options the collective was compiled with (its NCCL parameters decide the
            # algorithm and protocol), on the run's routing and seed
            plan = plan_collective(self.fabric, record.op, group, record.size, record.options,
                                   algo=record.algo, routing=routing, seed=seed, state=state)
            # wire paths: links weighted by wire bytes per payload byte, as the engine runs them
            for stage, paths in zip(plan.schedule.stages, plan.wire_paths, strict=True):
                if paths is None:
                    continue
                if stage.coupled:
                    out.append((paths, None))
                else:
                    out.extend((paths, m) for m in range(paths.n_flows))
        return out

    def changes(self, records, routing: str, seed: int, state,
                unfinished=None) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``(task, links, usage)`` for every transfer of ``records`` whose path differs under
        ``state`` (None: every link up) from the one last applied; ``unfinished`` (a bool
        mask over tasks) skips finished ones."""
        out = []
        self.moved = []
        verdict: dict[tuple, bool] = {}
        for record in records:
            key = id(record)
            tasks = self.graph.transfers_in(record.first, record.end)
            if unfinished is not None and not unfinished[tasks].any():
                continue          # all done: never moves again
            old = self._applied.get(key)
            if old is None:
                old = self._paths(record, routing, seed, None)
            new = self._paths(record, routing, seed, state)
            for task, (a, m), (b, n) in zip(tasks.tolist(), old, new, strict=True):
                if a is b or (unfinished is not None and not unfinished[task]):
                    continue
                if n is None:
                    pair = (id(a), id(b))
                    if pair not in verdict:   # the objects are kept alive with the verdict
                        verdict[pair] = (a, b, _same(a, b))
                    if verdict[pair][2]:
                        continue
                    links, usage = b.links, b.weight
                    before, flows = a.links, int(b.n_flows)
                else:
                    links, usage = b.links[b.ptr[n]:b.ptr[n + 1]], b.weight[b.ptr[n]:b.ptr[n + 1]]
                    before, flows = a.links[a.ptr[m]:a.ptr[m + 1]], 1
                    if np.array_equal(before, links) and \
                            np.array_equal(a.weight[a.ptr[m]:a.ptr[m + 1]], usage):
                        continue
                out.append((task, np.asarray(links, np.int64), np.asarray(usage)))
                self.moved.append((task, flows, np.asarray(before, np.int64),
                                   np.asarray(links, np.int64)))
            self._applied[key] = new
            self._records[key] = record
        return out
