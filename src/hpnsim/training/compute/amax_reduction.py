"""The amax reduction of TransformerEngine's delayed FP8 scaling: once per FP8 region and pass.

What TransformerEngine 1.x does (read at tag v1.9, e79d915a, Apache-2.0):

- every FP8 module registers its amaxes in one global buffer per pass
  (``FP8GlobalStateManager.add_fp8_tensors_to_global_buffer``, ``pytorch/fp8.py``): per GEMM
  3 in the forward (input, weight, output) and 2 in the backward (output gradient, input
  gradient): ``num_fp8_tensors = num_gemms * 3 if fwd else num_gemms * 2``
  (``pytorch/module/base.py``);
- at the exit of the outermost ``fp8_autocast`` (forward) and at the end of the backward of the
  region's first module (``reduce_and_update_bwd_fp8_tensors``),
  ``reduce_and_update_fp8_tensors`` concatenates the buffer (``torch.cat``: one kernel),
  all-reduces it with ``MAX`` over the region's group with ``async_op=False`` (only when
  ``recipe.reduce_amax``, default True, and the group has more than one rank), and runs one
  fused kernel that rolls the amax history (``amax_history_len``, default 1024) and writes the
  scales and their inverses (``tex.fused_amax_and_scale_update_after_reduction``).

Megatron-Core wraps each model chunk's ``TransformerBlock.forward`` in one ``fp8_autocast``
whose group is ``parallel_state.get_amax_reduction_group(with_context_parallel=True)``
(NVIDIA/Megatron-LM ``megatron/core/transformer/transformer_block.py``): the TP x CP group in
core 0.8.0 (tag ``core_v0.8.0``, baf94af3; NeMo 24.07), the TP x DP x CP group in 0.5 to 0.7
and from 0.9 on (``tp_only_amax_red`` off, its default) (:func:`amax_group`).

How it is timed: the two kernels as memory-bound kernels of their bytes
(:func:`~hpnsim.training.compute.memory_ops.memory_op_time`); the all-reduce, a few KiB, as the
latency NCCL's own tuner charges an LL all-reduce on the group (the smaller of ring and tree,
:func:`~hpnsim.collectives.nccl.tuner.tuner_latency` at v2.29.7, the release hpnsim's simulated
latencies are read from), counted as time the compute stream waits (kind ``gaps``: the call
blocks the stream, ``async_op=False``). The group's GPUs fill hosts of
:data:`GPUS_PER_HOST` (Megatron orders ranks tp, cp, dp: the group is consecutive ranks).

>>> from hpnsim.workloads.gpus import get_gpu
>>> ops = amax_reduction_ops(get_gpu("h100"), gemms=4, group=4, phase="forward")
>>> [(op.name, op.kind) for op in ops.ops]
[('amax_cat', 'memory'), ('amax_allreduce', 'gaps'), ('amax_update', 'memory')]
>>> round(ops.ops[1].seconds * 1e6, 2)       # NCCL LL ring on 4 NVLink ranks: 6.6 + 6 x 0.6
10.2
>>> len(amax_reduction_ops(get_gpu("h100"), gemms=4, group=1, phase="input_grad"))
2
"""

from __future__ import annotations

from hpnsim.collectives.nccl.tuner import tuner_latency
from hpnsim.errors import InputError
from hpnsim.training.compute.memory_ops import memory_op_time
from hpnsim.training.compute.ops import Op, OpList

#: amaxes per FP8 GEMM registered for the forward and for the backward reduction (TE v1.9
#: ``module/base.py``: ``num_gemms * 3`` forward, ``num_gemms * 2`` backward)
AMAXES_PER_GEMM = {"forward": 3, "input_grad": 2}
#: TransformerEngine ``DelayedScaling.amax_history_len`` default (``common/recipe``, v1.9)
AMAX_HISTORY_LEN = 1024
#: GPUs a host's NVLink joins (DGX/HGX H100, every FP8 run hpnsim compares with); the stage cost
#: is fabric-independent, so the group's hosts are counted at this size
GPUS_PER_HOST = 8
#: the NCCL release whose tuner latencies time the reduction (hpnsim's own tables)
NCCL_VERSION = "2.29.7"
_FLOAT = 4


def amax_group(megatron_core: tuple[int, int], *, tp: int, cp: int, dp: int) -> int:
    """GPUs of the amax reduction group Megatron-Core ``megatron_core`` passes to
    ``fp8_autocast``: TP x CP in 0.8, TP x DP x CP before and after (module docstring).

    >>> amax_group((0, 8), tp=4, cp=2, dp=2), amax_group((0, 15), tp=4, cp=2, dp=2)
    (8, 16)
    """
    within = tp * cp
    return within if tuple(megatron_core) == (0, 8) else within * dp


def reduction_latency(group: int, gpus_per_host: int = GPUS_PER_HOST) -> float:
    """Seconds NCCL's tuner charges a small all-reduce over ``group`` consecutive GPUs (0 for
    one GPU: TransformerEngine skips the call).

    >>> reduction_latency(1), round(reduction_latency(16) * 1e6, 1)   # tree over 2 hosts
    (0.0, 25.2)
    """
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise InputError("group", f"must be a positive integer, got {group!r}")
    if group == 1:
        return 0.0
    per_host = min(group, gpus_per_host)
    if group % per_host:
        raise InputError("group", f"{group} GPUs do not fill hosts of {gpus_per_host}")
    hosts = group // per_host
    return min(tuner_latency("allreduce", algo, "ll", ranks=group, hosts=hosts,
                             version=NCCL_VERSION) for algo in ("ring", "tree"))


def amax_reduction_ops(gpu, *, gemms: int, group: int, phase: str, table=None,
                       history: int = AMAX_HISTORY_LEN) -> OpList:
    """The ops of one amax reduction of a region with ``gemms`` FP8 GEMMs over ``group`` GPUs,
    in ``phase`` ``"forward"`` (at the autocast's exit) or ``"input_grad"`` (the backward's).

    ``amax_cat`` reads and writes the amaxes; ``amax_allreduce`` (only when ``group > 1``) is the
    stream's wait for the all-reduce; ``amax_update`` reads the amaxes and the history, writes
    the rolled history, the scales and their inverses: ``4 n (2 history + 3)`` bytes for ``n``
    amaxes.
    """
    if phase not in AMAXES_PER_GEMM:
        raise InputError("phase", f"one of {', '.join(AMAXES_PER_GEMM)}, got {phase!r}")
    if isinstance(gemms, bool) or not isinstance(gemms, int) or gemms < 1:
        raise InputError("gemms", f"must be a positive integer, got {gemms!r}")
    n = gemms * AMAXES_PER_GEMM[phase]
    cat = 2 * _FLOAT * n
    update = _FLOAT * n * (2 * history + 3)
    ops = [Op("amax_cat", "memory", phase, (cat,), "fp32", 0.0, cat,
              memory_op_time("amax_cat", cat, gpu, table=table).seconds)]
    wait = reduction_latency(group)
    if wait:
        ops.append(Op("amax_allreduce", "gaps", phase, (1,), "fp32", 0.0, _FLOAT * n, wait))
    ops.append(Op("amax_update", "memory", phase, (update,), "fp32", 0.0, update,
                  memory_op_time("amax_update", update, gpu, table=table).seconds))
    return OpList(tuple(ops))
