"""TrainJob's option checks and its compute-model choice, apart from what the job derives.

Each check raises :class:`~hpnsim.errors.InputError` naming the keyword (the CLI and the
YAML loader turn it into the flag or the YAML path) before anything is simulated.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from hpnsim.errors import InputError
from hpnsim.training.compute import KernelTable
from hpnsim.training.compute.core_attention import attention_kernel
from hpnsim.training.compute.cross_entropy import DEFAULT_CROSS_ENTROPY, cross_entropy_kernel
from hpnsim.training.compute.current_scaling import fp8_recipe_for
from hpnsim.training.compute.precision import true_or_false
from hpnsim.training.cost import DTYPES, ConstantEfficiency, OperationModel
from hpnsim.training.frameworks import (
    FUSED_ATTENTION_DEFAULT,
    MEGATRON_CORE_DEFAULT,
    MEGATRON_CORE_FIRST,
    MEGATRON_CORE_SINCE,
    MEGATRON_LM_RELEASES,
    PRE_CORE,
    TE_FUSED_KERNEL,
)
from hpnsim.workloads import models
from hpnsim.workloads.gpus import GPUSpec
from hpnsim.workloads.layout import PP_BEFORE_DP, Layout, check_layout, make_layout

ZERO_STAGES = (0, 1, 2, 3)


def check_sizes(parallel: dict, grad_bytes, zero) -> None:
    """Positive integer sizes and a known ZeRO stage.

    >>> check_sizes({"tp": 0}, 2, 0)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: tp: must be a positive integer, got 0
    """
    for name, value in (*parallel.items(), ("grad_bytes", grad_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(name, f"must be a positive integer, got {value!r}")
    if zero not in ZERO_STAGES:
        raise InputError("zero", f"one of {', '.join(map(str, ZERO_STAGES))}, got {zero!r}")


def compute_settings(gpu: GPUSpec, dtype, efficiency, table
                     ) -> tuple[GPUSpec, str, float | None, KernelTable | None]:
    """The checked ``(gpu, dtype, compute_efficiency, kernel_table)`` of a job: the dtype
    the GPU has, an efficiency in (0, 1] or a kernel table (read from its CSV, or a table
    shipped with hpnsim by name), not both.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> compute_settings(get_gpu("a100"), "FP8", None, None)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dtype: a100 has no fp8 tensor cores; choose from tf32, bf16, fp16
    """
    dtype = str(dtype).strip().lower()
    if dtype not in DTYPES:
        raise InputError("dtype", f"one of {', '.join(DTYPES)}, got {dtype!r}")
    if gpu.tensor_peaks:
        gpu.tensor_peak(dtype)   # FP8 on A100: refused, naming the dtype
    elif dtype == "fp8":
        raise InputError("dtype", f"{gpu.name} has no per-dtype tensor peaks; use bf16")
    if efficiency is not None:
        if isinstance(efficiency, bool) or not 0 < float(efficiency) <= 1:
            raise InputError("compute_efficiency", f"must be in (0, 1], got {efficiency!r}")
        if table is not None:
            raise InputError("compute_efficiency", "give either a kernel table or a "
                                                   "compute efficiency, not both")
        efficiency = float(efficiency)
        gpu = replace(gpu, mfu=efficiency)
    if isinstance(table, (str, Path)):
        try:
            table = KernelTable.load(table)
        except InputError as error:   # named by what the user typed, with its line
            where = "" if error.field == "kernel-table" else f"{error.field}: "
            raise InputError("kernel_table", where + error.message) from None
    elif table is not None and not isinstance(table, KernelTable):
        raise InputError("kernel_table", f"must be a KernelTable or a CSV path, got "
                                         f"{type(table).__name__}")
    if table is not None and table.rows and not any(r.gpu == gpu.name for r in table.rows):
        measured = ", ".join(sorted({r.gpu for r in table.rows}))
        raise InputError("kernel_table", f"{table.source} has rows for {measured}, none for "
                                         f"the job's GPU {gpu.name}")
    return gpu, dtype, efficiency, table


def compute_model(gpu: GPUSpec, dtype: str, efficiency: float | None,
                  table: KernelTable | None, fp8_gemm=None, fp8_recipe: str = "delayed"
                  ) -> OperationModel | ConstantEfficiency:
    """The strategy timing a job's kernels: the per-operation model, or the constant
    efficiency (given, or the GPU's ``mfu`` for a spec without the compute fields).

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> compute_model(get_gpu("h800"), "bf16", 0.5, None).name
    'constant'
    """
    if efficiency is not None:
        return ConstantEfficiency(efficiency, dtype)
    if not (gpu.tensor_peaks and gpu.sm_count and gpu.architecture):
        return ConstantEfficiency(gpu.mfu, dtype)
    return OperationModel(dtype, table, fp8_gemm, fp8_recipe)


def check_fp8_recipe(version: tuple[int, int], dtype: str, recipe) -> str:
    """The checked FP8 recipe of a job (:mod:`~hpnsim.training.compute.current_scaling`):
    ``"delayed"`` unless given; ``"current"`` needs FP8 GEMMs and a Megatron-Core with
    ``--fp8-recipe tensorwise``.

    >>> check_fp8_recipe((0, 15), "fp8", "current"), check_fp8_recipe((0, 8), "bf16", None)
    ('current', 'delayed')
    >>> check_fp8_recipe((0, 11), "fp8", "current")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: fp8_recipe: Megatron-Core 0.11 lacks it (--fp8-recipe tensorwise arrived in 0.12); give megatron_core 0.12 or later, or leave it off
    """
    checked = fp8_recipe_for(dtype, recipe)
    if checked == "current":
        check_framework(version, ["fp8_recipe"])
    return checked


def check_fp8_param_gather(version: tuple[int, int], dtype: str, zero: int, value) -> bool:
    """The checked ``fp8_param_gather`` of a job (:mod:`~hpnsim.training.fp8_params`): FP8
    weights need FP8 GEMMs (``fp8_param must be used together with fp8 mode``,
    megatron/core/transformer/transformer_config.py) and a sharded optimizer or FSDP
    (``--fp8-param-gather only supported with distributed optimizer``,
    megatron/training/arguments.py, both at ``d98e8a64dd``), from Megatron-Core 0.9.

    >>> check_fp8_param_gather((0, 20), "fp8", 1, True)
    True
    >>> check_fp8_param_gather((0, 20), "bf16", 1, True)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: fp8_param_gather: keeps the linear weights in FP8: needs dtype fp8, got bf16
    """
    if not true_or_false("fp8_param_gather", value):
        return False
    if dtype != "fp8":
        raise InputError("fp8_param_gather", "keeps the linear weights in FP8: needs dtype "
                                             f"fp8, got {dtype}")
    if zero == 0:
        raise InputError("fp8_param_gather", "gathers the sharded weights: needs the "
                                             "distributed optimizer or FSDP (zero 1, 2 or 3)")
    check_framework(version, ["fp8_param_gather"])
    return True


def job_layout(spec: models.ModelSpec, layout: Layout | None, parallel: dict, *, zero: int,
               global_batch: int | None, schedule: str, sequence_parallel: bool,
               uneven: bool, rank_order: str = "") -> Layout:
    """The job's checked :class:`Layout`: built from the sizes in ``parallel`` (``tp`` ..
    ``virtual_stages``) and the keywords, or ``layout`` itself when the sizes are left at
    their defaults (giving both is refused).

    >>> spec = models.get("llama3-8b")
    >>> job_layout(spec, Layout(tp=8), dict(tp=2), zero=0, global_batch=None, schedule="",
    ...            sequence_parallel=False, uneven=False)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: layout: give the parallel sizes either in the layout or as arguments, not both (got tp)
    """
    if layout is None:
        p = parallel
        if global_batch is None:
            global_batch = p["dp"] * p["micro_batch"] * 4 * p["pp"]
        return make_layout(spec, tp=p["tp"], pp=p["pp"], dp=p["dp"], ep=p["ep"], cp=p["cp"],
                           vpp=p["virtual_stages"], zero=zero,
                           sequence_parallel=sequence_parallel, micro_batch=p["micro_batch"],
                           global_batch=global_batch, schedule=schedule, gpus_per_host=None,
                           even_layers=not uneven, rank_order=rank_order or "")
    given = {k: v for k, v in (*parallel.items(), ("zero", zero),
                               ("global_batch", global_batch), ("schedule", schedule),
                               ("sequence_parallel", sequence_parallel),
                               ("rank_order", rank_order or ""))
             if v != {"global_batch": None, "schedule": "", "zero": 0,
                      "sequence_parallel": False, "rank_order": ""}.get(k, 1)}
    if given:
        raise InputError("layout", f"give the parallel sizes either in the layout or "
                                   f"as arguments, not both (got {', '.join(given)})")
    if not isinstance(layout, Layout):
        raise InputError("layout", f"must be a Layout, got {type(layout).__name__}")
    check_layout(layout, spec, gpus_per_host=None, even_layers=not uneven)
    return layout


def check_fits(model: models.ModelSpec, gpu: GPUSpec, micro_batch: int, seq_len: int) -> None:
    """Refuse a job whose smallest activation cannot sit on its GPU: the ``b x s x h``
    hidden state of one micro-batch is whole on every GPU of a stage (the TP all-reduce
    buffer; with sequence parallelism, the all-gathered GEMM input), so past the GPU's
    memory no schedule runs it (``--seq-len 1e9`` reported a 490,679-hour iteration).

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> check_fits(models.get("llama3-8b"), get_gpu("h800"), 1, 10**9)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: seq_len: one micro-batch's hidden state (micro_batch 1 x seq_len 1,000,000,000 x hidden 4,096 x 2 bytes = 7,629.4 GiB) is more than the 74.5 GiB of a h800; lower seq_len or micro_batch
    """
    try:
        need = model.hidden_state_bytes(micro_batch, seq_len)
    except InputError:   # not a transformer: no b x s x h tensor
        return
    if need > gpu.memory_bytes:
        alone = need / seq_len * model.seq_len   # at the model's own seq_len
        field = "micro_batch" if alone > gpu.memory_bytes else "seq_len"
        raise InputError(field, f"one micro-batch's hidden state (micro_batch {micro_batch} x "
                                f"seq_len {seq_len:,} x hidden {model.hidden:,} x "
                                f"{model.dtype_bytes:g} bytes = {need / 2**30:,.1f} GiB) is more "
                                f"than the {gpu.memory_bytes / 2**30:,.1f} GiB of a "
                                f"{gpu.name}; lower seq_len or micro_batch")


def check_combinations(layout: Layout, seq_len: int, *, tp_comm_overlap: bool,
                       overlap_grad_reduce: bool, selective_recompute: bool, recompute: bool,
                       overlap_param_gather: bool) -> None:
    """Options that only make sense together (or never together) on ``layout``.

    >>> check_combinations(Layout(tp=2), 4096, tp_comm_overlap=True, overlap_grad_reduce=True,
    ...                    selective_recompute=False, recompute=False,
    ...                    overlap_param_gather=False)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: tp_comm_overlap: overlaps sequence parallelism's collectives: needs sequence_parallel and tp > 1
    """
    if layout.schedule == "zb-h1" and layout.zero == 3:
        raise InputError("schedule", "zb-h1 splits each backward in two; ZeRO-3's per-unit "
                                     "gathers are modelled with 1f1b, gpipe or interleaved")
    if layout.cp > 1 and seq_len % (2 * layout.cp):
        raise InputError("cp", f"must split the sequence ({seq_len} tokens) into 2*cp "
                               f"equal chunks (causal load balancing), got cp={layout.cp}")
    if layout.cp > 1 and layout.ep > 1:
        raise InputError("cp", "context parallelism with expert parallelism is not "
                               f"modelled, got cp={layout.cp} with ep={layout.ep}")
    if tp_comm_overlap and not (layout.sequence_parallel and layout.tp > 1):
        raise InputError("tp_comm_overlap", "overlaps sequence parallelism's collectives: "
                                            "needs sequence_parallel and tp > 1")
    if selective_recompute and recompute:
        raise InputError("selective_recompute", "recomputes core attention only; full "
                                                "recompute already replays it: give one")
    if overlap_param_gather and (layout.zero not in (1, 2) or not overlap_grad_reduce):
        raise InputError("overlap_param_gather", "needs the distributed optimizer (zero 1 "
                                                 "or 2) and overlap_grad_reduce, as in "
                                                 "Megatron-Core")


def parse_version(text, field: str = "megatron_core") -> tuple[int, int]:
    """``"0.20"``, ``"0.20.1"`` or ``"core_v0.20.0"`` as ``(0, 20)``; a Megatron-LM release
    before ``megatron.core`` (``"v2.6"``, :data:`~hpnsim.training.frameworks.MEGATRON_LM_RELEASES`)
    as ``(0, 0)``.

    >>> parse_version("core_v0.13.0"), parse_version("v2.6")
    ((0, 13), (0, 0))
    >>> parse_version(0.1)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: megatron_core: a version as text, e.g. '0.20' (quoted in YAML: 0.10 reads as 0.1), or a Megatron-LM release before Megatron-Core (v1.0, v2.0, v2.5, v2.6), got 0.1
    """
    if isinstance(text, str) and text.strip().lower() in MEGATRON_LM_RELEASES:
        return PRE_CORE
    match = re.fullmatch(r"(?:core_v)?(\d+)\.(\d+)(?:\.\d+)?(?:rc\d+)?",
                         text.strip()) if isinstance(text, str) else None
    if match is None:
        raise InputError(field, f"a version as text, e.g. '0.20' (quoted in YAML: 0.10 reads "
                                f"as 0.1), or a Megatron-LM release before Megatron-Core "
                                f"({', '.join(MEGATRON_LM_RELEASES)}), got {text!r}")
    version = (int(match[1]), int(match[2]))
    if version < MEGATRON_CORE_FIRST:
        raise InputError(field, "Megatron-Core releases start at "
                                f"{_dotted(MEGATRON_CORE_FIRST)}, got {text!r}")
    return version


def options_used(layout: Layout, **options) -> list[str]:
    """The :data:`~hpnsim.training.frameworks.MEGATRON_CORE_SINCE` keys a job uses:
    ``options`` are its TrainJob keywords of the same names (true or set when used).

    >>> options_used(Layout(zero=1), overlap_grad_reduce=True, stage_layers=None)
    ['zero_1_2', 'overlap_grad_reduce']
    """
    used = {"zero_1_2": layout.zero in (1, 2), "zero_3": layout.zero == 3, "cp": layout.cp > 1,
            "rank_order": layout.rank_order == PP_BEFORE_DP,
            "rank_order_cp_ep": layout.rank_order == PP_BEFORE_DP and max(layout.cp, layout.ep) > 1}
    used.update({name: value is not None and value is not False
                 for name, value in options.items()})
    return [name for name in MEGATRON_CORE_SINCE if used.get(name)]


def check_framework(version: tuple[int, int], used: list[str]) -> None:
    """Refuse the first option in ``used`` that Megatron-Core ``version`` lacks, naming
    the keyword, Megatron's flag and the release that added it.

    >>> check_framework((0, 8), ["cp", "first_stage_layers"])
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: first_stage_layers: Megatron-Core 0.8 lacks it (--decoder-first-pipeline-num-layers arrived in 0.9); give megatron_core 0.9 or later, or leave it off
    """
    for name in used:
        since = MEGATRON_CORE_SINCE[name]
        if version < since.version:
            field = since.keyword or name
            framework = ("Megatron-LM before Megatron-Core" if version == PRE_CORE
                         else f"Megatron-Core {_dotted(version)}")
            raise InputError(field, f"{framework} lacks it ({since.flag} arrived in "
                                    f"{_dotted(since.version)}); give megatron_core "
                                    f"{_dotted(since.version)} or later, or leave it off")


def check_attention(megatron_core, attention, cp: int = 1) -> str:
    """The checked core-attention kernel of a job given as typed (its Megatron version as text):
    :func:`job_attention`, refusing ``"flash"`` before Megatron-LM had it and ``"unfused"``
    with context parallelism. Called by :class:`~hpnsim.training.job.TrainJob` and, before
    any fabric is built, by the scenario's job spec.

    >>> check_attention("v2.6", "flash")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: attention: Megatron-LM before Megatron-Core lacks it (--use-flash-attn arrived in 0.1); give megatron_core 0.1 or later, or leave it off
    """
    version = parse_version(megatron_core)
    kernel = job_attention(version, attention, cp)
    if kernel == "unfused" and cp > 1:
        raise InputError("attention", "unfused attention with context parallelism: "
                                      "Megatron's CP runs through fused attention only")
    if kernel != "unfused":
        check_framework(version, ["attention"])
    return kernel


def job_attention(version: tuple[int, int], attention, cp: int = 1) -> str:
    """The core-attention kernel of a job: ``attention`` as given, or the default of its
    Megatron version: from 0.7 (:data:`~hpnsim.training.frameworks.FUSED_ATTENTION_DEFAULT`),
    and with context parallelism in any version, TransformerEngine's attention, whose backend
    choice is ``"cudnn"`` (:data:`~hpnsim.training.frameworks.TE_FUSED_KERNEL`: cuDNN's fused
    attention on Hopper and later, FlashAttention-2 on Ampere, which ``"cudnn"`` times there);
    before 0.7 the unfused core attention.

    >>> job_attention((0, 6), None), job_attention((0, 20), None), job_attention((0, 6), "flash")
    ('unfused', 'cudnn', 'flash')
    >>> job_attention((0, 6), None, cp=2)
    'cudnn'
    """
    if attention is None:
        fused = version >= FUSED_ATTENTION_DEFAULT or cp > 1
        return TE_FUSED_KERNEL if fused else "unfused"
    return attention_kernel(attention)


def check_cross_entropy(version: tuple[int, int], cross_entropy) -> str:
    """The checked loss implementation of a job (:mod:`~hpnsim.training.compute.cross_entropy`):
    ``cross_entropy`` as given, or Megatron-Core's default, the unfused loss (its
    ``cross_entropy_loss_fusion`` is off by default in every release); a fused form before
    the release that added it is refused.

    >>> check_cross_entropy((0, 20), None), check_cross_entropy((0, 8), "fused")
    ('unfused', 'fused')
    >>> check_cross_entropy((0, 8), "te")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: cross_entropy: Megatron-Core 0.8 lacks it (--cross-entropy-fusion-impl te arrived in 0.13); give megatron_core 0.13 or later, or leave it off
    """
    if cross_entropy is None:
        return DEFAULT_CROSS_ENTROPY
    kernel = cross_entropy_kernel(cross_entropy)
    needs = {"fused": ["cross_entropy_fusion"], "te": ["cross_entropy_te"]}.get(kernel, [])
    check_framework(version, needs)
    return kernel


def _dotted(version: tuple[int, int]) -> str:
    return ".".join(map(str, version))


DEFAULT_VERSION_TEXT = _dotted(MEGATRON_CORE_DEFAULT)
