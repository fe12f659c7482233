"""experiments/plane_gain_and_port_loss.py, part 3: the dual plane's busiest NIC port is as busy
as the NVLS-tree's bytes say (two trees: 2S per host and direction over its 8 NICs, so S/4
per NIC), and the single plane's loss is what its worst port's doubled load makes of it."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

#: one H800 NIC's NCCL payload: 2 x 200 Gb/s at RoCE framing 4096 / (4096 + 82)
NIC_PAYLOAD = 2 * 25e9 * 4096 / (4096 + 82)


@pytest.fixture(scope="module")
def rows():
    import plane_gain_and_port_loss as m

    return m, m.gain_bound(1, (32,), progress=lambda *_: None)


def test_dual_plane_nic_port_busy_as_the_tree_bytes_say(rows):
    m, (row,) = rows
    dual_fabric, routing = m.PLANES["dual plane"][0](), m.PLANES["dual plane"][1]
    gpus = m.two_segment_gpus(dual_fabric, 32)
    algo, protocol = m.nccl_2_18_algorithm(dual_fabric, "allreduce", gpus, m.SIZE)
    r = m._run(dual_fabric, routing, gpus, algo, protocol, 0)
    # per NIC and direction S/4 bytes, on two ports of half the NIC's payload rate each
    busy = (m.SIZE / 4) / NIC_PAYLOAD / r.time
    assert row["dual_nic_port_utilization"] == pytest.approx(busy, rel=0.02)
    assert row["two_u_minus_1"] == pytest.approx(2 * busy - 1, rel=0.05)


def test_single_plane_loss_is_the_doubled_port(rows):
    _, (row,) = rows
    # the worst NIC takes all its bytes on one port: 2u of the dual plane's time, at the
    # utilization that port reaches
    expected = 2 * row["dual_nic_port_utilization"] / row["single_nic_port_utilization"] - 1
    assert row["nics_all_on_one_port"] >= 1
    assert row["gain"] == pytest.approx(expected, abs=0.01)
