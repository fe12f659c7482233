"""SimAI/AICB workload files: parsing, round trips, line-numbered errors."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.workloads.aicb import COMM_KINDS, example_path, load_aicb, parse_aicb

HEADER = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 4 pp: 2 vpp: 3 ga: 6 "
          "all_gpus: 32 checkpoints: 2 1 3 checkpoint_initiates: 1 2 pp_comm 4096")


def _text(*layers, header=HEADER):
    return "\n".join([header, str(len(layers)), *layers]) + "\n"


def test_example_file():
    w = load_aicb(example_path())
    assert (w.policy, w.tp, w.pp, w.ep, w.ga, w.all_gpus, w.dp) == (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD", 2, 1, 1, 2, 4, 2)
    assert [layer.name for layer in w.layers][:3] == ["embedding_layer", "attention_layer_0", "mlp_layer_0"]
    attention = w.layers[1]
    assert attention.forward_compute == pytest.approx(343597e-9)
    assert attention.forward_comm.kind == "allreduce" and attention.forward_comm.group == "tp"
    assert attention.forward_comm.size == 2048 * 2048 * 2
    grad = w.layers[-1]
    assert grad.weight_grad_comm.group == "dp" and grad.weight_grad_comm.size == 207837184
    assert w.comm_bytes("tp", "forward") == 5 * 2048 * 2048 * 2
    layout = w.to_layout()
    assert (layout.tp, layout.pp, layout.dp, layout.num_microbatches) == (2, 1, 2, 2)


def test_header_fields_and_group_suffixes():
    w = parse_aicb(_text(
        "moe -1 10 ALLTOALL_EP 100 20 ALLTOALL_EP 100 30 ALLREDUCE_DP_EP 300 5",
        "attn -1 1 ALLGATHER 64 2 REDUCESCATTER 64 3 REDUCESCATTER 8 0",
    ))
    assert (w.tp, w.ep, w.pp, w.vpp, w.ga, w.all_gpus, w.dp) == (2, 4, 2, 3, 6, 32, 8)
    assert w.checkpoints == (1, 3) and w.checkpoint_initiates == (2,)
    assert w.pp_comm == 4096
    moe, attn = w.layers
    assert (moe.forward_comm.kind, moe.forward_comm.group) == ("alltoall", "ep")
    assert (moe.weight_grad_comm.kind, moe.weight_grad_comm.group) == ("allreduce", "edp")
    assert (attn.weight_grad_comm.kind, attn.weight_grad_comm.group) == ("reducescatter", "dp")
    assert moe.update_time == pytest.approx(5e-9)
    assert moe.line == 3 and attn.line == 4
    assert w.comm_bytes(group="ep") == 200
    assert w.compute_time() == pytest.approx((10 + 20 + 30 + 1 + 2 + 3) * 1e-9)
    assert w.to_layout().vpp == 3 and w.to_layout().ep == 4


def test_vpp_ignored_without_pipeline_and_data_policy():
    w = parse_aicb("HYBRID_TRANSFORMER model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 "
                   "all_gpus: 32\n1\nx -1 1 ALLREDUCE 16 1 NONE 0 1 NONE 0 1\n")
    assert w.to_layout().vpp == 1 and w.to_layout().dp == 4
    d = parse_aicb("DATA\n1\nfc -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1000 1\n")
    assert d.tp == 1 and d.all_gpus is None
    with pytest.raises(InputError, match="all_gpus"):
        d.to_layout()


def test_customized_policy_has_a_thirteenth_field():
    w = parse_aicb("HYBRID_CUSTOMIZED model_parallel_NPU_group: 2 all_gpus: 4\n1\n"
                   "x -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 0 DATA\n")
    assert w.layers[0].policy == "DATA"


def test_blank_lines_and_tabs_are_tolerated():
    w = parse_aicb("MICRO\n\n1\n\nx\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tALLREDUCE\t8\t0\n\n")
    assert w.layers[0].line == 5


@pytest.mark.parametrize("text, line, words", [
    ("", None, "empty"),
    ("BOGUS x: 1\n1\n", 1, "unknown policy"),
    ("MICRO model_parallel_NPU_group: two\n1\n", 1, "integer"),
    ("MICRO checkpoints: 3 1\n1\n", 1, "announces 3"),
    ("MICRO\n", None, "number of layers"),
    ("MICRO\nseven\n", 2, "integer"),
    ("MICRO\n0\n", 2, ">= 1"),
    ("MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8\n", 3, "12 fields"),
    ("MICRO\n1\nx -1 1 BROADCAST 4 1 NONE 0 1 ALLREDUCE 8 0\n", 3, "forward comm type"),
    ("MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8.5 0\n", 3, "weight_grad bytes"),
    ("MICRO\n1\nx -1 -4 NONE 0 1 NONE 0 1 ALLREDUCE 8 0\n", 3, "forward compute"),
    ("MICRO\n2\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 0\n", 2, "announces 2 layers"),
    ("MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 0\ny -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", 4, "extra"),
])
def test_malformed_files_report_the_line(text, line, words):
    """Each error names a line the file has (or none: an empty file, a file that ends
    before what it needs)."""
    with pytest.raises(InputError) as info:
        parse_aicb(text, source="w.txt")
    assert info.value.field == ("w.txt" if line is None else f"w.txt line {line}")
    assert line is None or 1 <= line <= len(text.splitlines())
    assert words in info.value.message


_COMM = st.sampled_from(["NONE", *COMM_KINDS, *(k + "_EP" for k in COMM_KINDS),
                         *(k + "_DP_EP" for k in COMM_KINDS)])
_LAYER = st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True),
                   st.integers(0, 10**9), _COMM, st.integers(0, 2**40),
                   st.integers(0, 10**9), _COMM, st.integers(0, 2**40),
                   st.integers(0, 10**9), _COMM, st.integers(0, 2**40), st.integers(0, 10**9))


@settings(max_examples=50, deadline=None)
@given(layers=st.lists(_LAYER, min_size=1, max_size=8), tp=st.integers(1, 8), ga=st.integers(1, 64))
def test_round_trip(layers, tp, ga):
    header = f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: {tp} ga: {ga} all_gpus: {tp * 4}"
    lines = [" ".join([name, "-1", *map(str, rest)]) for name, *rest in layers]
    w = parse_aicb(_text(*lines, header=header))
    assert (w.tp, w.ga, w.dp) == (tp, ga, 4)
    for parsed, (name, fc, ft, fs, ic, it, is_, wc, wt, ws, up) in zip(w.layers, layers, strict=True):
        assert parsed.name == name
        assert parsed.forward_compute == pytest.approx(fc * 1e-9)
        assert parsed.input_grad_compute == pytest.approx(ic * 1e-9)
        assert parsed.weight_grad_compute == pytest.approx(wc * 1e-9)
        assert parsed.update_time == pytest.approx(up * 1e-9)
        for op, token, size, default in ((parsed.forward_comm, ft, fs, "tp"),
                                         (parsed.input_grad_comm, it, is_, "tp"),
                                         (parsed.weight_grad_comm, wt, ws, "dp")):
            assert op.size == size
            if token == "NONE":
                assert op.kind is None
                continue
            base = token.removesuffix("_DP_EP").removesuffix("_EP")
            assert op.kind == COMM_KINDS[base]
            expected = "edp" if token.endswith("_DP_EP") else "ep" if token.endswith("_EP") else default
            assert op.group == expected


def test_cli_summary_and_error(tmp_path):
    runner = CliRunner()
    ok = runner.invoke(app, ["aicb", str(example_path()), "--json"])
    assert ok.exit_code == 0, ok.output
    assert '"tp": 2' in ok.stdout
    bad = tmp_path / "bad.txt"
    bad.write_text("MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE\n")
    result = runner.invoke(app, ["aicb", str(bad)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{bad} line 3" in lines[0]
    missing = runner.invoke(app, ["aicb", str(tmp_path / "none.txt")])
    assert missing.exit_code == 2 and "cannot read" in missing.stderr


def _header_text(sizes: str, layer: str = "moe -1 10 ALLTOALL_EP 4096 20 ALLTOALL_EP 4096 30 NONE 0 5",
                 lead: str = "") -> str:
    return f"{lead}HYBRID_TRANSFORMER_FWD_IN_BCKWD {sizes}\n1\n{layer}\n"


@pytest.mark.parametrize("sizes, words", [
    # dp = 8 / (2 * 1) = 4, and 3 does not divide 4: the audit's case (was silently ep -> 1)
    ("model_parallel_NPU_group: 2 ep: 3 pp: 1 vpp: 1 ga: 1 all_gpus: 8",
     ["ep=3 must divide dp=4", "8/(2*1)"]),
    # dp = 12 / (3 * 2) = 2: ep 4 > dp
    ("model_parallel_NPU_group: 3 ep: 4 pp: 2 ga: 2 all_gpus: 12", ["ep=4 must divide dp=2"]),
    # 3 * 1 does not divide 4 (the summary used to print TP3 x PP1 x DP1 (4 GPUs))
    ("model_parallel_NPU_group: 3 ep: 1 pp: 1 ga: 1 all_gpus: 4",
     ["all_gpus=4 is not a multiple of tp*pp = 3*1 = 3"]),
    ("model_parallel_NPU_group: 2 pp: 3 ga: 3 all_gpus: 8", ["all_gpus=8", "2*3 = 6"]),
    ("model_parallel_NPU_group: 2 ep: 2 ga: 1", ["ep=2 needs all_gpus"]),
    # 2 * 2 * 2 = 8 GPUs, dp 2, but interleaving (vpp 2) needs ga % pp == 0
    ("model_parallel_NPU_group: 2 pp: 2 vpp: 2 ga: 3 all_gpus: 8", ["ga", "multiple of pp=2", "ga=3"]),
])
@pytest.mark.parametrize("lead, line", [("", 1), ("\n\n", 3)])
def test_inconsistent_header_sizes_name_the_header_line(tmp_path, sizes, words, lead, line):
    path = tmp_path / "w.txt"
    path.write_text(_header_text(sizes, lead=lead))
    with pytest.raises(InputError) as info:
        load_aicb(path)
    assert info.value.field == f"{path} line {line}"
    for word in words:
        assert word in info.value.message


def test_header_sizes_are_checked_before_the_layers():
    # the header is wrong and so is the layer line: the first error in file order wins
    text = _header_text("model_parallel_NPU_group: 3 all_gpus: 4", layer="x -1 1 NONE")
    with pytest.raises(InputError) as info:
        parse_aicb(text, source="w.txt")
    assert info.value.field == "w.txt line 1" and "all_gpus=4" in info.value.message


def test_workload_object_checks_its_own_sizes():
    w = load_aicb(example_path())
    with pytest.raises(InputError) as info:
        dataclasses.replace(w, ep=3)                       # dp = 4 / (2 * 1) = 2
    assert info.value.field == f"{w.source} line 1" and "ep=3 must divide dp=2" in info.value.message
    with pytest.raises(InputError, match="not a multiple of tp\\*pp"):
        dataclasses.replace(w, tp=3)


def test_valid_expert_parallel_header_keeps_ep():
    # dp = 8 / (2 * 1) = 4, ep 2 divides it: kept (not dropped to 1), expert-DP groups of 4 / 2
    w = parse_aicb(_header_text("model_parallel_NPU_group: 2 ep: 2 pp: 1 vpp: 1 ga: 1 all_gpus: 8"))
    layout = w.to_layout()
    assert (layout.tp, layout.dp, layout.ep, layout.edp) == (2, 4, 2, 2)
    # ep > 1 without any _EP layer is accepted: the file just lists no expert traffic
    plain = parse_aicb(_header_text("model_parallel_NPU_group: 1 ep: 4 all_gpus: 8",
                                    layer="x -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 0"))
    assert plain.to_layout().ep == 4 and plain.comm_bytes(group="ep") == 0


def _small_fabric():
    from hpnsim.fabrics import hpn7
    return hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)      # 8 GPUs, one host


def test_expert_all_to_all_is_simulated_with_ep_above_one():
    from hpnsim.training import simulate_aicb

    w = parse_aicb(_header_text("model_parallel_NPU_group: 1 ep: 2 ga: 2 all_gpus: 8"))
    r = simulate_aicb(w, _small_fabric())
    assert r.job["ep"] == 2
    assert r.exposed_comm["ep"] > 0
    # one layer, ga 2: compute (10 + 20 + 30) ns per micro-batch, 5 ns update, nothing else
    compute = 2 * (10 + 20 + 30) * 1e-9
    assert r.compute_time == pytest.approx(compute)
    assert r.iteration_time == pytest.approx(compute + r.exposed_comm["ep"] + 5e-9)
    assert r.exposed_comm["tp"] == r.exposed_comm["dp"] == 0.0


def test_expert_all_to_all_with_ep_one_moves_nothing():
    from hpnsim.training import simulate_aicb

    # ep 1: every EP group is a single GPU, so ALLTOALL_EP costs nothing
    w = parse_aicb(_header_text("model_parallel_NPU_group: 1 ep: 1 ga: 2 all_gpus: 8"))
    r = simulate_aicb(w, _small_fabric())
    assert r.exposed_comm["ep"] == 0.0
    assert r.iteration_time == pytest.approx(2 * (10 + 20 + 30) * 1e-9 + 5e-9)


@pytest.mark.parametrize("sizes, words", [
    ("model_parallel_NPU_group: 2 ep: 3 pp: 1 vpp: 1 ga: 1 all_gpus: 8", "ep=3 must divide dp=4"),
    ("model_parallel_NPU_group: 3 ep: 1 pp: 1 ga: 1 all_gpus: 4", "all_gpus=4 is not a multiple"),
])
@pytest.mark.parametrize("command", [["aicb"], ["train", "--fabric", "hpn7", "--workload"]])
def test_cli_rejects_inconsistent_header(tmp_path, sizes, words, command):
    # the summary and train --workload share the parser's check: same single error line
    path = tmp_path / "bad_header.txt"
    path.write_text(_header_text(sizes))
    result = CliRunner().invoke(app, [*command, str(path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path} line 1: ") and words in lines[0]
    assert "TP3 x PP1 x DP1" not in result.stdout
