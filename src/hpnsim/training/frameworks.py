"""Which Megatron-Core release first has each option hpnsim models (data only).

A job names the Megatron-Core version it runs (``megatron_core``, default
:data:`MEGATRON_CORE_DEFAULT`, the version docs/pipelines.md reads); an option that version
lacks is refused (:func:`hpnsim.training.job_options.check_framework`). Each entry's version
is the first ``core_vX.Y.0`` tag of NVIDIA/Megatron-LM holding the commit that added the
flag (``git log -S<flag> -- megatron/training/arguments.py megatron/arguments.py``, then
``git tag --contains``), read at ``d98e8a64dd`` (August 2026). Options that Megatron-LM had
before ``megatron.core`` became a package (``9cdc714939``, 2023-05-11, version 0.1) date
from 0.1. Megatron-Core has no zero-bubble schedule (no ``zero_bubble``/``zb`` schedule in
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


#: The version a job runs unless it says otherwise: Megatron-LM ``d98e8a64dd``
#: (``megatron/core/package_info.py``: MAJOR 0, MINOR 20), with TransformerEngine 2.x.
MEGATRON_CORE_DEFAULT = (0, 20)
#: The first ``megatron.core`` package (``9cdc714939`` "Add pip package for megatron.core").
MEGATRON_CORE_FIRST = (0, 1)

#: hpnsim TrainJob option -> the first Megatron-Core release that has it.
MEGATRON_CORE_SINCE: dict[str, Since] = {
    "zero_1_2": Since((0, 1), "--use-distributed-optimizer",
                      "329fe5820f (2022-02-10, Float16DistributedOptimizer), before the "
                      "megatron.core package"),
    "zero_3": Since((0, 10), "--use-torch-fsdp2",
                    "e1993fa6f7 (2024-11-13, PyTorch FSDP-2); first in core_v0.10.0 (Megatron's "
                    "own FSDP, --use-custom-fsdp, d165a8548b, from core_v0.12.0)"),
    "recompute": Since((0, 1), "--recompute-granularity full",
                       "bbab79f869 (2022-05-16), before the megatron.core package"),
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
    "stage_layers": Since((0, 13), "--pipeline-model-parallel-layout",
                          "77732c3628 (2025-06-13, Flexible Asymmetric Virtual Pipeline "
                          "Parallelism with Custom Pipeline Layout); first in core_v0.13.0"),
}
