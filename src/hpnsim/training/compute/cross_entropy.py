"""The vocabulary-parallel cross-entropy loss as the framework computes it: its passes over
the logits.

The output head writes the logits, ``T x V/tp`` BF16 values per GPU and micro-batch (``T``
tokens, ``V`` the vocabulary). The loss and its gradient then stream them through HBM a few
times, in FP32 where the framework casts; with Llama 3's 128,256-entry vocabulary at
8,192 tokens that is a billion logits per GPU, so the number of passes is what the loss
costs. Three implementations, chosen by :data:`CROSS_ENTROPY_KERNELS` (TrainJob
``cross_entropy``), each pass one kernel moving the bytes per logit below (reads plus
writes; the row-sized work, a max, sum or target gather over ``T`` values, is left out: it is
``1/V`` of a pass):

``"unfused"``: Megatron-Core's ``vocab_parallel_cross_entropy``
(``megatron/core/tensor_parallel/cross_entropy.py`` at ``core_r0.8.0``; the same operations in
Megatron-LM v2's ``mpu/cross_entropy.py``, with the FP32 cast outside the function), the only
form before Megatron-Core 0.8 and the default in every release (``cross_entropy_loss_fusion``
is False in ``model_parallel_config.py`` at ``d98e8a64dd``):

  ====================  =========  ==============================================
  pass                  bytes      what
  ====================  =========  ==============================================
  ``cast``              2 + 4      ``logits.float()``
  ``max``               4          ``torch.max`` over the vocabulary
  ``subtract``          4 + 4      ``logits -= max`` in place
  ``exp``               4 + 4      ``torch.exp(out=logits)``
  ``sum``               4          the softmax denominator
  ``normalize``         4 + 4      ``exp_logits.div_(sum)``: the softmax, kept for the backward
  ``grad_scale``        4 + 4      backward: ``grad_input.mul_(grad_output)``
  ``grad_cast``         4 + 2      backward: the FP32 gradient cast to the logits' BF16
  ====================  =========  ==============================================

``"fused"``: ``cross_entropy_loss_fusion`` (from Megatron-Core 0.8, 7b4a6d76c9 of 2024-06-14;
``megatron/core/fusions/fused_cross_entropy.py``): the same operations in four functions under
``jit_fuser``, which is ``torch.compile`` from PyTorch 2.2 (``megatron/core/jit.py``); each
compiles to one pass reading its tensor inputs and writing its outputs and the inputs it
mutates: ``calculate_logits_max`` 2 + 4 (the cast, the max in the same pass),
``calculate_predicted_logits`` 4 + 4 (subtract, exp and sum), ``calculate_cross_entropy_loss``
4 + 4 (the normalization), backward ``calculate_gradients`` 4 + 4 + 2 (the in-place update
written back, and its BF16 copy): 32 bytes per logit against the unfused 52.

``"te"``: ``cross_entropy_fusion_impl='te'`` (from Megatron-Core 0.13), TransformerEngine's
Triton kernels (``transformer_engine/pytorch/triton/cross_entropy.py``, as of 2025, before
01bbe3eea of 2026-07-09): ``online_softmax_kernel`` reads the BF16 logits once for each row's max
and sum, ``cross_entropy_kernel`` reads them again and writes the gradient in their place,
and the backward's ``element_mul_kernel`` scales it in place (Megatron passes per-token loss
gradients, so it runs): 2 + 4 + 4 = 10 bytes per logit. (From 01bbe3eea the gradient is kept
in FP32: 22 bytes; not modelled, hpnsim does not track TransformerEngine's version.)
Megatron-Bridge's performance recipes (``perf_recipes/_common.py`` at 067f987d) run it.

>>> ce = cross_entropy_passes("unfused")
>>> sum(p.bytes_per_logit for p in ce), sum(p.bytes_per_logit for p in ce if p.backward)
(52, 14)
>>> [sum(p.bytes_per_logit for p in cross_entropy_passes(k)) for k in ("fused", "te")]
[32, 10]
"""

from __future__ import annotations

from typing import NamedTuple

from hpnsim.errors import InputError


class LossPass(NamedTuple):
    """One kernel of the loss: its name, the HBM bytes it moves per logit, its direction."""

    name: str
    bytes_per_logit: int
    backward: bool = False


_FP32, _BF16 = 4, 2

#: Cross-entropy implementations a job may run (TrainJob ``cross_entropy``), each as its
#: passes over the logits (module docstring).
CROSS_ENTROPY_KERNELS: dict[str, tuple[LossPass, ...]] = {
    "unfused": (
        LossPass("ce_cast", _BF16 + _FP32),
        LossPass("ce_max", _FP32),
        LossPass("ce_subtract", 2 * _FP32),
        LossPass("ce_exp", 2 * _FP32),
        LossPass("ce_sum", _FP32),
        LossPass("ce_normalize", 2 * _FP32),
        LossPass("ce_grad_scale", 2 * _FP32, backward=True),
        LossPass("ce_grad_cast", _FP32 + _BF16, backward=True),
    ),
    "fused": (
        LossPass("ce_logits_max", _BF16 + _FP32),
        LossPass("ce_predicted_logits", 2 * _FP32),
        LossPass("ce_loss", 2 * _FP32),
        LossPass("ce_gradients", 2 * _FP32 + _BF16, backward=True),
    ),
    "te": (
        LossPass("ce_online_softmax", _BF16),
        LossPass("ce_loss_and_gradient", 2 * _BF16),
        LossPass("ce_grad_scale", 2 * _BF16, backward=True),
    ),
}


#: What a job runs unless it names one: Megatron-Core's default in every release
#: (``cross_entropy_loss_fusion`` off, ``model_parallel_config.py`` at ``d98e8a64dd``).
DEFAULT_CROSS_ENTROPY = "unfused"


def cross_entropy_kernel(name) -> str:
    """The checked implementation name.

    >>> cross_entropy_kernel(" TE ")
    'te'
    >>> cross_entropy_kernel("liger")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: cross_entropy: one of unfused, fused, te, got 'liger'
    """
    key = str(name).strip().lower()
    if key not in CROSS_ENTROPY_KERNELS:
        raise InputError("cross_entropy", f"one of {', '.join(CROSS_ENTROPY_KERNELS)}, "
                                          f"got {name!r}")
    return key


def loss_kernel(name, backward: bool = False) -> str:
    """The kernel name implementation ``name``'s passes are timed by (its fitted HBM rate,
    :func:`~hpnsim.training.compute.memory_ops.hbm_efficiency`, and its kernel-table rows,
    ``memory:<kernel>``), forward or backward.

    >>> loss_kernel("fused"), loss_kernel(" Unfused ", backward=True)
    ('cross_entropy_fused', 'cross_entropy_unfused_bwd')
    """
    return f"cross_entropy_{cross_entropy_kernel(name)}" + ("_bwd" if backward else "")


def cross_entropy_passes(name) -> tuple[LossPass, ...]:
    """The passes over the logits of implementation ``name``, forward ones first."""
    return CROSS_ENTROPY_KERNELS[cross_entropy_kernel(name)]
