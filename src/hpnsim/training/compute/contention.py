"""Compute beside communication: the SMs a communication kernel holds are not the GEMMs'.

A communication kernel overlapped with compute runs its thread blocks on SMs of the same GPU,
one resident block per SM for as long as it runs (NCCL's blocks use all of an SM's registers
and share it with no other kernel: S. Jeaugey, NVIDIA/nccl#689, 2024-05-13). How the GEMM
beside it loses them depends on how it was launched (:class:`Launch`):

- **with a margin** (:attr:`Launch.MARGIN`): told the SMs the other kernel leaves, as
  TransformerEngine's ``set_sm_margin`` does (``_math_sms = sm_count - num_comm_sm`` in its
  userbuffers overlap), the GEMM runs on ``n - c`` SMs throughout: tiles that filled ``n``
  SMs in ``w`` waves take ``ceil(tiles / (n - c))`` (:func:`without_sms`). A kernel whose
  blocks each compute one tile (Ampere's cuBLAS kernels) loses the same to a kernel holding
  SMs: its later tiles go to whichever SMs are free;
- **for every SM** (:attr:`Launch.FULL`): Hopper's cuBLAS GEMMs are persistent, as many
  blocks as SMs, each dealt its output tiles in advance (pytorch/pytorch#143988 and PR
  #144974, L. Wehrstedt, 2024-12/2025-01: "all the matmuls look like they are using
  persistent kernels ... launch as many CUDA blocks as there are SMs"). The blocks that find
  their SMs held start only when an SM frees, and then run their whole share of tiles: the
  GEMM takes up to twice as long (the same reports: "the matmuls take 2x as long" beside an
  NCCL kernel; the NVIDIA developer forum's 132-block GEMM beside a 24-block all-gather,
  80% -> 47% MFU, 2025) for as long as the other kernel holds its SMs
  (:func:`persistent_tail`). This is how the recipes' GEMMs run beside the DP and ZeRO
  collectives' NCCL kernels (TransformerEngine sets no GEMM margin unless
  ``NVTE_EXT_MARGIN_SM`` is set, which NeMo-Framework-Launcher 24.07 and Megatron-Bridge
  v0.2.0 do not; they set only the layer norms' margins) and beside userbuffer overlaps
  configured without ``set_sm_margin`` (the bulk ones). Fused attention keeps the
  fewer-SMs rule either way (its kernels are not modelled by tile).

How many SMs each overlap takes:

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

The slowed time of each kernel comes from the compute model itself (the GEMM's tiles and
waves, fused attention at ``n / (n - c)``); memory-bound kernels are unchanged (the remaining
SMs still saturate HBM; the communication's own HBM traffic, a few percent of the bandwidth
at NIC rates, is left out). Lee et al. (arXiv 2507.03114, 2025) measure an 18.9% average (40%
at most) compute slowdown under overlap on A100, H100, MI250 and MI210; DeepSeek's training
trace sizes its expert GEMM grid to 112 = 132 - 20 SMs beside its 20-block all-to-all kernels
(deepseek-ai/profile-data ``train.json``), a margin. None of these is fitted here.

>>> from hpnsim.workloads.gpus import get_gpu
>>> h100 = get_gpu("h100")
>>> without_sms(h100, 16).sm_count, round(without_sms(h100, 16).tensor_peak("bf16") / 1e12, 1)
(116, 869.5)
"""

from __future__ import annotations

import math
from dataclasses import replace
from enum import Enum

from hpnsim.errors import InputError
from hpnsim.training.compute.core_attention import UNFUSED_GEMMS
from hpnsim.training.compute.gemm import gemm_time, kernel_plan
from hpnsim.training.compute.ops import Op
from hpnsim.training.compute.precision import element_bytes
from hpnsim.workloads.gpus import GPUSpec

#: Thread blocks of an NCCL ring collective across hosts of 8 GPUs and 8 NICs.
NCCL_RING_SMS = 16
#: Thread blocks of an NCCL send/recv to two ring neighbours.
NCCL_P2P_SMS = 4
#: architectures whose cuBLAS GEMMs are persistent, tiles dealt to the blocks in advance
#: (the module docstring); Ampere's are one block per tile. Blackwell's persistent kernels
#: fetch their next tile at run time (cluster launch control), so a held SM delays no tile
#: there: it keeps the fewer-SMs rule.
PERSISTENT_GEMMS = ("hopper",)


class Launch(Enum):
    """How a GEMM beside a communication kernel was launched (the module docstring)."""

    MARGIN = "margin"     # on the SMs the other kernel leaves
    FULL = "full"         # for every SM


