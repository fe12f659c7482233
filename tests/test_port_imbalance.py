"""Port imbalance as max/min per NIC (send, receive), per ToR (uplinks), per Agg (downlinks).

Counts per port are read off the routed paths (or a collective's link bytes) by the test;
ratios, nearest-rank percentiles and histogram rows are worked out here by hand.
"""

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.collectives import run_collective
from hpnsim.fabrics import dcn_plus, hpn7
from hpnsim.fabrics.fabric import NodeKind
from hpnsim.routing import route
from hpnsim.routing.diagnostics import diagnose, port_imbalance
from hpnsim.routing.imbalance import ratios_by_tier


@pytest.fixture(scope="module")
def fabric():
    return hpn7(segments=2, hosts_per_segment=4, backup_hosts=0, tor_uplinks=4,
                aggs_per_plane=4)


def receive_links(f, gpu):
    return [int(f.link_ids([f.gpu_tor[gpu, p]], [f.gpu_nic[gpu]])[0]) for p in range(2)]


def by_hand(counts):
    lo, hi = min(counts), max(counts)
    if hi == 0:
        return None
    return math.inf if lo == 0 else hi / lo


def test_nic_ratios_percentiles_and_histogram_by_hand(fabric):
    # receivers: GPU 8 gets 3 + 1, GPU 9 gets 2 + 0, GPU 10 gets 1 + 1 (ports forced)
    src = [0, 1, 16, 24, 0, 1, 2, 3]
    dst = [8, 8, 8, 8, 9, 9, 10, 10]
    port = [0, 0, 0, 1, 1, 1, 0, 1]
    p = route(fabric, src, dst, "ecmp", port=port)
    received = {g: [sum(link in p.path(i).tolist() for i in range(p.n_flows))
                    for link in receive_links(fabric, g)] for g in (8, 9, 10)}
    assert received == {8: [3, 1], 9: [0, 2], 10: [1, 1]}
    ratios = sorted(by_hand(c) for c in received.values())      # [1, 3, inf]
    sent = {}
    for i, s in enumerate(src):
        sent.setdefault(s, [0, 0])[port[i]] += 1
    send_ratios = sorted(by_hand(c) for c in sent.values())

    d = diagnose(fabric, p)
    rx, tx = d.imbalance["nic_receive"], d.imbalance["nic_send"]
    assert (rx["devices"], rx["infinite"], rx["max"]) == (3, 1, math.inf)
    # nearest rank: p50 of 3 values is the 2nd, p90 and p99 the 3rd
    assert (rx["p50"], rx["p90"]) == (ratios[1], ratios[2]) == (3.0, math.inf)
    assert rx["worst"] == "pod0/seg0/host1/nic-r1"             # GPU 9
    assert rx["histogram"] == {"1-1.5": 1, "1.5-2": 0, "2-3": 0, "3-inf": 1, "inf": 1}
    assert tx["devices"] == len(sent) and tx["infinite"] == sum(np.isinf(send_ratios))
    assert tx["max"] == send_ratios[-1]
    assert port_imbalance(fabric, p.link_load(fabric.n_links)) == d.imbalance


def test_tor_uplinks_and_agg_downlinks_by_hand(fabric):
    rng = np.random.default_rng(4)
    src = rng.integers(0, 32, 60)                  # segment 0 -> segment 1
    dst = rng.integers(32, 64, 60)
    p = route(fabric, src, dst, "ecmp", seed=9)
    load = np.zeros(fabric.n_links)
    for i in range(p.n_flows):
        load[p.path(i)] += 1
    kinds, tiers = fabric.node_kind, fabric.node_tier
    expected = {}
    for tier, kind, pick in (
            ("tor_uplinks", NodeKind.TOR, lambda s, d: tiers[d] > tiers[s]),
            ("agg_downlinks", NodeKind.AGG, lambda s, d: kinds[d] == NodeKind.TOR)):
        per_switch = {}
        for link in range(fabric.n_links):
            s, d = fabric.link_src[link], fabric.link_dst[link]
            if kinds[s] == kind and pick(s, d):
                per_switch.setdefault(fabric.node_name(s), []).append(load[link])
        expected[tier] = {name: by_hand(c) for name, c in per_switch.items()
                          if by_hand(c) is not None}
    got = ratios_by_tier(fabric, load)
    for tier in ("tor_uplinks", "agg_downlinks"):
        ratios, names = got[tier]
        assert dict(zip(names, ratios.tolist(), strict=True)) == expected[tier]
        assert len(names) > 0


