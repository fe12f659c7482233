"""Compile a training :class:`~hpnsim.training.program.Program` into a TaskGraph.

What becomes a task, and the one approximation:

- **Compute** of a stage is one Delay shared by every GPU of the stage (all DP replicas and
  TP ranks run identical kernels in lockstep: exact). Consecutive stream ops nobody else
  waits for merge into one Delay.
- **Collectives that cross the network are tasks of the graph**: gradient buckets, ZeRO
  gathers and reduce-scatters (every group of the stage), EP all-to-alls whose groups span
  hosts (all EP groups of the stage at once, between the compute pieces of their layer), TP
  collectives whose group spans hosts. Other jobs, other dimensions' traffic and failures
  slow them.
- **PP messages** of all replicas move as one transfer group per message (the replicas run
  in lockstep; the coupled variable is as fast as the most loaded link any member crosses:
  the slowest replica's timing).
- **Blocking collectives that stay inside a host** (TP with rail-aligned placement, EP
  groups inside a host) are timed once, alone on the fabric, on one group, and replayed as a
  Delay. This is an approximation; it is exact when nothing else crosses those NVLink links
  while they run: the groups of one kind are disjoint GPU sets (their GPU-NVSwitch links do
  not meet), a stage runs its blocking collectives one at a time, and with rail-aligned
  placement PP and DP traffic leaves a GPU through its own NIC, never through NVSwitch. When
  DP peers share a host (not rail-aligned) a note says the figure is an isolated one.
- **NCCL kernels beside compute** (:attr:`~hpnsim.training.program.Compute.beside`, the extra
  a kernel would take if the DP or ZeRO collectives dispatched before it held their SMs
  throughout) are charged for the time those collectives run: each stage keeps a clock of
  its stream's compute, and every asynchronous DP, expert-DP or ZeRO collective holds its
  SMs from its dispatch (or from the end of the one before it: their kernels run one at a
  time) for its time alone on one group (:func:`~hpnsim.training.comm.time_groups`, hash
  seed 0); a compute op runs at its slowed pace within that residency and pays what that
  adds (the clock is wall time: a GEMM twice as slow beside the kernels spans half the
  work). A TP collective overlapped in bulk charges the compute beside it the same way for
  its own time alone (:attr:`~hpnsim.training.program.Compute.held`). Approximations: the
  clock counts compute only, so a stream waiting for a pipeline message runs the collective
  further than the clock says (it overcharges there); a collective slowed by other traffic
  runs longer than alone (it undercharges there).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hpnsim.collectives.ops import AUTO
from hpnsim.collectives.planning.options import CollectiveOptions
from hpnsim.engine import TaskGraph
from hpnsim.errors import InputError
from hpnsim.training.comm import compile_groups, time_groups
from hpnsim.training.compiled import CompiledIteration, Element, RouteRecord, StagePass
from hpnsim.training.program import Collective, Compute, Pass, Program, Recv, Send
from hpnsim.workloads.placement import place

_CATEGORY = {"tp": "tp", "cp": "cp", "ep": "ep", "dp": "dp", "edp": "dp"}
#: groups whose asynchronous collectives (gradient buckets, ZeRO gathers and reduce-scatters)
#: are the NCCL kernels :attr:`Compute.beside` prices
_RESIDENT = ("dp", "edp")
_NAMES = {"allreduce": "all-reduce", "alltoall": "all-to-all", "allgather": "all-gather",
          "reducescatter": "reduce-scatter", "sendrecv": "send/recv"}


def path_latency(fabric, paths) -> float:
    """Largest member path latency (propagation along the links), seconds.

    >>> from hpnsim.fabrics import fat_tree
    >>> from hpnsim.routing import route
    >>> f = fat_tree(4, gpus_per_host=1)
    >>> p = route(f, [0], [4])
    >>> path_latency(f, p) == float(np.sum(f.link_latency[p.links]))
    True
    """
    per_link = np.asarray(fabric.link_latency)[np.asarray(paths.links, dtype=np.int64)]
    sums = np.add.reduceat(per_link, paths.ptr[:-1]) if per_link.size else np.zeros(0)
    empty = np.diff(paths.ptr) == 0
    if sums.size:
        sums[empty] = 0.0
    return float(sums.max(initial=0.0))


def compile_program(program: Program, graph: TaskGraph, fabric,
                    options: CollectiveOptions | None = None, *, gpus=None,
                    tp_algo: str | None = None, dp_algo: str | None = None,
                    release: float = 0.0, after=(), **keywords) -> CompiledIteration:
    """Add one iteration of ``program`` to ``graph`` (see the module docstring).

    Parameters
    ----------
    program : Program
    graph : TaskGraph
        Several jobs and iterations may share it.
    fabric : Fabric
    options : CollectiveOptions, optional
        How the collectives run (routing policy and hash seed, which also route the pipeline
        messages; NCCL parameters, a calibration; ...); default: every default.
    gpus : array of int, optional
        GPU indices of the job in rank order (default ``0 .. n - 1``).
    tp_algo, dp_algo : str, optional
        Algorithms of TP collectives and of DP / expert-DP ones (None: ``options.algo``);
        EP all-to-alls always choose theirs (``auto``).
    release, after : float, sequence of int
        The iteration starts at ``release`` and after the tasks ``after``.
    **keywords
        Fields of :class:`~hpnsim.collectives.planning.options.CollectiveOptions` replacing those of
        ``options`` (``routing="hpn_dual_plane"``, ``seed=1``, ``nccl=...``). Without ``nccl``, the collectives
        run with the defaults of the job's GPU (:func:`program_nccl`), so an H800 or H100 job
        gets NVLS.

    Returns
    -------
    CompiledIteration

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.training.program import Layout
    >>> prog = Program(Layout(tp=8), [[Pass("F", 0, 0), Compute(1e-3),
    ...                                Collective("allreduce", "tp", 2**20), Compute(1e-3)]])
    >>> it = compile_program(prog, TaskGraph(), hpn7(segments=1, hosts_per_segment=1))
    >>> it.end_task - it.first_task              # one Delay (TP replayed) and the stage end
    2
    """
    options = CollectiveOptions.build(options, **keywords)
    layout = program.layout
    if gpus is None and layout.n_gpus > fabric.n_gpus:
        raise InputError("fabric", f"has {fabric.n_gpus} GPUs; the job needs "
                                   f"tp*pp*dp = {layout.n_gpus}")
    placement = place(layout, fabric.gpus_per_host, gpus=gpus)
    options = replace(options, nccl=program_nccl(program, options.nccl))
    first_task = len(graph)
    origin = -1
    if release > 0 or len(after):
        origin = graph.add_delay(0.0, deps=after, release=release, name="iteration start")
    it = CompiledIteration(program, graph, origin=origin, first_task=first_task,
                           notes=list(program.notes), options=options)
    if layout.cp > 1:
        it.comm_bytes["cp"] = 0.0
    per_group = {"tp": tp_algo, "dp": dp_algo, "edp": dp_algo, "ep": AUTO, "cp": AUTO}
    _Compiler(it, fabric, placement, {group: options if algo is None else
                                      replace(options, algo=algo)
                                      for group, algo in per_group.items()}).run()
    it.end_task = len(graph)
    return it


def program_nccl(program: Program, nccl=None):
    """The NCCL parameters a program's collectives run with: ``nccl`` when given (a
    calibration), else :meth:`NcclParams.for_gpu` of the job's GPU (``program.job["gpu"]``),
    else NCCL's generic defaults (a program without a GPU, e.g. from an AICB file).

    >>> from hpnsim.training.program import Layout
    >>> program_nccl(Program(Layout(tp=8), [[]], job={"gpu": "h800"})).nvls
    True
    >>> program_nccl(Program(Layout(tp=8), [[]])).nvls
    False
    """
    from hpnsim.collectives.nccl.params import NVLINK_EFFICIENCY, NcclParams, resolve_nccl

    if nccl is not None:
        return resolve_nccl(nccl)
    gpu = str((program.job or {}).get("gpu", "")).lower()
    return NcclParams.for_gpu(gpu) if gpu in NVLINK_EFFICIENCY else NcclParams()


class _Compiler:
    def __init__(self, it, fabric, placement, options: dict[str, CollectiveOptions]):
        self.it, self.graph, self.fabric, self.placement = it, it.graph, fabric, placement
        self.options = options     # per group kind (tp, dp, edp, ep)
        self.routing, self.seed = it.routing, it.seed   # of the pipeline messages
        lay = placement.layout
        # gradients (and ZeRO shards) span DP x CP: Megatron's data-parallel group with CP
        self.groups = {kind: placement.groups(source).reshape(lay.pp, -1, size)
                       for kind, source, size in (
                           ("tp", "tp", lay.tp), ("cp", "cp", lay.cp), ("ep", "ep", lay.ep),
                           ("dp", "dp_cp" if lay.cp > 1 else "dp", lay.dp * lay.cp),
                           ("edp", "edp", lay.edp))}
        self.members = placement.groups("pp")  # column s: GPUs of stage s
        self.cache: dict = {}      # compiled collectives to replay
        self.timed: dict = {}      # (op, kind, size, local pattern) -> (seconds, bytes)
        self.paths: dict = {}
        self.sent: dict = {}       # tag -> transfer task
        self.replayed: set = set()
        self.hosted: dict = {}     # (kind, stage) -> (groups inside a host, local pattern)

    # ----- driver --------------------------------------------------------------------------
    def run(self) -> None:
        stages = self.it.program.stages
        state = [_StageState(self, s, ops) for s, ops in enumerate(stages)]
        remaining = sum(len(ops) for ops in stages)
        while remaining:
            progressed = False
            for st in state:
                while st.cursor < len(st.ops):
                    op = st.ops[st.cursor]
                    if isinstance(op, Recv) and op.tag not in self.sent:
                        break
                    st.step(op)
                    st.cursor += 1
                    remaining -= 1
                    progressed = True
            if not progressed:
                waiting = [f"stage {st.s} waits for {st.ops[st.cursor].tag}" for st in state
                           if st.cursor < len(st.ops)]
                raise InputError("program", "deadlock: " + "; ".join(waiting))
        for st in state:
            st.finish()
        self._notes()

    def _notes(self) -> None:
        lay = self.placement.layout
        if lay.dp > 1 and not self.placement.rail_aligned:
            for op, kind in sorted(self.replayed):
                self.it.notes.append(f"{kind.upper()} {_NAMES[op]} timed in isolation; this "
                                     "placement lets other traffic share its links, which is "
                                     "not simulated")
        size = self.it.program.tp_allreduce_bytes
        if size is None:
            self.it.tp_time = float("nan")
        elif size > 0:
            key = next((k for k in self.timed if k[:3] == ("allreduce", "tp", float(size))), None)
            self.it.tp_time = self.timed[key][0] if key else float("nan")

    # ----- collectives ---------------------------------------------------------------------
    def _hosted(self, kind: str, s: int) -> tuple[bool, tuple]:
        """Whether every ``kind`` group of stage ``s`` stays inside a host, and the first
        group's local GPU pattern (asked for every op of the stage: worked out once)."""
        found = self.hosted.get((kind, s))
        if found is None:
            groups = self.groups[kind][s]
            hosts = self.placement.host_of(groups)
            found = (bool((hosts == hosts[:, :1]).all()),
                     tuple(self.placement.local_of(groups[0])))
            self.hosted[(kind, s)] = found
        return found

    def in_host(self, kind: str, s: int) -> bool:
        return self._hosted(kind, s)[0]

    def replay_time(self, op: Collective, s: int) -> float:
        """Seconds of ``op`` on one group of stage ``s`` alone; the bytes of all groups
        are counted."""
        groups = self.groups[op.group][s]
        group = groups[0]
        key = (op.op, op.group, float(op.size), self._hosted(op.group, s)[1])
        if key not in self.timed:
            options = self._options(op)
            self.timed[key] = time_groups(self.fabric, op.op, group[None, :], op.size, options)
            self.it.timed.append((op.op, group, op.size, options))
        self.replayed.add((op.op, op.group))
        seconds, sent = self.timed[key]
        if op.group == "ep":
            self.it.ep_replay = max(self.it.ep_replay, seconds)
        self.it.comm_bytes[_CATEGORY[op.group]] += sent * len(groups)
        return seconds

    def alone_time(self, op: Collective, s: int) -> float:
        """Seconds of ``op`` on the first group of stage ``s`` alone on the fabric, under
        hash seed 0 whatever the job's (so that a reseeded graph keeps its compute: see
        :mod:`hpnsim.training.reseed`); cached, nothing recorded as traffic: how long its
        NCCL kernels hold their SMs."""
        group = self.groups[op.group][s][0]
        key = ("alone", op.op, op.group, float(op.size), s)
        if key not in self.timed:
            self.timed[key] = time_groups(self.fabric, op.op, group[None, :], op.size,
                                          replace(self._options(op), seed=0))
        return self.timed[key][0]

    def _options(self, op: Collective) -> CollectiveOptions:
        """The group's options; a point-to-point shift keeps its own algorithm whatever
        algorithm the group's collectives are forced to (``tp_algo``, ``dp_algo``)."""
        options = self.options[op.group]
        return replace(options, algo=AUTO) if op.op == "sendrecv" else options

    def collective(self, op: Collective, groups: np.ndarray, deps, name: str):
        """Compile ``op`` on all ``groups`` after ``deps``: ``(done, first tasks)``."""
        start = len(self.graph)
        options = self._options(op)
        done, first, sent = compile_groups(self.graph, self.fabric, op.op, groups, op.size,
                                           options, deps=deps, name=name, cache=self.cache)
        self.it.comm_bytes[_CATEGORY[op.group]] += sent
        self.it.routes.append(RouteRecord(op.op, np.asarray(groups), float(op.size),
                                          options.algo, start, len(self.graph), options))
        return done, first

    def send(self, s: int, op: Send, deps) -> int:
        key = (s, op.to)
        if key not in self.paths:
            from hpnsim.routing import route

            paths = route(self.fabric, self.members[:, s], self.members[:, op.to],
                          self.routing, seed=self.seed)
            self.paths[key] = (paths, path_latency(self.fabric, paths))
        paths, latency = self.paths[key]
        task = self.graph.add_transfer_paths(paths, op.size, latency=latency, deps=deps,
                                             name=f"pp {op.tag}")
        self.it.routes.append(RouteRecord("p2p", np.stack([self.members[:, s],
                                                           self.members[:, op.to]]),
                                          float(op.size), "", task, task + 1))
        self.it.comm_bytes["pp"] += op.size * self.members.shape[0]
        self.sent[op.tag] = task
        return task


