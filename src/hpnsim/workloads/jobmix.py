"""A seeded synthetic job mix shaped like the published Lingjun 2023 trace (reference/crux.md).

The trace's job files are not public; the Crux paper describes the mix: GPT-style and LLaMA
models of 1B-65B, BERT and ResNet, GPU counts from 1 to 512, more than 10% of jobs on >= 128
GPUs, 30+ jobs running at peak. :func:`lingjun_mix` draws jobs with that shape; every knob is
a keyword with the figure it matches (or, where the paper gives none, why it is set so).

Models come from the catalog: ``bert-large`` and the LLaMA family (7B-70B) — the catalog
has no GPT-3 between 1B and 65B, and ResNet (a CNN) has no training program to simulate,
so neither is drawn. A job's layout keeps TP inside a host, adds pipeline stages only when
the model's training state does not fit on one host's GPUs, and spends the rest on DP.

Each job is a dict of :class:`hpnsim.scenario.spec.JobSpec` fields. A job runs for its drawn
``duration`` and leaves, as a production job does: the simulation turns that time into the
iterations the job does at its simulated (contended) iteration time. An earlier version
turned the duration into an iteration count with :func:`iteration_time_estimate` (compute
only), so simulated jobs ran a median 2.25 times longer than drawn.
"""

from __future__ import annotations

import math

import numpy as np

from hpnsim.errors import InputError, check_seed
from hpnsim.training.job import TrainJob
from hpnsim.workloads import models
from hpnsim.workloads.gpus import get_gpu
from hpnsim.workloads.layout import make_layout

#: catalog models drawn (uniformly among those that fit the job's GPUs): the published mix
#: names GPT variants of 1B-65B, LLaMA, BERT and ResNet without their shares
MIX_MODELS = ("bert-large", "llama-7b", "llama3-8b", "llama-13b", "llama-65b", "llama3-70b")

#: GPU counts: powers of two from 1 to 512, the published range
SMALL_COUNTS = (1, 2, 4, 8, 16, 32, 64)
LARGE_COUNTS = (128, 256, 512)
#: relative weights inside each band (the paper gives only the band shares): single hosts
#: (<= 8 GPUs) as the most common small size, larger jobs rarer
SMALL_WEIGHTS = (0.10, 0.05, 0.05, 0.20, 0.20, 0.20, 0.20)
LARGE_WEIGHTS = (0.50, 0.30, 0.20)

#: training state per parameter: BF16 weights and gradients + FP32 master weights, Adam
#: momentum and variance (Rajbhandari et al. 2020, ZeRO, section 3.1: 2 + 2 + 12 bytes)
STATE_BYTES_PER_PARAM = 16
#: share of HBM the training state may take; the rest holds activations and NCCL buffers
#: (a planning margin, not a published figure)
STATE_SHARE_OF_HBM = 0.5
#: micro-batches per pipeline stage when pp > 1: TrainJob's default (4 * pp micro-batches,
#: a 1F1B bubble near 20%); a pp = 1 job takes one micro-batch per iteration
MICROBATCHES_PER_STAGE = 4


def model_parallel_size(model: str, gpu: str = "h800") -> int:
    """GPUs (a power of two) that one model replica needs to hold its training state.

    >>> model_parallel_size("bert-large"), model_parallel_size("llama-13b")
    (1, 8)
    >>> model_parallel_size("llama-65b")          # 65.3e9 * 16 B over 40 GB per GPU
    32
    """
    state = models.get(model).num_parameters() * STATE_BYTES_PER_PARAM
    per_gpu = STATE_SHARE_OF_HBM * get_gpu(gpu).memory_bytes
    return 1 << max(0, math.ceil(math.log2(state / per_gpu)))


