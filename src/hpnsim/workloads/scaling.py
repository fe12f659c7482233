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


def fabric_for_job(template: str, n_gpus: int, options: dict | None = None, gpu=None):
    """Build ``template`` large enough for ``n_gpus`` unless ``options`` give its size.

    hpn7 grows by 1,024-GPU segments (one pod holds 15); dcn_plus by 512-GPU pods. A job
    smaller than one block gets a block trimmed to its hosts. Other templates and any
    explicit size options are passed through to the builder unchanged. ``gpu`` (a name or
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
    sized = {"pods", "segments", "hosts_per_segment", "k"} & set(options)
    if template in _BLOCK and not sized:
        block = _BLOCK[template]
        blocks = math.ceil(n_gpus / block)
        if template == "hpn7":
            if blocks > 15:
                options.update(pods=math.ceil(blocks / 15), segments=15)
            elif n_gpus < block:
                options.update(segments=1, hosts_per_segment=max(1, math.ceil(n_gpus / 8)))
            else:
                options.update(segments=blocks)
        else:
            hosts = 16 if n_gpus >= 128 else max(1, math.ceil(n_gpus / 8))
            segments = 4 if n_gpus >= 512 else max(1, math.ceil(n_gpus / (8 * hosts)))
            options.update(pods=max(1, blocks), segments=segments, hosts_per_segment=hosts)
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
                      fabric_options: dict | None = None, seed: int = 0,
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
    job_options
        Passed to :class:`TrainJob` (``micro_batch``, ``gpu``, ``zero``, ...).

    Examples
    --------
    >>> r = scaling_linearity("llama3-8b", tp=8, pp=1, dps=[2, 4], fabrics=["hpn7"],
    ...                       micro_batches=1)
    >>> [p.gpus for p in r.curve("hpn7")], r.curve("hpn7")[0].linearity
    ([16, 32], 1.0)
    """
    from hpnsim.routing import native_policy
    from hpnsim.workloads.iteration import simulate_iteration

    dps = sorted({int(d) for d in dps})
    if not dps or dps[0] < 1:
        raise InputError("dps", f"need positive data-parallel sizes, got {dps!r}")
    m = micro_batches or 4 * pp
    micro_batch = int(job_options.pop("micro_batch", 1))
    result = ScalingResult(str(model), tp, pp, m)
    for template in fabrics:
        base = None
        for dp in dps:
            job = TrainJob(model, tp=tp, pp=pp, dp=dp, micro_batch=micro_batch,
                           global_batch=dp * micro_batch * m, **job_options)
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


def plot_linearity(result: ScalingResult, path) -> None:
    """Linearity against GPUs, one line per fabric, to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for template in dict.fromkeys(p.fabric for p in result.points):
        pts = result.curve(template)
        ax.plot([p.gpus for p in pts], [p.linearity for p in pts], marker="o", label=template)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("linearity")
    ax.set_title(f"{result.model} TP{result.tp} x PP{result.pp}: weak-scaling linearity")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
