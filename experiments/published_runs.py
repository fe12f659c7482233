"""Published, measured training runs with the configuration to reproduce them (data + conversions).

Each :class:`PublishedRun` is one row of a published table: model, GPUs, parallel layout,
batch, sequence, precision, framework, and the measured throughput exactly as published
(tokens/s per GPU, or TFLOP/s per GPU with the paper's own FLOP formula). The published
iteration time follows from the source's own numbers only:

- tokens/s per GPU (NeMo, Megatron-Bridge): ``t = GBS * seq / (tokens_per_s_per_gpu * GPUs)``;
- TFLOP/s per GPU counted by Narayanan et al. (SC'21) eq. (3):
  ``t = 96 B s l h^2 (1 + s / 6h + V / 16 l h) / (TFLOP/s * 1e12 * GPUs)``;
- TFLOP/s per GPU whose source does not state its count (Llama 3): hpnsim's model FLOPs
  (:meth:`ModelSpec.training_flops_per_token`), an assumption the row names.

Nothing here feeds a constant of the model: these rows are what the model is judged by
(experiments/fidelity_iteration.py). Where a source leaves an option unstated, ``assumed``
says what was chosen (the framework's recipe default, with the file read).

Sources
-------
``NEMO_2407``: NVIDIA/NeMo, ``docs/source/performance/performance_summary.md`` at commit
8e3d65dcfe (2024-09-09, "24.07 perf numbers"; file removed by d31653f792, 2024-12-12, when the
summary moved to docs.nvidia.com): container NeMo 24.07, DGX-H100, FP8 pre-training; the same
rows are on https://docs.nvidia.com/nemo-framework/user-guide/24.09/performance/performance_summary.html.
``BRIDGE_2511``: NVIDIA-NeMo/Megatron-Bridge, ``docs/performance-summary-archive.md`` at commit
067f987df0 (2026-08-22), section "25.11 NeMo Container", System DGX-H100, FP8-CS (current
scaling). ``MEGATRON_SC21``: Narayanan et al., *Efficient Large-Scale Language Model Training on
GPU Clusters Using Megatron-LM*, SC'21 (arXiv 2104.04473), section 5.1: GPT-3 175B on 1024
A100s, 140 TFLOP/s per GPU by their eq. (3); ``MEGATRON_SC21_T1``: the same paper's Table 1 (its
rows without pipeline parallelism). ``LLAMA3_TABLE4``: Dubey et al., *The Llama 3 Herd
of Models* (arXiv 2407.21783, 2024), Table 4, the 8k-token rows (430 and 400 TFLOP/s per GPU
on 8,192 and 16,384 H100s, batch 32 and 16 sequences per DP group), as P. Balaji's SC'24 talk
is quoted at https://glennklockwood.com/garden/llama-3.1 and as the paper's text states them
(read from public copies of its text: Table 4 and section 3.3.2, which also states the rank
order, the pipeline's split and FP32 gradient reduce-scatters).

>>> run = NEMO_RUNS[0]
>>> run.label, run.gpus, round(published_iteration(run), 3)
('GPT3-5B', 64, 2.8)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpnsim.workloads.model_spec import ModelSpec

NEMO_2407 = ("NeMo 24.07 perf summary (NVIDIA/NeMo docs/source/performance/"
             "performance_summary.md @8e3d65dc), DGX-H100 FP8")
BRIDGE_2511 = ("Megatron-Bridge perf archive, 25.11 container (NVIDIA-NeMo/Megatron-Bridge "
               "docs/performance-summary-archive.md @067f987d), DGX-H100 FP8-CS")
LLAMA3_TABLE4 = ("Dubey et al., The Llama 3 Herd of Models, 2024, Table 4 and sec. 3.3.2 (Table "
                 "4 also as P. Balaji's SC'24 slide is quoted at "
                 "https://glennklockwood.com/garden/llama-3.1), H100 BF16")
MEGATRON_SC21_T1 = ("Narayanan et al., Megatron-LM, SC'21, Table 1 (sec. 5.1; as public copies "
                    "of the paper's text and SotaroKaneda/MLCarbon data/megatron_table.csv "
                    "@69070b28 record it): A100 80GB, TFLOP/s per GPU by eq. 3")
MEGATRON_SC21 = ("Narayanan et al., Megatron-LM, SC'21, sec. 5.1: GPT-3 175B, 1024 A100, "
                 "TP8 PP8 DP16, batch 1536, 140 TFLOP/s per GPU (eq. 3, recomputation counted)")

#: Which rows count as "current recipes": H100/H800-era frameworks (Megatron-Core with
#: TransformerEngine, FlashAttention, FP8 or BF16 on Hopper). Older: A100 runs of 2021-2022.
CURRENT, A100_ERA = "current", "a100"

# Architectures not in hpnsim's catalog, from NVIDIA/NeMo nemo/collections/llm/gpt/model/
# (base.py GPTConfig5B/20B; nemotron.py Nemotron3Config8B/22B, Nemotron4Config340B: LayerNorm,
# squared-ReLU MLP without gate, RoPE, no linear bias, untied embeddings, 256k vocabulary;
# llama.py Llama2Config70B). GPT-3's vocabulary is GPT-2's BPE (50,257), as gpt3-175b's.
GPT3_5B = ModelSpec("gpt3-5b", layers=24, hidden=4096, heads=32, ffn=16384, vocab=50257,
                    seq_len=2048, gated_mlp=False, tied_embeddings=True, learned_positions=True,
                    bias=True, norm="layernorm")
GPT3_20B = ModelSpec("gpt3-20b", layers=44, hidden=6144, heads=48, ffn=24576, vocab=50257,
                     seq_len=2048, gated_mlp=False, tied_embeddings=True, learned_positions=True,
                     bias=True, norm="layernorm")
LLAMA2_70B = ModelSpec("llama2-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672,
                       vocab=32000, seq_len=4096)
NEMOTRON3_8B = ModelSpec("nemotron3-8b", layers=32, hidden=4096, heads=32, ffn=16384,
                         vocab=256000, seq_len=4096, gated_mlp=False, norm="layernorm")
NEMOTRON3_22B = ModelSpec("nemotron3-22b", layers=40, hidden=6144, heads=48, ffn=24576,
                          vocab=256000, seq_len=4096, gated_mlp=False, norm="layernorm")
NEMOTRON4_340B = ModelSpec("nemotron4-340b", layers=96, hidden=18432, heads=96, kv_heads=8,
                           ffn=73728, vocab=256000, seq_len=4096, gated_mlp=False,
                           norm="layernorm")

# What NeMo's recipes run and the tables leave unstated (NVIDIA/NeMo
# nemo/collections/llm/recipes/gpt3_175b.py: MegatronStrategy with the distributed optimizer,
# DistributedDataParallelConfig(overlap_grad_reduce=True, overlap_param_gather=True);
# pretrain_performance_optimizations: MegatronCommOverlapCallback(tp_comm_overlap=True)).
NEMO_ASSUMED = ("distributed optimizer (zero 1), overlap_grad_reduce and overlap_param_gather, "
                "sequence parallelism and TP communication overlap when TP > 1 (NeMo recipes' "
                "performance mode); gradients reduced in BF16; dropout, the loss's fusion and "
                "selective recomputation and the TP overlap's userbuffer configuration as "
                "NeMo-Framework-Launcher's configs at its 24.07 tag set them, "
                "FlashAttention-2 as its NVTE_FUSED_ATTN=0 leaves TransformerEngine (the perf "
                "table does not restate them)")

# What NeMo-Framework-Launcher's training configs set at tag 24.07 (8325688d, 2024-08-01;
# launcher_scripts/conf/training/{gpt3/5b,gpt3/20b,gpt3/175b,llama/llama2_*,llama/llama3_*,
# nemotron/nemotron_*}.yaml): GPT-3 trains with hidden_dropout and attention_dropout 0.1
# (bias_dropout_add_fusion on), every other family with 0; llama3_* and nemotron_* set
# cross_entropy_loss_fusion, the others leave Megatron's unfused loss; nemotron_340b sets
# activations_checkpoint_granularity selective (core attention recomputed).
# Its conf/config.yaml sets env_vars NVTE_FUSED_ATTN: 0 ("Disable cudnn FA until we've tested
# it more") for every run, so TransformerEngine (1.9 or older in a 24.07 container: FA3 arrived
# in v1.11, 2024-10-08) runs FlashAttention-2 on the H100s: attention "flash2". (It also sets
# NCCL_NVLS_ENABLE: 0; none of these rows all-reduces through NCCL beyond the amax's few KiB.)
_LAUNCHER_GPT3 = {"dropout": True}
# The userbuffer configuration each model's training config names (``defaults:
# tp_overlap@model.ub_tp_comm_overlap_cfg``; hpnsim.training.userbuffers holds the files'
# figures): gpt3/20b ub_cfg_h100_h6144_tp2_mbs2_seqlen2048, gpt3/175b
# ub_cfg_h100_h12288_tp4_mbs1_seqlen2048 (for its MBS-2 row too: the one the config names),
# llama/llama2_70b ub_cfg_h100_h8192_tp4_mbs1_seqlen4096, llama/llama3_70b
# ub_cfg_h100_h8192_tp4_mbs1_seqlen8192; nemotron/* name none (TransformerEngine's defaults).
_UB_GPT3_175B = "ub_cfg_h100_h12288_tp4_mbs1_seqlen2048"
_LAUNCHER_FUSED_LOSS = {"cross_entropy": "fused"}


@dataclass(frozen=True)
class PublishedRun:
    """One published measured run.

    ``measured`` is the published throughput in ``unit`` (``"tokens/s/GPU"`` or
    ``"TFLOP/s/GPU eq.3"``); ``dp`` excludes ``cp`` (GPUs = tp * pp * cp * dp);
    ``options`` are further :class:`~hpnsim.training.TrainJob` keywords the run's framework
    sets; ``assumed`` names what the source does not state.
    """

    label: str
    source: str
    era: str
    model: str | ModelSpec
    gpu: str
    tp: int
    pp: int
    dp: int
    micro_batch: int
    global_batch: int
    seq_len: int
    dtype: str
    measured: float
    unit: str = "tokens/s/GPU"
    cp: int = 1
    vp: int = 1
    megatron_core: str = "0.8"
    options: dict = field(default_factory=dict)
    assumed: str = NEMO_ASSUMED
    slow: bool = False          # over ~15 s of CPU: cached (experiments/fidelity_iteration.py)
    formula_vocab: int | None = None   # eq. 3's V where the paper's differs from the model's

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def layout(self) -> str:
        parts = [f"TP{self.tp}", f"PP{self.pp}"]
        parts += [f"VP{self.vp}"] if self.vp > 1 else []
        parts += [f"CP{self.cp}"] if self.cp > 1 else []
        parts += [f"DP{self.dp}"]
        return " ".join(parts)


def iteration_from_tokens(global_batch: int, seq_len: int, tokens_per_s_per_gpu: float,
                          gpus: int) -> float:
    """Seconds per iteration from a published tokens/s per GPU.

    >>> round(iteration_from_tokens(128, 4096, 16934.0, 8), 4)     # NeMo 24.07 Llama 2 7B
    3.8701
    """
    return global_batch * seq_len / (tokens_per_s_per_gpu * gpus)


def megatron_flops(batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """FLOPs of one iteration as Narayanan et al. (SC'21) eq. (3) counts them (full
    recomputation included): ``96 B s l h^2 (1 + s / 6h + V / 16 l h)``.

    >>> f"{megatron_flops(1536, 2048, 96, 12288, 51200):.4e}"       # GPT-3 175B, SC'21
    '4.5110e+18'
    """
    return (96 * batch * seq_len * layers * hidden * hidden
            * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden)))


def iteration_from_tflops(flops: float, tflops_per_gpu: float, gpus: int) -> float:
    """Seconds per iteration from a published TFLOP/s per GPU and that source's FLOP count.

    >>> round(iteration_from_tflops(4.5110e18, 140.0, 1024), 2)
    31.47
    """
    return flops / (tflops_per_gpu * 1e12 * gpus)


def published_iteration(run: PublishedRun) -> float:
    """The run's iteration time (seconds) from its published throughput."""
    if run.unit == "tokens/s/GPU":
        return iteration_from_tokens(run.global_batch, run.seq_len, run.measured, run.gpus)
    if run.unit == "TFLOP/s/GPU model":
        from hpnsim.workloads import models

        flops = (models.get(run.model).training_flops_per_token(run.seq_len)
                 * run.global_batch * run.seq_len)
        return iteration_from_tflops(flops, run.measured, run.gpus)
    if run.unit == "TFLOP/s/GPU eq.3":
        from hpnsim.workloads import models

        m = models.get(run.model)
        flops = megatron_flops(run.global_batch, run.seq_len, m.layers, m.hidden,
                               run.formula_vocab or m.vocab)
        return iteration_from_tflops(flops, run.measured, run.gpus)
    raise ValueError(f"unit: {run.unit!r} is not a published throughput this module converts")


