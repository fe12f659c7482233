"""Scaling linearity and the train/scaling CLI."""

import json

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.training.scaling import scaling_linearity
from hpnsim.workloads.sizing import fabric_for_job


def test_linearity_is_throughput_per_gpu_relative_to_smallest_size():
    r = scaling_linearity("llama3-8b", tp=8, pp=1, dps=[1, 2, 4], fabrics=["hpn7", "dcn_plus"],
                          micro_batches=1)
    for fabric in ("hpn7", "dcn_plus"):
        pts = r.curve(fabric)
        assert [p.gpus for p in pts] == [8, 16, 32]
        assert pts[0].linearity == 1.0
        for p in pts:
            # weak scaling: tokens per GPU are fixed, so linearity = T(N0) / T(N)
            assert p.linearity == pytest.approx(pts[0].iteration_time / p.iteration_time)
            assert p.linearity <= 1.0 + 1e-12
        # dp=1 has no gradient traffic; dp>1 adds it
        assert pts[0].exposed_dp == 0.0 and pts[1].exposed_dp > 0.0


def test_fabric_for_job_sizes_blocks():
    assert fabric_for_job("hpn7", 1024).n_gpus == 1024
    assert fabric_for_job("hpn7", 1500).n_gpus == 2048
    assert fabric_for_job("dcn_plus", 1024).n_gpus == 1024


def test_the_job_gpu_sets_nvlink_unless_the_fabric_options_do():
    from hpnsim.fabrics import LinkKind

    def nvlink(f):
        return set(f.link_capacity[f.link_kind == LinkKind.NVLINK].tolist())

    # published bidirectional NVLink: H800 400 GB/s, H100 900 GB/s; a link is one direction
    assert nvlink(fabric_for_job("hpn7", 16, gpu="h800")) == {200e9}
    assert nvlink(fabric_for_job("dcn_plus", 16, gpu="h100")) == {450e9}
    assert nvlink(fabric_for_job("hpn7", 16, {"nvlink": "600GB/s"}, gpu="h100")) == {300e9}


def test_native_routing_compares_each_fabric_under_its_own_routing():
    # DP groups of one GPU per host over 16 hosts: HPN's dual-plane routing puts a NIC's two
    # channels on its two ports and keeps a rail one ToR hop; DCN+ under ECMP collides
    # (bond hash at the NIC, hashes at the ToR uplinks), so its gradient sync shows more
    r = scaling_linearity("llama3-8b", tp=8, pp=1, dps=[1, 16], micro_batches=1, gpu="h100")
    hpn, dcn = r.curve("hpn7")[-1], r.curve("dcn_plus")[-1]
    assert (hpn.routing, dcn.routing) == ("hpn_dual_plane", "ecmp")
    assert hpn.exposed_dp < dcn.exposed_dp and hpn.linearity > dcn.linearity
    # one policy for both (ECMP's NIC bond hash sets both rings' pace): no difference
    same = scaling_linearity("llama3-8b", tp=8, pp=1, dps=[16], micro_batches=1, gpu="h100",
                             routing="ecmp")
    assert same.curve("hpn7")[0].iteration_time == same.curve("dcn_plus")[0].iteration_time


def test_train_cli_json_has_the_promised_fields():
    out = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--tp", "8", "--pp", "2",
                                   "--dp", "2", "--global-batch", "8", "--fabric", "hpn7",
                                   "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert set(data["exposed_comm"]) == {"tp", "pp", "dp", "ep"}
    assert data["iteration_time"] > 0 and 0 < data["mfu"] < 1 and data["bubble"] > 0
    assert data["job"]["gpus"] == 32


def test_train_cli_bad_input_exits_2_with_one_line():
    runner = CliRunner()
    cases = [["--model", "nope"], ["--model", "llama3-70b", "--tp", "8", "--pp", "3"],
             ["--model", "llama3-8b", "--tp", "16", "--fabric", "hpn7"],
             ["--model", "llama3-8b", "--gpu", "v100"]]
    for args in cases:
        out = runner.invoke(app, ["train", *args])
        assert out.exit_code == 2, (args, out.output)
        assert out.output.strip().startswith("error: ") and out.output.strip().count("\n") == 0


def test_train_cli_runs_an_aicb_workload(tmp_path):
    from hpnsim.workloads.aicb import example_path, load_aicb

    png = tmp_path / "g.png"
    out = CliRunner().invoke(app, ["train", "--workload", str(example_path()), "--json",
                                   "--plot", str(png)])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["job"]["gpus"] == 4 and data["iteration_time"] > data["compute_time"] > 0
    w = load_aicb(example_path())
    assert data["compute_time"] == pytest.approx(w.ga * w.compute_time(), rel=1e-12)
    update = sum(layer.update_time for layer in w.layers)
    parts = data["compute_time"] + sum(data["exposed_comm"].values()) + update
    assert data["iteration_time"] == pytest.approx(parts, rel=1e-12)
    assert png.stat().st_size > 0
