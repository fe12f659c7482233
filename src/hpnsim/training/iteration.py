"""The result of one simulated training iteration (:class:`IterationResult`).

The simulation itself (program, compiler, accounting) is :mod:`hpnsim.training`:
``hpnsim.training.simulate_iteration(job, fabric)``. The parts of :data:`PARTS` split each
pipeline stage's iteration time with no remainder (see :mod:`hpnsim.training.account`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PARTS", "IterationResult"]

PARTS = ("compute", "tp", "pp", "dp", "ep", "bubble", "optimizer", "straggler")


@dataclass
class IterationResult:
    """Outcome of one simulated iteration (seconds unless named otherwise).

    Attributes
    ----------
    iteration_time : float
    compute_time : float
        Compute per GPU (average over stages).
    compute_by_class : dict
        ``compute_time`` split by operation class: ``gemm``, ``attention`` (fused attention
        kernels), ``memory`` (memory-bound kernels: norms, activations, rotary, residual adds,
        casts, the embedding and loss); empty for a program without the split (AICB files).
    exposed_comm : dict
        Per dimension (``tp``, ``pp``, ``dp``, ``ep``): time GPUs wait on it, GPU average.
    bubble : float
        Pipeline-bubble idle time, GPU average; ``bubble_fraction`` is it over the iteration.
    optimizer_time : float
    straggler_time : float
        Waiting for the job's slowest GPU: the compute stream's share of a synchronous
        step's expected maximum over the GPUs' varying compute times
        (:mod:`hpnsim.training.straggler`), GPU average.
    mfu : float
        Model FLOPs / (iteration time x peak FLOP/s x GPUs).
    tokens_per_second : float
    per_stage : list of dict
        The same breakdown per pipeline stage.
    timeline : list of dict
        Gantt rows: ``stage``, ``kind`` (F, B, dp, optimizer, allgather; with ZeRO-3
        fsdp-ag and fsdp-rs, one per unit's collective step), ``micro_batch``,
        ``chunk``, ``start``, ``finish``.
    """

    job: dict
    iteration_time: float
    compute_time: float
    exposed_comm: dict
    bubble: float
    bubble_fraction: float
    optimizer_time: float
    mfu: float
    tokens_per_second: float
    model_flops: float
    tp_allreduce_time: float
    ep_alltoall_time: float = 0.0
    straggler_time: float = 0.0
    compute_by_class: dict = field(default_factory=dict)
    comm_bytes: dict = field(default_factory=dict)
    per_stage: list = field(default_factory=list)
    timeline: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    n_tasks: int = 0

    def to_dict(self, timeline: bool = True) -> dict:
        """JSON-ready dict (``timeline=False`` drops the Gantt rows)."""
        out = {k: v for k, v in self.__dict__.items() if k != "timeline" or timeline}
        out["exposed_comm"] = dict(self.exposed_comm)
        out["compute_by_class"] = dict(self.compute_by_class)
        out["breakdown"] = self.breakdown()
        return out

    def breakdown(self) -> dict[str, float]:
        """Where the iteration's time goes, GPU average, adding up to ``iteration_time``:
        compute by operation class (``gemm``, ``attention``, ``memory``, ``gaps``; ``compute``
        when the program has no split), ``optimizer``, exposed communication per dimension
        (``exposed_tp``, ``exposed_pp``, ``exposed_dp``, ``exposed_ep``), ``bubble`` and
        ``straggler`` (waiting for the slowest GPU).

        >>> r = IterationResult({}, 1.0, 0.6, {"tp": 0.1, "pp": 0.0, "dp": 0.05, "ep": 0.0},
        ...                     0.2, 0.2, 0.05, 0.4, 1.0, 1.0, 0.0,
        ...                     compute_by_class={"gemm": 0.5, "attention": 0.06, "memory": 0.04})
        >>> b = r.breakdown(); list(b)[:4], round(sum(b.values()), 12)   # no straggler here
        (['gemm', 'attention', 'memory', 'optimizer'], 1.0)
        """
        out = dict(self.compute_by_class) or {"compute": self.compute_time}
        out["optimizer"] = self.optimizer_time
        out.update({f"exposed_{dim}": self.exposed_comm.get(dim, 0.0)
                    for dim in ("tp", "pp", "dp", "ep")})
        out["bubble"] = self.bubble
        out["straggler"] = self.straggler_time
        return out

    def rows(self) -> list[dict]:
        """One row per pipeline stage: ``stage`` and the parts of :data:`PARTS` (seconds),
        which add up to the iteration time.

        Examples
        --------
        >>> from hpnsim.fabrics import build_fabric
        >>> from hpnsim.training import TrainJob, simulate_iteration
        >>> f = build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0})
        >>> it = simulate_iteration(TrainJob("llama3-8b", tp=8, pp=2, global_batch=2), f)
        >>> [row["stage"] for row in it.rows()], list(it.rows()[0])[1:3]
        ([0, 1], ['compute', 'tp'])
        >>> abs(sum(it.rows()[0][part] for part in PARTS) - it.iteration_time) < 1e-9
        True
        """
        return [{"stage": stage["stage"], **{part: stage[part] for part in PARTS}}
                for stage in self.per_stage]

    def to_frame(self):
        """:meth:`rows` as a pandas DataFrame (pandas: the optional ``frames`` extra)."""
        from hpnsim.frames import to_frame

        return to_frame(self.rows(), columns=["stage", *PARTS])

