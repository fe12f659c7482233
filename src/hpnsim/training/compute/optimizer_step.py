"""The optimizer step as the kernels it launches (Megatron-Core's mixed-precision optimizer).

Per iteration, after the last gradient reduction, one GPU of Megatron-Core
(``megatron/core/optimizer``, read at NVIDIA/Megatron-LM ``d98e8a64dd``) runs on its optimizer
shard of ``P`` parameters (all local parameters without the distributed optimizer), with FP32
main gradients, FP32 master weights and Adam moments:

=====================  ===========================================  =================  ========
kernel                 what                                         bytes / parameter  of
=====================  ===========================================  =================  ========
``grad_norm``          ``multi_tensor_l2norm`` of the main grads    read 4             shard
                       (``clip_grads.get_grad_norm_fp32``; then
                       ``total_norm.item()``: the host waits)
``adam``               ``multi_tensor_adam`` (Apex / TE FusedAdam): read g, p, m, v 16;   shard
                       write p, m, v 12
``param_copy``         ``_copy_main_params_to_model_params``:      read 4, write 2    shard
                       FP32 master to the 16-bit model weight
``zero_grad``          the grad buffer zeroed for the next step     write 4            local
                       (``zero_grad_buffer``, one memset)
=====================  ===========================================  =================  ========

(gradient clipping's ``multi_tensor_scale`` runs only when the norm exceeds the threshold and
is left out). A multi-tensor kernel processes its tensors in chunks of 65,536 elements and
launches once per 320 chunks (Apex ``csrc/multi_tensor_apply.cuh``: ``depth_to_max_blocks``
320 at every depth, chunk size ``2048 * 32``; PyTorch's ``MultiTensorApply.cuh`` the same):
:func:`multi_tensor_launches` (the per-launch tensor limit, 110 to 30 by depth, is not counted:
one flat buffer per bucket). Because the grad-norm's ``.item()`` synchronizes, the kernels
after it are issued by a host that has just waited: the step's ``gaps`` op counts their
dispatch gaps or the host's pace, whichever is longer, and one launch latency
(:mod:`~hpnsim.training.compute.overhead`).

>>> multi_tensor_launches(65536 * 320), multi_tensor_launches(65536 * 320 + 1)
(1, 2)
>>> step_kernel_bytes(10)["adam"], step_kernel_bytes(10, local_parameters=20)["zero_grad"]
(280.0, 80.0)
"""

from __future__ import annotations

import math

from hpnsim.training.compute.precision import positive_int

#: Elements per multi-tensor-apply chunk (Apex / PyTorch: ``2048 * 32``).
CHUNK_ELEMENTS = 65536
#: Chunks per multi-tensor-apply launch (``depth_to_max_blocks``).
CHUNKS_PER_LAUNCH = 320
#: Multi-tensor kernels of the step (the rest are one kernel each).
MULTI_TENSOR = ("grad_norm", "adam", "param_copy")


def multi_tensor_launches(elements: int) -> int:
    """Launches of one multi-tensor kernel over ``elements`` (one flat buffer)."""
    return math.ceil(math.ceil(positive_int("parameters", elements) / CHUNK_ELEMENTS)
                     / CHUNKS_PER_LAUNCH)


def step_kernel_bytes(parameters: int, local_parameters: int | None = None,
                      fp8_parameters: float = 0.0) -> dict[str, float]:
    """HBM bytes of each kernel of the step (module docstring): ``parameters`` is the
    optimizer shard, ``local_parameters`` every parameter the GPU holds (its grad buffer;
    default the shard), ``fp8_parameters`` those of the shard kept in FP8
    (``fp8_param_gather``: the copy writes 1 byte for them, not 2).

    >>> step_kernel_bytes(10, fp8_parameters=4)["param_copy"]     # 10 x 4 read, 6 x 2 + 4 x 1
    56.0
    """
    p = float(positive_int("parameters", parameters))
    local = p if local_parameters is None else float(positive_int("local_parameters",
                                                                  local_parameters))
    fp8 = min(float(fp8_parameters), p)
    return {"grad_norm": 4.0 * p, "adam": 28.0 * p, "param_copy": 6.0 * p - fp8,
            "zero_grad": 4.0 * local}
