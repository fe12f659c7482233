"""FP8 current scaling: the kernels TransformerEngine 2.x runs around each FP8 GEMM.

TransformerEngine's ``Float8CurrentScaling`` recipe (Megatron-Core ``--fp8-recipe tensorwise``,
Megatron-Bridge's ``fp8_cs``) scales each tensor by its own amax, computed right before its
cast, instead of delayed scaling's amax history (:mod:`.amax_reduction`). What TE runs, read at
tag v2.9 (70f53666, 2025-10-30; Megatron-Bridge v0.2.0, the NeMo 25.11 release, pins
``transformer-engine ... rev = "release_v2.9"`` in its pyproject.toml):

- one quantize of a BF16 tensor of ``N`` elements (``Float8CurrentScalingQuantizer::
  quantize_impl``, ``pytorch/csrc/quantizer.cpp``) is four kernels: ``nvte_compute_amax``
  (``common/recipe/current_scaling.cu``: a one-thread ``zero_amax_kernel`` and the amax
  kernel, which reads the tensor: ``2 N`` bytes); when ``with_amax_reduction``, a MAX
  all-reduce of that one float over the quantizer's group, waited for on the compute stream
  (``allreduce(...)->wait()``); a one-thread ``compute_scale_from_amax_kernel``; the cast,
  ``nvte_quantize_v2``: a row-wise FP8 copy (``fp8_quantize``: read 2, write 1 byte an element)
  or, when the column-wise (transposed) copy a Hopper weight-gradient GEMM reads is wanted too,
  TE's fused ``cast_transpose`` (read 2, write 1 + 1) (``common/util/cast_kernels.cuh``);
- a LayerNormLinear (Megatron's QKV and FC1) quantizes its norm's output: TE's own norm kernel
  writes BF16 and the amax (``FUSED_NORM_AMAX_FP8`` in ``csrc/extensions/normalization.cpp``),
  then ``quantize_with_amax`` skips the amax kernel; with ``NVTE_NORM_FWD_USE_CUDNN`` the cuDNN
  norm has no amax output and the full quantize runs (not modelled: :data:`NORM_AMAX_FUSED`);
- which copies a GEMM input gets: with sequence parallelism (SP) a column-parallel input is
  quantized row-wise on the local ``T/tp`` tokens (FP8 is all-gathered row-wise only,
  ``supports_only_rowwise_all_gather``), its amax all-reduced over the TP group
  (``_customize_quantizers_float8_current_scaling`` in ``module/linear.py`` and
  ``layernorm_linear.py``: ``sequence_parallel and parallel_mode == "column"``), and the
  gathered FP8 is transposed in the backward (``update_usage(columnwise_usage=True)``: read 1,
  write 1 of ``T``); without SP, and for row-parallel inputs (O, FC2), one cast-transpose;
- an output gradient: of a row-parallel layer under SP, quantized row-wise on ``T/tp`` tokens,
  amax all-reduced over TP (``sequence_parallel and parallel_mode == "row"``), all-gathered in
  FP8, then transposed (``_all_gather_fp8``, ``pytorch/distributed.py``:
  ``out._create_transpose()``); otherwise one cast-transpose;
- the SwiGLU output is Megatron's own BF16 kernel, cast by FC2's quantize with its amax pass;
- no amax buffer and no per-region reduction (``add_fp8_tensors_to_global_buffer`` returns for
  a non-delayed recipe, ``pytorch/quantization.py``);
- weights: ``get_weight_workspace`` quantizes a weight only when ``is_first_microbatch`` is
  True or None (Megatron-Core sets it once a step), so a weight's amax and cast-transpose run
  once per step, as delayed scaling's cast does. Megatron-Bridge's ``fp8_cs`` precision also
  sets ``fp8_param_gather`` (``bf16_with_fp8_current_scaling_mixed``, mixed_precision.py at
  v0.2.0): FP8 weights cast from the master shard after the optimizer step and gathered in
  FP8; that path is not modelled here.

The one-thread kernels move a few bytes; they are ops so that the time between kernels counts
them (:mod:`.overhead`). The all-reduce is timed as :func:`~.amax_reduction.reduction_latency`
over the TP group (kind ``gaps``: the stream waits for it).

>>> [(k.name, k.bytes) for k in quantize_kernels(1000, both_layouts=True)]
[('amax_zero', 4.0), ('amax', 2004.0), ('scale', 12.0), ('cast_transpose', 4000.0)]
>>> [k.name for k in quantize_kernels(1000, both_layouts=False, amax_pass=False)]
['scale', 'cast']
"""

from __future__ import annotations

from typing import NamedTuple

from hpnsim.errors import InputError
from hpnsim.training.compute.precision import positive_int

#: hpnsim's FP8 recipes: TE's delayed scaling (TE 1.x modules, the default) and current scaling
FP8_RECIPES = ("delayed", "current")
#: TE's norm kernel writes the amax of its output (TE v2.9 ``FUSED_NORM_AMAX_FP8``, the default
#: without ``NVTE_NORM_FWD_USE_CUDNN``)
NORM_AMAX_FUSED = True
_FLOAT = 4.0


class Kernel(NamedTuple):
    """One kernel of a quantize: its name and HBM bytes."""

    name: str
    bytes: float


def checked_recipe(value) -> str:
    """The checked FP8 recipe (``None``: ``"delayed"``).

    >>> checked_recipe(None), checked_recipe("Current")
    ('delayed', 'current')
    >>> checked_recipe("mxfp8")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: fp8_recipe: one of delayed, current, got 'mxfp8'
    """
    if value is None:
        return "delayed"
    key = str(value).strip().lower()
    if key not in FP8_RECIPES:
        raise InputError("fp8_recipe", f"one of {', '.join(FP8_RECIPES)}, got {value!r}")
    return key


def fp8_recipe_for(dtype: str, recipe) -> str:
    """The checked FP8 recipe of a compute in ``dtype``: ``"delayed"`` unless given, and
    ``"current"`` only with FP8 GEMMs.

    >>> fp8_recipe_for("fp8", "current"), fp8_recipe_for("bf16", None)
    ('current', 'delayed')
    >>> fp8_recipe_for("bf16", "current")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: fp8_recipe: current scaling scales FP8 casts; needs dtype fp8, got bf16
    """
    checked = checked_recipe(recipe)
    if checked == "current" and dtype != "fp8":
        raise InputError("fp8_recipe", f"current scaling scales FP8 casts; needs dtype fp8, "
                                       f"got {dtype}")
    return checked


def quantize_kernels(elements: int, *, both_layouts: bool, amax_pass: bool = True
                     ) -> list[Kernel]:
    """The kernels of one current-scaled quantize of ``elements`` BF16 values (the amax
    all-reduce, when there is one, goes between ``amax`` and ``scale``).

    ``amax_zero`` writes the FP32 amax; ``amax`` reads the tensor (2 bytes an element) and
    writes the amax; ``scale`` reads the amax, writes the scale and its inverse; the cast reads
    2 bytes an element and writes 1 (``cast``) or 1 + 1 (``cast_transpose``). ``amax_pass``
    False: the amax came with the tensor (TE's norm kernel), only ``scale`` and the cast run.

    >>> sum(k.bytes for k in quantize_kernels(10, both_layouts=False))
    70.0
    """
    n = positive_int("elements", elements)
    out = [Kernel("amax_zero", _FLOAT), Kernel("amax", 2.0 * n + _FLOAT)] if amax_pass else []
    out.append(Kernel("scale", 3 * _FLOAT))
    out.append(Kernel("cast_transpose", 4.0 * n) if both_layouts else Kernel("cast", 3.0 * n))
    return out