def _nemo(label, model, gpus, gbs, mbs, seq, tp, pp, cp, vp, tokens, **extra) -> PublishedRun:
    dp = gpus // (tp * pp * cp)
    options = {"zero": 1, "overlap_param_gather": True, "sequence_parallel": tp > 1,
               "tp_comm_overlap": tp > 1, "attention": "flash2",
               **extra.pop("options", {})}
    return PublishedRun(label, NEMO_2407, CURRENT, model, "h100", tp, pp, dp, mbs, gbs, seq,
                        "fp8", tokens, cp=cp, vp=vp, options=options, **extra)


#: NeMo 24.07, DGX-H100, FP8: every pre-training row of the table (Megatron-Core 0.8, the
#: version NeMo 24.07 ships, assumed).
NEMO_RUNS: tuple[PublishedRun, ...] = (
    _nemo("GPT3-5B", GPT3_5B, 64, 2048, 4, 2048, 1, 1, 1, 1, 23406.0, options=_LAUNCHER_GPT3),
    _nemo("GPT3-20B", GPT3_20B, 64, 256, 2, 2048, 2, 1, 1, 1, 5851.0,
          options={**_LAUNCHER_GPT3, "userbuffers": "ub_cfg_h100_h6144_tp2_mbs2_seqlen2048"}),
    _nemo("GPT3-175B", "gpt3-175b", 128, 256, 1, 2048, 4, 8, 1, 6, 716.0, slow=True,
          options={**_LAUNCHER_GPT3, "userbuffers": _UB_GPT3_175B}),
    _nemo("GPT3-175B", "gpt3-175b", 512, 2048, 2, 2048, 4, 8, 1, 6, 825.0, slow=True,
          options={**_LAUNCHER_GPT3, "userbuffers": _UB_GPT3_175B}),
    _nemo("Llama 2 7B", "llama-7b", 8, 128, 1, 4096, 1, 1, 1, 1, 16934.0),
    _nemo("Llama 2 13B", "llama-13b", 16, 128, 1, 4096, 1, 4, 1, 10, 8715.0),
    _nemo("Llama 2 70B", LLAMA2_70B, 64, 128, 1, 4096, 4, 4, 1, 20, 1728.0,
          options={"userbuffers": "ub_cfg_h100_h8192_tp4_mbs1_seqlen4096"}),
    _nemo("Nemotron-8B", NEMOTRON3_8B, 64, 256, 4, 4096, 2, 1, 1, 1, 12507.0,
          options=_LAUNCHER_FUSED_LOSS),
    _nemo("Nemotron-22B", NEMOTRON3_22B, 64, 256, 2, 4096, 2, 4, 1, 10, 4312.0,
          options=_LAUNCHER_FUSED_LOSS),
    _nemo("Nemotron-340B", NEMOTRON4_340B, 128, 32, 1, 4096, 8, 8, 1, 12, 326.0,
          options={**_LAUNCHER_FUSED_LOSS, "selective_recompute": True}),
    _nemo("Llama 3 8B", "llama3-8b", 8, 128, 1, 8192, 1, 1, 2, 1, 12273.0,
          options=_LAUNCHER_FUSED_LOSS),
    _nemo("Llama 3 70B", "llama3-70b", 64, 128, 1, 8192, 4, 4, 2, 5, 1524.0, slow=True,
          options={**_LAUNCHER_FUSED_LOSS,
                   "userbuffers": "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192"}),
)

