"""TransformerEngine userbuffer configurations: how each GEMM's TP communication overlaps it,
and how many SMs its communication kernel takes from it.

With ``tp_comm_overlap`` TransformerEngine overlaps each of a layer's ten TP-communicating
GEMMs (``qkv_fprop``, ``proj_fprop``, ``fc1_fprop``, ``fc2_fprop`` forward; ``proj_dgrad``,
``fc2_dgrad``, ``qkv_dgrad``, ``fc1_dgrad`` input gradients; ``qkv_wgrad``, ``fc1_wgrad``
weight gradients) with its collective by one of three methods, each configured per GEMM
(``ub_cfgs``; Megatron-Core's ``tp_comm_overlap_cfg``):

- ``ring_exchange``: the GEMM in ``tp`` slices, one shard passed to the next rank per slice,
  copied by the copy engines (``use_ce``);
- ``pipeline``: the GEMM in ``num_splits`` slices, each slice's reduce-scatter launched when
  it is done, by a communication kernel of ``num_sm`` thread blocks;
- ``bulk``: the whole collective (an all-gather or reduce-scatter the GEMM does not consume)
  beside the whole GEMM, by a kernel of ``num_sm`` blocks.

``set_sm_margin`` launches the GEMM on ``sm_count - num_sm`` SMs (``_math_sms`` in
``common/comm_gemm_overlap/comm_gemm_overlap.cpp``); without it the GEMM is launched on every
SM and the communication kernel's ``num_sm`` blocks hold their SMs while it runs. Either way
hpnsim charges the GEMM ``num_sm`` fewer SMs over its whole time (:attr:`Overlap.sms`); a
ring exchange without the margin takes none (copy engines). Not modelled, for a bulk
collective without the margin: that its kernel holds the SMs only while it runs (the charge
is then an upper bound), and that a GEMM launched for every SM whose tiles are dealt out in
advance waits with some tiles for the SMs the kernel holds (a tail that can double it, the
forum measurement :mod:`hpnsim.training.compute.contention` cites: the charge is then a lower
bound). Which of the two a step shows needs a GEMM timed beside a kernel holding SMs
(``tools/measure_overlap.py``).

Where the configurations come from (every figure transcribed from the source named):

- :data:`TE_DEFAULT`: TransformerEngine's own, used where a recipe names none
  (``transformer_engine/pytorch/module/base.py``, ``initialize_ub``'s ``get_default_config``
  at NVIDIA/TransformerEngine ``d0067d0da6``: ``num_sm`` 1 for ``ring_exchange`` and 16
  otherwise, ``set_sm_margin`` for every method but ``ring_exchange``, ``num_splits`` 4 for
  ``pipeline``; ``pipeline`` for ``proj_fprop``/``fc2_fprop``, ``bulk`` for the four
  ``*_dgrad``/``*_wgrad`` of QKV and FC1, ``ring_exchange`` for the rest);
- ``ub_cfg_h100_*``: NVIDIA/NeMo-Framework-Launcher at tag 24.07 (8325688d),
  ``launcher_scripts/conf/training/tp_overlap/<name>.yaml``, the file each model's training
  config names (``tp_overlap@model.ub_tp_comm_overlap_cfg``);
- ``userbuffers_fp8_h100_*``: NVIDIA-NeMo/Megatron-Bridge v0.2.0 (717c62de),
  ``src/megatron/bridge/training/comm_overlap.py``, named by its H100 FP8 performance
  recipes (``scripts/performance/configs/llama3{,1}/llama3{,1}_llm_pretrain.py``).

What is left out: ``aggregate`` (a ring exchange moving two shards a step, in some
``fc2_dgrad`` entries: it takes no SMs either way), ``cga_size``, ``atomic_gemm`` and
``fp8_buf``.

>>> cfg = get_userbuffers("ub_cfg_h100_h8192_tp4_mbs1_seqlen8192")
>>> cfg.sms("proj_fprop"), cfg.sms("qkv_wgrad"), cfg.sms("qkv_fprop")
(24, 24, 0)
>>> TE_DEFAULT.sms("qkv_wgrad"), TE_DEFAULT.overlap("fc2_fprop").method.value
(16, 'pipeline')
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from hpnsim.errors import InputError
from hpnsim.training.compute.contention import Launch

__all__ = ["DEFAULT_USERBUFFERS", "GEMMS", "Method", "Overlap", "PIPELINE_SPLITS", "TE_DEFAULT",
           "USERBUFFERS", "UserbufferConfig", "get_userbuffers"]


class Method(StrEnum):
    """How a GEMM's TP collective overlaps it (the module docstring)."""

    RING_EXCHANGE = "ring_exchange"
    PIPELINE = "pipeline"
    BULK = "bulk"


