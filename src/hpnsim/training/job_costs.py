"""What one GPU of a :class:`~hpnsim.training.job.TrainJob` computes and holds, per
virtual stage (a contiguous chunk of layers held by one pipeline stage).

:class:`StageCosts` gives the job its per-micro-batch cost of each virtual stage (forward
and backward compute, TP all-reduce and EP all-to-all counts, the per-block split of the
passes), its ZeRO-3 / FSDP units, its gradient buckets, the parameters each stage holds
(dense ones, synchronized over DP, and routed-expert ones, synchronized over the
expert-data-parallel group), the optimizer step and the compute per operation class.

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

from hpnsim.errors import InputError
from hpnsim.training.compute.contention import Launch
from hpnsim.training.cost import BLOCK_SUMS, OP_CLASSES, Block, StageCost
from hpnsim.training.fp8_params import block_fp8

__all__ = ["StageCosts"]


class StageCosts:
    """The per-stage costs of a :class:`~hpnsim.training.job.TrainJob` (a base of it):
    each virtual stage's cost is computed once, on first use, and kept in ``_costs``."""

    def stage_cost(self, chunk: int) -> StageCost:
        """Per-micro-batch cost of virtual stage ``chunk`` (0 .. chunks-1), per GPU.

        >>> from hpnsim.training.job import TrainJob
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
        blocks = self.compute_model.blocks(self, self.chunk_layers(chunk), first=chunk == 0,
                                           last=chunk == self.chunks - 1)
        return StageCost.of(blocks[::-1])  # backward order

    def fsdp_units(self, chunk: int) -> list[Block]:
        """ZeRO-3 / FSDP units of virtual stage ``chunk`` in *forward* order: one per
        transformer layer, the embedding merged into the first layer's unit and the output
        head (with the final norm) into the last one's, as FSDP wraps them with their
        neighbours rather than gathering a unit that has no compute to hide behind.

        >>> from hpnsim.training.job import TrainJob
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
                              *(getattr(a, f) + getattr(block, f) for f in BLOCK_SUMS))
            merged.append(block)
        return merged

    @property
    def edp(self) -> int:
        """Expert-data-parallel size: replicas of each expert shard (``dp / ep``)."""
        return self.dp // self.ep

    @property
    def ep_buffer_bytes(self) -> float:
        """One GPU's all-to-all send buffer per MoE layer and micro-batch (bytes): routed
        tokens x top_k x hidden x dtype bytes (see this module's docstring).

        >>> from hpnsim.training.job import TrainJob
        >>> TrainJob("mixtral-8x7b", dp=8, ep=8, seq_len=4096).ep_buffer_bytes
        67108864.0
        """
        spec = self.model
        tokens = self.micro_batch * self.seq_len / (self.tp if self.sequence_parallel else 1)
        return float(tokens * spec.top_k * spec.hidden * spec.dtype_bytes)

    def stage_params(self, stage: int, expert: bool = False) -> float:
        """Parameters held by one GPU of pipeline stage ``stage`` (all its chunks): the dense
        ones, or with ``expert=True`` the routed-expert ones (0 unless ``ep > 1``).

        >>> from hpnsim.training.job import TrainJob
        >>> round(TrainJob("llama3-70b", tp=8, pp=8, dp=16).stage_params(0) / 1e9, 3)
        1.201
        """
        field_ = "expert_params_per_gpu" if expert else "params_per_gpu"
        return sum(getattr(self.stage_cost(k * self.pp + stage), field_)
                   for k in range(self.virtual_stages))

    def optimizer_time(self, stage: int) -> float:
        """The optimizer step on one GPU of ``stage``: memory-bound kernels and the gaps
        between them (:mod:`~hpnsim.training.compute.optimizer_step`); ZeRO shards the dense
        parameters over ``dp`` and the expert ones over the expert-data-parallel group.

        >>> from hpnsim.training.job import TrainJob
        >>> round(TrainJob("llama3-8b").optimizer_time(0) * 1e3, 1)  # 8.03e9 x 42 B / 3.015 TB/s
        114.2

        (and 1,150 launches' 2.06 us gaps: 383 per multi-tensor kernel).
        """
        dense, expert = self.stage_params(stage), self.stage_params(stage, expert=True)
        params = dense / (self.dp * self.cp) + expert / self.edp if self.zero else dense + expert
        if self.optimizer_bytes_per_param is not None:
            return params * self.optimizer_bytes_per_param / self.gpu.memory_bandwidth
        layers = [b for k in range(self.virtual_stages)
                  for b in self.stage_cost(k * self.pp + stage).blocks
                  if b.name.startswith("layer")]
        layer_params = sum(b.dense_params + b.expert_params for b in layers)
        # the gradient buffer zeroed each step: whole with ZeRO 0-2 (Megatron reduce-scatters
        # in place), the shard with ZeRO-3
        local = params if self.zero == 3 else dense + expert
        if not self.fp8_param_gather:
            return self.compute_model.optimizer_seconds(self, params, layer_params, local)
        fp8_dense = sum(block_fp8(self, b.name) for b in layers)
        fp8_expert = sum(block_fp8(self, b.name, expert=True) for b in layers)
        shard = fp8_dense / (self.dp * self.cp) + fp8_expert / self.edp
        return self.compute_model.optimizer_seconds(self, params, fp8_dense + fp8_expert,
                                                    local, fp8_shard=shard)

    def compute_by_class(self, stage: int) -> dict[str, float]:
        """Compute seconds per operation class (``gemm``, ``attention``, ``memory``, ``gaps``)
        of one GPU of pipeline stage ``stage`` over an iteration (every micro-batch through each of
        its chunks; recomputation included), and ``optimizer``.

        >>> from hpnsim.training.job import TrainJob
        >>> job = TrainJob("llama3-8b", global_batch=2)
        >>> c = job.compute_by_class(0)
        >>> cost = job.stage_cost(0)
        >>> bool(abs(c["gemm"] + c["attention"] + c["memory"] + c["gaps"]
        ...          - 2 * (cost.forward_compute + cost.backward_compute)) < 1e-12)
        True
        """
        out = dict.fromkeys(OP_CLASSES, 0.0)
        for k in range(self.virtual_stages):
            for key, seconds in self.stage_cost(k * self.pp + stage).classes.items():
                out[key] += self.micro_batches * seconds
        out["optimizer"] = self.optimizer_time(stage)
        return out

    def overlap_slowdown(self, block: str, sms: int, phases: tuple[str, ...],
                         names: tuple[str, ...] = (), part: str = "",
                         launch: Launch = Launch.MARGIN) -> float:
        """Factor by which block ``block``'s kernels of ``phases`` (only those called
        ``names``, of ``part``, when given) are longer beside a communication kernel holding
        ``sms`` SMs, the GEMMs launched as ``launch`` says
        (:mod:`hpnsim.training.compute.contention`); cached per question.

        >>> from hpnsim.training.job import TrainJob
        >>> job = TrainJob("llama3-70b", tp=8, seq_len=8192, sequence_parallel=True)
        >>> round(job.overlap_slowdown("layer0", 16, ("forward",), names=("o_proj",)), 3)
        1.124
        >>> from hpnsim.training.compute.contention import Launch
        >>> round(job.overlap_slowdown("layer0", 16, ("forward",), names=("o_proj",),
        ...                            launch=Launch.FULL), 3)    # H100: persistent GEMMs
        1.968
        """
        key = ("slowdown", block if block in ("embedding", "head")
               else self.model.is_moe_layer(int(block.removeprefix("layer"))), sms, phases,
               names, part, launch)
        if key not in self._costs:
            self._costs[key] = self.compute_model.slowdown(self, block, sms, phases, names,
                                                           part, launch)
        return self._costs[key]

    def buckets(self, chunk: int, expert: bool = False) -> list[tuple[float, int]]:
        """Gradient buckets of virtual stage ``chunk``: ``(parameters, block index)`` each,
        in launch order; a bucket is ready when backward block ``block index`` finishes.
        Dense and routed-expert parameters fill separate buckets (``expert``), as Megatron's
        separate expert gradient buffer.

        >>> from hpnsim.training.job import TrainJob
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