BRIDGE_ASSUMED = ("Megatron-Core 0.15 (NeMo 25.11); Megatron-Bridge's H100 perf recipes "
                  "(src/megatron/bridge/perf_recipes/llama/h100/): distributed optimizer, "
                  "overlap_grad_reduce and overlap_param_gather, sequence parallelism and TP "
                  "communication overlap when TP > 1; 405B: embedding and loss counted in the "
                  "pipeline split; gradients reduced in BF16; TransformerEngine's cross-entropy "
                  "kernels (perf_recipes/_common.py: cross_entropy_fusion_impl 'te'); FP8 "
                  "current scaling as TransformerEngine 2.9 runs it (fp8_recipe 'current': "
                  "Bridge v0.2.0 pins TE release_v2.9, its fp8_cs precision sets fp8_recipe "
                  "'tensorwise'), TE's norm giving the amax (the 8B run's cuDNN norm, "
                  "NVTE_NORM_FWD_USE_CUDNN, is not modelled); FP8 parameter all-gathers "
                  "(fp8_param_gather, set by the same precision config); the userbuffer "
                  "configuration each H100 FP8 recipe names (llama3{,1}_llm_pretrain.py)")


def _bridge(label, model, gpus, gbs, seq, tp, pp, cp, vp, tokens, zero=1, **extra):
    dp = gpus // (tp * pp * cp)
    # fp8_recipe: Megatron-Bridge v0.2.0 (the 25.11 release), scripts/performance/utils/
    # helpers.py get_precision_config("fp8_cs") -> bf16_with_fp8_current_scaling_mixed()
    # (src/megatron/bridge/training/mixed_precision.py: fp8_recipe = "tensorwise", Megatron-
    # Core's TransformerEngine Float8CurrentScaling), first_last_layers_bf16 off; the same
    # config sets fp8_param_gather = True (mixed_precision.py:289 at v0.2.0, 717c62de40)
    options = {"zero": zero, "sequence_parallel": tp > 1, "tp_comm_overlap": tp > 1,
               "cross_entropy": "te", "fp8_recipe": "current", "fp8_param_gather": True,
               **({"overlap_param_gather": True} if zero in (1, 2) else {}),
               **extra.pop("options", {})}
    return PublishedRun(label, BRIDGE_2511, CURRENT, model, "h100", tp, pp, dp, 1, gbs, seq,
                        "fp8", tokens, cp=cp, vp=vp, megatron_core="0.15", options=options,
                        assumed=BRIDGE_ASSUMED, **extra)


