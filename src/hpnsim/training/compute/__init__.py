"""hpnsim.training.compute: the per-operation compute model.

An iteration's compute is the sum of its operations, each timed from its shape on its GPU:
GEMMs by a roofline with tile, wave and K-block quantization (:mod:`.gemm`), fused attention
by FLOPs under its mask at a measured fraction of peak (:mod:`.attention`), memory-bound ops at
HBM bandwidth (:mod:`.memory_ops`); :func:`layer_ops` lists a transformer layer's operations on
one GPU with their times (:mod:`.layer`, :mod:`.ops`), :func:`stage_ops` a pipeline stage's
(with :func:`embedding_ops` and :func:`head_ops`), :func:`step_ops` the optimizer step's
(:mod:`.stage`, its kernels in :mod:`.optimizer_step`); measured kernel tables override the
efficiencies where present (:mod:`.kernel_tables`). Attention as the framework ran it, fused or
Megatron's unfused core attention (:mod:`.core_attention`); the time between kernels
(:mod:`.overhead`); kernels beside overlapped communication (:mod:`.contention`). Efficiencies come from per-kernel measurements, never from
end-to-end training throughput. See docs/compute.md.

>>> from hpnsim.workloads.gpus import get_gpu
>>> round(gemm_time(8192, 8192, 8192, "bf16", get_gpu("h100")).seconds * 1e3, 3)
1.502
"""

from hpnsim.training.compute.attention import (
    AttentionTiming,
    attention_efficiency,
    attention_flops,
    attention_time,
)
from hpnsim.training.compute.contention import contended_seconds, without_sms
from hpnsim.training.compute.core_attention import ATTENTION_KERNELS, unfused_attention_ops
from hpnsim.training.compute.gemm import GemmTiming, gemm_time, issue_efficiency, wave_count
from hpnsim.training.compute.kernel_tables import KernelRow, KernelTable
from hpnsim.training.compute.layer import layer_ops
from hpnsim.training.compute.memory_ops import HBM_EFFICIENCY, MemoryOpTiming, memory_op_time
from hpnsim.training.compute.ops import Op, OpList
from hpnsim.training.compute.overhead import pass_gaps
from hpnsim.training.compute.stage import embedding_ops, head_ops, stage_ops, step_ops

__all__ = ["ATTENTION_KERNELS", "HBM_EFFICIENCY", "AttentionTiming", "GemmTiming", "KernelRow",
           "KernelTable", "MemoryOpTiming", "Op", "OpList", "attention_efficiency",
           "attention_flops", "attention_time", "contended_seconds", "embedding_ops",
           "gemm_time", "head_ops", "issue_efficiency", "layer_ops", "memory_op_time",
           "pass_gaps", "stage_ops", "step_ops", "unfused_attention_ops", "wave_count",
           "without_sms"]