class _StageState:
    """One stage being compiled: its stream tail and the tasks of its ops."""

    def __init__(self, compiler: _Compiler, s: int, ops: list):
        self.c, self.s, self.ops, self.cursor = compiler, s, ops, 0
        self.graph = compiler.graph
        origin = compiler.it.origin
        self.tail = origin
        self.recv = -1                    # message the next stream element waits for
        self.pending: dict | None = None  # stream Delay being merged
        self.tasks: dict[int, list[int]] = {}          # op -> tasks that finish it
        self.per_group: dict[int, list[list[int]]] = {}
        self.passes: list[StagePass] = []
        self.rows: dict[tuple, list] = {}
        self.shares: dict[int, float] | None = None   # compute op -> share beside NCCL
        referenced, self.followed = set(), set()
        for op in ops:
            if isinstance(op, Compute | Collective):
                referenced.update(op.after)
            if isinstance(op, Collective) and op.follows >= 0:
                self.followed.add(op.follows)
        self.referenced = referenced | self.followed
        compiler.it.passes.append(self.passes)

    def deps(self, indices) -> list[int]:
        return [t for i in indices for t in self.tasks.get(i, ())]

    def start_deps(self, extra=()) -> list[int]:
        deps = [t for t in (self.tail, self.recv) if t >= 0] + list(extra)
        self.recv = -1
        return deps

    def current(self) -> StagePass:
        if not self.passes:  # ops before any Pass: an anonymous forward pass
            self.passes.append(StagePass("F", -1, -1))
        return self.passes[-1]

    def flush(self) -> None:
        p = self.pending
        if p is None:
            return
        seconds = p["compute"] + p["tp"] + p["ep"] + p["straggler"] + p["contention"]
        task = self.graph.add_delay(seconds, deps=p["deps"] or self._origin(),
                                    name=f"s{self.s} {p['name']}")
        nominal = {k: p[k] for k in ("compute", "tp", "ep")}
        for extra in ("straggler", "contention"):
            if p[extra]:
                nominal[extra] = p[extra]
        self.current().elements.append(Element(task, task, nominal, wait=p["wait"]))
        for i in p["ops"]:
            self.tasks[i] = [task]
        self.tail = task
        self.pending = None

    def _origin(self) -> list[int]:
        return [self.c.it.origin] if self.c.it.origin >= 0 else []

    def delay(self, index: int, part: str, seconds: float, after, name: str,
              straggler: float = 0.0, contention: float = 0.0) -> None:
        if self.pending is None or after or self.recv >= 0:
            self.flush()
            # a wait for a TP or CP collective overlapped with compute is exposed TP or CP
            # time; any other (ZeRO-3 gathers) DP
            waits = [_CATEGORY[self.ops[a].group] for a in after
                     if isinstance(self.ops[a], Collective) and self.ops[a].group in ("tp", "cp")]
            self.pending = {"compute": 0.0, "tp": 0.0, "ep": 0.0, "straggler": 0.0,
                            "contention": 0.0, "ops": [], "name": name,
                            "deps": self.start_deps(self.deps(after)),
                            "wait": waits[0] if waits else "dp"}
        self.pending[part] += seconds
        self.pending["straggler"] += straggler
        self.pending["contention"] += contention
        self.pending["ops"].append(index)
        if index in self.referenced:
            self.flush()

    def step(self, op) -> None:
        i, c, s = self.cursor, self.c, self.s
        if isinstance(op, Pass):
            self.flush()
            self.passes.append(StagePass(op.kind, op.micro_batch, op.chunk))
        elif isinstance(op, Compute):
            contention = (op.contention
                          + (self.resident_share(i) * op.beside if op.beside else 0.0)
                          + (self.held_share(op) * op.held if op.held else 0.0))
            self.delay(i, "compute", op.seconds, op.after, op.label or "compute",
                       op.straggler, contention)
        elif isinstance(op, Recv):
            self.flush()
            self.recv = c.sent[op.tag]
            self.current().recv = self.recv
            self.tasks[i] = [self.recv]
        elif isinstance(op, Send):
            self.flush()
            self.tasks[i] = [c.send(s, op, [t for t in (self.tail,) if t >= 0]
                                    or self._origin())]
        elif op.blocking:
            self.blocking(i, op)
        else:
            self.asynchronous(i, op)

    def blocking(self, i: int, op: Collective) -> None:
        groups = self.c.groups[op.group][self.s]
        if groups.shape[1] < 2:  # one-GPU groups move nothing: no time, no task
            self.delay(i, _CATEGORY[op.group], 0.0, op.after, f"{op.group} {op.op}")
            return
        if self.c.in_host(op.group, self.s):
            seconds = self.c.replay_time(op, self.s)
            self.delay(i, _CATEGORY[op.group], seconds, op.after, f"{op.group} {op.op}")
            return
        self.flush()
        deps = self.start_deps(self.deps(op.after)) or self._origin()
        done, first = self.c.collective(op, groups, deps, f"s{self.s} {op.group} {op.op}")
        self.current().elements.append(Element(first[0] if first else done, done,
                                               category=_CATEGORY[op.group]))
        self.tasks[i] = [done]
        self.tail = done

    def held_share(self, op: Compute) -> float:
        """Share of compute ``op``'s time within the time alone of the collective beside it
        (``op.held_by``), which starts with it: how long that collective's kernels hold the
        SMs its GEMMs were launched for (:class:`~hpnsim.training.compute.contention.Launch`)."""
        beside = self.ops[op.held_by]
        if op.seconds <= 0 or self.c.groups[beside.group][self.s].shape[1] < 2:
            return 0.0
        return min(1.0, self.c.alone_time(beside, self.s) / op.seconds)

    def resident_share(self, i: int) -> float:
        """Share of compute op ``i``'s time within the time the NCCL kernels of the stage's
        DP and ZeRO collectives hold their SMs (see the module docstring)."""
        if self.shares is None:
            self.shares = self._resident_shares()
        return self.shares.get(i, 0.0)

    def _resident_shares(self) -> dict[int, float]:
        """Every compute op's share, from the stage's stream clock: compute ops and the
        blocking collectives inside a host advance it; each resident collective is
        dispatched at the clock its ``after`` ops end at (or its own place in the stream),
        its kernels run after the previous one's, for its time alone. A compute op beside
        them advances at ``1 / (1 + beside / seconds)`` of its pace while they hold their
        SMs, so the clock is the stream's wall time. Two walks: the first places the
        residencies (a collective may be dispatched at a clock the walk has passed), the
        second charges every compute op by all of them."""
        busy: list = []
        ends: dict[int, float] = {}               # resident collective -> its end
        self._walk(busy, ends, place=True)
        return self._walk(busy, ends, place=False)

    def _walk(self, busy: list, ends: dict, place: bool) -> dict[int, float]:
        clock, free, end, shares = 0.0, 0.0, {}, {}
        for i, op in enumerate(self.ops):
            if isinstance(op, Compute):
                # a stream waiting for a resident collective (a gather it needs) resumes
                # when it ends
                clock = max([clock, *(ends[a] for a in op.after if a in ends)])
                wall = op.seconds
                if op.beside and op.seconds > 0:
                    wall = _through(clock, op.seconds, 1.0 + op.beside / op.seconds, busy)
                    shares[i] = (wall - op.seconds) / op.beside
                clock += wall
            elif isinstance(op, Collective) and self.c.groups[op.group][self.s].shape[1] > 1:
                if op.blocking and self.c.in_host(op.group, self.s):
                    clock += self.c.alone_time(op, self.s)
                elif place and not op.blocking and op.group in _RESIDENT:
                    begin = max(max((end[a] for a in op.after), default=clock), free)
                    free = begin + self.c.alone_time(op, self.s)
                    ends[i] = free
                    if busy and begin <= busy[-1][1]:
                        busy[-1] = (busy[-1][0], max(busy[-1][1], free))
                    else:
                        busy.append((begin, free))
            end[i] = clock
        return shares

    def asynchronous(self, i: int, op: Collective) -> None:
        groups = self.c.groups[op.group][self.s]
        if groups.shape[1] < 2:
            self.tasks[i] = []
            return
        base = self.deps(op.after) or self._origin()
        if op.group == "tp" and self.c.in_host(op.group, self.s):
            # TP overlapped with compute, inside a host: timed once and replayed, as the
            # blocking ones (the module docstring's approximation), beside the stream
            seconds = self.c.replay_time(op, self.s)
            self.tasks[i] = [self.graph.add_delay(seconds, deps=base,
                                                  name=f"s{self.s} tp {op.op}")]
            return
        name = f"s{self.s} {op.row or op.group} {op.op}"
        if op.follows >= 0 or i in self.followed:  # one chain per group
            behind = self.per_group.get(op.follows) if op.follows >= 0 else None
            finals, first = [], []
            for g, group in enumerate(groups):
                deps = base + (behind[g] if behind else [])
                done, starts = self.c.collective(op, group[None, :], deps, name)
                finals.append([done])
                first += starts
            self.per_group[i] = finals
            self.tasks[i] = [f[0] for f in finals]
        else:
            done, first = self.c.collective(op, groups, base, name)
            self.tasks[i] = [done]
        if op.row:
            key = (op.row, op.step if op.step >= 0 else -1)
            row = self.rows.setdefault(key, [op.row, [], []])
            row[1].extend(first)
            row[2].extend(self.tasks[i])

    def finish(self) -> None:
        self.flush()
        leaves = [t for i, op in enumerate(self.ops) if isinstance(op, Collective)
                  and not op.blocking and i not in self.referenced for t in self.tasks[i]]
        end = [t for t in (self.tail,) if t >= 0] + leaves
        self.c.it.stage_end.append(self.graph.add_delay(0.0, deps=end or self._origin(),
                                                        name=f"end s{self.s}"))
        rows = list(self.rows.values())
        rows.sort(key=lambda row: row[0] == "allgather")
        self.c.it.rows.append([tuple(row) for row in rows])


def _through(start: float, seconds: float, slowdown: float, busy: list) -> float:
    """Wall time of ``seconds`` of compute from ``start``, ``slowdown`` times slower inside
    the ``busy`` intervals (sorted, disjoint ``(from, to)``).

    >>> _through(0.0, 2.0, 2.0, [(1.0, 3.0)])     # 1 s alone, then 1 s at half pace: 2 s
    3.0
    >>> _through(0.0, 1.0, 2.0, []), _through(5.0, 1.0, 2.0, [(1.0, 3.0)])
    (1.0, 1.0)
    """
    t, left = start, seconds
    for lo, hi in busy:
        if hi <= t:
            continue
        if lo > t:
            if left <= lo - t:
                break
            left -= lo - t
            t = lo
        if left * slowdown <= hi - t:
            return t + left * slowdown - start
        left -= (hi - t) / slowdown
        t = hi
    return t + left - start
