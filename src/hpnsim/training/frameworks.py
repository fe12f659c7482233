"""Which Megatron-Core release first has each option hpnsim models (data only).

A job names the Megatron-Core version it runs (``megatron_core``, default
:data:`MEGATRON_CORE_DEFAULT`, the version docs/pipelines.md reads); an option that version
lacks is refused (:func:`hpnsim.training.job_options.check_framework`). Each entry's version
is the first ``core_vX.Y.0`` tag of NVIDIA/Megatron-LM holding the commit that added the
flag (``git log -S<flag> -- megatron/training/arguments.py megatron/arguments.py``, then
``git tag --contains``), read at ``d98e8a64dd`` (August 2026). Options that Megatron-LM had
before ``megatron.core`` became a package (``9cdc714939``, 2023-05-11, version 0.1) date
from 0.1. Megatron-LM releases before the package (tags ``v1.0``, ``v2.0``, ``v2.5``, ``v2.6``,
2020-04 to 2021-08) read as version 0.0 (:data:`MEGATRON_LM_RELEASES`): none has FlashAttention,
the distributed optimizer or selective recomputation. Megatron-Core has no zero-bubble schedule (no ``zero_bubble``/``zb`` schedule in
``megatron/`` at ``d98e8a64dd``; ``delay_wgrad_compute`` splits weight gradients for MoE
overlap, not a ZB-H1 pipeline): hpnsim's ``zb-h1`` follows Qi et al. (ICLR 2024) and is not
checked against a version.

>>> MEGATRON_CORE_SINCE["stage_layers"].version
(0, 13)
"""

from __future__ import annotations

from typing import NamedTuple


class Since(NamedTuple):
    """The first Megatron-Core release with an option, and where that is read."""

    version: tuple[int, int]
    flag: str      # Megatron's own spelling of the option
    source: str    # the commit that added the flag, and the first release tag holding it
    keyword: str = ""   # the TrainJob keyword a refusal names, when not the entry's own name


#: The version a job runs unless it says otherwise: Megatron-LM ``d98e8a64dd``
#: (``megatron/core/package_info.py``: MAJOR 0, MINOR 20), with TransformerEngine 2.x.
MEGATRON_CORE_DEFAULT = (0, 20)
#: The first ``megatron.core`` package (``9cdc714939`` "Add pip package for megatron.core").
MEGATRON_CORE_FIRST = (0, 1)
#: Megatron-LM release tags before ``megatron.core`` (``git tag``: v1.0 03d2880923 2020-04-21,
#: v2.0 be473a5bd2 2021-01-12, v2.5 e269e20064 2021-08-10, v2.6 3860e99526 2021-08-27), all
#: read as this version: older than every Megatron-Core release.
PRE_CORE = (0, 0)
MEGATRON_LM_RELEASES = ("v1.0", "v2.0", "v2.5", "v2.6")
#: The first release whose default core attention is fused: ``--transformer-impl`` defaults to
#: ``transformer_engine`` (TransformerEngine's ``DotProductAttention``, flash or cuDNN fused
#: attention) from e7b74a4b7e (2024-04-02, "Change default `transformer_impl` to
#: `transformer_engine` instead of `local`"), first in core_v0.7.0. Before it the default
#: ``local`` implementation ran the unfused ``CoreAttention`` unless ``--use-flash-attn``.
FUSED_ATTENTION_DEFAULT = (0, 7)
#: The kernel TransformerEngine's ``DotProductAttention`` runs where both of its fused backends
#: support the shape: cuDNN's fused attention (``FusedAttention``, arbitrary sequence length)
#: on Hopper, FlashAttention elsewhere. NVIDIA/TransformerEngine 32db39288 (2023-12-07,
#: "Integrate cuDNN frontend v1 to fused attention", first in v1.2) disables FlashAttention on
#: compute capability 9.0 "for performance"; ``get_attention_backend`` at d0067d0da (2026) does
#: so for 9.0 and later. hpnsim's ``"cudnn"`` times as FlashAttention-2 on Ampere, so one name
#: is TransformerEngine's choice on every GPU.
TE_FUSED_KERNEL = "cudnn"

