"""A training job as the iteration simulator sees it: model, parallelism, batch, GPU.

:class:`TrainJob` validates the layout and derives, per *virtual stage* (a contiguous
chunk of layers held by one pipeline stage), what one micro-batch costs: forward and
backward compute time, TP all-reduce and EP all-to-all counts, gradient parameters per
GPU (dense ones, synchronized over DP, and routed-expert ones, synchronized over the
expert-data-parallel group), and the per-block split of the passes that decides when
gradient buckets become ready and what one ZeRO-3 / FSDP unit gathers.

Per-stage costs (compute, FSDP units, gradient buckets, optimizer step, the expert-parallel
all-to-all buffer) are :class:`~hpnsim.training.job_costs.StageCosts`, a base of
:class:`TrainJob`; its module docstring says how expert parallelism is counted.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from hpnsim.errors import InputError
from hpnsim.training.compute import KernelTable
from hpnsim.training.compute.attention_dropout import fused_dropout_factor
from hpnsim.training.compute.cross_entropy import DEFAULT_CROSS_ENTROPY
from hpnsim.training.compute.gemm_library import DEFAULT_LIBRARY, GemmLibrary, gemm_library
from hpnsim.training.compute.precision import true_or_false
from hpnsim.training.cost import CONSTANT_OPTIMIZER_BYTES, ConstantEfficiency, OperationModel
from hpnsim.training.frameworks import MEGATRON_CORE_DEFAULT
from hpnsim.training.job_costs import StageCosts
from hpnsim.training.job_options import (
    DEFAULT_VERSION_TEXT,
    ZERO_STAGES,  # noqa: F401  (kept importable from here)
    check_attention,
    check_combinations,
    check_cross_entropy,
    check_fits,
    check_fp8_param_gather,
    check_fp8_recipe,
    check_framework,
    check_sizes,
    compute_model,
    compute_settings,
    job_attention,
    job_layout,
    options_used,
    parse_version,
)
from hpnsim.training.stages import layer_ranges, split_layers
from hpnsim.training.straggler import straggler_variation
from hpnsim.training.userbuffers import DEFAULT_USERBUFFERS, UserbufferConfig, get_userbuffers
from hpnsim.workloads import models
from hpnsim.workloads.gpus import GPUSpec, get_gpu
from hpnsim.workloads.layout import Layout

#: The constant model's optimizer bytes per parameter (kept under its old name).
OPTIMIZER_BYTES_PER_PARAM = CONSTANT_OPTIMIZER_BYTES


@dataclass(frozen=True, init=False)
class TrainJob(StageCosts):
    """Model + parallel layout + batch + GPU of one data-parallel training job.

    Parameters
    ----------
    model : str or ModelSpec
    tp, pp, dp : int
        Tensor-, pipeline- and data-parallel degrees (GPUs = tp * pp * dp).
    micro_batch : int
        Sequences per micro-batch.
    global_batch : int, optional
        Sequences per iteration; default ``dp * micro_batch * 4 * pp`` (enough micro-batches to
        keep a 1F1B bubble at about 20%).
    seq_len : int, optional
        Defaults to the model's.
    gpu : str or GPUSpec
    dtype : {"bf16", "fp16", "fp8"}
        Dtype of the linear layers' GEMMs (FP8: Hopper and Blackwell; attention and the
        output head stay BF16, as Transformer Engine's FP8 recipe keeps them).
    kernel_table : KernelTable or path, optional
        Measured kernels (the compute model's CSV format) overriding the model's efficiency
        on this GPU.
    compute_efficiency : float, optional
        Override of the per-operation model: every block's FLOPs at this fraction of the
        dtype's tensor peak, backward twice the forward (the constant model hpnsim used
        before the per-operation one; see :class:`~hpnsim.training.cost.ConstantEfficiency`).
    mfu : float, optional
        Deprecated name of ``compute_efficiency`` (it never was MFU).
    schedule : {"", "1f1b", "interleaved", "gpipe", "zb-h1"}
        Empty: 1F1B, or interleaved 1F1B when ``virtual_stages > 1``. ``zb-h1``: zero-bubble
        H1, the backward split into input- and weight-gradient passes (not with ZeRO-3).
    virtual_stages : int
        Model chunks per stage (interleaved schedule).
    sequence_parallel : bool
        Megatron sequence parallelism: a pipeline message is split over the TP ranks (each
        sends ``1/tp`` of the hidden state); each TP all-reduce becomes a reduce-scatter
        (where the all-reduce was) and an all-gather (before the next attention or MLP), two
        collectives with the all-reduce's ring bytes.
    zero : {0, 1, 2, 3}
        0: gradient all-reduce; 1 and 2 (distributed optimizer): gradient reduce-scatter,
        optimizer on the 1/dp shard, parameter all-gather. 3 (ZeRO-3 / FSDP): parameters
        stay sharded; every FSDP unit (one transformer layer; the embedding joins the first
        layer's unit, the final norm and output head the last one's) is all-gathered before
        its forward and again before its backward, and its gradients reduce-scattered after
        its backward, every micro-batch; then the optimizer steps on the shard.
    ep : int
        Expert-parallel size (MoE models; divides ``dp`` and the number of experts).
    fsdp_prefetch : bool
        ZeRO-3: issue the next unit's all-gather when the current unit starts computing (one
        unit ahead, as FSDP's forward/backward prefetch with its rate limiter), so it
        overlaps that compute; ``False`` gathers each unit only when it is needed.
    bucket_params : int, optional
        Parameters per gradient bucket; default Megatron-LM's ``max(40e6, 1e6 * dp)``.
    overlap_grad_reduce : bool
        Reduce each gradient bucket as soon as the last micro-batch's backward has filled it,
        behind the rest of the backward (hpnsim's default). ``False`` is Megatron-Core 0.20's
        default (``DistributedDataParallelConfig.overlap_grad_reduce``): one bucket per model
        chunk, reduced after the stage's whole schedule.
    grad_bytes : int
        Bytes per gradient element on the wire (2: BF16; 4: FP32 reduction).
    cp : int
        Context-parallel size (Megatron-Core / TransformerEngine ring attention): each of ``cp``
        ranks holds ``seq_len / cp`` tokens of every micro-batch (two chunks of
        ``seq_len / 2cp``, TE's causal load balancing) and passes its keys and values around
        the CP ring, overlapped with attention (:mod:`hpnsim.training.context`). Gradients
        reduce over DP x CP. Needs ``seq_len`` divisible by ``2 * cp``; not with ``ep > 1``.
    tp_comm_overlap : bool
        Megatron-Core's ``tp_comm_overlap`` (default off; needs ``sequence_parallel``): SP's
        all-gathers and reduce-scatters pipelined with the GEMMs they feed over
        TransformerEngine userbuffers (:mod:`hpnsim.training.tp_overlap`), configured as
        ``userbuffers`` says.
    userbuffers : str
        With ``tp_comm_overlap``: the per-GEMM userbuffer configuration a recipe names (how
        each GEMM overlaps its collective and the SMs its communication kernel takes,
        :mod:`hpnsim.training.userbuffers`); default TransformerEngine's own.
    recompute : bool
        Full activation recomputation (backward re-runs the forward, TP included).
    overlap_param_gather : bool
        Megatron-Core's ``overlap_param_gather`` (default off): with the distributed optimizer
        (``zero`` 1 or 2) and ``overlap_grad_reduce``, the updated parameters are all-gathered
        during the next forward, each bucket when its first block needs it, one bucket ahead
        (:mod:`hpnsim.training.param_gather`); off, right after the optimizer step.
    selective_recompute : bool
        Megatron's selective recomputation (``--recompute-activations``: granularity
        ``selective``, module ``core_attn``): the backward re-runs each layer's core attention
        (score and value products) only. Off by default, as in Megatron-Core; not with
        ``recompute``.
    stage_layers : sequence of int, optional
        Transformer layers of each virtual stage ``u = k * pp + s`` (``pp * virtual_stages``
        counts summing to the model's layers; 0 allowed: an embedding- or head-only stage),
        as Megatron-Core's ``pipeline_model_parallel_layout``; default an even split.
    first_stage_layers, last_stage_layers : int, optional
        Megatron-Core's ``num_layers_in_first_pipeline_stage`` / ``..._last_...``.
    account_for_embedding, account_for_loss : bool
        Megatron-Core's ``account_for_embedding_in_pipeline_split`` /
        ``account_for_loss_in_pipeline_split``: the embedding (loss and head) counts as a layer
        when splitting (see :func:`hpnsim.training.stages.split_layers`).
    optimizer_bytes_per_param : float, optional
        HBM bytes the optimizer step moves per local parameter, at the datasheet HBM
        bandwidth (0 leaves the step out); default: the compute model's (Adam's bytes at the
        measured HBM efficiency, FP8 weight casts; the constant model: 28 bytes).
    megatron_core : str
        The Megatron-Core version the job runs (``"0.13"``, ``"core_v0.13.0"``; default the
        one docs/pipelines.md reads, 0.20), or a Megatron-LM release before Megatron-Core
        (``"v2.6"``): an option that version lacks is refused, naming its keyword
        (:mod:`hpnsim.training.frameworks` says which release added each).
    attention : {"flash", "cudnn", "flash2", "unfused"}, optional
        Core attention kernel (:mod:`hpnsim.training.compute.core_attention`): fused
        FlashAttention (3 on Hopper, 2 on Ampere), fused cuDNN attention (TransformerEngine's
        ``FusedAttention``, its choice on Hopper), FlashAttention-2 on any GPU (what
        TransformerEngine before v1.11 runs on Hopper with ``NVTE_FUSED_ATTN=0``), or
        Megatron's unfused core attention (scores in HBM). Default: what the
        job's Megatron version runs by default (fused from Megatron-Core 0.7, unfused before);
        a fused kernel before Megatron-LM had ``--use-flash-attn`` is refused, as is ``"unfused"``
        with ``cp > 1``.
    cross_entropy : {"unfused", "fused", "te"}, optional
        The vocab-parallel cross-entropy loss as the framework computes it
        (:mod:`hpnsim.training.compute.cross_entropy`: its passes over the logits): Megatron's
        unfused loss (the default, as in every Megatron-Core release), Megatron-Core's
        ``cross_entropy_loss_fusion`` (from 0.8), or TransformerEngine's kernels
        (``cross_entropy_fusion_impl='te'``, from 0.13).
    dropout : bool
        Megatron's ``--hidden-dropout`` and ``--attention-dropout`` at 0.1, their default
        (GPT-3 recipes), rather than 0 (Llama-style recipes; hpnsim's default): each layer's
        two hidden-state dropouts, fused into the residual adds (``bias_dropout_fusion``),
        and the attention dropout, inside a fused attention kernel at its measured cost
        (:mod:`hpnsim.training.compute.attention_dropout`; FlashAttention-3 has none) or as
        the unfused path's kernel.
    gpu_variation : float, optional
        Coefficient of variation of one GPU's compute time per step (0 leaves the straggler
        term out); default the measured :data:`~hpnsim.training.straggler.GPU_VARIATION`
        (0 with ``compute_efficiency``: the constant model's fraction folds it in).
    fp8_gemm : {"cublas", "deepgemm"}, optional
        The library whose measured FP8 GEMMs time a ``dtype="fp8"`` job's linear layers
        (:mod:`hpnsim.training.compute.gemm_library`). Default ``"cublas"``: every framework
        hpnsim models (Megatron-LM, NeMo) runs TransformerEngine's cuBLASLt GEMMs.
    fp8_recipe : {"delayed", "current"}, optional
        How a ``dtype="fp8"`` job scales its casts: ``"delayed"`` (TransformerEngine's delayed
        scaling, the default) or ``"current"`` (``Float8CurrentScaling``, Megatron-Core's
        ``--fp8-recipe tensorwise`` from 0.12: each cast's own amax pass, and under sequence
        parallelism an amax all-reduce over TP; :mod:`hpnsim.training.compute.current_scaling`).
    fp8_param_gather : bool
        Megatron-Core's ``--fp8-param-gather`` (from 0.9; needs ``dtype="fp8"`` and ``zero``
        1, 2 or 3): the transformer layers' linear weights are kept in FP8, so the
        distributed optimizer's and FSDP's parameter all-gathers move 1 byte per such
        weight instead of 2 (:mod:`hpnsim.training.fp8_params`); default False.
    rank_order : {"tp-cp-dp-pp", "tp-cp-pp-dp"}, optional
        How ranks map to GPUs, fastest dimension first
        (:data:`~hpnsim.workloads.layout.RANK_ORDERS`): ``"tp-cp-pp-dp"`` is Megatron-Core's
        ``--use-tp-pp-dp-mapping`` (from 0.7, with ``cp`` or ``ep`` > 1 from 0.11; a
        pipeline's stages on consecutive hosts, as Llama 3's [TP, CP, PP, DP]); default
        hpnsim's order (:func:`~hpnsim.workloads.placement.default_order`).
    layout : Layout, optional
        The parallel layout itself (then leave ``tp`` .. ``sequence_parallel`` and
        ``rank_order`` at their defaults). The job keeps it as ``job.layout``; ``job.tp``,
        ``job.pp``, ``job.dp``, ``job.ep``, ``job.zero``, ``job.micro_batch``,
        ``job.global_batch``, ``job.schedule``, ``job.virtual_stages`` and
        ``job.sequence_parallel`` read it.

    Examples
    --------
    >>> job = TrainJob("llama3-70b", tp=8, pp=8, dp=16, global_batch=2048)
    >>> job.gpus, job.micro_batches, job.layers_per_chunk
    (1024, 128, 10)
    >>> round(job.stage_cost(0).forward_compute * 1e3, 1)       # ms per micro-batch
    33.5
    >>> TrainJob("llama3-8b", gpu="a100", dtype="fp8")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dtype: a100 has no fp8 tensor cores; choose from tf32, bf16, fp16
    >>> from hpnsim.workloads.layout import Layout
    >>> TrainJob("llama3-8b", layout=Layout(tp=8, dp=2, global_batch=8)).micro_batches
    4
    """

    model: models.ModelSpec
    layout: Layout
    seq_len: int
    gpu: GPUSpec
    dtype: str
    compute_efficiency: float | None
    kernel_table: KernelTable | None
    fsdp_prefetch: bool
    bucket_params: int
    grad_bytes: int
    recompute: bool
    tp_comm_overlap: bool
    userbuffers: UserbufferConfig
    overlap_grad_reduce: bool
    selective_recompute: bool
    overlap_param_gather: bool
    megatron_core: tuple[int, int]
    attention: str
    cross_entropy: str
    dropout: bool
    fp8_gemm: GemmLibrary
    fp8_recipe: str
    fp8_param_gather: bool
    gpu_variation: float
    optimizer_bytes_per_param: float | None
    stage_layers: tuple[int, ...]
    _costs: dict = field(compare=False, repr=False)

    def __init__(self, model: models.ModelSpec | str, tp: int = 1, pp: int = 1, dp: int = 1,
                 micro_batch: int = 1, global_batch: int | None = None,
                 seq_len: int | None = None, gpu: GPUSpec | str = "h800",
                 mfu: float | None = None, schedule: str = "", virtual_stages: int = 1,
                 zero: int = 0, ep: int = 1, fsdp_prefetch: bool = True,
                 sequence_parallel: bool = False, bucket_params: int | None = None,
                 grad_bytes: int = 2, recompute: bool = False,
                 optimizer_bytes_per_param: float | None = None,
                 stage_layers=None, first_stage_layers: int | None = None,
                 last_stage_layers: int | None = None, account_for_embedding: bool = False,
                 account_for_loss: bool = False, tp_comm_overlap: bool = False,
                 overlap_grad_reduce: bool = True, cp: int = 1,
                 selective_recompute: bool = False, overlap_param_gather: bool = False, *,
                 layout: Layout | None = None, dtype: str = "bf16",
                 compute_efficiency: float | None = None,
                 kernel_table: KernelTable | str | Path | None = None,
                 megatron_core: str = DEFAULT_VERSION_TEXT, attention: str | None = None,
                 gpu_variation: float | None = None, fp8_gemm: str | None = None,
                 cross_entropy: str | None = None, dropout: bool = False,
                 fp8_recipe: str | None = None, fp8_param_gather: bool = False,
                 rank_order: str | None = None, userbuffers: str | None = None):
        spec = models.get(model)
        if spec.kind != "transformer":
            raise InputError("model", f"{spec.name} is a {spec.kind}; the iteration simulator "
                                      "needs a transformer (layers, hidden size)")
        parallel = dict(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, micro_batch=micro_batch,
                        virtual_stages=virtual_stages)
        check_sizes(parallel, grad_bytes, zero)
        version = parse_version(megatron_core)
        kernel = check_attention(megatron_core, attention, cp)
        set_ = object.__setattr__
        set_(self, "attention", kernel)
        set_(self, "cross_entropy", check_cross_entropy(version, cross_entropy))
        set_(self, "dropout", true_or_false("dropout", dropout))
        set_(self, "fp8_gemm", gemm_library(fp8_gemm))
        set_(self, "model", spec)
        if mfu is not None:
            warnings.warn("TrainJob(mfu=...) is deprecated: it is the fraction of peak every "
                          "kernel reaches, now compute_efficiency=...", DeprecationWarning,
                          stacklevel=2)
            if compute_efficiency is not None:
                raise InputError("mfu", "give compute_efficiency only (mfu is its old name)")
            compute_efficiency = mfu
        for name, value in zip(("gpu", "dtype", "compute_efficiency", "kernel_table"),
                               compute_settings(get_gpu(gpu), dtype, compute_efficiency,
                                                kernel_table), strict=True):
            set_(self, name, value)
        set_(self, "fp8_recipe", check_fp8_recipe(version, self.dtype, fp8_recipe))
        set_(self, "gpu_variation", self.compute_model.gpu_variation if gpu_variation is None
             else straggler_variation(gpu_variation))
        set_(self, "seq_len", spec.seq_len if seq_len is None else seq_len)
        if dropout and kernel != "unfused" and self.compute_model.name == "operations":
            fused_dropout_factor(self.gpu, kernel, self.seq_len)   # refused before any work
        uneven = (stage_layers is not None or first_stage_layers is not None
                  or last_stage_layers is not None or account_for_embedding or account_for_loss)
        layout = job_layout(spec, layout, parallel, zero=zero, global_batch=global_batch,
                            schedule=schedule, sequence_parallel=sequence_parallel,
                            uneven=uneven, rank_order=rank_order)
        check_combinations(layout, self.seq_len, tp_comm_overlap=tp_comm_overlap,
                           overlap_grad_reduce=overlap_grad_reduce,
                           selective_recompute=selective_recompute, recompute=recompute,
                           overlap_param_gather=overlap_param_gather)
        check_framework(version, options_used(
            layout, recompute=recompute, selective_recompute=selective_recompute,
            overlap_grad_reduce=overlap_grad_reduce, tp_comm_overlap=tp_comm_overlap,
            overlap_param_gather=overlap_param_gather, first_stage_layers=first_stage_layers,
            last_stage_layers=last_stage_layers, account_for_embedding=account_for_embedding,
            account_for_loss=account_for_loss, stage_layers=stage_layers))
        set_(self, "fp8_param_gather", check_fp8_param_gather(version, self.dtype, layout.zero,
                                                              fp8_param_gather))
        set_(self, "megatron_core", version)
        set_(self, "tp_comm_overlap", bool(tp_comm_overlap))
        if userbuffers is not None and not tp_comm_overlap:
            raise InputError("userbuffers", "configures tp_comm_overlap's userbuffers: give "
                                            "tp_comm_overlap too")
        set_(self, "userbuffers", get_userbuffers(userbuffers))
        set_(self, "overlap_grad_reduce", bool(overlap_grad_reduce))
        set_(self, "selective_recompute", bool(selective_recompute))
        set_(self, "overlap_param_gather", bool(overlap_param_gather))
        set_(self, "layout", layout)
        set_(self, "stage_layers", split_layers(
            spec.layers, layout.pp, layout.vpp, first=first_stage_layers, last=last_stage_layers,
            embedding=account_for_embedding, loss=account_for_loss,
            given=None if stage_layers is None else tuple(stage_layers)))
        set_(self, "fsdp_prefetch", fsdp_prefetch)
        set_(self, "recompute", recompute)
        set_(self, "grad_bytes", grad_bytes)
        set_(self, "optimizer_bytes_per_param", optimizer_bytes_per_param)
        set_(self, "_costs", {})
        if bucket_params is None:
            bucket_params = int(max(40e6, 1e6 * layout.dp))
        set_(self, "bucket_params", bucket_params)
        if optimizer_bytes_per_param is not None and not optimizer_bytes_per_param >= 0:
            raise InputError("optimizer_bytes_per_param",
                             f"must be >= 0, got {optimizer_bytes_per_param!r}")
        if bucket_params < 1:
            raise InputError("bucket_params", f"must be >= 1, got {bucket_params}")
        check_fits(spec, self.gpu, layout.micro_batch, self.seq_len)

    @property
    def mfu(self) -> float | None:
        """Deprecated: :attr:`compute_efficiency`."""
        return self.compute_efficiency

    @property
    def compute_model(self) -> OperationModel | ConstantEfficiency:
        """The strategy timing this job's kernels: the per-operation model, or the constant
        efficiency (given, or the GPU's ``mfu`` for a spec without the compute fields)."""
        return compute_model(self.gpu, self.dtype, self.compute_efficiency, self.kernel_table,
                             self.fp8_gemm, self.fp8_recipe)

    # ----- the layout's sizes, read-only -------------------------------------------------
    tp = property(lambda self: self.layout.tp, doc="Tensor-parallel size.")
    pp = property(lambda self: self.layout.pp, doc="Pipeline-parallel size.")
    dp = property(lambda self: self.layout.dp, doc="Data-parallel size.")
    ep = property(lambda self: self.layout.ep, doc="Expert-parallel size.")
    zero = property(lambda self: self.layout.zero, doc="ZeRO stage.")
    micro_batch = property(lambda self: self.layout.micro_batch, doc="Sequences per micro-batch.")
    global_batch = property(lambda self: self.layout.global_batch, doc="Sequences per iteration.")
    schedule = property(lambda self: self.layout.schedule, doc="Pipeline schedule.")
    virtual_stages = property(lambda self: self.layout.vpp, doc="Model chunks per stage.")
    sequence_parallel = property(lambda self: self.layout.sequence_parallel,
                                 doc="Megatron sequence parallelism.")

    # ----- sizes -----------------------------------------------------------------------
    @property
    def gpus(self) -> int:
        """GPUs of the job: ``tp * cp * pp * dp``."""
        return self.layout.n_gpus

    @property
    def cp(self) -> int:
        """Context-parallel size."""
        return self.layout.cp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per iteration."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def chunks(self) -> int:
        """Virtual stages: ``pp * virtual_stages``."""
        return self.pp * self.virtual_stages

    @property
    def layers_per_chunk(self) -> int:
        """Transformer layers per virtual stage (the most any holds, with an uneven split)."""
        return max(self.stage_layers)

    def chunk_layers(self, chunk: int) -> range:
        """Indices of the transformer layers of virtual stage ``chunk``.

        >>> TrainJob("llama3-8b", pp=2, stage_layers=(12, 20)).chunk_layers(1)
        range(12, 32)
        """
        return layer_ranges(self.stage_layers)[chunk]

    @property
    def tokens_per_iteration(self) -> int:
        """Tokens per iteration: ``global_batch * seq_len``."""
        return self.global_batch * self.seq_len

    @property
    def model_flops(self) -> float:
        """Model FLOPs per iteration (3x forward; recomputation is not model work)."""
        return self.model.training_flops_per_token(self.seq_len) * self.tokens_per_iteration

    @property
    def activation_bytes(self) -> float:
        """One micro-batch's hidden state on one CP rank, ``b x s/cp x h`` (a TP all-reduce
        buffer)."""
        return self.model.hidden_state_bytes(self.micro_batch, self.seq_len) / self.cp

    @property
    def kv_bytes(self) -> float:
        """Keys and values of one layer on one GPU, what a ring-attention step passes on:
        ``2 x b x s/cp x kv_heads/tp x head_dim`` (KV heads replicated when fewer than tp).

        >>> TrainJob("llama3-8b", tp=8, cp=2).kv_bytes / 2**20   # K, V x 4096 tokens x 128 x 2 B
        2.0
        """
        spec = self.model
        heads = max(spec.kv_heads / self.tp, 1.0)
        return (2.0 * self.micro_batch * self.seq_len / self.cp * heads * spec.head_dim
                * spec.dtype_bytes)

    def to_dict(self) -> dict:
        """Job description for JSON output."""
        return {
            "model": self.model.name, "tp": self.tp, "pp": self.pp, "dp": self.dp,
            "ep": self.ep, **({"cp": self.cp} if self.cp > 1 else {}), "gpus": self.gpus,
            "micro_batch": self.micro_batch,
            "global_batch": self.global_batch,
            "micro_batches": self.micro_batches, "seq_len": self.seq_len,
            "gpu": self.gpu.name, "dtype": self.dtype, "compute_model": self.compute_model.name,
            "compute_efficiency": self.compute_efficiency,
            "kernel_table": self.kernel_table.source if self.kernel_table else None,
            "compute_by_class": [self.compute_by_class(s) for s in range(self.pp)],
            "schedule": self.schedule,
            "virtual_stages": self.virtual_stages, "zero": self.zero,
            "fsdp_prefetch": self.fsdp_prefetch,
            "bucket_params": self.bucket_params, "grad_bytes": self.grad_bytes,
            "sequence_parallel": self.sequence_parallel, "recompute": self.recompute,
            **({"tp_comm_overlap": True} if self.tp_comm_overlap else {}),
            **({"userbuffers": self.userbuffers.name}
               if self.userbuffers.name != DEFAULT_USERBUFFERS else {}),
            **({} if self.overlap_grad_reduce else {"overlap_grad_reduce": False}),
            **({"selective_recompute": True} if self.selective_recompute else {}),
            **({"overlap_param_gather": True} if self.overlap_param_gather else {}),
            **({"megatron_core": ".".join(map(str, self.megatron_core))}
               if self.megatron_core != MEGATRON_CORE_DEFAULT else {}),
            **({"attention": self.attention}
               if self.attention != job_attention(self.megatron_core, None, self.cp) else {}),
            **({"cross_entropy": self.cross_entropy}
               if self.cross_entropy != DEFAULT_CROSS_ENTROPY else {}),
            **({"dropout": True} if self.dropout else {}),
            **({"fp8_gemm": self.fp8_gemm.value}
               if self.fp8_gemm is not DEFAULT_LIBRARY else {}),
            **({"fp8_recipe": self.fp8_recipe} if self.fp8_recipe != "delayed" else {}),
            **({"fp8_param_gather": True} if self.fp8_param_gather else {}),
            **({"gpu_variation": self.gpu_variation}
               if self.gpu_variation != self.compute_model.gpu_variation else {}),
            **({"stage_layers": list(self.stage_layers)}
               if len(set(self.stage_layers)) > 1 else {}),
        }
