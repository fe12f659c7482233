"""Parallel layout of a training job: TP, PP (1F1B / interleaved), DP with ZeRO, EP, CP, batches.

A :class:`Layout` is the parallelism only; :func:`make_layout` checks it against a model and a
GPU count and raises :class:`~hpnsim.errors.InputError` naming the field that does not fit.
Placement of ranks on GPUs is in :mod:`hpnsim.workloads.placement`.

Conventions (Megatron-LM): the GPUs of a job are ``tp * cp * pp * dp``; expert parallelism
(EP) is carved out of the data-parallel dimension (``ep`` divides ``dp``); a global batch of
``B`` sequences is split into ``B / (dp * micro_batch)`` micro-batches per pipeline.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hpnsim.errors import InputError
from hpnsim.workloads.models import ModelSpec
from hpnsim.workloads.models import get as get_model

SCHEDULES = ("1f1b", "interleaved", "gpipe", "zb-h1")
#: How ranks are numbered, fastest dimension first, as Megatron-Core spells the orders its
#: command line offers (``initialize_model_parallel(order=...)``, EP being carved out of DP
#: here): ``tp-cp-dp-pp``, its default, and ``tp-cp-pp-dp`` (``--use-tp-pp-dp-mapping``,
#: the order Llama 3's 4D parallelism states, [TP, CP, PP, DP]). Unset (``""``): hpnsim's
#: :func:`~hpnsim.workloads.placement.default_order`.
MEGATRON_ORDER, PP_BEFORE_DP = "tp-cp-dp-pp", "tp-cp-pp-dp"
RANK_ORDERS = (MEGATRON_ORDER, PP_BEFORE_DP)


@dataclass(frozen=True)
class Layout:
    """Parallel sizes and batch split of one job (not validated against a model: see :func:`make_layout`).

    Parameters
    ----------
    tp, pp, dp, cp, ep : int
        Tensor, pipeline, data, context (sequence) and expert parallel sizes.
    vpp : int
        Virtual pipeline stages (model chunks) per pipeline rank; ``> 1`` means interleaved 1F1B.
    zero : int
        ZeRO stage: 0 plain DP (gradient all-reduce), 1/2 sharded optimizer (and gradients):
        reduce-scatter + all-gather, 3 = FSDP (parameters sharded, all-gathered per layer).
    sequence_parallel : bool
        Megatron sequence parallelism: TP all-reduces become reduce-scatter + all-gather.
    micro_batch, global_batch : int
        Sequences per micro-batch and per iteration (whole job).
    schedule : str
        ``1f1b`` (default; ``interleaved`` when ``vpp > 1``) or ``gpipe``.
    rank_order : str
        One of :data:`RANK_ORDERS`, or ``""`` (default) for hpnsim's order (Megatron's
        default unless TP x CP leaves a host part-filled).

    Examples
    --------
    >>> lay = Layout(tp=8, pp=8, dp=16, micro_batch=1, global_batch=2048)
    >>> lay.n_gpus, lay.num_microbatches, lay.schedule
    (1024, 128, '1f1b')
    >>> round(lay.bubble_fraction(), 4)              # (p-1)/(m+p-1)
    0.0519
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    zero: int = 0
    sequence_parallel: bool = False
    micro_batch: int = 1
    global_batch: int | None = None
    schedule: str = ""
    rank_order: str = ""

    def __post_init__(self):
        for field in ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(field, f"must be a positive integer, got {value!r}")
        if self.zero not in (0, 1, 2, 3):
            raise InputError("zero", f"ZeRO stage must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.global_batch is None:
            object.__setattr__(self, "global_batch", self.dp * self.micro_batch)
        if not isinstance(self.global_batch, int) or self.global_batch < 1:
            raise InputError("global_batch", f"must be a positive integer, got {self.global_batch!r}")
        if self.global_batch % (self.dp * self.micro_batch):
            raise InputError(
                "global_batch",
                f"must be a multiple of dp*micro_batch = {self.dp}*{self.micro_batch} = "
                f"{self.dp * self.micro_batch}, got {self.global_batch}")
        schedule = self.schedule or ("interleaved" if self.vpp > 1 else "1f1b")
        if schedule not in SCHEDULES:
            raise InputError("schedule", f"one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if (schedule == "interleaved") != (self.vpp > 1):
            raise InputError("vpp", f"the interleaved schedule needs vpp > 1 and vpp > 1 needs it; "
                                    f"got schedule={schedule}, vpp={self.vpp}")
        if self.vpp > 1 and self.pp < 2:
            raise InputError("vpp", f"virtual stages need pp >= 2, got pp={self.pp}")
        if schedule == "interleaved" and self.num_microbatches % self.pp:
            raise InputError("global_batch", f"interleaved 1F1B needs the micro-batch count "
                                             f"({self.num_microbatches}) to be a multiple of pp={self.pp}")
        if self.dp % self.ep:
            raise InputError("ep", f"must divide dp={self.dp} (experts are spread over DP ranks), got {self.ep}")
        if self.rank_order not in ("", *RANK_ORDERS):
            raise InputError("rank_order", f"one of {', '.join(RANK_ORDERS)} (fastest "
                                           f"dimension first), got {self.rank_order!r}")
        object.__setattr__(self, "schedule", schedule)

    @property
    def n_gpus(self) -> int:
        """GPUs of the job: ``tp * cp * pp * dp``."""
        return self.tp * self.cp * self.pp * self.dp

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per pipeline per iteration: ``global_batch / (dp * micro_batch)``."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def edp(self) -> int:
        """Expert-data-parallel size: replicas of each expert (``dp / ep``)."""
        return self.dp // self.ep

    def bubble_fraction(self) -> float:
        """Idle fraction of a pipeline iteration (closed form, equal stage times).

        1F1B and GPipe: ``(p-1)/(m+p-1)``; interleaved with ``v`` chunks: ``(p-1)/(v*m+p-1)``.

        >>> Layout(pp=4, dp=1, global_batch=12).bubble_fraction()    # 3 / (12 + 3)
        0.2
        >>> Layout(pp=4, vpp=2, global_batch=12).bubble_fraction()   # 3 / (24 + 3)
        0.1111111111111111
        """
        p, m, v = self.pp, self.num_microbatches, self.vpp
        return (p - 1) / (v * m + p - 1)

    def layers_per_stage(self, layers: int) -> int:
        """Transformer layers held by one pipeline rank (all its virtual chunks)."""
        return layers // self.pp

    def stage_of_layer(self, layers: int) -> list[tuple[int, int]]:
        """``(pipeline rank, virtual chunk)`` holding each layer (Megatron interleaved order).

        >>> Layout(pp=2, vpp=2, global_batch=2).stage_of_layer(8)
        [(0, 0), (0, 0), (1, 0), (1, 0), (0, 1), (0, 1), (1, 1), (1, 1)]
        """
        per_chunk = layers // (self.pp * self.vpp)
        return [((i // per_chunk) % self.pp, i // (per_chunk * self.pp)) for i in range(layers)]

    def to_dict(self) -> dict:
        """Fields plus derived sizes."""
        out = dataclasses.asdict(self)
        out.update(n_gpus=self.n_gpus, num_microbatches=self.num_microbatches,
                   bubble_fraction=self.bubble_fraction())
        return out


def check_layout(layout: Layout, model: ModelSpec | str, *, n_gpus: int | None = None,
                 gpus_per_host: int | None = 8, allow_cross_host_tp: bool = False,
                 even_layers: bool = True) -> None:
    """Raise :class:`InputError` if ``layout`` does not fit ``model``, ``n_gpus`` or the host size.

    ``even_layers=False`` leaves the layer split to the caller (an uneven pipeline split).

    Examples
    --------
    >>> check_layout(Layout(tp=8, pp=8, dp=16, global_batch=2048), "llama3-70b", n_gpus=1024)
    >>> check_layout(Layout(tp=8, pp=8, dp=16), "llama3-70b", n_gpus=512)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: layout: tp*cp*pp*dp = 8*1*8*16 = 1024 must equal the job's GPUs, got 512
    """
    model = get_model(model)
    lay = layout
    if gpus_per_host is not None and (isinstance(gpus_per_host, bool) or not isinstance(
            gpus_per_host, int) or gpus_per_host < 1):
        raise InputError("gpus_per_host", f"must be a positive integer (GPUs on one NVLink "
                                          f"domain, e.g. 8), got {gpus_per_host!r}")
    if n_gpus is not None and lay.n_gpus != n_gpus:
        raise InputError("layout", f"tp*cp*pp*dp = {lay.tp}*{lay.cp}*{lay.pp}*{lay.dp} = "
                                   f"{lay.n_gpus} must equal the job's GPUs, got {n_gpus}")
    if gpus_per_host is not None and not allow_cross_host_tp:
        if lay.tp > gpus_per_host or gpus_per_host % lay.tp:
            raise InputError("tp", f"must divide the GPUs per host ({gpus_per_host}) to stay on "
                                   f"NVLink, got {lay.tp}; allow_cross_host_tp lifts this")
    if model.kind != "transformer":
        if max(lay.tp, lay.pp, lay.cp, lay.ep) > 1:
            raise InputError("layout", f"{model.name} is a {model.kind}: only data parallelism "
                                       f"is modelled, got tp={lay.tp} pp={lay.pp} cp={lay.cp} ep={lay.ep}")
        return
    if even_layers and model.layers % (lay.pp * lay.vpp):
        raise InputError("pp", f"pp*vpp = {lay.pp}*{lay.vpp} must divide the {model.layers} layers "
                               f"of {model.name}")
    if model.heads % lay.tp:
        raise InputError("tp", f"must divide the {model.heads} attention heads of {model.name}, got {lay.tp}")
    if model.seq_len % lay.cp:
        raise InputError("cp", f"must divide the sequence length {model.seq_len}, got {lay.cp}")
    if lay.ep > 1 and not model.is_moe:
        raise InputError("ep", f"{model.name} has no experts; ep must be 1, got {lay.ep}")
    if model.is_moe and model.experts % lay.ep:
        raise InputError("ep", f"must divide the {model.experts} experts of {model.name}, got {lay.ep}")


def make_layout(model: ModelSpec | str, *, tp: int = 1, pp: int = 1, dp: int = 1, cp: int = 1,
                ep: int = 1, vpp: int = 1, zero: int = 0, sequence_parallel: bool = False,
                micro_batch: int = 1, global_batch: int | None = None, schedule: str = "",
                rank_order: str = "", n_gpus: int | None = None, gpus_per_host: int | None = 8,
                allow_cross_host_tp: bool = False, even_layers: bool = True) -> Layout:
    """Build a :class:`Layout` and validate it against ``model`` (see :func:`check_layout`).

    Examples
    --------
    >>> make_layout("llama3-70b", tp=8, pp=8, dp=16, global_batch=2048).num_microbatches
    128
    >>> make_layout("llama3-70b", tp=16, pp=4, dp=16)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: tp: must divide the GPUs per host (8) to stay on NVLink, got 16; allow_cross_host_tp lifts this
    """
    layout = Layout(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, zero=zero,
                    sequence_parallel=sequence_parallel, micro_batch=micro_batch,
                    global_batch=global_batch, schedule=schedule, rank_order=rank_order)
    check_layout(layout, model, n_gpus=n_gpus, gpus_per_host=gpus_per_host,
                 allow_cross_host_tp=allow_cross_host_tp, even_layers=even_layers)
    return layout
