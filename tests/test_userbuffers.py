"""Userbuffer configurations: the figures read back from their sources, and the GEMMs beside
their communication kernels slowed by exactly the SMs the configuration names."""

from pathlib import Path

import pytest
import yaml

from hpnsim.errors import InputError
from hpnsim.training.block_ops import block_ops
from hpnsim.training.compute.contention import Launch, contended_seconds
from hpnsim.training.job import TrainJob
from hpnsim.training.program import Collective, Compute
from hpnsim.training.tp_overlap import Bulk, Pipelined, expand, gemm_shares
from hpnsim.training.userbuffers import GEMMS, TE_DEFAULT, Method, get_userbuffers

DATA = Path(__file__).parent / "data" / "userbuffers"


@pytest.mark.parametrize("path", sorted(DATA.glob("*.yaml")), ids=lambda p: p.stem)
def test_launcher_configurations_read_back_from_the_launchers_files(path):
    """Every GEMM's method, num_sm, set_sm_margin and num_splits as the launcher's file
    (a verbatim copy) states them; the file's omissions are TransformerEngine's defaults."""
    source = yaml.safe_load(path.read_text())
    config = get_userbuffers(path.stem)
    assert set(source) == set(GEMMS)
    for gemm, entry in source.items():
        got = config.overlap(gemm)
        assert got.method == Method(entry["method"])
        ring = entry["method"] == "ring_exchange"
        assert got.num_sm == entry.get("num_sm", 1 if ring else 16)
        assert got.set_sm_margin == bool(entry.get("set_sm_margin", not ring))
        if entry["method"] == "pipeline":
            assert got.num_splits == entry["num_splits"]


def _overlapped_item(job, label):
    layer = job.stage_cost(0).blocks[1]
    ops = block_ops(job, layer, gemm_shares(job.model, job.seq_len))
    return next(op for op in ops.forward if getattr(op, "label", "") == label)


def _fc2_slowdown_by_hand(job, sms):
    """The FC2 forward GEMM of a layer on ``sms`` fewer SMs over its time alone, each kernel
    timed by the contention model directly."""
    model = job.compute_model
    fc2 = [op for op in model.block_kernels(job, "layer1").ops
           if op.phase == "forward" and op.name == "fc2"]
    alone = sum(op.seconds for op in fc2)
    return sum(contended_seconds(op, job.gpu, sms, model.table, model.fp8_gemm)
               for op in fc2) / alone


def test_pipelined_reduce_scatter_is_slowed_by_the_configured_sms():
    kwargs = dict(tp=4, seq_len=8192, sequence_parallel=True, tp_comm_overlap=True,
                  gpu="h100")
    default = TrainJob("llama3-70b", **kwargs)
    named = TrainJob("llama3-70b", userbuffers="ub_cfg_h100_h12288_tp4_mbs1_seqlen2048",
                     **kwargs)
    fc2_default = _overlapped_item(default, "mlp fc2")
    fc2_named = _overlapped_item(named, "mlp fc2")
    assert (fc2_default.op, fc2_default.splits) == ("reducescatter", 4)
    assert fc2_default.slowdown == pytest.approx(_fc2_slowdown_by_hand(default, 16), rel=1e-12)
    # this configuration's fc2_fprop takes 20 SMs (the launcher's file): slower still
    assert fc2_named.slowdown == pytest.approx(_fc2_slowdown_by_hand(named, 20), rel=1e-12)
    assert fc2_named.slowdown > fc2_default.slowdown > 1.0


def test_ring_exchange_reduce_scatter_passes_tp_minus_one_partial_sums():
    job = TrainJob("llama3-405b", tp=8, seq_len=8192, sequence_parallel=True,
                   tp_comm_overlap=True, gpu="h100", dtype="fp8",
                   userbuffers="userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192")
    proj = _overlapped_item(job, "attention proj")
    assert isinstance(proj, Pipelined) and (proj.op, proj.splits) == ("sendrecv", 8)

    class Builder:          # records what expand adds, as a stage builder would
        last, recv_op = -1, -1

        def __init__(self):
            self.ops = []

        def add(self, op):
            self.ops.append(op)
            return len(self.ops) - 1

    b = Builder()
    expand(b, proj, ())
    gemms = [op for op in b.ops if isinstance(op, Compute) and op.label == proj.label]
    shifts = [op for op in b.ops if isinstance(op, Collective)]
    assert len(gemms) == 8 and len(shifts) == 7
    assert {s.op for s in shifts} == {"sendrecv"}
    assert sum(s.size for s in shifts) == pytest.approx(7 / 8 * proj.size, rel=1e-12)
    assert sum(g.seconds for g in gemms) == pytest.approx(proj.seconds, rel=1e-12)
    # num_sm 1 with the margin: one SM less, a small but nonzero charge
    assert 1.0 < proj.slowdown < 1.05


