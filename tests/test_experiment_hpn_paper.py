"""experiments/hpn_paper.py: NCCL 2.18.3's algorithm choice, Multi-AllReduce on an HPN
segment against one rail alone, the NVLink bound of the forced ring, the --quick output."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpnsim.collectives import run_collective
from hpnsim.fabrics import dcn_plus, hpn7

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "hpn_paper.py"
#: one H800 NIC's NCCL payload: 2 x 200 Gb/s at RoCE framing 4096 / (4096 + 82)
NIC_PAYLOAD = 2 * 25e9 * 4096 / (4096 + 82)
#: one H800's NVLink payload per direction: 200 GB/s x 20.6 / 25 (NCCL topo.h)
NVLINK_PAYLOAD = 200e9 * 20.6 / 25


@pytest.fixture(scope="module")
def paper():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import hpn_paper as module
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


@pytest.fixture(scope="module")
def hpn():
    return hpn7(segments=2)


def test_algorithms_are_nccl_2_18_3s(paper, hpn):
    gpus = np.arange(448)
    for size in paper.SIZES:
        assert paper.nccl_2_18_algorithm(hpn, "allgather", gpus, size)[0] == "ring"
        assert paper.nccl_2_18_algorithm(hpn, "allreduce", gpus, size)[0] in (
            "ring", "tree", "nvlstree")
    # "we employ NVLS in AllReduce": the 448-GPU 4 GiB all-reduce takes NVLS+tree
    assert paper.nccl_2_18_algorithm(hpn, "allreduce", gpus, 4 * 2**30) == ("nvlstree",
                                                                              "simple")


def test_multi_allreduce_on_one_hpn_segment_is_one_rail_alone_at_nic_rate(paper, hpn):
    size = 4.0 * 2**30
    row = paper.run_case(hpn, "hpn_dual_plane", "Multi-AllReduce", size, 0)
    assert row["collectives"] == 8
    rail = list(range(0, 448, 8))
    alone = run_collective(hpn, "allreduce", rail, size, algo=row["algo"],
                           protocol=row["protocol"], routing="hpn_dual_plane",
                           nccl=paper.NCCL)
    assert row["busbw_GBps"] * 1e9 == pytest.approx(alone.busbw, rel=1e-12)
    # one GPU per host: a ring's busbw is the NIC's payload rate, less the latencies
    assert 0.98 * NIC_PAYLOAD < row["busbw_GBps"] * 1e9 <= NIC_PAYLOAD


def test_forced_rings_are_nvlink_bound_on_both_planes(paper):
    # a rail-aligned ring with PXN sends 2(n-1)/n S per GPU over NVLink: busbw -> NVLink's
    # payload rate, whatever the network does behind it (the NICs carry 8 x 49 GB/s)
    dual, single = hpn7(segments=2), hpn7(segments=2, dual_plane=False)
    for n in (32, 256):
        bws = []
        for fabric, routing in ((dual, "hpn_dual_plane"), (single, "ecmp")):
            gpus = paper.two_segment_gpus(fabric, n)
            r = run_collective(fabric, "allreduce", gpus.tolist(), 4e9, algo="ring",
                               protocol="simple", routing=routing, nccl=paper.NCCL)
            bws.append(r.busbw)
        assert bws[0] == pytest.approx(bws[1], rel=1e-9)
        assert 0.95 * NVLINK_PAYLOAD < bws[0] <= NVLINK_PAYLOAD


def test_dcn_plus_holds_448_gpus_in_one_pod():
    assert dcn_plus(pods=1).n_gpus >= 448


def test_quick_run_writes_the_sweep_and_appendix_a(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "hpn_paper.json").read_text())
    cases = {(r["system"], r["case"]) for r in data["sweep"]}
    assert len(cases) == 6
    assert [e["n_gpus"] for e in data["appendix_a"]] == [32, 64, 128, 256]
    for e in data["appendix_a"]:
        assert e["gain"] == pytest.approx(e["dual plane"]["busbw_GBps"]
                                          / e["single plane, ECMP"]["busbw_GBps"] - 1)
        assert e["published"] == [0.50, 0.64]


def test_a_packet_point_refused_up_front_keeps_the_flow_figure_and_the_sweep_goes_on(paper):
    # the NVLS-tree at 4 GiB on DCN+ is estimated at ~2e8 packet hops: under a budget of
    # 1e6 the engine refuses it before any work; the row keeps the flow engine's figure
    fabric = dcn_plus(pods=1)
    row = paper.packet_case(fabric, "ecmp", "all-reduce", 2.0**32, max_packets=1e6)
    flow = run_collective(fabric, "allreduce", np.arange(448), 2.0**32, algo="nvlstree",
                          protocol="simple", routing="ecmp", seed=0, nccl=paper.NCCL)
    assert row["flow_busbw"] == pytest.approx(flow.busbw / 1e9, rel=1e-12)
    assert row["refused"].startswith("max_packets: ") and "packet_busbw" not in row
    table = paper.packet_markdown([{"system": "DCN+", "case": "all-reduce",
                                    "size": 2.0**32, **row}])
    assert "| refused: max_packets: " in table