def nic_ratio_from_link_bytes(f, link_bytes, receive):
    out = []
    for g in range(f.n_gpus):
        links = receive_links(f, g) if receive else [int(x) for x in f.gpu_access_link[g]]
        r = by_hand([link_bytes[k] for k in links])
        if r is not None:
            out.append(r)
    return np.array(out)


def test_ring_under_ecmp_reaches_3x_and_dual_plane_stays_at_1():
    # 128 GPUs in one segment; 2 channels x 4 QPs = 8 hashed flows per NIC: the bond hash
    # puts 6 or more of 8 on one port with probability 2 * (1 + 8 + 28) / 256 = 0.29
    f = hpn7(segments=1, hosts_per_segment=16, backup_hosts=0, tor_uplinks=2,
             aggs_per_plane=2)
    ecmp = run_collective(f, "allreduce", range(128), 2**28, algo="ring", qps=4)
    hpn = run_collective(f, "allreduce", range(128), 2**28, algo="ring", qps=4,
                         routing="hpn_dual_plane")
    for receive, tier in ((True, "nic_receive"), (False, "nic_send")):
        ratios = nic_ratio_from_link_bytes(f, ecmp.link_bytes, receive)
        assert ratios.max() >= 3
        assert ecmp.port_imbalance[tier]["max"] == ratios.max()
        assert ecmp.port_imbalance[tier]["devices"] == ratios.size == 128
        high = int((ratios >= 3).sum())
        h = ecmp.port_imbalance[tier]["histogram"]
        assert h["3-inf"] + h["inf"] == high
        dual = nic_ratio_from_link_bytes(f, hpn.link_bytes, receive)
        assert np.allclose(dual, 1.0) and hpn.port_imbalance[tier]["max"] == pytest.approx(1)


def test_ring_under_ecmp_on_dcn_plus_reaches_3x_on_the_receive_side():
    f = dcn_plus(pods=1, segments=2, hosts_per_segment=4)
    r = run_collective(f, "allreduce", range(64), 2**28, algo="ring", qps=4)
    ratios = nic_ratio_from_link_bytes(f, r.link_bytes, receive=True)
    assert ratios.max() >= 3 and r.port_imbalance["nic_receive"]["max"] == ratios.max()


def test_cli_table_columns_and_json_keys():
    base = ["collective", "--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "4",
            "--backup-hosts", "0", "--tor-uplinks", "2", "--aggs-per-plane", "2", "--gpus",
            "32", "--algo", "ring", "--sizes", "1M", "--routing", "hpn_dual_plane"]
    table = CliRunner().invoke(app, base)
    assert table.exit_code == 0, table.output
    head = table.output.splitlines()[1].split()
    assert head[-5:] == ["collis", "txbal", "rxbal", "rx>=3", "bottleneck"]
    row = [line for line in table.output.splitlines() if line and line[0] != "#"][0].split()
    assert row[-4:-1] == ["1.00", "1.00", "0"]
    out = CliRunner().invoke(app, [*base, "--json"])
    data = json.loads(out.output)[0]["port_imbalance"]
    assert set(data) == {"nic_send", "nic_receive", "tor_uplinks", "agg_downlinks"}
    assert data["nic_receive"]["devices"] == 32 and data["nic_receive"]["max"] == 1.0
