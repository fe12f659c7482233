"""Compute beside communication: the SMs a communication kernel holds are not the GEMMs'.

A communication kernel overlapped with compute runs its thread blocks on SMs of the same GPU,
one resident block per SM for as long as it runs, so the compute kernels beside it get the
rest: a GEMM whose tiles filled ``n`` SMs in ``w`` waves now runs them on ``n - c`` SMs, in
``ceil(tiles / (n - c))`` waves. How many SMs each overlap takes:

- TransformerEngine userbuffers (``tp_comm_overlap``): the ``pipeline`` and ``bulk`` methods
  take ``num_sm`` SMs from their GEMMs, 16 by default and what a recipe configures per GEMM
  otherwise; ``ring_exchange`` moves data with the copy engines (``use_ce``) and leaves every
  SM to the GEMM (:mod:`hpnsim.training.userbuffers`);
- NCCL: one thread block per channel. A ring over several hosts has one ring per NIC of the
  host, duplicated (``ncclTopoPreset``, ``src/graph/connect.cc``: "Duplicate channels
  rings/trees"): 16 blocks with 8 GPUs and 8 NICs per host (:data:`NCCL_RING_SMS`, the DP
  gradient reductions and ZeRO gathers); a point-to-point exchange (context parallelism's
  ring attention) opens ``NCCL_NCHANNELS_PER_NET_PEER = 2`` channels per peer
  (``src/graph/paths.cc``) to each of its two neighbours: 4 blocks (:data:`NCCL_P2P_SMS`).

The slowed time of each kernel comes from the compute model itself on the GPU with ``c``
fewer SMs (:func:`without_sms`: the same per-SM rate, fewer SMs): GEMMs by their tiles and
waves, fused attention at ``n / (n - c)`` (its grids are many waves deep), memory-bound
kernels unchanged (the remaining SMs still saturate HBM; the communication's own HBM traffic,
a few percent of the bandwidth at NIC rates, is left out).

Published measurements of the same effect: an H100 GEMM of exactly 132 blocks beside an NCCL
all-gather of 24 blocks runs in two waves and nearly doubles (NVIDIA developer forum, "Compute-
Communication Overlap Causes Severe GEMM Performance Degradation because of Tail Effect",
2025); DeepSeek's training trace sizes its expert GEMM grid to 112 = 132 - 20 SMs beside its
20-block all-to-all kernels (deepseek-ai/profile-data ``train.json``); Lee et al.
(arXiv 2507.03114, 2025) measure an 18.9% average (40% at most) compute slowdown under
overlap on A100, H100, MI250 and MI210. None of these is fitted here.

>>> from hpnsim.workloads.gpus import get_gpu
>>> h100 = get_gpu("h100")
>>> without_sms(h100, 16).sm_count, round(without_sms(h100, 16).tensor_peak("bf16") / 1e12, 1)
(116, 869.5)
"""

from __future__ import annotations

from dataclasses import replace

from hpnsim.errors import InputError
from hpnsim.training.compute.core_attention import UNFUSED_GEMMS
from hpnsim.training.compute.gemm import gemm_time
from hpnsim.training.compute.ops import Op
from hpnsim.workloads.gpus import GPUSpec

#: Thread blocks of an NCCL ring collective across hosts of 8 GPUs and 8 NICs.
NCCL_RING_SMS = 16
#: Thread blocks of an NCCL send/recv to two ring neighbours.
NCCL_P2P_SMS = 4


def without_sms(gpu: GPUSpec, sms: int) -> GPUSpec:
    """``gpu`` as a kernel beside a communication kernel holding ``sms`` SMs sees it: fewer
    SMs, each at its own rate (the tensor peaks scale with the SM count)."""
    if isinstance(sms, bool) or not isinstance(sms, int) or not 0 <= sms < gpu.sm_count:
        raise InputError("sms", f"must be in 0..{gpu.sm_count - 1}, got {sms!r}")
    left = (gpu.sm_count - sms) / gpu.sm_count
    peaks = tuple((dtype, peak * left) for dtype, peak in gpu.tensor_peaks)
    return replace(gpu, sm_count=gpu.sm_count - sms, tensor_peaks=peaks,
                   peak_flops=gpu.peak_flops * left)


def contended_seconds(op: Op, gpu: GPUSpec, sms: int, table=None, library=None) -> float:
    """The time of kernel ``op`` with ``sms`` SMs held by a communication kernel (an FP8 GEMM
    timed with ``library``'s calibration, :mod:`~hpnsim.training.compute.gemm_library`).

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> from hpnsim.training.compute import gemm_time
    >>> h100 = get_gpu("h100")
    >>> t = gemm_time(8192, 8192, 8192, "bf16", h100)
    >>> op = Op("fc1", "gemm", "forward", (8192, 8192, 8192), "bf16", t.flops, t.bytes, t.seconds)
    >>> round(contended_seconds(op, h100, 16) / op.seconds, 4)   # 8192 tiles: 63 -> 71 waves
    1.1266
    """
    if sms == 0 or op.seconds == 0 or not op.flops:
        return op.seconds            # memory-bound kernels and gaps: unchanged
    if op.kind == "gemm" or op.name in UNFUSED_GEMMS:
        m, n, k, *groups = op.shape
        batch = groups[0] if groups else 1
        slowed = gemm_time(m, n, k, op.dtype, without_sms(gpu, sms), batch=batch, table=table,
                           library=library)
        full = gemm_time(m, n, k, op.dtype, gpu, batch=batch, table=table, library=library)
        return op.seconds * slowed.seconds / full.seconds
    return op.seconds * gpu.sm_count / (gpu.sm_count - sms)   # fused attention


def slowdown(ops, gpu: GPUSpec, sms: int, table=None, library=None) -> float:
    """Time of ``ops`` beside a communication kernel holding ``sms`` SMs over their time
    alone (1 for no ops).

    >>> slowdown((), None, 16)
    1.0
    """
    alone = sum(op.seconds for op in ops)
    if not alone:
        return 1.0
    return sum(contended_seconds(op, gpu, sms, table, library) for op in ops) / alone
