"""The loss and dropout as the framework runs them: the cross-entropy's passes over the logits
counted from Megatron-Core's and TransformerEngine's code by hand, the fused bias-dropout-add's
bytes, attention dropout at its measured cost, and the refusals."""

import math

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.training.compute import head_ops, layer_ops
from hpnsim.training.job import TrainJob
from hpnsim.workloads.gpus import get_gpu
from hpnsim.workloads.models import get

H100, A100 = get_gpu("h100"), get_gpu("a100")
BF16, FP32 = 2, 4


def _loss(ops, phase):
    return sum(op.bytes for op in ops.ops if op.name.startswith("ce_") and op.phase == phase)


@pytest.mark.parametrize("tp", [1, 4])
def test_unfused_loss_moves_what_megatrons_tensor_ops_move(tp):
    # megatron/core/tensor_parallel/cross_entropy.py (core_r0.8.0), per logit:
    m, tokens = get("llama3-8b"), 2048
    logits = tokens * math.ceil(m.vocab / tp)
    forward = (BF16 + FP32        # vocab_parallel_logits.float()
               + FP32             # torch.max(..., dim=-1)
               + 2 * FP32         # logits -= logits_max (in place)
               + 2 * FP32         # torch.exp(logits, out=logits)
               + FP32             # exp_logits.sum(dim=-1)
               + 2 * FP32)        # exp_logits.div_(sum): the softmax saved for the backward
    backward = (2 * FP32          # grad_input.mul_(grad_output)
                + FP32 + BF16)    # autograd's cast of the FP32 gradient to the logits' BF16
    ops = head_ops(m, H100, seq_len=tokens, tp=tp, sequence_parallel=False)
    assert _loss(ops, "forward") == logits * forward == logits * 38
    assert _loss(ops, "input_grad") == logits * backward == logits * 14
    assert len([op for op in ops.ops if op.name.startswith("ce_")]) == 8   # eight kernels


def test_fused_and_te_losses_move_fewer_bytes():
    m, tokens = get("llama3-8b"), 1024
    logits = tokens * m.vocab
    fused = head_ops(m, H100, seq_len=tokens, cross_entropy="fused")
    # four torch.compile'd functions: cast+max; subtract+exp+sum; normalize; gradients (the
    # in-place update written back, then its BF16 copy)
    assert _loss(fused, "forward") == logits * ((BF16 + FP32) + 2 * FP32 + 2 * FP32)
    assert _loss(fused, "input_grad") == logits * (2 * FP32 + BF16)
    te = head_ops(m, H100, seq_len=tokens, cross_entropy="te")
    # TransformerEngine's Triton kernels: online softmax reads the logits; the loss kernel reads
    # them again and writes the gradient in place; the backward scales it in place
    assert _loss(te, "forward") == logits * (BF16 + 2 * BF16)
    assert _loss(te, "input_grad") == logits * 2 * BF16
    unfused = head_ops(m, H100, seq_len=tokens)
    assert unfused.seconds() > fused.seconds() > te.seconds()


def test_the_loss_is_chosen_by_the_version_it_needs():
    assert TrainJob("llama3-8b").cross_entropy == "unfused"      # Megatron-Core's default
    assert TrainJob("llama3-8b", megatron_core="0.8", cross_entropy="fused",
                    overlap_grad_reduce=False).cross_entropy == "fused"
    with pytest.raises(InputError, match=r"Megatron-Core 0\.12 lacks it \(--cross-entropy-"
                                         r"fusion-impl te arrived in 0\.13\)") as refused:
        TrainJob("llama3-8b", megatron_core="0.12", cross_entropy="te")
    assert refused.value.field == "cross_entropy"
    with pytest.raises(InputError, match="one of unfused, fused, te"):
        TrainJob("llama3-8b", cross_entropy="liger")
    assert "cross_entropy" not in TrainJob("llama3-8b").to_dict()
    assert TrainJob("llama3-8b", cross_entropy="te").to_dict()["cross_entropy"] == "te"


def test_cli_refuses_a_loss_the_version_lacks_in_one_line(refused_cli):
    assert refused_cli("train", "--model", "llama3-8b", "--megatron-core", "0.7",
                       "--no-overlap-grad-reduce", "--cross-entropy", "fused") == (
        "error: --cross-entropy: Megatron-Core 0.7 lacks it (--cross-entropy-loss-fusion "
        "arrived in 0.8); give --megatron-core 0.8 or later, or leave it off")


