"""Jobs that meet inside a host: GPUs under one PCIe switch share its link to one NIC
(dcn_plus ``gpus_per_pcie_switch``), and two jobs on such a switch contend on it."""

from pathlib import Path

import numpy as np
import pytest
from cluster_tiny import program
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.fabrics import dcn_plus
from hpnsim.fabrics.assembly import parse_pcie
from hpnsim.fabrics.bom import bill_of_materials
from hpnsim.fabrics.fabric import LinkKind, NodeKind
from hpnsim.routing import route
from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster
from hpnsim.sched.cluster.jobs import TemplateCache
from hpnsim.sched.periodic import simulate_periodic


def _hosts(gpus_per_host=2, k=2, pcie="Gen3x4", port_speed="400G"):
    # one ToR, 2 hosts; PCIe Gen3 x4 (3.94 GB/s) behind a 400G (50 GB/s) NIC: PCIe binds
    return dcn_plus(segments=1, hosts_per_segment=2, gpus_per_host=gpus_per_host,
                    dual_tor="single", ports_per_nic=1, port_speed=port_speed, tor_uplinks=2,
                    aggs_per_pod=2, pcie=pcie, gpus_per_pcie_switch=k)


def test_gpus_under_one_switch_share_its_nic_link_and_port():
    f = _hosts(gpus_per_host=8, k=2, pcie="Gen4x16", port_speed="200G")  # the Crux testbed
    assert (f.node_kind == NodeKind.PCIE_SWITCH).sum() == 8            # 4 per host
    assert np.unique(f.gpu_nic).size == 8                              # 4 x 200G NICs per host
    assert f.gpu_nic.tolist()[:4] == [f.gpu_nic[0]] * 2 + [f.gpu_nic[2]] * 2
    # every PCIe link is PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 / 8 per direction
    pcie = f.link_capacity[f.link_kind == LinkKind.PCIE]
    assert pcie.size == 2 * (16 + 8) and np.allclose(pcie, 16e9 * 16 * 128 / 130 / 8)
    assert bill_of_materials(f)["nic_ports"] == 8                     # one port per NIC
    for policy in ("ecmp", "precise", "spray"):
        p = route(f, [0, 1], [8, 9], policy=policy, seed=3)
        a, b = (p.links[p.ptr[i]:p.ptr[i + 1]] for i in range(2))
        names = [f.link_name(link) for link in a]
        assert names[0].endswith("host0/pcie_switch-r0")               # GPU -> switch
        assert names[1].endswith("host0/nic-r0")                       # switch -> NIC
        assert names[-1].endswith("host1/gpu-r0")                      # switch -> GPU
        assert a[0] != b[0] and a[1] == b[1] and a[2] == b[2]          # own, shared, port
        assert a[-2] == b[-2] and a[-1] != b[-1]


def test_one_switch_per_gpu_is_todays_host():
    plain = _hosts(k=1)
    assert np.unique(plain.gpu_nic).size == plain.n_gpus
    assert not (plain.node_kind == NodeKind.PCIE_SWITCH).any()
    assert "gpus_per_pcie_switch" not in plain.meta


def test_two_jobs_on_one_pcie_switch_under_crux_and_fair_sharing():
    # host 0 holds GPUs 0, 1 under one switch, host 1 GPUs 2, 3: job a on [0, 2] and job b
    # on [1, 3] both cross each host's switch -> NIC link (Gen3 x4), their common bottleneck
    f = _hosts()
    cap, pcie = f.link_capacity, parse_pcie("Gen3x4")
    a = ClusterJob("a", program(0.004, 4e8), duration=2.0, gpus=[0, 2])
    b = ClusterJob("b", program(0.030, 1e8), duration=2.0, gpus=[1, 3])
    cache = TemplateCache(f)
    tpl = [cache.get(j, j.gpus, 0) for j in (a, b)]
    shared = np.intersect1d(tpl[0].links, tpl[1].links)
    shared = shared[f.link_kind[shared] == LinkKind.PCIE]
    assert shared.size == 4      # each host's switch <-> NIC link, both directions
    sched = [t.sched_job(j.name, 2, cap) for t, j in zip(tpl, (a, b), strict=True)]
    for t, s in zip(tpl, sched, strict=True):
        on = t.link_bytes[np.isin(t.links, shared)]
        assert np.allclose(on, on[0])
        # t_j is the shared PCIe link's: its bytes at 3.94 GB/s, not the NIC's 50 GB/s
        assert s.transfer_time(cap) == pytest.approx(on[0] / pcie, rel=1e-12)
    # the periodic model on the jobs' profiles over the same 2 s: fair sharing (one class)
    # and the strict orders; the runner agrees within one iteration of each job (the
    # model counts completed iterations only, the runner fractions of the last one too)
    fair = simulate_periodic(sched, cap, 2.0)
    by_order = {order: simulate_periodic(sched, cap, 2.0, priority=list(order))
                for order in ((0, 1), (1, 0))}
    best = max(by_order, key=lambda order: by_order[order].utilization)
    assert best == (1, 0)                                # b, the more GPU-intense, first
    alone = [2.0 / t.iteration_time for t in tpl]
    assert fair.iterations[0] < alone[0] - 1 and fair.iterations[1] < alone[1] - 1
    for scheduler, model in (("none", fair), ("crux", by_order[best])):
        run = simulate_cluster(f, [a, b], scheduler=scheduler, allocator="given",
                               share_hosts=True)
        assert [j.start for j in run.jobs] == [0.0, 0.0]
        for job, done in zip(run.jobs, model.iterations, strict=True):
            assert done <= job.iterations < done + 1, (scheduler, job.name)
    # with b first on the shared link, b runs as if alone: 2 s over its alone iteration
    assert run.jobs[1].iterations == pytest.approx(alone[1], rel=1e-6)


def test_a_switch_layout_the_host_cannot_have_is_refused(tmp_path):
    with pytest.raises(InputError, match="gpus_per_pcie_switch: must divide gpus_per_host=8"):
        _hosts(gpus_per_host=8, k=3)
    result = CliRunner().invoke(app, ["fabric", "dcn_plus", "--gpus-per-pcie-switch", "3"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --gpus-per-pcie-switch:")
    testbed = Path(__file__).parents[1] / "examples" / "crux_testbed.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(testbed.read_text().replace("gpus_per_pcie_switch: 2", "gpus_per_pcie_switch: 3"))
    result = CliRunner().invoke(app, ["cluster", str(bad)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: fabric.gpus_per_pcie_switch:")