def test_bad_userbuffers_are_refused_naming_the_option():
    with pytest.raises(InputError, match="userbuffers: unknown configuration 'x'"):
        get_userbuffers("x")
    with pytest.raises(InputError, match="userbuffers: .*give tp_comm_overlap too"):
        TrainJob("llama3-8b", tp=2, sequence_parallel=True, userbuffers=TE_DEFAULT.name)


def test_cli_names_the_configuration_and_refuses_an_unknown_one():
    import json

    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    base = ["train", "--model", "llama3-8b", "--gpu", "h100", "--tp", "2", "--dp", "1",
            "--global-batch", "1", "--sequence-parallel", "--tp-comm-overlap"]
    ok = CliRunner().invoke(app, base + ["--userbuffers", "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192",
                                         "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["job"]["userbuffers"] == "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192"
    bad = CliRunner().invoke(app, base + ["--userbuffers", "mine"])
    assert bad.exit_code == 2
    assert "--userbuffers" in bad.output and "te_default" in bad.output


def test_bulk_overlaps_take_the_sms_the_launchers_file_names_for_their_gemm():
    """TransformerEngine names a bulk overlap by the GEMM it runs beside: ``qkv_dgrad`` /
    ``fc1_dgrad`` the re-gather beside QKV's / FC1's input gradient, ``qkv_wgrad`` /
    ``fc1_wgrad`` the input gradient's reduce-scatter beside the attention's / MLP's weight
    gradient. In this file the four differ (8, 16, 2, 4 SMs), so any swap shows."""
    name = "ub_cfg_h100_h8192_tp4_mbs1_seqlen4096"
    source = yaml.safe_load((DATA / f"{name}.yaml").read_text())
    job = TrainJob("llama3-70b", tp=4, seq_len=4096, sequence_parallel=True,
                   tp_comm_overlap=True, gpu="h100", userbuffers=name)
    layer = job.stage_cost(0).blocks[1]
    ops = block_ops(job, layer, gemm_shares(job.model, job.seq_len))
    bulk = {op.label: op.slowdown for op in ops.backward if isinstance(op, Bulk)}
    launches = {op.label: op.launch for op in ops.backward if isinstance(op, Bulk)}

    def launch(gemm):      # TransformerEngine's _math_sms: every SM unless set_sm_margin
        return Launch.MARGIN if source[gemm]["set_sm_margin"] else Launch.FULL

    expected = {
        "attention qkv ig": job.overlap_slowdown(layer.name, source["qkv_dgrad"]["num_sm"],
                                                 ("input_grad",), names=("qkv",),
                                                 launch=launch("qkv_dgrad")),
        "mlp fc1 ig": job.overlap_slowdown(layer.name, source["fc1_dgrad"]["num_sm"],
                                           ("input_grad",), names=("fc1",),
                                           launch=launch("fc1_dgrad")),
        "attention wg": job.overlap_slowdown(layer.name, source["qkv_wgrad"]["num_sm"],
                                             ("weight_grad",), part="attention",
                                             launch=launch("qkv_wgrad")),
        "mlp wg": job.overlap_slowdown(layer.name, source["fc1_wgrad"]["num_sm"],
                                       ("weight_grad",), part="mlp",
                                       launch=launch("fc1_wgrad"))}
    assert launches == {"attention qkv ig": launch("qkv_dgrad"), "mlp fc1 ig": launch("fc1_dgrad"),
                        "attention wg": launch("qkv_wgrad"), "mlp wg": launch("fc1_wgrad")}
    assert len({source[g]["num_sm"] for g in ("qkv_dgrad", "qkv_wgrad", "fc1_dgrad",
                                               "fc1_wgrad")}) == 4
    assert bulk == pytest.approx(expected, rel=1e-12)
    assert all(v > 1.0 for v in bulk.values())