#: The ten GEMMs of a layer whose TP communication TransformerEngine overlaps, as it names them.
GEMMS = ("qkv_fprop", "proj_fprop", "fc1_fprop", "fc2_fprop", "proj_dgrad", "fc2_dgrad",
         "qkv_dgrad", "fc1_dgrad", "qkv_wgrad", "fc1_wgrad")


@dataclass(frozen=True)
class Overlap:
    """One GEMM's overlap: ``method``, the communication kernel's ``num_sm`` thread blocks,
    ``set_sm_margin`` (the GEMM launched on the SMs they leave) and the ``pipeline``
    method's ``num_splits``."""

    method: Method
    num_sm: int = 1
    set_sm_margin: bool = False
    num_splits: int = 4           # PIPELINE_SPLITS, TransformerEngine's default

    @property
    def sms(self) -> int:
        """SMs the GEMM does without: ``num_sm``, but none for a copy-engine ring exchange
        launched on every SM.

        >>> Overlap(Method.RING_EXCHANGE).sms, Overlap(Method.BULK, 8).sms
        (0, 8)
        """
        if self.method is Method.RING_EXCHANGE and not self.set_sm_margin:
            return 0
        return self.num_sm

    @property
    def launch(self) -> Launch:
        """How the GEMM is launched beside the kernel: on the SMs it leaves with
        ``set_sm_margin``, for every SM otherwise (TransformerEngine's ``_math_sms``).

        >>> Overlap(Method.BULK, 4).launch.value, Overlap(Method.BULK, 4, True).launch.value
        ('full', 'margin')
        """
        return Launch.MARGIN if self.set_sm_margin else Launch.FULL


@dataclass(frozen=True)
class UserbufferConfig:
    """A named per-GEMM userbuffer configuration (``overlaps``: one :class:`Overlap` per
    GEMM of :data:`GEMMS`, in that order) and where it was read."""

    name: str
    source: str
    overlaps: tuple[Overlap, ...]

    def overlap(self, gemm: str) -> Overlap:
        """The overlap of GEMM ``gemm`` (one of :data:`GEMMS`)."""
        return self.overlaps[GEMMS.index(gemm)]

    def sms(self, gemm: str) -> int:
        """SMs GEMM ``gemm`` does without beside its communication (:attr:`Overlap.sms`)."""
        return self.overlap(gemm).sms


_RING = Overlap(Method.RING_EXCHANGE)
_RING_FORWARD = ("qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad")


def _config(name: str, source: str, *, proj_fprop: Overlap, fc2_fprop: Overlap,
            bulk: tuple[int, int, int, int], margin: bool = False) -> UserbufferConfig:
    """A configuration with ring exchanges for the four all-gathers' GEMMs, ``bulk`` the
    ``num_sm`` of (qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad), ``margin`` their
    ``set_sm_margin``."""
    overlaps = {g: _RING for g in _RING_FORWARD}
    overlaps.update(proj_fprop=proj_fprop, fc2_fprop=fc2_fprop)
    for gemm, sms in zip(("qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad"), bulk,
                         strict=True):
        overlaps[gemm] = Overlap(Method.BULK, sms, margin)
    return UserbufferConfig(name, source, tuple(overlaps[g] for g in GEMMS))


