"""Shared PCIe switches on every host-based fabric builder (``gpus_per_pcie_switch``): the
GPUs of one switch share its link to one NIC, whatever the network above the host."""

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.engine import run_flows
from hpnsim.errors import InputError
from hpnsim.fabrics import dcn_plus, fat_tree, from_lingjun, hpn7, rail_only, rail_optimized
from hpnsim.fabrics.assembly import parse_pcie
from hpnsim.fabrics.fabric import LinkKind, NodeKind
from hpnsim.routing import route

GEN3X4 = parse_pcie("Gen3x4")     # 3.94 GB/s per direction: binds behind any NIC here

# every builder, with 8 GPUs per host, small, PCIe Gen3 x4 so the PCIe links bind
BUILDERS = {
    "hpn7": lambda k: hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=4,
                           aggs_per_plane=4, pcie="Gen3x4", gpus_per_pcie_switch=k),
    "dcn_plus": lambda k: dcn_plus(segments=1, hosts_per_segment=2, tor_uplinks=4,
                                   aggs_per_pod=4, pcie="Gen3x4", gpus_per_pcie_switch=k),
    "rail_optimized": lambda k: rail_optimized(segments=1, hosts_per_segment=2,
                                               tor_uplinks=4, aggs_per_pod=4, pcie="Gen3x4",
                                               gpus_per_pcie_switch=k),
    "rail_only": lambda k: rail_only(segments=1, hosts_per_segment=2, tor_uplinks=4,
                                     aggs_per_rail=4, pcie="Gen3x4", gpus_per_pcie_switch=k),
    "fat_tree": lambda k: fat_tree(16, gpus_per_host=8, pcie="Gen3x4",
                                   gpus_per_pcie_switch=k),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("k", [2, 4])
def test_gpus_of_one_switch_share_its_nic_link(name, k):
    f = BUILDERS[name](k)
    hosts = f.n_gpus // 8
    assert (f.node_kind == NodeKind.PCIE_SWITCH).sum() == hosts * 8 // k
    assert np.unique(f.gpu_nic).size == hosts * 8 // k          # one NIC per switch
    assert f.meta["gpus_per_pcie_switch"] == k
    # GPU g and g + 1 (one switch) send to host 1's GPUs of the same NIC: each crosses its
    # own GPU -> switch link and the shared switch -> NIC link; both flows get half of it.
    src = np.arange(k)
    paths = route(f, src, 8 + src, policy="ecmp", seed=1)
    first = [paths.links[paths.ptr[i]:paths.ptr[i + 1]] for i in range(k)]
    assert len({int(p[1]) for p in first}) == 1 and len({int(p[0]) for p in first}) == k
    assert f.link_kind[first[0][:2]].tolist() == [LinkKind.PCIE] * 2
    size = 1e8
    assert run_flows(f.link_capacity, paths, size) == pytest.approx(k * size / GEN3X4,
                                                                     rel=1e-9)
    # one GPU per NIC: each flow alone on its PCIe links
    plain = BUILDERS[name](1)
    alone = route(plain, src, 8 + src, policy="ecmp", seed=1)
    assert run_flows(plain.link_capacity, alone, size) == pytest.approx(size / GEN3X4,
                                                                        rel=1e-9)


def test_rail_optimized_keys_tors_by_nic():
    # 8 GPUs, 2 per switch: 4 NICs per host, rail r of a GPU's NIC = its GPU rail // 2, so
    # a segment has 4 ToRs (one per NIC rail), each with one port per host
    f = rail_optimized(segments=1, hosts_per_segment=2, tor_uplinks=4, aggs_per_pod=4,
                       gpus_per_pcie_switch=2)
    tors = f.nodes_where(kind=NodeKind.TOR)
    assert tors.size == 4 and f.meta["tiers"]["tor"]["down_ports"] == 2
    tor_of_gpu = f.gpu_tor[:, 0]
    assert [int(f.node_rail[t]) for t in tor_of_gpu[:8]] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert (tor_of_gpu[:8] == tor_of_gpu[8:]).all()


def test_fat_tree_hosts_take_one_edge_port_per_nic():
    # k = 4: 2 edge ports per edge switch; 2 GPUs per host under one switch take one port,
    # so two hosts (4 GPUs) per edge switch and 2 x 16 GPUs in all
    f = fat_tree(4, gpus_per_host=2, gpus_per_pcie_switch=2)
    assert f.n_gpus == 2 * 4 ** 3 // 4
    assert f.gpu_tor[:, 0].tolist()[:6] == [f.gpu_tor[0, 0]] * 4 + [f.gpu_tor[4, 0]] * 2


def test_lingjun_hosts_with_shared_switches():
    f = from_lingjun(gpus_per_pcie_switch=4)
    assert f.n_gpus == 6776 and np.unique(f.gpu_nic).size == 6776 // 4
    assert f.meta["tiers"]["tor"]["total_down_ports"] == 847 * 2 * 2   # 2 NICs x 2 ports


@pytest.mark.parametrize("build, message", [
    (lambda: hpn7(segments=1, gpus_per_pcie_switch=3),
     "gpus_per_pcie_switch: must divide rails=8 (the host's GPUs), got 3"),
    (lambda: rail_only(segments=1, rails=4, gpus_per_pcie_switch=8),
     "gpus_per_pcie_switch: must divide rails=4 (the host's GPUs), got 8"),
    (lambda: dcn_plus(gpus_per_pcie_switch=0),
     "gpus_per_pcie_switch: must be an integer > 0, got 0"),
    (lambda: fat_tree(4, gpus_per_host=4, gpus_per_pcie_switch=1),
     "gpus_per_host: must divide k/2 = 2, got 4"),
    (lambda: fat_tree(8, gpus_per_host=6, gpus_per_pcie_switch=2),
     "gpus_per_pcie_switch: leaves 3 NICs per host, which must divide k/2 = 4 (edge "
     "ports), got 2"),
    (lambda: from_lingjun(gpus_per_pcie_switch=16),
     "gpus_per_pcie_switch: must divide gpus_per_host=8 (the host's GPUs), got 16"),
])
def test_a_layout_the_host_cannot_have_is_refused(build, message):
    with pytest.raises(InputError) as err:
        build()
    assert str(err.value) == message


def test_refused_on_the_command_line_and_in_a_scenario(tmp_path):
    result = CliRunner().invoke(app, ["fabric", "hpn7", "--segments", "1",
                                      "--gpus-per-pcie-switch", "3"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: --gpus-per-pcie-switch: must divide rails=8 (the host's GPUs), "
                     "got 3"]
    scenario = Path(__file__).parents[1] / "examples" / "one_job.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(scenario.read_text().replace("  backup_hosts: 0\n",
                                                "  backup_hosts: 0\n  gpus_per_pcie_switch: 5\n"))
    result = CliRunner().invoke(app, ["run", str(bad)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: fabric.gpus_per_pcie_switch: must divide rails=8 (the host's GPUs), got 5")