#: hpnsim TrainJob option -> the first Megatron-Core release that has it (``attention``:
#: its fused kernel, ``"flash"``; the unfused core attention is in every release;
#: ``cross_entropy_*``: the loss's fused forms, the unfused one is in every release and the
#: default of all of them).
MEGATRON_CORE_SINCE: dict[str, Since] = {
    "zero_1_2": Since((0, 1), "--use-distributed-optimizer",
                      "329fe5820f (2022-02-10, Float16DistributedOptimizer), before the "
                      "megatron.core package", "zero"),
    "zero_3": Since((0, 10), "--use-torch-fsdp2",
                    "e1993fa6f7 (2024-11-13, PyTorch FSDP-2); first in core_v0.10.0 (Megatron's "
                    "own FSDP, --use-custom-fsdp, d165a8548b, from core_v0.12.0)", "zero"),
    "recompute": Since(PRE_CORE, "--checkpoint-activations",
                       "in Megatron-LM v1.0 and every v2 release (megatron/arguments.py); "
                       "--recompute-granularity full from bbab79f869 (2022-05-16)"),
    "attention": Since(MEGATRON_CORE_FIRST, "--use-flash-attn",
                       "d693034ecf (2022-12-08, Integrate FlashAttention into Megatron-LM; "
                       "attention='flash'), before the megatron.core package; in no v2 "
                       "release tag"),
    "selective_recompute": Since((0, 1), "--recompute-activations",
                                 "bbab79f869 (2022-05-16, granularity selective), before the "
                                 "megatron.core package"),
    "overlap_grad_reduce": Since((0, 4), "--overlap-grad-reduce",
                                 "2d5220a424 (2023-08-16); first in core_v0.4.0"),
    "tp_comm_overlap": Since((0, 4), "--tp-comm-overlap",
                             "116ffddc58 (2023-10-23, userbuffers as Python args); first in "
                             "core_v0.4.0; TransformerEngine userbuffers from v0.9 "
                             "(18da4e88d, 2023-04-19)"),
    "overlap_param_gather": Since((0, 4), "--overlap-param-gather",
                                  "f048bf8c08 (2023-11-17, all-gather overlap in the "
                                  "distributed optimizer); first in core_v0.4.0"),
    "cp": Since((0, 4), "--context-parallel-size",
                "292543d342 (2023-10-12); first in core_v0.4.0"),
    "first_stage_layers": Since((0, 9), "--decoder-first-pipeline-num-layers",
                                "fa8bb5921b (2024-09-05, Uneven Pipeline Parallelism); first "
                                "in core_v0.9.0"),
    "last_stage_layers": Since((0, 9), "--decoder-last-pipeline-num-layers",
                               "fa8bb5921b (2024-09-05, Uneven Pipeline Parallelism); first "
                               "in core_v0.9.0"),
    "account_for_embedding": Since((0, 11), "--account-for-embedding-in-pipeline-split",
                                   "ef490839e8 (2025-02-03, Uneven Virtual Pipeline "
                                   "Parallelism); first in core_v0.11.0"),
    "account_for_loss": Since((0, 11), "--account-for-loss-in-pipeline-split",
                              "ef490839e8 (2025-02-03, Uneven Virtual Pipeline Parallelism); "
                              "first in core_v0.11.0"),
    "cross_entropy_fusion": Since((0, 8), "--cross-entropy-loss-fusion",
                                  "7b4a6d76c9 (2024-06-14, Added cross entropy fusion; "
                                  "cross_entropy='fused'); first in core_v0.8.0",
                                  "cross_entropy"),
    "cross_entropy_te": Since((0, 13), "--cross-entropy-fusion-impl te",
                              "3b141a2471 (2025-04-05, with --cross-entropy-loss-fusion; "
                              "cross_entropy='te'); first in core_v0.13.0", "cross_entropy"),
    "stage_layers": Since((0, 13), "--pipeline-model-parallel-layout",
                          "77732c3628 (2025-06-13, Flexible Asymmetric Virtual Pipeline "
                          "Parallelism with Custom Pipeline Layout); first in core_v0.13.0"),
    "fp8_recipe": Since((0, 12), "--fp8-recipe tensorwise",
                        "3db741160b (2025-03-22, Add FP8 recipe selection to arguments; "
                        "fp8_recipe='current', TransformerEngine's Float8CurrentScaling); "
                        "first in core_v0.12.0"),
    "rank_order": Since((0, 7), "--use-tp-pp-dp-mapping",
                        "6513cde7b2 (2024-04-12, Support alternative mapping TP->PP->DP; "
                        "rank_order='tp-cp-pp-dp'); first in core_v0.7.0"),
    "rank_order_cp_ep": Since((0, 11), "--use-tp-pp-dp-mapping with context or expert "
                              "parallelism", "3e7ceda6b7 (2025-02-04, Support CP + EP with DP "
                              "last rank ordering: until then arguments.py refused cp or ep "
                              "> 1 with the mapping); first in core_v0.11.0", "rank_order"),
    "fp8_param_gather": Since((0, 9), "--fp8-param-gather",
                              "033d8b0de5 (2024-09-05, Add native-fp8: FP8 weights gathered "
                              "as uint8 by the distributed optimizer); first in core_v0.9.0"),
}
