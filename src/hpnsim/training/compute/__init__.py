"""hpnsim.training.compute: the per-operation compute model.

An iteration's compute is the sum of its operations, each timed from its shape on its GPU:
GEMMs by a roofline with tile, wave and K-block quantization (:mod:`.gemm`), fused attention
by FLOPs under its mask at a measured fraction of peak (:mod:`.attention`), memory-bound ops at
HBM bandwidth (:mod:`.memory_ops`); measured kernel tables override the efficiencies where
present (:mod:`.kernel_tables`). Efficiencies come from per-kernel measurements, never from
end-to-end training throughput. See docs/compute.md.

>>> from hpnsim.workloads.gpus import get_gpu
>>> round(gemm_time(8192, 8192, 8192, "bf16", get_gpu("h100")).seconds * 1e3, 3)
1.431
"""

from hpnsim.training.compute.attention import (
    AttentionTiming,
    attention_efficiency,
    attention_flops,
    attention_time,
)
from hpnsim.training.compute.gemm import GemmTiming, gemm_time, issue_efficiency, wave_count
from hpnsim.training.compute.kernel_tables import KernelRow, KernelTable
from hpnsim.training.compute.memory_ops import HBM_EFFICIENCY, MemoryOpTiming, memory_op_time

__all__ = ["HBM_EFFICIENCY", "AttentionTiming", "GemmTiming", "KernelRow", "KernelTable",
           "MemoryOpTiming", "attention_efficiency", "attention_flops", "attention_time",
           "gemm_time", "issue_efficiency", "memory_op_time", "wave_count"]