#: Megatron-Bridge, NeMo 25.11 container, DGX-H100, FP8 current scaling (MBS 1 in all three).
BRIDGE_RUNS: tuple[PublishedRun, ...] = (
    _bridge("Llama 3 8B (FSDP)", "llama3-8b", 8, 128, 8192, 1, 1, 1, 1, 14451.0, zero=3),
    _bridge("Llama 3 70B", "llama3-70b", 64, 128, 8192, 4, 8, 1, 5, 1602.0, slow=True,
            options={"userbuffers": "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192"}),
    _bridge("Llama 3.1 405B", "llama3-405b", 1024, 512, 8192, 8, 8, 2, 8, 292.0, slow=True,
            options={"account_for_embedding": True, "account_for_loss": True,
                     "userbuffers": "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192"}),
)

_MEGATRON_V2 = {"recompute": True, "overlap_grad_reduce": False, "dropout": True}


def _table1(billions: float, heads: int, hidden: int, layers: int, tp: int, gpus: int,
            batch: int, tflops: float) -> PublishedRun:
    """A Table 1 row without pipeline parallelism: GPT (LayerNorm, GeLU MLP of 4h, learned
    positions, tied embeddings, biases), V = 51,200, s = 2048, as sec. 5.1 states."""
    spec = ModelSpec(f"gpt-{billions:g}b", layers=layers, hidden=hidden, heads=heads,
                     ffn=4 * hidden, vocab=51200, seq_len=2048, gated_mlp=False,
                     tied_embeddings=True, learned_positions=True, bias=True, norm="layernorm")
    return PublishedRun(f"GPT {billions:g}B", MEGATRON_SC21_T1, A100_ERA, spec, "a100", tp, 1,
                        gpus // tp, 1, batch, 2048, "bf16", tflops, unit="TFLOP/s/GPU eq.3",
                        megatron_core="v2.0", options=_MEGATRON_V2,
                        assumed="micro-batch 1 (Table 1 does not state it; sec. 5.2's PTD rows "
                                "use 1); Megatron-LM v2.0 (unfused core attention, dropout "
                                "0.1, full recomputation as eq. 3 counts it, all-reduce after "
                                "the backward); 16-bit GEMMs as BF16")