def test_yaml_refuses_a_loss_by_path(refused_yaml):
    err = refused_yaml("jobs:\n  - model: llama3-8b\n    cross_entropy: te\n"
                       "    megatron_core: '0.12'\n")
    assert err.startswith("error: jobs[0].cross_entropy: Megatron-Core 0.12 lacks it")


def test_hidden_dropout_is_fused_into_the_residual_adds():
    m, tokens = get("llama3-8b"), 1024
    n = tokens * m.hidden
    plain = {(op.name, op.phase): op.bytes for op in layer_ops(m, H100, seq_len=tokens).ops}
    drop = {(op.name, op.phase): op.bytes
            for op in layer_ops(m, H100, seq_len=tokens, attention="cudnn", dropout=True).ops}
    for part in ("attention", "mlp"):
        # forward: one kernel reads the branch and the residual, writes the sum and the mask
        assert drop[(f"{part}_residual", "forward")] == n * (3 * BF16 + 1)
        assert plain[(f"{part}_residual", "forward")] == n * 3 * BF16
        # backward: the mask applied to the branch's gradient (read dy and mask, write dx),
        # beside the residual's gradient sum as without dropout
        assert drop[(f"{part}_dropout", "input_grad")] == n * (BF16 + 1 + BF16)
        assert drop[(f"{part}_residual", "input_grad")] == plain[(f"{part}_residual",
                                                                  "input_grad")]
    assert set(drop) - set(plain) == {("attention_dropout", "input_grad"),
                                      ("mlp_dropout", "input_grad")}


def test_attention_dropout_costs_what_it_was_measured_to():
    m, seq = get("llama3-8b"), 4096

    def attention(gpu, kernel, dropout):
        ops = layer_ops(m, gpu, seq_len=seq, attention=kernel, dropout=dropout)
        return {op.phase: op.seconds for op in ops.ops if op.name == "attention"}

    # cuDNN on Hopper: TransformerEngine#3312's H200 forward+backward, 0.594 ms -> 0.614 ms
    off, on = attention(H100, "cudnn", False), attention(H100, "cudnn", True)
    for phase in ("forward", "input_grad"):
        assert on[phase] == pytest.approx(off[phase] * 0.614 / 0.594, rel=1e-12)
    # FlashAttention on Ampere at 2048 tokens: halfway (in log length) between FlashAttention's
    # 1k (2.29 -> 2.52 ms) and 4k (30.09 -> 36.70 ms) forward+backward ratios
    ops_off = layer_ops(m, A100, seq_len=2048, attention="flash")
    ops_on = layer_ops(m, A100, seq_len=2048, attention="flash", dropout=True)
    ratio = (sum(op.seconds for op in ops_on.ops if op.name == "attention")
             / sum(op.seconds for op in ops_off.ops if op.name == "attention"))
    assert ratio == pytest.approx((2.52 / 2.29 + 36.70 / 30.09) / 2, rel=1e-12)
    # FlashAttention-2 on Hopper (which has dropout, unlike FlashAttention-3) takes the same
    # FlashAttention ratio: no Hopper measurement of it with and without dropout exists in text
    fa2_off, fa2_on = attention(H100, "flash2", False), attention(H100, "flash2", True)
    assert fa2_on["forward"] == pytest.approx(fa2_off["forward"] * 36.70 / 30.09, rel=1e-12)
    # the unfused path's dropout kernel comes and goes with the option
    names = {op.name for op in layer_ops(m, A100, seq_len=2048, attention="unfused").ops}
    assert "attention_dropout" not in names
    names = {op.name for op in layer_ops(m, A100, seq_len=2048, attention="unfused",
                                         dropout=True).ops}
    assert "attention_dropout" in names


def test_dropout_without_a_measured_kernel_is_refused_before_any_work():
    with pytest.raises(InputError, match="FlashAttention-3 .* has no dropout") as refused:
        TrainJob("llama3-8b", gpu="h100", attention="flash", dropout=True)
    assert refused.value.field == "dropout"
    with pytest.raises(InputError, match="measured on Ampere and Hopper only, not on b200"):
        TrainJob("llama3-8b", gpu="b200", dropout=True)
    result = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--gpu", "h100",
                                      "--attention", "flash", "--dropout"])
    assert result.exit_code == 2 and result.output.startswith("error: --dropout: ")
    assert TrainJob("llama3-8b", dropout=True).to_dict()["dropout"] is True
    assert "dropout" not in TrainJob("llama3-8b").to_dict()
