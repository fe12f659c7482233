"""What one micro-batch costs on one virtual stage: blocks filled by a compute model.

A virtual stage is a list of :class:`Block` s (the embedding, transformer layers, the output
head), each with its forward and backward kernel seconds split the way the program builder
issues them (the attention sub-layer and the MLP; input- and weight-gradient apart), its
blocking TP all-reduce and EP all-to-all counts, its parameters, and its seconds per
operation class (GEMM, attention, memory-bound) for the report. Two compute models fill them
(strategies, :data:`COMPUTE_MODELS`; each method takes the
:class:`~hpnsim.training.job.TrainJob` as ``job``):

- :class:`OperationModel` (the default): every kernel timed from its shape on its GPU by
  :mod:`hpnsim.training.compute` (GEMM roofline with tile/wave/K quantization, fused
  attention, memory-bound kernels at HBM bandwidth), optionally overridden by a measured
  :class:`~hpnsim.training.compute.KernelTable`; the optimizer step from its bytes
  (:func:`~hpnsim.training.compute.step_ops`).
- :class:`ConstantEfficiency`: the model before the per-operation one, kept as an explicit
  override: a block's forward is its catalog FLOPs / (tensor peak x ``efficiency``), its
  backward twice that, the optimizer ``params x bytes / HBM bandwidth``. Also what a user
  :class:`~hpnsim.workloads.gpus.GPUSpec` without the compute fields gets, at its ``mfu``.

Recomputation (:data:`RECOMPUTE`): ``"full"`` replays a layer's whole forward in its backward
(Megatron ``--recompute-granularity full``), TP and EP collectives included; a new policy
(selective: only the attention core) adds a branch to :func:`recomputed_seconds`.

>>> from hpnsim.training.job import TrainJob
>>> job = TrainJob("llama3-8b", seq_len=8192)
>>> layer = job.stage_cost(0).blocks[1]          # backward order: head, layer31, ...
>>> layer.name, round(layer.forward_compute * 1e3, 2), round(layer.backward_compute * 1e3, 2)
('layer31', 6.66, 13.85)
>>> round(layer.gemm + layer.attention + layer.memory + layer.gaps, 12) == round(
...     layer.forward_compute + layer.backward_compute, 12)
True
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from hpnsim.errors import InputError
from hpnsim.training.compute import KernelTable, OpList, head_ops, layer_ops, step_ops
from hpnsim.training.compute import embedding_ops as _embedding_ops
from hpnsim.training.compute.amax_reduction import amax_group, amax_reduction_ops
from hpnsim.training.compute.contention import Launch, slowdown
from hpnsim.training.compute.current_scaling import fp8_recipe_for
from hpnsim.training.compute.gemm_library import GemmLibrary, gemm_library
from hpnsim.training.compute.overhead import pass_gaps
from hpnsim.training.straggler import GPU_VARIATION

#: Operation classes of compute in a report: GEMMs, attention, memory-bound kernels, and the
#: time between kernels (dispatch gaps, a host slower than its kernels).
OP_CLASSES = ("gemm", "attention", "memory", "gaps")
#: Activation recomputation policies: none, or the whole layer forward replayed in backward.
RECOMPUTE = ("none", "full")
#: Compute models (strategies filling the blocks).
COMPUTE_MODELS = ("operations", "constant")
#: Dtypes a job's linear layers may run in.
DTYPES = ("bf16", "fp16", "fp8")
#: HBM bytes the constant model's Adam step moves per parameter: fp32 master weight, m and v
#: read and written (2 x 12), the 16-bit gradient read (2) and the 16-bit weight written (2).
CONSTANT_OPTIMIZER_BYTES = 28.0
# ops of a layer's attention sub-layer (the rest, from ``mlp_norm`` on, is the MLP)
_ATTENTION_PART = frozenset(("input_norm", "qkv", "rotary", "attention", "o_proj",
                             "attention_dropout", "attention_residual"))


@dataclass(frozen=True)
class Block:
    """One block of a virtual stage (a transformer layer, the embedding or the output head),
    per GPU and per micro-batch.

    ``forward_compute`` / ``backward_compute``: kernel seconds of each pass (backward with the
    recomputed forward, if any); ``forward_attention``: the attention sub-layer's share of the
    forward (the rest is the MLP, or the whole head); ``attention_ig`` / ``attention_wg`` /
    ``mlp_ig`` / ``mlp_wg``: the backward's input- and weight-gradient kernels of each part
    (the head's in ``mlp_*``), without recomputation; ``gemm``, ``attention``, ``memory``,
    ``gaps``: the block's seconds (both passes, recomputation included) per operation class. TP all-reduce
    and EP all-to-all counts per pass; dense parameters, routed-expert ones apart when
    ``ep > 1`` (they synchronize over another group).
    """

    name: str
    forward_compute: float
    backward_compute: float
    forward_tp_ops: int
    backward_tp_ops: int
    forward_ep_ops: int
    backward_ep_ops: int
    dense_params: float
    expert_params: float
    forward_attention: float = 0.0
    attention_ig: float = 0.0
    attention_wg: float = 0.0
    mlp_ig: float = 0.0
    mlp_wg: float = 0.0
    gemm: float = 0.0
    attention: float = 0.0
    memory: float = 0.0
    gaps: float = 0.0

    @property
    def classes(self) -> dict[str, float]:
        """Seconds per operation class (both passes): ``gemm``, ``attention``, ``memory``,
        ``gaps``."""
        return {"gemm": self.gemm, "attention": self.attention, "memory": self.memory,
                "gaps": self.gaps}


#: Block fields that add up when blocks merge (FSDP units).
BLOCK_SUMS = tuple(f.name for f in fields(Block) if f.name != "name")


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

    @classmethod
    def of(cls, blocks: list[Block]) -> StageCost:
        """The stage of ``blocks`` (backward order), its totals summed."""
        return cls(*(sum(getattr(b, f) for b in blocks) for f in (
            "forward_compute", "backward_compute", "forward_tp_ops", "backward_tp_ops",
            "forward_ep_ops", "backward_ep_ops", "dense_params", "expert_params")),
            blocks=tuple(blocks))

    @property
    def blocks_compute(self) -> tuple[float, ...]:
        return tuple(b.backward_compute for b in self.blocks)

    @property
    def blocks_tp_ops(self) -> tuple[int, ...]:
        return tuple(b.backward_tp_ops for b in self.blocks)

    @property
    def blocks_params(self) -> tuple[float, ...]:
        return tuple(b.dense_params for b in self.blocks)

    @property
    def classes(self) -> dict[str, float]:
        """Seconds per operation class of one micro-batch (forward and backward)."""
        return {k: sum(b.classes[k] for b in self.blocks) for k in OP_CLASSES}


def recomputed_seconds(forward: OpList, policy: str) -> OpList:
    """The forward ops a backward replays under recomputation ``policy``.

    >>> from hpnsim.training.compute import Op
    >>> ops = OpList((Op("qkv", "gemm", "forward", (1, 1, 1), "bf16", 2.0, 6.0, 1e-6),))
    >>> len(recomputed_seconds(ops, "full")), len(recomputed_seconds(ops, "none"))
    (1, 0)
    """
    if policy == "full":
        return OpList(forward.select(phase="forward"))
    if policy == "none":
        return OpList(())
    raise InputError("recompute", f"one of {', '.join(RECOMPUTE)}, got {policy!r}")


def _counts(job, moe: bool) -> tuple[int, int, int, int]:
    # Megatron TP: per layer, the attention and MLP outputs are all-reduced in forward and
    # their inputs' gradients in backward; recomputation replays the forward pair (and the
    # MoE dispatch/combine all-to-alls).
    again = 2 if job.recompute else 0
    tp_fwd, tp_bwd = (2, 2 + again) if job.tp > 1 else (0, 0)
    ep_fwd, ep_bwd = (2, 2 + again) if job.ep > 1 and moe else (0, 0)
    return tp_fwd, tp_bwd, ep_fwd, ep_bwd


def _params(job, layer: int) -> tuple[float, float]:
    spec = job.model
    params = spec.layer_parameters(layer) / job.tp
    moe = spec.is_moe_layer(layer)
    width = spec.mlp_parameters(spec.expert_ffn) if spec.is_moe else 0
    expert = spec.experts * width / job.tp if moe and job.ep > 1 else 0.0
    return params - expert, expert / job.ep


def _head_params(job) -> float:
    spec = job.model
    return (0 if spec.tied_embeddings else spec.vocab * spec.hidden / job.tp) + spec.hidden


def _embedding_params(job) -> float:
    spec = job.model
    positions = spec.seq_len * spec.hidden / job.tp if spec.learned_positions else 0
    return spec.vocab * spec.hidden / job.tp + positions


class OperationModel:
    """Blocks from the per-operation compute model (:mod:`hpnsim.training.compute`)."""

    name = "operations"
    #: the default per-GPU variation of a job timed by this model (measured)
    gpu_variation = GPU_VARIATION

    def __init__(self, dtype: str = "bf16", table: KernelTable | None = None,
                 fp8_gemm: GemmLibrary | None = None, fp8_recipe: str | None = None):
        self.dtype, self.table, self.fp8_gemm = dtype, table, gemm_library(fp8_gemm)
        self.fp8_recipe = fp8_recipe_for(dtype, fp8_recipe)

    def _sharding(self, job) -> dict:
        return dict(micro_batch=job.micro_batch, seq_len=job.seq_len, tp=job.tp, cp=job.cp,
                    sequence_parallel=job.sequence_parallel, table=self.table)

    def _block(self, job, name: str, ops: OpList, counts, params) -> Block:
        """One block from its kernels, with the time between them: each pass's gaps
        (:func:`~hpnsim.training.compute.overhead.pass_gaps`; the recomputed forward's are the
        forward's) spread over the pass's parts by their kernel counts."""
        policy = "full" if job.recompute else "none"
        again = recomputed_seconds(ops, policy)
        part: dict[bool, dict[str, float]] = {True: {}, False: {}}
        kernels: dict[bool, dict[str, int]] = {True: {}, False: {}}
        for op in ops.ops:
            in_attention = _in_attention(op.name)
            part[in_attention][op.phase] = part[in_attention].get(op.phase, 0.0) + op.seconds
            kernels[in_attention][op.phase] = kernels[in_attention].get(op.phase, 0) + 1
        gaps = {}
        for phases in (("forward",), ("input_grad", "weight_grad")):
            cells = [(a, p) for a in (True, False) for p in phases]
            n = sum(kernels[a].get(p, 0) for a, p in cells)
            between = pass_gaps(n, sum(part[a].get(p, 0.0) for a, p in cells))
            for a, p in cells:
                if kernels[a].get(p):
                    part[a][p] += between * kernels[a][p] / n
            gaps[phases[0]] = between
        replayed = gaps["forward"] if len(again) else 0.0
        classes = {k: ops.seconds(kind=k) + again.seconds(kind=k) for k in OP_CLASSES}
        classes["gaps"] += gaps["forward"] + gaps["input_grad"] + replayed
        attn, mlp = part[True], part[False]
        return Block(name, ops.forward_seconds + gaps["forward"],
                     ops.backward_seconds + gaps["input_grad"] + again.seconds() + replayed,
                     *counts, *params, forward_attention=attn.get("forward", 0.0),
                     attention_ig=attn.get("input_grad", 0.0),
                     attention_wg=attn.get("weight_grad", 0.0),
                     mlp_ig=mlp.get("input_grad", 0.0), mlp_wg=mlp.get("weight_grad", 0.0),
                     **classes)

    def block_kernels(self, job, name: str) -> OpList:
        """The kernels of block ``name`` (``embedding``, ``layer<i>``, ``head``) of ``job``."""
        spec, shard = job.model, self._sharding(job)
        if name == "embedding":
            return _embedding_ops(spec, job.gpu, **shard)
        if name == "head":
            return head_ops(spec, job.gpu, cross_entropy=job.cross_entropy, **shard)
        return layer_ops(spec, job.gpu, layer=int(name.removeprefix("layer")), ep=job.ep,
                         dtype=self.dtype, attention=job.attention, fp8_gemm=self.fp8_gemm,
                         dropout=job.dropout, fp8_recipe=self.fp8_recipe, **shard)

    def slowdown(self, job, name: str, sms: int, phases: tuple[str, ...],
                 names: tuple[str, ...] = (), part: str = "",
                 launch: Launch = Launch.MARGIN) -> float:
        """How much longer block ``name``'s kernels of ``phases`` take beside a
        communication kernel holding ``sms`` SMs, the GEMMs launched as ``launch`` says
        (:mod:`hpnsim.training.compute.contention`); only the kernels called ``names`` (when
        given) of the ``part`` (``attention`` or ``mlp``, when given)."""
        kernels = [op for op in self.block_kernels(job, name).ops if op.phase in phases
                   and (not names or op.name in names)
                   and (not part or _in_attention(op.name) == (part == "attention"))]
        return slowdown(kernels, job.gpu, sms, self.table, self.fp8_gemm, launch)

    def blocks(self, job, layers, first: bool, last: bool) -> list[Block]:
        """The stage's blocks in *forward* order."""
        spec, shard = job.model, self._sharding(job)
        out: list[Block] = []
        if first:
            ops = _embedding_ops(spec, job.gpu, **shard)
            out.append(self._block(job, "embedding", ops, (0, 0, 0, 0),
                                   (_embedding_params(job), 0.0)))
        cached: dict[bool, OpList] = {}   # dense and MoE layers: one timing each
        layers = list(layers)
        for layer in layers:
            moe = spec.is_moe_layer(layer)
            if moe not in cached:
                cached[moe] = layer_ops(spec, job.gpu, layer=layer, ep=job.ep,
                                        dtype=self.dtype, attention=job.attention,
                                        fp8_gemm=self.fp8_gemm, fp8_recipe=self.fp8_recipe,
                                        dropout=job.dropout, **shard)
        amax = self._amax_reductions(job, layers, cached)
        for layer in layers:
            moe = spec.is_moe_layer(layer)
            ops = cached[moe] + amax.get(layer, OpList(()))
            out.append(self._block(job, f"layer{layer}", ops, _counts(job, moe),
                                   _params(job, layer)))
        if last:
            ops = head_ops(spec, job.gpu, cross_entropy=job.cross_entropy, **shard)
            out.append(self._block(job, "head", ops, (0, 0, 0, 0), (_head_params(job), 0.0)))
        return out

    def _amax_reductions(self, job, layers, cached) -> dict[int, OpList]:
        """FP8 delayed scaling's amax reductions of the chunk's ``fp8_autocast`` region
        (:mod:`~hpnsim.training.compute.amax_reduction`): the forward's after the last layer,
        the backward's at the end of the first layer's backward; none without FP8 layers, and
        none under current scaling (its amaxes are the layers' own kernels)."""
        if self.dtype != "fp8" or self.fp8_recipe != "delayed" or not layers:
            return {}
        gemms = sum(op.shape[3] if len(op.shape) == 4 else 1
                    for layer in layers
                    for op in cached[job.model.is_moe_layer(layer)].select(kind="gemm",
                                                                          phase="forward")
                    if op.dtype == "fp8")
        if not gemms:
            return {}
        group = amax_group(job.megatron_core, tp=job.tp, cp=job.cp, dp=job.dp)
        fwd = amax_reduction_ops(job.gpu, gemms=gemms, group=group, phase="forward",
                                 table=self.table)
        bwd = amax_reduction_ops(job.gpu, gemms=gemms, group=group, phase="input_grad",
                                 table=self.table)
        first, last = layers[0], layers[-1]
        if first == last:
            return {first: fwd + bwd}
        return {last: fwd, first: bwd}

    def optimizer_seconds(self, job, params: float, layer_params: float,
                          local_params: float | None = None, fp8_shard: float = 0.0) -> float:
        """The optimizer step's kernels over the GPU's optimizer shard ``params`` (its
        gradient buffer: ``local_params``), plus FP8 weight casts of the stage's layers when
        the linear layers run in FP8 (with ``fp8_param_gather``: ``layer_params`` are the FP8
        weights, ``fp8_shard`` those of the shard; :func:`~hpnsim.training.compute.stage.
        step_ops`), and the time between them."""
        if params < 1:
            return 0.0
        fp8 = int(layer_params) if self.dtype == "fp8" else 0
        local = int(max(local_params or params, params))
        return step_ops(job.gpu, parameters=int(params), micro_batches=job.micro_batches,
                        fp8_parameters=fp8, local_parameters=local,
                        table=self.table, fp8_recipe=self.fp8_recipe,
                        fp8_shard=int(fp8_shard) if fp8 else 0).seconds()


class ConstantEfficiency:
    """Blocks at ``efficiency`` x the tensor peak of the job's dtype (the pre-operation model):
    forward = catalog FLOPs / rate, backward = 2 x forward (3 x with full recomputation);
    class split: the attention scores' FLOPs are ``attention``, the rest ``gemm``. Its one
    fraction folds in what the operation model times apart (gaps between kernels, kernels
    beside communication, stragglers), so it adds none of them."""

    name = "constant"
    #: the default per-GPU variation of a job timed by this model (folded into the fraction)
    gpu_variation = 0.0

    def __init__(self, efficiency: float, dtype: str = "bf16"):
        self.efficiency, self.dtype = efficiency, dtype

    def blocks(self, job, layers, first: bool, last: bool) -> list[Block]:
        spec, gpu = job.model, job.gpu
        peak = gpu.tensor_peak(self.dtype) if gpu.tensor_peaks else gpu.peak_flops
        rate = peak * self.efficiency
        tokens = job.micro_batch * job.seq_len / job.cp   # each CP rank: s/cp tokens
        factor = 3.0 if job.recompute else 2.0
        q = spec.heads * spec.head_dim if spec.kind == "transformer" else 0
        scores = 4 * job.seq_len * q * tokens / job.tp / rate
        out: list[Block] = []
        if first:   # embedding lookup: no matmul, its gradient is ready last
            out.append(Block("embedding", 0.0, 0.0, 0, 0, 0, 0, _embedding_params(job), 0.0))
        for layer in layers:
            seconds = spec.layer_forward_flops_per_token(layer, job.seq_len) * tokens / job.tp / rate
            attention = _attention_flops_per_token(spec, job.seq_len) * tokens / job.tp / rate
            mlp = seconds - attention
            out.append(Block(f"layer{layer}", seconds, factor * seconds,
                             *_counts(job, spec.is_moe_layer(layer)), *_params(job, layer),
                             forward_attention=attention, attention_ig=attention,
                             attention_wg=attention, mlp_ig=mlp, mlp_wg=mlp,
                             gemm=(1 + factor) * (seconds - scores),
                             attention=(1 + factor) * scores))
        if last:    # final norm and output head (untied)
            head = spec.head_forward_flops_per_token() * tokens / job.tp / rate
            out.append(Block("head", head, factor * head, 0, 0, 0, 0, _head_params(job), 0.0,
                             mlp_ig=head, mlp_wg=head, gemm=(1 + factor) * head))
        return out

    def optimizer_seconds(self, job, params: float, layer_params: float,
                          local_params: float | None = None, fp8_shard: float = 0.0) -> float:
        return params * CONSTANT_OPTIMIZER_BYTES / job.gpu.memory_bandwidth

    def slowdown(self, job, name: str, sms: int, phases: tuple[str, ...],
                 names: tuple[str, ...] = (), part: str = "",
                 launch: Launch = Launch.MARGIN) -> float:
        """1: the constant fraction of peak came from end-to-end runs, which already paid
        for their kernels running beside communication (and for their stragglers: the
        constant model's default ``gpu_variation`` is 0)."""
        return 1.0


def _in_attention(name: str) -> bool:
    """Whether kernel ``name`` belongs to a layer's attention sub-layer (else its MLP)."""
    base = name.removesuffix("_grad_cast").removesuffix("_input_cast")
    return base in _ATTENTION_PART or base.startswith("attention")


def _attention_flops_per_token(spec, seq_len: int) -> float:
    """Forward FLOPs per token of a layer's attention: Q, K, V, O projections and the
    score and value products (the part of ``layer_forward_flops_per_token`` before the MLP).

    >>> from hpnsim.workloads import models
    >>> m = models.get("gpt3-175b")
    >>> _attention_flops_per_token(m, 2048) == 8 * 12288**2 + 4 * 2048 * 12288
    True
    """
    q = spec.heads * spec.head_dim
    kv = spec.kv_heads * spec.head_dim
    return float(2 * (2 * spec.hidden * q + 2 * spec.hidden * kv) + 4 * seq_len * q)