#: The A100 runs of 2021 (Megatron-LM v2: unfused core attention, gradients all-reduced after
#: the backward, full recomputation). GPT-3 175B on 1,024 GPUs: sec. 5.1 states the
#: interleaved schedule for its runs but not its depth, so 1F1B is kept (interleaving would
#: only shorten the predicted bubble). Table 1's rows without pipeline parallelism (1.7B to
#: 18.4B on 32 to 256 GPUs) leave only the micro-batch unstated; its pipelined rows (39.1B
#: up) would rest on the unstated interleaving depth as well and are left out.
A100_RUNS: tuple[PublishedRun, ...] = (
    PublishedRun("GPT-3 175B", MEGATRON_SC21, A100_ERA, "gpt3-175b", "a100", 8, 8, 16, 1, 1536,
                 2048, "bf16", 140.0, unit="TFLOP/s/GPU eq.3", megatron_core="v2.0",
                 formula_vocab=51200,     # the paper's vocabulary (sec. 5.1), in eq. 3
                 options=_MEGATRON_V2,
                 assumed="1F1B schedule (sec. 5.1 names the interleaved schedule, not its "
                         "depth); Megatron-LM v2.0 (unfused core attention, all-reduce after "
                         "the backward); 16-bit GEMMs as BF16 (A100's FP16 and BF16 tensor "
                         "peaks are equal)"),
    _table1(1.7, 24, 2304, 24, 1, 32, 512, 137.0),
    _table1(3.6, 32, 3072, 30, 2, 64, 512, 138.0),
    _table1(7.5, 32, 4096, 36, 4, 128, 512, 142.0),
    _table1(18.4, 48, 6144, 40, 8, 256, 1024, 135.0),
)

