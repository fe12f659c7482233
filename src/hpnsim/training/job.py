"""A training job as the iteration simulator sees it: model, parallelism, batch, GPU.

:class:`TrainJob` validates the layout and derives, per *virtual stage* (a contiguous
chunk of layers held by one pipeline stage), what one micro-batch costs: forward and
backward compute time, TP all-reduce and EP all-to-all counts, gradient parameters per
GPU (dense ones, synchronized over DP, and routed-expert ones, synchronized over the
expert-data-parallel group), and the per-block split of the passes that decides when
gradient buckets become ready and what one ZeRO-3 / FSDP unit gathers.

Expert parallelism (Megatron-LM convention): ``ep`` consecutive DP ranks split the routed
experts of every MoE layer, each holding ``experts / ep`` of them (expert weights are also
split over TP). Per MoE layer and micro-batch a GPU dispatches its routed tokens to the
experts' owners with one all-to-all and gets their outputs back with a second (combine);
backward does the same with the gradients. Its send buffer is

    routed tokens x top_k x hidden x dtype bytes,   routed tokens = micro_batch x seq_len
    (/ tp with sequence parallelism, where each TP rank routes its own slice),

and with uniform routing a ``1/ep`` share of it goes to the GPU itself, so each GPU puts
``(ep - 1) / ep`` of the buffer on the wire per all-to-all (what
:func:`hpnsim.workloads.traffic.iteration_traffic` counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpnsim.errors import InputError
from hpnsim.workloads import models
from hpnsim.workloads.gpus import GPUSpec, get_gpu
from hpnsim.workloads.layout import Layout, check_layout, make_layout

ZERO_STAGES = (0, 1, 2, 3)
#: HBM bytes the mixed-precision Adam step moves per parameter: fp32 master weight, m and v
#: read and written (2 x 12), the 16-bit gradient read (2) and the 16-bit weight written (2).
OPTIMIZER_BYTES_PER_PARAM = 28.0


@dataclass(frozen=True)
class Block:
    """One block of a virtual stage (a transformer layer, the embedding or the output head),
    per GPU and per micro-batch: compute seconds, blocking TP all-reduces and EP all-to-alls
    of each pass, and the parameters it holds (dense ones; routed-expert ones apart when
    ``ep > 1``, as they synchronize over another group)."""

    name: str
    forward_compute: float
    backward_compute: float
    forward_tp_ops: int
    backward_tp_ops: int
    forward_ep_ops: int
    backward_ep_ops: int
    dense_params: float
    expert_params: float
    forward_attention: float = 0.0  # the attention part of forward_compute (the rest: MLP)


@dataclass(frozen=True)
class StageCost:
    """Cost of one micro-batch on one virtual stage (per GPU; every GPU of the stage alike).

    ``blocks`` lists the :class:`Block` s in *backward* execution order (output head first,
    embedding last); gradients of a block are ready when its backward finishes. The
    ``blocks_*`` tuples are the same, field by field (backward compute, TP all-reduces,
    dense parameters).
    """

    forward_compute: float
    backward_compute: float
    forward_tp_ops: int
    backward_tp_ops: int
    forward_ep_ops: int
    backward_ep_ops: int
    params_per_gpu: float
    expert_params_per_gpu: float
    blocks: tuple[Block, ...]

    @property
    def blocks_compute(self) -> tuple[float, ...]:
        return tuple(b.backward_compute for b in self.blocks)

    @property
    def blocks_tp_ops(self) -> tuple[int, ...]:
        return tuple(b.backward_tp_ops for b in self.blocks)

    @property
    def blocks_params(self) -> tuple[float, ...]:
        return tuple(b.dense_params for b in self.blocks)


@dataclass(frozen=True, init=False)
class TrainJob:
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
    mfu : float, optional
        Achievable fraction of peak during compute (default: the GPU's).
    schedule : {"", "1f1b", "interleaved", "gpipe"}
        Empty: 1F1B, or interleaved 1F1B when ``virtual_stages > 1``.
    virtual_stages : int
        Model chunks per stage (interleaved schedule).
    sequence_parallel : bool
        Megatron sequence parallelism: a pipeline message is split over the TP ranks (each
        sends ``1/tp`` of the hidden state); TP all-reduces become reduce-scatter + all-gather
        pairs, which move the same bytes and are timed as the all-reduce.
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
    grad_bytes : int
        Bytes per gradient element on the wire (2: BF16; 4: FP32 reduction).
    recompute : bool
        Full activation recomputation (backward re-runs the forward, TP included).
    optimizer_bytes_per_param : float
        HBM bytes the optimizer step moves per local parameter (0 leaves the step out).
    layout : Layout, optional
        The parallel layout itself (then leave ``tp`` .. ``sequence_parallel`` at their
        defaults). The job keeps it as ``job.layout``; ``job.tp``, ``job.pp``, ``job.dp``,
        ``job.ep``, ``job.zero``, ``job.micro_batch``, ``job.global_batch``,
        ``job.schedule``, ``job.virtual_stages`` and ``job.sequence_parallel`` read it.

    Examples
    --------
    >>> job = TrainJob("llama3-70b", tp=8, pp=8, dp=16, global_batch=2048)
    >>> job.gpus, job.micro_batches, job.layers_per_chunk
    (1024, 128, 10)
    >>> round(job.stage_cost(0).forward_compute * 1e3, 1)       # ms per micro-batch
    45.5
    >>> from hpnsim.workloads.layout import Layout
    >>> TrainJob("llama3-8b", layout=Layout(tp=8, dp=2, global_batch=8)).micro_batches
    4
    """

    model: models.ModelSpec
    layout: Layout
    seq_len: int
    gpu: GPUSpec
    mfu: float | None
    fsdp_prefetch: bool
    bucket_params: int
    grad_bytes: int
    recompute: bool
    optimizer_bytes_per_param: float
    _costs: dict = field(compare=False, repr=False)

    def __init__(self, model: models.ModelSpec | str, tp: int = 1, pp: int = 1, dp: int = 1,
                 micro_batch: int = 1, global_batch: int | None = None,
                 seq_len: int | None = None, gpu: GPUSpec | str = "h800",
                 mfu: float | None = None, schedule: str = "", virtual_stages: int = 1,
                 zero: int = 0, ep: int = 1, fsdp_prefetch: bool = True,
                 sequence_parallel: bool = False, bucket_params: int | None = None,
                 grad_bytes: int = 2, recompute: bool = False,
                 optimizer_bytes_per_param: float = OPTIMIZER_BYTES_PER_PARAM, *,
                 layout: Layout | None = None):
        spec = models.get(model)
        if spec.kind != "transformer":
            raise InputError("model", f"{spec.name} is a {spec.kind}; the iteration simulator "
                                      "needs a transformer (layers, hidden size)")
        parallel = dict(tp=tp, pp=pp, dp=dp, ep=ep, micro_batch=micro_batch,
                        virtual_stages=virtual_stages)
        for name, value in (*parallel.items(), ("grad_bytes", grad_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(name, f"must be a positive integer, got {value!r}")
        if zero not in ZERO_STAGES:
            raise InputError("zero", f"one of {', '.join(map(str, ZERO_STAGES))}, got {zero!r}")
        set_ = object.__setattr__
        set_(self, "model", spec)
        set_(self, "gpu", get_gpu(gpu, mfu=mfu))
        set_(self, "mfu", mfu)
        set_(self, "seq_len", spec.seq_len if seq_len is None else seq_len)
        if layout is None:
            if global_batch is None:
                global_batch = dp * micro_batch * 4 * pp
            layout = make_layout(spec, tp=tp, pp=pp, dp=dp, ep=ep, vpp=virtual_stages,
                                 zero=zero, sequence_parallel=sequence_parallel,
                                 micro_batch=micro_batch, global_batch=global_batch,
                                 schedule=schedule, gpus_per_host=None)
        else:
            given = {k: v for k, v in (*parallel.items(), ("zero", zero),
                                       ("global_batch", global_batch), ("schedule", schedule),
                                       ("sequence_parallel", sequence_parallel))
                     if v != {"global_batch": None, "schedule": "", "zero": 0,
                              "sequence_parallel": False}.get(k, 1)}
            if given:
                raise InputError("layout", f"give the parallel sizes either in the layout or "
                                           f"as arguments, not both (got {', '.join(given)})")
            if not isinstance(layout, Layout):
                raise InputError("layout", f"must be a Layout, got {type(layout).__name__}")
            if layout.cp != 1:
                raise InputError("cp", f"context parallelism is not simulated, got {layout.cp}")
            check_layout(layout, spec, gpus_per_host=None)
        set_(self, "layout", layout)
        set_(self, "fsdp_prefetch", fsdp_prefetch)
        set_(self, "recompute", recompute)
        set_(self, "grad_bytes", grad_bytes)
        set_(self, "optimizer_bytes_per_param", optimizer_bytes_per_param)
        set_(self, "_costs", {})
        if bucket_params is None:
            bucket_params = int(max(40e6, 1e6 * layout.dp))
        set_(self, "bucket_params", bucket_params)
        if not optimizer_bytes_per_param >= 0:
            raise InputError("optimizer_bytes_per_param",
                             f"must be >= 0, got {optimizer_bytes_per_param!r}")
        if bucket_params < 1:
            raise InputError("bucket_params", f"must be >= 1, got {bucket_params}")
        self._check_fits()

    def _check_fits(self) -> None:
        """Refuse a job whose smallest activation cannot sit on its GPU: the ``b x s x h``
        hidden state of one micro-batch is whole on every GPU of a stage (the TP all-reduce
        buffer; with sequence parallelism, the all-gathered GEMM input), so past the GPU's
        memory no schedule runs it (``--seq-len 1e9`` reported a 490,679-hour iteration)."""
        try:
            need = self.model.hidden_state_bytes(self.layout.micro_batch, self.seq_len)
        except InputError:   # not a transformer: no b x s x h tensor
            return
        if need > self.gpu.memory_bytes:
            alone = need / self.seq_len * self.model.seq_len   # at the model's own seq_len
            field = "micro_batch" if alone > self.gpu.memory_bytes else "seq_len"
            raise InputError(field, f"one micro-batch's hidden state (micro_batch "
                                        f"{self.layout.micro_batch} x seq_len {self.seq_len:,} x "
                                        f"hidden {self.model.hidden:,} x {self.model.dtype_bytes:g} "
                                        f"bytes = {need / 2**30:,.1f} GiB) is more than the "
                                        f"{self.gpu.memory_bytes / 2**30:,.1f} GiB of a "
                                        f"{self.gpu.name}; lower seq_len or micro_batch")

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
        """GPUs of the job: ``tp * pp * dp``."""
        return self.tp * self.pp * self.dp

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
        """Transformer layers per virtual stage."""
        return self.model.layers // self.chunks

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
        """One micro-batch's hidden state ``b x s x h`` (a TP all-reduce buffer)."""
        return self.model.hidden_state_bytes(self.micro_batch, self.seq_len)

    # ----- costs -----------------------------------------------------------------------
    def stage_cost(self, chunk: int) -> StageCost:
        """Per-micro-batch cost of virtual stage ``chunk`` (0 .. chunks-1), per GPU.

        >>> job = TrainJob("llama3-8b", tp=1, pp=2, dp=1)
        >>> c0, c1 = job.stage_cost(0), job.stage_cost(1)
        >>> c1.forward_compute > c0.forward_compute       # the output head sits on the last stage
        True
        >>> len(c1.blocks_compute), len(c0.blocks_compute)   # head + 16 layers; 16 layers + embedding
        (17, 17)
        """
        if not 0 <= chunk < self.chunks:
            raise InputError("chunk", f"must be in 0..{self.chunks - 1}, got {chunk}")
        if chunk not in self._costs:
            self._costs[chunk] = self._stage_cost(chunk)
        return self._costs[chunk]

    def _stage_cost(self, chunk: int) -> StageCost:
        spec, tp = self.model, self.tp
        tokens = self.micro_batch * self.seq_len
        rate = self.gpu.achieved_flops
        backward_factor = 3.0 if self.recompute else 2.0
        # Megatron TP: per layer, the attention and MLP outputs are all-reduced in forward and
        # their inputs' gradients in backward; recomputation replays the forward pair (and
        # the MoE dispatch/combine all-to-alls).
        tp_fwd, tp_bwd = (2, 4 if self.recompute else 2) if tp > 1 else (0, 0)
        ep_fwd, ep_bwd = (2, 4 if self.recompute else 2) if self.ep > 1 else (0, 0)
        expert_width = spec.mlp_parameters(spec.expert_ffn) if spec.is_moe else 0
        first = chunk * self.layers_per_chunk
        blocks: list[Block] = []
        for layer in range(first, first + self.layers_per_chunk):
            seconds = spec.layer_forward_flops_per_token(layer, self.seq_len) * tokens / tp / rate
            attention = _attention_flops_per_token(spec, self.seq_len) * tokens / tp / rate
            params = spec.layer_parameters(layer) / tp
            moe = spec.is_moe_layer(layer)
            expert = spec.experts * expert_width / tp if moe and self.ep > 1 else 0.0
            blocks.append(Block(f"layer{layer}", seconds, backward_factor * seconds,
                                tp_fwd, tp_bwd, ep_fwd if moe else 0, ep_bwd if moe else 0,
                                params - expert, expert / self.ep, attention))
        table = spec.vocab * spec.hidden / tp
        if chunk == self.chunks - 1:  # final norm and output head (untied) on the last chunk
            head = spec.head_forward_flops_per_token() * tokens / tp / rate
            blocks.append(Block("head", head, backward_factor * head, 0, 0, 0, 0,
                                (0 if spec.tied_embeddings else table) + spec.hidden, 0.0))
        if chunk == 0:  # embedding lookup: no matmul, its gradient is ready last
            positions = spec.seq_len * spec.hidden / tp if spec.learned_positions else 0
            blocks.insert(0, Block("embedding", 0.0, 0.0, 0, 0, 0, 0, table + positions, 0.0))
        blocks.reverse()  # backward order
        return StageCost(
            forward_compute=sum(b.forward_compute for b in blocks),
            backward_compute=sum(b.backward_compute for b in blocks),
            forward_tp_ops=sum(b.forward_tp_ops for b in blocks),
            backward_tp_ops=sum(b.backward_tp_ops for b in blocks),
            forward_ep_ops=sum(b.forward_ep_ops for b in blocks),
            backward_ep_ops=sum(b.backward_ep_ops for b in blocks),
            params_per_gpu=sum(b.dense_params for b in blocks),
            expert_params_per_gpu=sum(b.expert_params for b in blocks),
            blocks=tuple(blocks),
        )

    def fsdp_units(self, chunk: int) -> list[Block]:
        """ZeRO-3 / FSDP units of virtual stage ``chunk`` in *forward* order: one per
        transformer layer, the embedding merged into the first layer's unit and the output
        head (with the final norm) into the last one's, as FSDP wraps them with their
        neighbours rather than gathering a unit that has no compute to hide behind.

        >>> job = TrainJob("llama3-8b", dp=2, zero=3)
        >>> units = job.fsdp_units(0)
        >>> len(units), units[0].name, units[-1].name
        (32, 'embedding+layer0', 'layer31+head')
        >>> round(sum(u.dense_params for u in units)) == job.model.num_parameters()
        True
        """
        forward = list(reversed(self.stage_cost(chunk).blocks))
        merged: list[Block] = []
        for block in forward:
            if merged and (merged[-1].name == "embedding" or block.name == "head"):
                a = merged.pop()
                block = Block(f"{a.name}+{block.name}",
                              *(getattr(a, f) + getattr(block, f) for f in _BLOCK_SUMS))
            merged.append(block)
        return merged

    @property
    def edp(self) -> int:
        """Expert-data-parallel size: replicas of each expert shard (``dp / ep``)."""
        return self.dp // self.ep

    @property
    def ep_buffer_bytes(self) -> float:
        """One GPU's all-to-all send buffer per MoE layer and micro-batch (bytes): routed
        tokens x top_k x hidden x dtype bytes (see the module docstring).

        >>> TrainJob("mixtral-8x7b", dp=8, ep=8, seq_len=4096).ep_buffer_bytes
        67108864.0
        """
        spec = self.model
        tokens = self.micro_batch * self.seq_len / (self.tp if self.sequence_parallel else 1)
        return float(tokens * spec.top_k * spec.hidden * spec.dtype_bytes)

    def stage_params(self, stage: int, expert: bool = False) -> float:
        """Parameters held by one GPU of pipeline stage ``stage`` (all its chunks): the dense
        ones, or with ``expert=True`` the routed-expert ones (0 unless ``ep > 1``).

        >>> round(TrainJob("llama3-70b", tp=8, pp=8, dp=16).stage_params(0) / 1e9, 3)
        1.201
        """
        field_ = "expert_params_per_gpu" if expert else "params_per_gpu"
        return sum(getattr(self.stage_cost(k * self.pp + stage), field_)
                   for k in range(self.virtual_stages))

    def optimizer_time(self, stage: int) -> float:
        """Adam step on one GPU of ``stage``: memory-bound; ZeRO shards the dense parameters
        over ``dp`` and the expert ones over the expert-data-parallel group."""
        dense, expert = self.stage_params(stage), self.stage_params(stage, expert=True)
        params = dense / self.dp + expert / self.edp if self.zero else dense + expert
        return params * self.optimizer_bytes_per_param / self.gpu.memory_bandwidth

    def buckets(self, chunk: int, expert: bool = False) -> list[tuple[float, int]]:
        """Gradient buckets of virtual stage ``chunk``: ``(parameters, block index)`` each,
        in launch order; a bucket is ready when backward block ``block index`` finishes.
        Dense and routed-expert parameters fill separate buckets (``expert``), as Megatron's
        separate expert gradient buffer.

        >>> job = TrainJob("llama3-8b", tp=1, pp=1, dp=2, bucket_params=10**12)
        >>> [(round(p / 1e9, 2), b) for p, b in job.buckets(0)]
        [(8.03, 33)]
        """
        blocks = self.stage_cost(chunk).blocks
        out: list[tuple[float, int]] = []
        filled = 0.0
        size = float(self.bucket_params)
        for index, block in enumerate(blocks):
            filled += block.expert_params if expert else block.dense_params
            while filled >= size:
                out.append((size, index))
                filled -= size
        if filled > 0:
            out.append((filled, len(blocks) - 1))
        return out

    def to_dict(self) -> dict:
        """Job description for JSON output."""
        return {
            "model": self.model.name, "tp": self.tp, "pp": self.pp, "dp": self.dp,
            "ep": self.ep, "gpus": self.gpus, "micro_batch": self.micro_batch,
            "global_batch": self.global_batch,
            "micro_batches": self.micro_batches, "seq_len": self.seq_len,
            "gpu": self.gpu.name, "mfu_compute": self.gpu.mfu, "schedule": self.schedule,
            "virtual_stages": self.virtual_stages, "zero": self.zero,
            "fsdp_prefetch": self.fsdp_prefetch,
            "bucket_params": self.bucket_params, "grad_bytes": self.grad_bytes,
            "sequence_parallel": self.sequence_parallel, "recompute": self.recompute,
        }


_BLOCK_SUMS = ("forward_compute", "backward_compute", "forward_tp_ops", "backward_tp_ops",
               "forward_ep_ops", "backward_ep_ops", "dense_params", "expert_params",
               "forward_attention")


def _attention_flops_per_token(spec: models.ModelSpec, seq_len: int) -> float:
    """Forward FLOPs per token of a layer's attention: Q, K, V, O projections and the
    score and value products (the part of ``layer_forward_flops_per_token`` before the MLP).

    >>> m = models.get("gpt3-175b")
    >>> _attention_flops_per_token(m, 2048) == 8 * 12288**2 + 4 * 2048 * 12288
    True
    """
    q = spec.heads * spec.head_dim
    kv = spec.kv_heads * spec.head_dim
    return float(2 * (2 * spec.hidden * q + 2 * spec.hidden * kv) + 4 * seq_len * q)
