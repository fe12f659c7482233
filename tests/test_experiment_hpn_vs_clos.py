"""experiments/hpn_vs_clos_collectives.py --quick: placement, one-hop segments, the gains table."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpnsim.fabrics import dcn_plus, hpn7

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "hpn_vs_clos_collectives.py"


@pytest.fixture(scope="module")
def experiment():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import hpn_vs_clos_collectives as module
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


@pytest.mark.parametrize("build", [lambda: hpn7(segments=2), lambda: dcn_plus(pods=1)])
def test_two_segment_placement_puts_half_the_hosts_in_each_segment(experiment, build):
    fabric = build()
    for n in (32, 256):
        gpus = experiment.two_segment_gpus(fabric, n)
        segment = fabric.node_segment[fabric.gpu_node[gpus]]
        # whole hosts: every host's 8 GPUs, counted by brute force
        hosts, per_host = np.unique(gpus // 8, return_counts=True)
        assert set(per_host) == {8} and hosts.size == n // 8
        assert np.sum(segment == 0) == np.sum(segment == 1) == n // 2


def test_quick_run_writes_results_and_gains(experiment, tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "hpn_vs_clos_results.json").read_text())
    table = json.loads((tmp_path / "hpn_vs_clos_gains.json").read_text())
    assert (tmp_path / "hpn_vs_clos_collectives.png").stat().st_size > 0
    # HPN paper: inside a segment same-rail traffic is one hop, no ECMP choice at all; with
    # the NIC ports chosen by dual-plane routing no flow can sit above the ideal spread
    inside = [r for r in rows if r["system"] == "hpn7" and r["case"] == "allreduce 448"]
    assert inside and all(r["collisions"] == 0 for r in inside)
    # the gain is the ratio of the two fabrics' seed means, recomputed from the rows
    for entry in table:
        def mean(system, entry=entry):
            return np.mean([r["busbw_GBps"] for r in rows if r["system"] == system
                            and r["case"] == entry["case"] and r["size"] == entry["size"]
                            and r["variant"] == entry["variant"]])
        assert entry["gain"] == pytest.approx(mean("hpn7") / mean("dcn_plus") - 1, rel=1e-12)