LLAMA3_ASSUMED = ("FLOPs per token as hpnsim counts them (ModelSpec.training_flops_per_token: "
                  "6 per parameter-multiply plus the full attention square; the paper does "
                  "not state its formula, causal halving would be 4% fewer at 8k tokens); "
                  "micro-batch 1; ZeRO-1-like sharding (the paper's FSDP keeps weights "
                  "unsharded between forward and backward); sequence parallelism, no TP "
                  "communication overlap; FlashAttention-2 (the paper does not name the kernel; "
                  "FlashAttention-3 was released on 2024-07-11, after the 405B's pre-training, "
                  "which Meta's post of 2024-04-18 called 'still training'; PyTorch's "
                  "scaled_dot_product_attention, which Meta's open trainer pytorch/torchtitan "
                  "calls, runs FlashAttention-2 from PyTorch 2.2, 2024-01-30); no dropout; the "
                  "loss as Megatron's unfused default (not stated); Meta's RoCE Clos (400G "
                  "per GPU) as hpn7 segments of 128 hosts. Stated in sec. 3.3.2 and followed: "
                  "ranks in the order [TP, CP, PP, DP] (rank_order tp-cp-pp-dp: a pipeline's "
                  "16 stages on consecutive hosts); the first and the last stage one "
                  "Transformer layer short, which leaves 'the first model chunk on the first "
                  "stage' with only the embedding and the last with only the output and the "
                  "loss, so a model chunk holds one layer: 126 + 2 = 128 chunks, 8 virtual "
                  "stages on each of the 16 ranks (0, 1 x 126, 0 layers); gradients "
                  "reduce-scattered in FP32 (grad_bytes 4); no activation recomputation")

#: The virtual-stage depth the text implies (a model chunk of one layer, above).
LLAMA3_VIRTUAL_STAGES = 8


def _llama3(gpus: int, tflops: float) -> PublishedRun:
    dp = gpus // (8 * 16)
    chunks = 16 * LLAMA3_VIRTUAL_STAGES
    return PublishedRun("Llama 3 405B (Meta)", LLAMA3_TABLE4, CURRENT, "llama3-405b", "h100",
                        8, 16, dp, 1, 2048, 8192, "bf16", tflops, unit="TFLOP/s/GPU model",
                        vp=LLAMA3_VIRTUAL_STAGES, megatron_core="0.20", slow=True,
                        assumed=LLAMA3_ASSUMED,
                        options={"zero": 1, "sequence_parallel": True,
                                 "stage_layers": (0,) + (1,) * (chunks - 2) + (0,),
                                 "rank_order": "tp-cp-pp-dp", "grad_bytes": 4,
                                 "attention": "flash2"})


#: Llama 3 405B pre-training at 8k tokens (Dubey et al. 2024, Table 4: TP 8, CP 1, PP 16,
#: 16M tokens a batch = 2,048 sequences of 8,192, BF16). The 131k-token row (CP 16) is left
#: out: there causal halving of the attention FLOPs changes the count by 29%.
LLAMA3_RUNS: tuple[PublishedRun, ...] = (_llama3(8192, 430.0), _llama3(16384, 400.0))

RUNS: tuple[PublishedRun, ...] = A100_RUNS + NEMO_RUNS + BRIDGE_RUNS + LLAMA3_RUNS
