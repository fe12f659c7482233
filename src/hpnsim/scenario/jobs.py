"""The jobs of a scenario: :class:`JobSpec`, one training job, and its checks against the
built fabric (:func:`check_jobs`).

A job's keys are the keyword names of :class:`~hpnsim.training.job.TrainJob` wherever the
two share a field, so a ``TrainJob`` is built from a ``JobSpec`` by those names
(:meth:`JobSpec.train_job`). Two YAML keys were renamed to follow it and stay accepted as
deprecated aliases: ``vpp`` (now ``virtual_stages``) and ``prefetch`` (now
``fsdp_prefetch``); a run's echo of the scenario still writes the old keys. ``mfu`` (the
fraction of peak every kernel reaches, never MFU) is now ``compute_efficiency``, an override
of the per-operation compute model; ``mfu`` stays accepted for one release, deprecated.

Examples
--------
>>> job = JobSpec.model_validate({"model": "llama3-70b", "tp": 8, "pp": 4, "vpp": 2,
...                               "schedule": "interleaved"})
>>> job.virtual_stages, job.train_job().virtual_stages, job.gpu_count
(2, 2, 32)
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from hpnsim.errors import InputError, read_user_text
from hpnsim.scenario.yaml import format_path, located, seconds_field
from hpnsim.training.job_options import (
    DEFAULT_VERSION_TEXT,
    check_attention,
    check_cross_entropy,
    parse_version,
)
from hpnsim.training.userbuffers import USERBUFFERS
from hpnsim.workloads.layout import RANK_ORDERS

__all__ = ["JobSpec", "check_jobs"]


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {value!r}")
    return value


#: seconds, from a number or a string with a unit ("30s", "1.5ms", "2h")
Seconds = Annotated[float, BeforeValidator(seconds_field), Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[int, Field(ge=1, strict=True)]


#: old YAML key -> the field it names now (the TrainJob keyword)
_OLD_KEYS = {"vpp": "virtual_stages", "prefetch": "fsdp_prefetch", "mfu": "compute_efficiency"}
#: keys a workload file fixes (it gives the parallelism and batches)
_FIXED = {"tp", "pp", "dp", "ep", "cp", "micro_batch", "global_batch", "virtual_stages"}
#: ... as the user may write them, old keys included
_FIXED_BY_WORKLOAD = _FIXED | {old for old, new in _OLD_KEYS.items() if new in _FIXED}


def _renamed(new: str, description: str) -> dict:
    """Field options of a key renamed to ``new`` that still accepts its old key (and echoes
    it, so a run's JSON output keeps its keys)."""
    old = next(old for old, field in _OLD_KEYS.items() if field == new)
    return {"validation_alias": AliasChoices(new, old), "serialization_alias": old,
            "description": f"{description} (the old key {old} is accepted, deprecated)"}


def _old_keys_in_schema(schema: dict) -> None:
    """List the old keys in the JSON Schema too, marked deprecated, so an editor that
    validates a scenario against ``hpnsim schema`` accepts them as the loader does."""
    properties = schema.get("properties", {})
    for old, new in _OLD_KEYS.items():
        properties[old] = {**properties[new], "deprecated": True,
                           "description": f"deprecated: the old key of {new}"}
        properties[old].pop("title", None)


class JobSpec(BaseModel):
    """One training job: what it trains, how it is parallelised, where and when it runs.

    ``model`` names a catalog model (or one in ``model_file``); ``workload`` a SimAI/AICB
    workload file instead, whose header fixes the parallelism. ``gpus`` is an explicit
    placement (GPU indices in rank order); without it the run allocates whole hosts.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=_old_keys_in_schema)

    name: str = ""
    model: str | None = None
    model_file: str | None = None
    workload: str | None = None
    tp: Positive = 1
    pp: Positive = 1
    dp: Positive = 1
    ep: Positive = 1
    cp: Positive = 1
    zero: Annotated[Literal[0, 1, 2, 3], BeforeValidator(_not_bool)] = 0
    micro_batch: Positive = 1
    global_batch: Positive | None = None
    seq_len: Positive | None = None
    gpu: Literal["a100", "h100", "h800", "b200"] = Field(
        "h800", description="the GPU model (default: the GPU of the fabric's hosts, "
                            "hpnsim.fabrics.hosts: H800 on hpn7 and dcn_plus)")
    dtype: Literal["bf16", "fp16", "fp8"] = "bf16"
    compute_efficiency: Annotated[float, Field(gt=0, le=1, strict=True)] | None = Field(
        None, validation_alias=AliasChoices("compute_efficiency", "mfu"),
        description="override of the per-operation compute model: every kernel at this "
                    "fraction of the tensor peak (the old key mfu is accepted, deprecated)")
    kernel_table: str | None = Field(
        None, description="measured kernel CSV (the compute model's format) overriding the "
                          "model's efficiencies on the job's GPU, or the name of a table "
                          "shipped with hpnsim (e.g. f8e_bf16_h100)")
    schedule: Literal["", "1f1b", "interleaved", "gpipe", "zb-h1"] = ""
    virtual_stages: Positive = Field(
        1, **_renamed("virtual_stages", "virtual pipeline stages per rank (interleaved)"))
    sequence_parallel: bool = False
    tp_comm_overlap: bool = False
    userbuffers: Literal[tuple(USERBUFFERS)] | None = Field(
        None, exclude=True,   # not echoed: the job's own JSON names it when not te_default
        description="with tp_comm_overlap: the per-GEMM userbuffer configuration a recipe "
                    "names (the SMs each overlap takes; hpnsim.training.userbuffers); "
                    "default TransformerEngine's own, te_default")
    recompute: bool = False
    selective_recompute: bool = False
    fsdp_prefetch: bool = Field(
        True, **_renamed("fsdp_prefetch", "ZeRO-3 gathers one unit ahead"))
    bucket_params: Positive | None = None
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = False
    megatron_core: str | float | int = Field(
        DEFAULT_VERSION_TEXT, exclude=True,   # not echoed: the job's own JSON names it when set
        description="Megatron-Core version the job runs (quoted, e.g. '0.13'): an option it "
                    "lacks is refused (hpnsim.training.frameworks)")
    attention: Literal["flash", "cudnn", "flash2", "unfused"] | None = Field(
        None, exclude=True,   # not echoed: the job's own JSON names it when not the default
        description="core attention kernel: flash (fused FlashAttention), cudnn (fused, "
                    "TransformerEngine's choice on Hopper), flash2 (FlashAttention-2, as "
                    "TransformerEngine before 1.11 with NVTE_FUSED_ATTN=0) or unfused (Megatron's core "
                    "attention, scores in HBM); default: what megatron_core runs by default "
                    "(cudnn from 0.7 and with cp > 1, unfused before)")
    cross_entropy: Literal["unfused", "fused", "te"] | None = Field(
        None, exclude=True,   # not echoed: the job's own JSON names it when not the default
        description="the loss as the framework computes it: unfused (Megatron's, the "
                    "default), fused (cross_entropy_loss_fusion, from Megatron-Core 0.8) or "
                    "te (TransformerEngine's kernels, from 0.13)")
    dropout: bool = Field(
        False, exclude=True,   # not echoed: the job's own JSON names it when on
        description="Megatron's hidden and attention dropout at 0.1 (GPT-3 recipes) rather "
                    "than 0 (Llama-style recipes, the default)")
    fp8_gemm: Literal["cublas", "deepgemm"] | None = Field(
        None, exclude=True,   # not echoed: the job's own JSON names it when not cublas
        description="FP8 GEMM library whose measured kernels time a dtype: fp8 job: cublas "
                    "(TransformerEngine's cuBLASLt, the default) or deepgemm")
    fp8_recipe: Literal["delayed", "current"] | None = Field(
        None, exclude=True,   # not echoed: the job's own JSON names it when not delayed
        description="how a dtype: fp8 job scales its casts: delayed (TransformerEngine's "
                    "delayed scaling, the default) or current (Float8CurrentScaling, "
                    "Megatron-Core's --fp8-recipe tensorwise, from 0.12)")
    fp8_param_gather: bool = Field(
        False, exclude=True,   # not echoed: the job's own JSON names it when on
        description="Megatron-Core's --fp8-param-gather (from 0.9; dtype: fp8 with zero 1-3): "
                    "the layers' linear weights kept in FP8 and all-gathered as 1 byte each")
    rank_order: Literal[RANK_ORDERS] | None = Field(
        None, exclude=True,   # not echoed: the job's own JSON names it when set
        description="how ranks map to GPUs, fastest dimension first: tp-cp-dp-pp "
                    "(Megatron-Core's default) or tp-cp-pp-dp (--use-tp-pp-dp-mapping, from "
                    "0.7: a pipeline's stages on consecutive hosts); default hpnsim's order")
    gpu_variation: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] | None = Field(
        None, exclude=True,
        description="coefficient of variation of one GPU's compute time per step (the "
                    "straggler term; 0: off); default the measured 0.007")
    stage_layers: list[Annotated[int, Field(ge=0, strict=True)]] | None = Field(
        None, min_length=1, description="transformer layers of each virtual stage "
                                        "(u = chunk * pp + stage), summing to the model's layers")
    first_stage_layers: Annotated[int, Field(ge=0, strict=True)] | None = None
    last_stage_layers: Annotated[int, Field(ge=0, strict=True)] | None = None
    account_for_embedding: bool = False
    account_for_loss: bool = False
    grad_bytes: Annotated[Literal[2, 4], BeforeValidator(_not_bool)] = 2
    tp_algo: str = "auto"
    dp_algo: str = "auto"
    gpus: list[Annotated[int, Field(ge=0, strict=True)]] | None = Field(
        None, min_length=1, description="explicit placement: GPU indices in rank order")
    hosts: list[Annotated[int, Field(ge=0, strict=True)]] | None = Field(
        None, min_length=1, description="explicit placement by host: the hosts' GPUs, host by host, in "
                          "rank order")
    arrival: Seconds = 0.0
    iterations: Positive = 1
    duration: Annotated[float | None, BeforeValidator(seconds_field),
                        Field(gt=0, allow_inf_nan=False)] = Field(
        None, exclude=True,      # not echoed: a run's output keeps its keys
        description="cluster trace: seconds the job runs before it leaves (instead of "
                    "iterations)")

    @model_validator(mode="wrap")
    @classmethod
    def _what_it_trains(cls, data: Any, handler) -> JobSpec:
        job = handler(data)
        if isinstance(data, dict) and "mfu" in data:
            warnings.warn("jobs[].mfu is deprecated: it is the fraction of peak every kernel "
                          "reaches, now compute_efficiency", DeprecationWarning, stacklevel=2)
        if (job.model is None) == (job.workload is None):
            raise ValueError("give model (a catalog name) or workload (an AICB file), "
                             "exactly one")
        if job.workload is not None:
            # named by the key as written (``vpp`` or ``virtual_stages``): the raw keys
            given = set(data) if isinstance(data, dict) else job.model_fields_set
            fixed = sorted(_FIXED_BY_WORKLOAD & given)
            if fixed:
                raise ValueError(f"{fixed[0]}: fixed by the workload file; remove it")
        if job.gpus is not None and job.hosts is not None:
            raise ValueError("hosts: give gpus or hosts, not both")
        if job.model is not None and (job.attention, job.cross_entropy) != (None, None):
            try:   # here, before any fabric is built for the job
                check_attention(job.megatron_core, job.attention, job.cp)
                check_cross_entropy(parse_version(job.megatron_core), job.cross_entropy)
            except InputError as refused:
                raise ValueError(f"{refused.field}: {refused.message}") from None
        if job.duration is not None and "iterations" in job.model_fields_set:
            raise ValueError("duration: give iterations or duration, not both")
        for key in ("gpus", "hosts"):
            values = getattr(job, key)
            if values is not None and len(set(values)) != len(values):
                raise ValueError(f"{key}: {max(values, key=values.count)} appears twice")
        return job

    def placement(self, gpus_per_host: int) -> list[int] | None:
        """The explicit placement as GPU indices (``gpus``, or the GPUs of ``hosts``)."""
        if self.hosts is None:
            return self.gpus
        return [h * gpus_per_host + g for h in self.hosts for g in range(gpus_per_host)]

    @property
    def gpu_count(self) -> int:
        """GPUs the job occupies (tp * cp * pp * dp, or the workload's; reads the workload
        file)."""
        return self.gpu_count_with(self.load_workload() if self.workload is not None else None)

    def gpu_count_with(self, workload) -> int:
        """GPUs the job occupies, given its parsed workload (None for a model job)."""
        if workload is not None:
            return workload.to_layout().n_gpus
        return self.tp * self.cp * self.pp * self.dp

    def load_workload(self):
        """The parsed workload file (read on every call; ``prepare()`` reads it once and
        keeps it)."""
        from hpnsim.workloads.aicb import parse_aicb

        return parse_aicb(read_user_text(self.workload, "workload"), source=self.workload)

    def train_job(self):
        """The :class:`~hpnsim.training.job.TrainJob` of a ``model`` job: every field the two
        share passed by name."""
        from hpnsim.training.job import TrainJob
        from hpnsim.workloads import models

        extra = models.load_yaml(self.model_file) if self.model_file else None
        shared = {name: getattr(self, name) for name in _train_job_fields()}
        return TrainJob(models.get(self.model, extra), **shared)


@functools.cache
def _train_job_fields() -> tuple[str, ...]:
    """The JobSpec fields that are TrainJob keywords too (``model`` aside: it is a name
    here and a ModelSpec there)."""
    from hpnsim.training.job import TrainJob

    keywords = inspect.signature(TrainJob).parameters
    return tuple(name for name in JobSpec.model_fields if name in keywords and name != "model")


def _job_keys() -> set[str]:
    """Every key a job may be written with: field names and their old keys."""
    return set(JobSpec.model_fields) | set(_OLD_KEYS)


def _size_key(job) -> str:
    """The key that makes a job large: its ``workload`` file, else its largest parallel
    dimension (``dp`` on a tie).

    >>> _size_key(JobSpec(model="llama3-8b", tp=8, dp=4096))
    'dp'
    """
    if job.workload is not None:
        return "workload"
    dims = {"dp": job.dp, "tp": job.tp, "pp": job.pp, "cp": job.cp or 1}
    return max(dims, key=lambda k: dims[k])


def check_jobs(scenario, fabric, lines: dict) -> list:
    """Every job against ``fabric``: TP within a host, the TrainJob builds, the job fits,
    ``hosts``/``gpus`` exist and (unless a ``cluster:`` section queues the jobs) are
    disjoint and fit together. Returns each job's parsed workload (None for a model job).
    Raises :class:`InputError` by YAML path.

    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.scenario.spec import parse_scenario
    >>> s = parse_scenario({"jobs": [{"model": "llama3-8b", "tp": 3}]})
    >>> check_jobs(s, hpn7(segments=1), {})
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].tp: must divide the GPUs per host (8), got 3
    """
    def fail(path, message):
        raise located(InputError(format_path(path), message), lines, path)

    keys = _job_keys()
    per_host = fabric.gpus_per_host
    used = np.zeros(fabric.n_gpus, dtype=bool)
    total = 0
    workloads = []
    for i, job in enumerate(scenario.jobs):
        if job.duration is not None and scenario.cluster is None:
            fail(("jobs", i, "duration"), "only a cluster trace (a cluster: section) runs a "
                                          "job for a duration; give iterations")
        if job.model is not None:
            if per_host % job.tp:
                fail(("jobs", i, "tp"), f"must divide the GPUs per host ({per_host}), "
                                        f"got {job.tp}")
            try:
                job.train_job()
            except InputError as exc:
                key = exc.field.lstrip("-").replace("-", "_")
                fail(("jobs", i, key) if key in keys else ("jobs", i),
                     exc.message if key in keys else str(exc))
        try:
            workload = job.load_workload() if job.workload is not None else None
            count = job.gpu_count_with(workload)
        except InputError as exc:
            fail(("jobs", i, "workload"), exc.message)
        workloads.append(workload)
        total += count
        if count > fabric.n_gpus:
            fail(("jobs", i, _size_key(job)),
                 f"the job needs {count:,} GPUs; the fabric has {fabric.n_gpus:,} (lower it, "
                 f"or raise fabric.segments, fabric.pods or fabric.gpus)")
        if job.hosts is not None:
            if max(job.hosts) >= fabric.n_hosts:
                fail(("jobs", i, "hosts"), f"host {max(job.hosts)} does not exist (the fabric "
                                           f"has hosts 0..{fabric.n_hosts - 1})")
            if len(job.hosts) * per_host < count or (len(job.hosts) - 1) * per_host >= count:
                fail(("jobs", i, "hosts"), f"lists {len(job.hosts)} hosts; the job's {count} "
                                           f"GPUs need {-(-count // per_host)}")
        placement = job.placement(per_host)
        if placement is None:
            continue
        key = "gpus" if job.hosts is None else "hosts"
        placed = np.asarray(placement[:count])
        if len(placement) != count and key == "gpus":
            fail(("jobs", i, key), f"lists {len(placement)} GPUs; the job has {count} ranks")
        if placed.max() >= fabric.n_gpus:
            fail(("jobs", i, key), f"GPU {int(placed.max())} does not exist (the fabric has "
                                   f"GPUs 0..{fabric.n_gpus - 1})")
        if used[placed].any() and scenario.cluster is None:   # a cluster trace queues
            gpu = int(placed[used[placed]][0])
            fail(("jobs", i, key), f"GPU {gpu} is already given to another job")
        used[placed] = True
    if total > fabric.n_gpus and scenario.cluster is None:   # a cluster trace queues
        fail(("jobs",), f"the jobs need {total:,} GPUs together; the fabric has "
                        f"{fabric.n_gpus:,}")
    return workloads