def job_layout(model: str, gpus: int, gpus_per_host: int = 8, gpu: str = "h800") -> dict | None:
    """``tp, pp, dp, micro_batch, global_batch`` for ``model`` on ``gpus`` GPUs, or ``None``.

    TP fills at most a host, PP takes the rest of one replica, DP the remaining GPUs.

    >>> job_layout("llama-65b", 256)
    {'tp': 8, 'pp': 4, 'dp': 8, 'micro_batch': 1, 'global_batch': 128}
    >>> job_layout("llama-7b", 8)
    {'tp': 4, 'pp': 1, 'dp': 2, 'micro_batch': 1, 'global_batch': 2}
    >>> job_layout("llama-13b", 4) is None
    True
    """
    replica = model_parallel_size(model, gpu)
    if replica > gpus:
        return None
    tp = min(replica, gpus_per_host)
    pp, dp = replica // tp, gpus // replica
    micro_batches = MICROBATCHES_PER_STAGE * pp if pp > 1 else 1
    out = dict(tp=tp, pp=pp, dp=dp, micro_batch=1, global_batch=dp * micro_batches)
    make_layout(model, n_gpus=gpus, gpus_per_host=gpus_per_host, **out)  # raises if invalid
    return out


def iteration_time_estimate(job: dict) -> float:
    """Seconds per iteration from compute alone: model FLOPs over the job's achievable rate,
    stretched by the pipeline bubble (communication comes on top in a simulation).

    >>> round(iteration_time_estimate(dict(model="llama-7b", tp=4, dp=2, global_batch=2)), 4)
    0.0493
    """
    train = TrainJob(job["model"], tp=job.get("tp", 1), pp=job.get("pp", 1),
                     dp=job.get("dp", 1), micro_batch=job.get("micro_batch", 1),
                     global_batch=job.get("global_batch"), gpu=job.get("gpu", "h800"))
    compute = train.model_flops / (train.gpus * train.gpu.achieved_flops)
    return compute / (1.0 - train.layout.bubble_fraction())


def lingjun_mix(n_jobs: int = 300, seed: int = 0, hours: float = 24.0,
                gpus_available: int = 6776, *,
                share_large: float = 0.15,
                mean_concurrency: float = 28.0,
                duration_sigma: float = 1.0,
                gpus_per_host: int = 8, gpu: str = "h800") -> list[dict]:
    """Draw ``n_jobs`` jobs arriving over ``hours`` (JobSpec dicts, in arrival order).

    Parameters
    ----------
    n_jobs, seed, hours :
        Jobs, random seed (same seed, same mix), arrival horizon.
    gpus_available :
        The cluster's GPUs (Lingjun: 847 hosts x 8 = 6,776); no job asks for more.
    share_large :
        Share of jobs on >= 128 GPUs. Published: "more than 10%"; 0.15 keeps a few-hundred
        job sample above 10% (two standard deviations at 300 jobs).
    mean_concurrency :
        Mean number of running jobs once the cluster is warm. Arrivals are a Poisson process
        of rate ``n_jobs / hours`` (uniform times given the count); by Little's law the mean
        duration is ``mean_concurrency * hours / n_jobs``. 28 puts the peak of a 24-hour,
        300-job mix above the published "30+ concurrent jobs" (33 to 46 over seeds 0-19;
        the peak is the mean plus Poisson fluctuations).
    duration_sigma :
        Log-normal shape of durations (the trace's durations are not published; a heavy tail
        of a few long jobs among many short ones).
    gpus_per_host, gpu :
        Host size (TP limit) and accelerator of every job.

    Examples
    --------
    >>> jobs = lingjun_mix(5, seed=1)
    >>> sorted(jobs[0])
    ['arrival', 'dp', 'duration', 'global_batch', 'gpu', 'micro_batch', 'model', 'name', 'pp', 'tp']
    >>> lingjun_mix(5, seed=1) == jobs
    True
    """
    seed = check_seed(seed)
    _positive("n_jobs", n_jobs, integer=True)
    _positive("hours", hours)
    _positive("gpus_available", gpus_available, integer=True)
    _positive("mean_concurrency", mean_concurrency)
    _positive("duration_sigma", duration_sigma)
    if not 0 <= share_large <= 1:
        raise InputError("share_large", f"must be in 0..1, got {share_large!r}")
    counts, weights = _count_distribution(share_large, gpus_available)
    rng = np.random.default_rng(seed)
    horizon = float(hours) * 3600.0
    arrivals = np.sort(rng.uniform(0.0, horizon, n_jobs))
    sizes = rng.choice(counts, size=n_jobs, p=weights)
    mean_duration = mean_concurrency * horizon / n_jobs
    mu = math.log(mean_duration) - duration_sigma**2 / 2     # log-normal with that mean
    durations = rng.lognormal(mu, duration_sigma, n_jobs)
    picks = rng.random(n_jobs)
    jobs = []
    for i in range(n_jobs):
        n_gpus = int(sizes[i])
        fitting = [m for m in MIX_MODELS if model_parallel_size(m, gpu) <= n_gpus]
        model = fitting[int(picks[i] * len(fitting))]
        job = dict(name=f"job{i:03d}-{model}-{n_gpus}g", model=model, gpu=gpu,
                   **job_layout(model, n_gpus, gpus_per_host, gpu),
                   arrival=round(float(arrivals[i]), 3))
        job["duration"] = max(0.001, round(float(durations[i]), 3))
        jobs.append(job)
    return jobs


