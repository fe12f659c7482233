"""Scaling linearity of a training job as it grows, fabric against fabric.

Weak scaling, as training teams measure it: the model parallel shape (TP x PP) and the
micro-batches per pipeline stay fixed while data parallelism grows, so the work per GPU per
iteration is constant and any loss of throughput per GPU is the network's doing (DP
collectives over more GPUs and farther, contention, and ECMP collisions).

``linearity(N) = throughput(N) / (N / N0 * throughput(N0))`` with ``N0`` the smallest size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpnsim.errors import InputError
from hpnsim.training.job import TrainJob
from hpnsim.workloads.sizing import check_fabric_for_job, fabric_for_job


@dataclass
class ScalingPoint:
    """One (fabric, size) measurement: the fabric template, GPUs and DP size, the iteration
    time, tokens/s, MFU, ``linearity`` (throughput per GPU over the smallest size's), the
    exposed DP communication (seconds) and the routing policy used.

    Examples
    --------
    >>> p = ScalingPoint("hpn7", 16, 2, 0.5, 1000.0, 0.4, 1.0, 0.01, "hpn_dual_plane")
    >>> p.gpus, p.linearity
    (16, 1.0)
    """

    fabric: str
    gpus: int
    dp: int
    iteration_time: float
    tokens_per_second: float
    mfu: float
    linearity: float
    exposed_dp: float
    routing: str = ""


@dataclass
class ScalingResult:
    """Linearity curves per fabric: the job shape (model, TP, PP, micro-batches) and every
    measured :class:`ScalingPoint`.

    Examples
    --------
    >>> r = ScalingResult("llama3-8b", 8, 1, 4, [
    ...     ScalingPoint("hpn7", 32, 4, 0.5, 1900.0, 0.4, 0.95, 0.02),
    ...     ScalingPoint("hpn7", 16, 2, 0.5, 1000.0, 0.4, 1.0, 0.01)])
    >>> [p.gpus for p in r.curve("hpn7")]
    [16, 32]
    """

    model: str
    tp: int
    pp: int
    micro_batches: int
    points: list[ScalingPoint] = field(default_factory=list)

    def curve(self, fabric: str) -> list[ScalingPoint]:
        """The points of one fabric, by size.

        Examples
        --------
        >>> r = ScalingResult("llama3-8b", 8, 1, 4, [
        ...     ScalingPoint("dcn_plus", 16, 2, 0.5, 1000.0, 0.4, 1.0, 0.01)])
        >>> r.curve("hpn7"), len(r.curve("dcn_plus"))
        ([], 1)
        """
        return sorted((p for p in self.points if p.fabric == fabric), key=lambda p: p.gpus)

    def to_dict(self) -> dict:
        """JSON-ready dict: the job shape and one dict per point.

        Examples
        --------
        >>> r = ScalingResult("llama3-8b", 8, 1, 4)
        >>> r.to_dict()
        {'model': 'llama3-8b', 'tp': 8, 'pp': 1, 'micro_batches': 4, 'points': []}
        """
        return {"model": self.model, "tp": self.tp, "pp": self.pp,
                "micro_batches": self.micro_batches,
                "points": [p.__dict__ for p in self.points]}

    def rows(self) -> list[dict]:
        """One row per point (fabric, size), in the order they were measured: the fields of
        :class:`ScalingPoint`.

        Examples
        --------
        >>> r = ScalingResult("llama3-8b", 8, 1, 1, [
        ...     ScalingPoint("hpn7", 16, 2, 0.5, 1000.0, 0.4, 1.0, 0.01, "hpn_dual_plane")])
        >>> r.rows()[0]["gpus"], r.rows()[0]["linearity"]
        (16, 1.0)
        """
        return [dict(p.__dict__) for p in self.points]

    def to_frame(self):
        """:meth:`rows` as a pandas DataFrame (pandas: the optional ``frames`` extra).

        Examples
        --------
        >>> ScalingResult("llama3-8b", 8, 1, 4).to_frame().columns[:3].tolist()
        ['fabric', 'gpus', 'dp']
        """
        from dataclasses import fields

        from hpnsim.frames import to_frame

        return to_frame(self.rows(), columns=[f.name for f in fields(ScalingPoint)])


def scaling_linearity(model: str, *, tp: int, pp: int, dps, fabrics=("hpn7", "dcn_plus"),
                      micro_batches: int | None = None, routing: str = "native",
                      fabric_options: dict | None = None, seed: int = 0, note=None,
                      **job_options) -> ScalingResult:
    """Simulate the job at each DP size on each fabric and compute linearity.

    Parameters
    ----------
    model : str
    tp, pp : int
        Fixed model-parallel shape.
    dps : sequence of int
        Data-parallel sizes (GPUs = tp * pp * dp).
    fabrics : sequence of str
        Fabric templates, each sized per job by
        :func:`~hpnsim.workloads.sizing.fabric_for_job`.
    micro_batches : int, optional
        Micro-batches per pipeline (default ``4 * pp``), fixed across sizes.
    routing : str
        A policy of :func:`hpnsim.routing.route`, or ``"native"`` (default): each fabric
        with the routing it is built for (:func:`hpnsim.routing.native_policy`: HPN's
        dual-plane routing on hpn7, ECMP elsewhere).
    note : callable, optional
        Hears a message when sizing options grow a fabric (see
        :func:`~hpnsim.workloads.sizing.check_fabric_for_job`).
    job_options
        Passed to :class:`TrainJob` (``micro_batch``, ``gpu``, ``zero``, ...); without
        ``gpu`` each fabric's jobs run on its hosts' GPU (:mod:`hpnsim.fabrics.hosts`).

    Every input (each job, each fabric's size) is checked before the first simulation.

    Returns
    -------
    ScalingResult
        One :class:`ScalingPoint` per (fabric, DP size); linearity is relative to the
        smallest size on the same fabric.

    Examples
    --------
    >>> r = scaling_linearity("llama3-8b", tp=8, pp=1, dps=[2, 4], fabrics=["hpn7"],
    ...                       micro_batches=1)
    >>> [p.gpus for p in r.curve("hpn7")], r.curve("hpn7")[0].linearity
    ([16, 32], 1.0)
    """
    from hpnsim.errors import check_seed
    from hpnsim.fabrics.hosts import host_gpu
    from hpnsim.fabrics.registry import TEMPLATES
    from hpnsim.routing import native_policy
    from hpnsim.training.simulate import simulate_iteration

    dps = sorted({int(d) for d in dps})
    if not dps or dps[0] < 1:
        raise InputError("dps", f"need positive data-parallel sizes, got {dps!r}")
    fabrics = list(fabrics)
    if not fabrics:
        raise InputError("fabrics", f"name at least one fabric template, e.g. hpn7,dcn_plus; "
                                    f"choose from {', '.join(TEMPLATES)}")
    for template in fabrics:
        if template not in TEMPLATES:
            raise InputError("fabrics", f"unknown fabric {template!r}; choose from "
                                        f"{', '.join(TEMPLATES)}")
    m = 4 * pp if micro_batches is None else micro_batches
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise InputError("micro_batches", f"must be a positive integer (default 4*pp = "
                                          f"{4 * pp}), got {micro_batches!r}")
    check_seed(seed)
    micro_batch = int(job_options.pop("micro_batch", 1))
    gpu = job_options.pop("gpu", None)

    def jobs_on(template: str) -> list[TrainJob]:
        """The jobs on ``template``'s hosts: ``gpu``, else the GPU they hold."""
        on = gpu or host_gpu(template).model
        return [TrainJob(model, tp=tp, pp=pp, dp=dp, micro_batch=micro_batch,
                         global_batch=dp * micro_batch * m, gpu=on, **job_options)
                for dp in dps]

    jobs_of = {template: jobs_on(template) for template in fabrics}
    for template in fabrics:   # refuse a fabric too small for the largest job before running
        check_fabric_for_job(template, jobs_of[template][-1].gpus, fabric_options, note,
                             size_field="dp")
    result = ScalingResult(str(model), tp, pp, m)
    for template in fabrics:
        base = None
        for dp, job in zip(dps, jobs_of[template], strict=True):
            fabric = fabric_for_job(template, job.gpus, fabric_options, gpu=job.gpu)
            policy = native_policy(fabric) if routing == "native" else routing
            r = simulate_iteration(job, fabric, routing=policy, seed=seed)
            if base is None:
                base = (job.gpus, r.tokens_per_second)
            ideal = job.gpus / base[0] * base[1]
            result.points.append(ScalingPoint(template, job.gpus, dp, r.iteration_time,
                                              r.tokens_per_second, r.mfu,
                                              r.tokens_per_second / ideal, r.exposed_comm["dp"],
                                              policy))
    return result
