"""Scaling linearity of a training job as it grows, fabric against fabric.

Weak scaling, as training teams measure it: the model parallel shape (TP x PP) and the
micro-batches per pipeline stay fixed while data parallelism grows, so the work per GPU per
iteration is constant and any loss of throughput per GPU is the network's doing (DP
collectives over more GPUs and farther, contention, and ECMP collisions).

``linearity(N) = throughput(N) / (N / N0 * throughput(N0))`` with ``N0`` the smallest size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hpnsim.errors import InputError
from hpnsim.workloads.iteration_job import TrainJob

#: GPUs in one building block of each template, used to size a fabric for a job
_BLOCK = {"hpn7": 1024, "dcn_plus": 512}
#: the most GPUs a template is sized to when no option sizes it: one HPN 7.0 pod (the
#: published 15,360-GPU design; more pods add a core tier) and DCN+ at the same scale (the
#: fabric it is compared at). A larger job must ask for a larger fabric (--pods, --gpus).
DEFAULT_MAX_GPUS = {"hpn7": 15360, "dcn_plus": 15360}
#: builder options that size a fabric
_SIZING = ("gpus", "pods", "segments", "last_pod_segments", "hosts_per_segment", "k")


def _grow_hint(template: str, n_gpus: int, options: dict) -> str:
    """How to ask for a fabric of at least ``n_gpus``: ``--pods P (G GPUs) or --gpus N``."""
    from hpnsim.fabrics.registry import planned_gpus, template_parameters

    hints = []
    keep = {k: v for k, v in options.items() if k not in ("gpus", "pods", "last_pod_segments")}
    if "pods" in template_parameters(template):
        try:
            pods = math.ceil(n_gpus / planned_gpus(template, {**keep, "pods": 1}))
            hints.append(f"--pods {pods} ({planned_gpus(template, {**keep, 'pods': pods}):,} "
                         f"GPUs)")
        except InputError:
            pass   # no pod count fits: --gpus says why
    return " or ".join([*hints, f"--gpus {n_gpus}"])


def check_fabric_for_job(template: str, n_gpus: int, options: dict | None = None,
                         note=None) -> dict:
    """The builder options :func:`fabric_for_job` uses, checked without building anything.

    Without sizing options a template is sized to the job, up to ``DEFAULT_MAX_GPUS`` (one
    HPN pod); a larger job raises :class:`InputError` saying how to ask for more. With
    sizing options (``--pods``, ``--gpus``, ...) the fabric is what they say; it must hold
    the job, and ``note`` (a callable taking a message) hears when it is larger than the
    template without them.

    >>> check_fabric_for_job("hpn7", 32768)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: fabric: the job needs 32,768 GPUs but hpn7 is sized up to 15,360 GPUs (one pod of 15 segments) unless told otherwise; ask for more with --pods 3 (46,080 GPUs) or --gpus 32768
    >>> check_fabric_for_job("hpn7", 32768, {"pods": "3"}, note=print)
    fabric: hpn7 with --pods 3 holds 46,080 GPUs (without sizing options: up to 15,360); the job uses 32,768
    {'pods': '3'}
    """
    from hpnsim.fabrics.registry import planned_gpus

    options = dict(options or {})
    given = [k for k in options if k.replace("-", "_") in _SIZING]
    if not given:
        limit = DEFAULT_MAX_GPUS.get(template)
        if limit is None:
            limit = planned_gpus(template, options)
        if n_gpus > limit:
            unit = " (one pod of 15 segments)" if template == "hpn7" else ""
            raise InputError("fabric", f"the job needs {n_gpus:,} GPUs but {template} is sized "
                                       f"up to {limit:,} GPUs{unit} unless told otherwise; ask "
                                       f"for more with {_grow_hint(template, n_gpus, options)}")
        return _sized_for(template, n_gpus, options)
    have = planned_gpus(template, options)
    flags = " ".join(f"--{k.replace('_', '-')} {options[k]}" for k in given)
    if have < n_gpus:
        raise InputError("fabric", f"the job needs {n_gpus:,} GPUs but {template} with {flags} "
                                   f"holds {have:,}; ask for more with "
                                   f"{_grow_hint(template, n_gpus, options)}")
    default = DEFAULT_MAX_GPUS.get(template)
    if default is None:
        try:
            default = planned_gpus(template, {k: v for k, v in options.items() if k not in given})
        except InputError:   # the template needs a size (fat_tree's k)
            default = have
    if note is not None and have > default:
        note(f"fabric: {template} with {flags} holds {have:,} GPUs (without sizing options: "
             f"up to {default:,}); the job uses {n_gpus:,}")
    return options


def _sized_for(template: str, n_gpus: int, options: dict) -> dict:
    """Options that trim ``template`` to the blocks a job needs (no sizing option given)."""
    options = dict(options)
    if template in _BLOCK:
        block = _BLOCK[template]
        blocks = math.ceil(n_gpus / block)
        if template == "hpn7":
            if n_gpus < block:
                options.update(segments=1, hosts_per_segment=max(1, math.ceil(n_gpus / 8)))
            else:
                options.update(segments=blocks)
        else:
            hosts = 16 if n_gpus >= 128 else max(1, math.ceil(n_gpus / 8))
            segments = 4 if n_gpus >= 512 else max(1, math.ceil(n_gpus / (8 * hosts)))
            options.update(pods=max(1, blocks), segments=segments, hosts_per_segment=hosts)
    return options


def fabric_for_job(template: str, n_gpus: int, options: dict | None = None, gpu=None,
                   note=None):
    """Build ``template`` large enough for ``n_gpus`` unless ``options`` give its size.

    hpn7 grows by 1,024-GPU segments up to one pod (15 segments); dcn_plus by 512-GPU pods
    up to the same 15,360 GPUs; a larger job raises :class:`InputError` unless sizing
    options (``pods``, ``gpus``, ...) ask for a fabric that holds it (then ``note`` hears
    of it: see :func:`check_fabric_for_job`). A job smaller than one block gets a block
    trimmed to its hosts. Other templates and any explicit size options are passed through
    to the builder unchanged. ``gpu`` (a name or
    :class:`~hpnsim.workloads.gpus.GPUSpec`) gives the hosts that GPU's NVLink unless
    ``options`` set ``nvlink``: an H100 job gets 900 GB/s, an H800 job 400 GB/s.

    Examples
    --------
    >>> fabric_for_job("hpn7", 2048).n_gpus
    2048
    >>> fabric_for_job("dcn_plus", 64).n_gpus
    64
    >>> f = fabric_for_job("hpn7", 16, gpu="h100")
    >>> from hpnsim.fabrics import LinkKind
    >>> float(f.link_capacity[f.link_kind == LinkKind.NVLINK].max()) / 1e9   # per direction
    450.0
    """
    from hpnsim.fabrics import build_fabric
    from hpnsim.workloads.gpus import get_gpu

    options = dict(options or {})
    if gpu is not None and "nvlink" not in options:
        options["nvlink"] = f"{get_gpu(gpu).nvlink_bandwidth / 1e9:g}GB/s"
    options = check_fabric_for_job(template, n_gpus, options, note)
    fabric = build_fabric(template, options)
    if fabric.n_gpus < n_gpus:
        raise InputError("fabric", f"{template} with {options} has {fabric.n_gpus} GPUs; the "
                                   f"job needs {n_gpus}")
    return fabric


@dataclass
class ScalingPoint:
    """One (fabric, size) measurement."""

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
    """Linearity curves per fabric."""

    model: str
    tp: int
    pp: int
    micro_batches: int
    points: list[ScalingPoint] = field(default_factory=list)

    def curve(self, fabric: str) -> list[ScalingPoint]:
        """The points of one fabric, by size."""
        return sorted((p for p in self.points if p.fabric == fabric), key=lambda p: p.gpus)

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return {"model": self.model, "tp": self.tp, "pp": self.pp,
                "micro_batches": self.micro_batches,
                "points": [p.__dict__ for p in self.points]}


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
        Fabric templates, each sized per job by :func:`fabric_for_job`.
    micro_batches : int, optional
        Micro-batches per pipeline (default ``4 * pp``), fixed across sizes.
    routing : str
        A policy of :func:`hpnsim.routing.route`, or ``"native"`` (default): each fabric
        with the routing it is built for (:func:`hpnsim.routing.native_policy`: HPN's
        dual-plane routing on hpn7, ECMP elsewhere).
    note : callable, optional
        Hears a message when sizing options grow a fabric (see :func:`check_fabric_for_job`).
    job_options
        Passed to :class:`TrainJob` (``micro_batch``, ``gpu``, ``zero``, ...).

    Every input (each job, each fabric's size) is checked before the first simulation.

    Examples
    --------
    >>> r = scaling_linearity("llama3-8b", tp=8, pp=1, dps=[2, 4], fabrics=["hpn7"],
    ...                       micro_batches=1)
    >>> [p.gpus for p in r.curve("hpn7")], r.curve("hpn7")[0].linearity
    ([16, 32], 1.0)
    """
    from hpnsim.errors import check_seed
    from hpnsim.fabrics.registry import TEMPLATES
    from hpnsim.routing import native_policy
    from hpnsim.training import simulate_iteration

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
    jobs = [TrainJob(model, tp=tp, pp=pp, dp=dp, micro_batch=micro_batch,
                     global_batch=dp * micro_batch * m, **job_options) for dp in dps]
    for template in fabrics:   # refuse a fabric too small for the largest job before running
        check_fabric_for_job(template, jobs[-1].gpus, fabric_options, note)
    result = ScalingResult(str(model), tp, pp, m)
    for template in fabrics:
        base = None
        for dp, job in zip(dps, jobs, strict=True):
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