def _count_distribution(share_large: float, gpus_available: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.array(SMALL_COUNTS + LARGE_COUNTS)
    weights = np.concatenate([(1 - share_large) * np.array(SMALL_WEIGHTS) / sum(SMALL_WEIGHTS),
                              share_large * np.array(LARGE_WEIGHTS) / sum(LARGE_WEIGHTS)])
    keep = counts <= gpus_available
    return counts[keep], weights[keep] / weights[keep].sum()


def _positive(field: str, value, integer: bool = False) -> None:
    kind = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0 or (
            not integer and not math.isfinite(value)):
        raise InputError(field, f"must be a positive {'integer' if integer else 'number'}, "
                                f"got {value!r}")


def mix_summary(jobs: list[dict]) -> dict:
    """Jobs, share on >= 128 GPUs, peak and mean concurrency, GPU-hours of a mix, from each
    job's arrival and its ``duration`` (or ``iterations x`` :func:`iteration_time_estimate`
    for a job given by iterations), queueing left out.

    >>> s = mix_summary(lingjun_mix(300, seed=0))
    >>> s["jobs"], s["peak_concurrency"] >= 30
    (300, True)
    """
    gpus = np.array([j["tp"] * j["pp"] * j["dp"] for j in jobs])
    start = np.array([j["arrival"] for j in jobs], dtype=float)
    end = start + np.array([j["duration"] if "duration" in j
                            else j["iterations"] * iteration_time_estimate(j) for j in jobs])
    times = np.concatenate([start, end])
    step = np.concatenate([np.ones(len(jobs)), -np.ones(len(jobs))])
    order = np.lexsort((step, times))               # a departure before an arrival at a tie
    last = float(start.max()) if len(jobs) else 0.0
    return {
        "jobs": len(jobs),
        "share_ge_128_gpus": float((gpus >= 128).mean()) if len(jobs) else 0.0,
        "gpus_min": int(gpus.min()) if len(jobs) else 0,
        "gpus_max": int(gpus.max()) if len(jobs) else 0,
        "peak_concurrency": int(np.cumsum(step[order]).max(initial=0)),
        "mean_concurrency_over_arrivals": float((np.minimum(end, last) - start).clip(0).sum()
                                                / last) if last > 0 else 0.0,
        "gpu_hours": float((gpus * (end - start)).sum() / 3600.0),
        "last_end_hours": float(end.max(initial=0.0) / 3600.0),
    }