#: TransformerEngine's default split of a pipelined reduce-scatter (``num_splits``)
PIPELINE_SPLITS = 4


def _pipeline(sms: int) -> Overlap:
    return Overlap(Method.PIPELINE, sms, True, PIPELINE_SPLITS)


_LAUNCHER = ("NVIDIA/NeMo-Framework-Launcher 24.07 (8325688d), launcher_scripts/conf/"
             "training/tp_overlap/{}.yaml")
_BRIDGE = ("NVIDIA-NeMo/Megatron-Bridge v0.2.0 (717c62de), src/megatron/bridge/training/"
           "comm_overlap.py: {}")
_RING_MARGIN = Overlap(Method.RING_EXCHANGE, 1, True)

TE_DEFAULT = _config("te_default", "TransformerEngine initialize_ub get_default_config "
                     "(transformer_engine/pytorch/module/base.py at d0067d0da6)",
                     proj_fprop=_pipeline(16), fc2_fprop=_pipeline(16),
                     bulk=(16, 16, 16, 16), margin=True)
DEFAULT_USERBUFFERS = TE_DEFAULT.name

def _launcher(name: str, proj: int, fc2: int, bulk: tuple[int, int, int, int]):
    """A NeMo-Framework-Launcher file: pipelined reduce-scatters of ``proj`` and ``fc2`` SMs."""
    return _config(name, _LAUNCHER.format(name), proj_fprop=_pipeline(proj),
                   fc2_fprop=_pipeline(fc2), bulk=bulk)


def _bridge(name: str, bulk: tuple[int, int, int, int]):
    """A Megatron-Bridge configuration: ring-exchange reduce-scatters with the margin."""
    return _config(name, _BRIDGE.format(name), proj_fprop=_RING_MARGIN,
                   fc2_fprop=_RING_MARGIN, bulk=bulk)


_CONFIGS = (
    TE_DEFAULT,
    _launcher("ub_cfg_h100_h6144_tp2_mbs2_seqlen2048", 16, 24, (8, 16, 4, 16)),
    _launcher("ub_cfg_h100_h8192_tp4_mbs1_seqlen4096", 24, 16, (8, 16, 2, 4)),
    _launcher("ub_cfg_h100_h8192_tp4_mbs1_seqlen8192", 24, 16, (4, 24, 2, 4)),
    _launcher("ub_cfg_h100_h12288_tp4_mbs1_seqlen2048", 24, 20, (4, 8, 2, 4)),
    _bridge("userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", (4, 24, 2, 4)),
    _bridge("userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", (2, 24, 2, 2)),
)

#: Every configuration by name.
USERBUFFERS = MappingProxyType({c.name: c for c in _CONFIGS})


def get_userbuffers(name: str | None) -> UserbufferConfig:
    """The configuration called ``name`` (None: :data:`TE_DEFAULT`); an unknown name is an
    :class:`~hpnsim.errors.InputError` naming ``userbuffers`` and the names it knows.

    >>> get_userbuffers(None).name
    'te_default'
    >>> get_userbuffers("mine")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: userbuffers: unknown configuration 'mine'; known: te_default, ub_cfg_h100_h6144_tp2_mbs2_seqlen2048, ub_cfg_h100_h8192_tp4_mbs1_seqlen4096, ub_cfg_h100_h8192_tp4_mbs1_seqlen8192, ub_cfg_h100_h12288_tp4_mbs1_seqlen2048, userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192, userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192
    """
    if name is None:
        return TE_DEFAULT
    if name not in USERBUFFERS:
        raise InputError("userbuffers", f"unknown configuration {name!r}; known: "
                                        + ", ".join(USERBUFFERS))
    return USERBUFFERS[name]