def without_sms(gpu: GPUSpec, sms: int) -> GPUSpec:
    """``gpu`` as a kernel beside a communication kernel holding ``sms`` SMs sees it: fewer
    SMs, each at its own rate (the tensor peaks scale with the SM count)."""
    if isinstance(sms, bool) or not isinstance(sms, int) or not 0 <= sms < gpu.sm_count:
        raise InputError("sms", f"must be in 0..{gpu.sm_count - 1}, got {sms!r}")
    left = (gpu.sm_count - sms) / gpu.sm_count
    peaks = tuple((dtype, peak * left) for dtype, peak in gpu.tensor_peaks)
    return replace(gpu, sm_count=gpu.sm_count - sms, tensor_peaks=peaks,
                   peak_flops=gpu.peak_flops * left)


def persistent_tail(blocks: int, sm_count: int, held: int) -> float:
    """How much longer a persistent GEMM of ``blocks`` work units (tiles, or tile slices
    under split-K) launched for all ``sm_count`` SMs takes while another kernel holds ``held``
    of them (at most half): ``min(blocks, sm_count)`` blocks, block ``b`` dealt units ``b``,
    ``b + grid``, ...; the blocks beyond the ``sm_count - held`` that fit start, in block
    order, as the SMs of the others free, and then run their whole share.

    >>> persistent_tail(132, 132, 24)      # one wave of 132: 24 blocks wait for it (the forum)
    2.0
    >>> persistent_tail(1320, 132, 16), persistent_tail(100, 132, 16), persistent_tail(200, 132, 16)
    (2.0, 1.0, 1.0)
    >>> persistent_tail(252, 132, 16)      # blocks 116-119 wait with two units each
    2.0
    """
    grid = min(blocks, sm_count)
    free = sm_count - held
    if grid <= free:
        return 1.0                                # every block fits beside the other kernel
    share, extra = divmod(blocks, grid)           # blocks below ``extra`` get one unit more
    alone = share + (1 if extra else 0)
    early = free - min(extra, free)               # SMs whose blocks finish at ``share`` units
    end = alone
    for rank, b in enumerate(range(free, grid)):  # the waiting blocks, in order
        start = share if rank < early else alone
        end = max(end, start + share + (1 if b < extra else 0))
    return end / alone


def contended_seconds(op: Op, gpu: GPUSpec, sms: int, table=None, library=None,
                      launch: Launch = Launch.MARGIN) -> float:
    """The time of kernel ``op`` while a communication kernel holds ``sms`` SMs, the GEMM
    launched as ``launch`` says (an FP8 GEMM timed with ``library``'s calibration,
    :mod:`~hpnsim.training.compute.gemm_library`).

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> from hpnsim.training.compute import gemm_time
    >>> h100 = get_gpu("h100")
    >>> t = gemm_time(8192, 8192, 8192, "bf16", h100)
    >>> op = Op("fc1", "gemm", "forward", (8192, 8192, 8192), "bf16", t.flops, t.bytes, t.seconds)
    >>> round(contended_seconds(op, h100, 16) / op.seconds, 4)   # 8192 tiles: 63 -> 71 waves
    1.1266
    >>> round(contended_seconds(op, h100, 16, launch=Launch.FULL) / op.seconds, 4)  # 62 + 62 of 63
    1.9683
    """
    if sms == 0 or op.seconds == 0 or not op.flops:
        return op.seconds            # memory-bound kernels and gaps: unchanged
    if op.kind == "gemm" or op.name in UNFUSED_GEMMS:
        m, n, k, *groups = op.shape
        batch = groups[0] if groups else 1
        if launch is Launch.FULL and gpu.architecture in PERSISTENT_GEMMS:
            plan = kernel_plan(m, n, k, batch, gpu.architecture, gpu.sm_count,
                               element_bytes(op.dtype))
            blocks = batch * math.ceil(m / plan.tile[0]) * math.ceil(n / plan.tile[1])
            return op.seconds * persistent_tail(blocks * plan.split, gpu.sm_count, sms)
        slowed = gemm_time(m, n, k, op.dtype, without_sms(gpu, sms), batch=batch, table=table,
                           library=library)
        full = gemm_time(m, n, k, op.dtype, gpu, batch=batch, table=table, library=library)
        return op.seconds * slowed.seconds / full.seconds
    return op.seconds * gpu.sm_count / (gpu.sm_count - sms)   # fused attention


def slowdown(ops, gpu: GPUSpec, sms: int, table=None, library=None,
             launch: Launch = Launch.MARGIN) -> float:
    """Time of ``ops`` beside a communication kernel holding ``sms`` SMs over their time
    alone (1 for no ops), the GEMMs launched as ``launch`` says.

    >>> slowdown((), None, 16)
    1.0
    """
    alone = sum(op.seconds for op in ops)
    if not alone:
        return 1.0
    return sum(contended_seconds(op, gpu, sms, table, library, launch) for op in ops) / alone
