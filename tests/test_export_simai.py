"""SimAI topology export: the header and every link line against the format's rules.

The rules, as SimAI's generator (astra-sim-alibabacloud/inputs/topo/gen_Topo_Template.py)
writes the file and its ns-3 frontend (network_frontend/ns3/common.h, AstraSimNetwork.cc)
reads it:

1. Header ``node_num gpus_per_server nvswitch_num switch_num link_num gpu_type``.
   node_num = GPUs + NVSwitches + network switches; switch_num = network switches only
   (ns-3 reads nvswitch_num ids, then switch_num ids; GPUs = node_num - nvswitch_num -
   switch_num).
2. Line 2: the switch ids n_gpus .. node_num-1, NVSwitches first (one per server, server
   order), then ToRs (all first-side ToRs, then all second-side ToRs, each by segment then
   rail), then Aggs (by plane, then index).
3. link_num lines ``src dst <x>Gbps <y>ms <error_rate>``, nothing after them. GPU i's NVLink
   goes to NVSwitch gpu_num + i // gpus_per_server (AstraSimNetwork.cc's node2nvswitch);
   every line names the lower id first; lines come in generator order: per GPU its NVSwitch
   then its NIC ports' ToRs (first side, second side), then ToR-Agg lines by (ToR, Agg).
4. Rates and delays are plain decimals (ns-3's DataRate parser accepts digits and '.' only).

Expected ids, counts, rates and latencies below are derived from the builder parameters, not
from the fabric arrays.
"""

import re

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.fabrics import dcn_plus, fat_tree, hpn7
from hpnsim.fabrics.export import to_simai

RATE = re.compile(r"^\d+(\.\d+)?Gbps$")
DELAY = re.compile(r"^\d+(\.\d+)?ms$")
NVLINK_GBPS = 400 / 2 * 8  # builders' default nvlink "400GB/s" is bidirectional -> per direction
ACCESS_GBPS, UPLINK_GBPS = 200, 400  # port_speed 200G, uplink_speed 400G
HOST_MS, HOP_MS = 0.0005, 0.001  # host_latency 0.5us (NVLink), hop_latency 1us


def ns3_read(text):
    """Read the file the way SimAI's ns-3 frontend does (token stream, counts from the header);
    returns (header, node type per id, links) and checks nothing is left over."""
    lines = text.splitlines()
    tokens = text.split()
    node_num, gps, nvs, sw, link_num = map(int, tokens[:5])
    gpu_type = tokens[5]
    pos = 6
    node_type = [0] * node_num
    for _ in range(nvs):
        node_type[int(tokens[pos])] = 2
        pos += 1
    for _ in range(sw):
        node_type[int(tokens[pos])] = 1
        pos += 1
    links = []
    for _ in range(link_num):
        s, d, rate, delay, err = tokens[pos:pos + 5]
        links.append((int(s), int(d), rate, delay, float(err)))
        pos += 5
    assert pos == len(tokens), "tokens left after link_num links"
    assert len(lines) == 2 + link_num  # the generator's layout: one cable per line
    assert lines[1].split() == [str(i) for i in range(node_num - nvs - sw, node_num)]
    return (node_num, gps, nvs, sw, link_num, gpu_type), node_type, links


def check_common(links, node_type, gpus, gps):
    for s, d, rate, delay, err in links:
        assert s < d and 0 <= s and d < len(node_type)
        assert RATE.match(rate) and DELAY.match(delay) and err == 0.0
    for i in range(gpus):
        assert node_type[i] == 0
    assert [t for t in node_type[gpus:]].count(0) == 0
    assert links == sorted(links, key=lambda x: (x[0], x[1]))


@pytest.mark.parametrize(("segments", "hosts", "aggs"), [(1, 2, 2), (2, 2, 4)])
def test_hpn7_dual_plane_header_and_every_line(segments, hosts, aggs):
    f = hpn7(segments=segments, hosts_per_segment=hosts, backup_hosts=0, tor_uplinks=aggs,
             aggs_per_plane=aggs)
    servers, gps = segments * hosts, 8
    gpus = servers * gps
    tors = segments * 8 * 2  # 8 rails x 2 sides per segment
    psw = 2 * aggs  # 2 planes
    # gen_Topo_Template.py, Rail_Opti_DualToR_DualPlane: psw/2*asw + servers*2*gps + servers*1*gps
    link_num = psw // 2 * tors + servers * 2 * gps + servers * 1 * gps
    header, node_type, links = ns3_read(to_simai(f))
    assert header == (gpus + servers + tors + psw, 8, servers, tors + psw, link_num, "H800")
    assert node_type[gpus:gpus + servers] == [2] * servers
    assert node_type[gpus + servers:] == [1] * (tors + psw)
    check_common(links, node_type, gpus, gps)
    tor0 = gpus + servers
    agg0 = tor0 + tors

    def tor(side, seg, rail):
        return tor0 + side * segments * 8 + seg * 8 + rail

    expected = []
    for g in range(gpus):
        seg, rail = g // (hosts * gps), g % gps
        expected.append((g, gpus + g // gps, f"{NVLINK_GBPS:g}Gbps", f"{HOST_MS}ms", 0.0))
        for side in (0, 1):
            expected.append((g, tor(side, seg, rail), f"{ACCESS_GBPS}Gbps", f"{HOP_MS}ms", 0.0))
    for side in (0, 1):  # plane p's ToRs reach only plane p's Aggs, one uplink each
        for seg in range(segments):
            for rail in range(8):
                for j in range(aggs):
                    expected.append((tor(side, seg, rail), agg0 + side * aggs + j,
                                     f"{UPLINK_GBPS}Gbps", f"{HOP_MS}ms", 0.0))
    assert links == expected


def test_hpn7_small_header_before_and_after():
    """The doctest fabric: 2 hosts. Before: '38 8 2 22 80 H800' (switch_num counted the 2
    NVSwitches, so ns-3 read 24 switch ids from a 22-id line and ate the first link line)."""
    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)
    assert to_simai(f).splitlines()[0] == "38 8 2 20 80 H800"


@pytest.mark.parametrize("dual_tor", ["nonstacked", "single"])
def test_dcn_plus_header_and_every_line(dual_tor):
    segments, hosts, aggs, gps = 2, 2, 2, 8
    f = dcn_plus(pods=1, segments=segments, hosts_per_segment=hosts, tor_uplinks=aggs,
                 aggs_per_pod=aggs, dual_tor=dual_tor,
                 ports_per_nic=2 if dual_tor != "single" else 1)
    sides = 2 if dual_tor != "single" else 1
    servers = segments * hosts
    gpus = servers * gps
    tors = segments * sides  # not rail-optimized: one ToR (pair) per segment
    # gen_Topo_Template.py, No_Rail_Opti_{Dual,Single}ToR: psw*asw + servers*gps*sides
    # + servers*1*gps
    link_num = aggs * tors + servers * gps * sides + servers * gps
    header, node_type, links = ns3_read(to_simai(f, gpu_type="H100"))
    assert header == (gpus + servers + tors + aggs, gps, servers, tors + aggs, link_num, "H100")
    check_common(links, node_type, gpus, gps)
    tor0 = gpus + servers
    expected = []
    for g in range(gpus):
        seg = g // (hosts * gps)
        expected.append((g, gpus + g // gps, f"{NVLINK_GBPS:g}Gbps", f"{HOST_MS}ms", 0.0))
        for side in range(sides):
            expected.append((g, tor0 + side * segments + seg, f"{ACCESS_GBPS}Gbps",
                             f"{HOP_MS}ms", 0.0))
    for t in range(tors):  # every ToR to every Agg of the pod
        for j in range(aggs):
            expected.append((tor0 + t, tor0 + tors + j, f"{UPLINK_GBPS}Gbps", f"{HOP_MS}ms",
                             0.0))
    assert links == expected


def test_one_gpu_hosts_have_no_nvswitch_and_cli_writes_the_file(tmp_path):
    # fat-tree k=4: 16 one-GPU hosts, 8 edge + 8 agg + 4 core switches, 3 x 16 cables
    header, node_type, links = ns3_read(to_simai(fat_tree(4)))
    assert header == (36, 1, 0, 20, 48, "H800")
    check_common(links, node_type, 16, 1)
    out = tmp_path / "topo.txt"
    result = CliRunner().invoke(app, ["fabric", "dcn_plus", "--pods", "1", "--segments", "1",
                                      "--hosts-per-segment", "2", "--tor-uplinks", "2",
                                      "--aggs-per-pod", "2", "--export", str(out),
                                      "--format", "simai"])
    assert result.exit_code == 0, result.output
    # 16 GPUs + 2 NVSwitches + 2 ToRs + 2 Aggs; 16 NVLink + 32 access + 4 uplink cables
    assert out.read_text().splitlines()[0] == "22 8 2 4 52 H800"


def test_bad_export_options():
    f = fat_tree(4)
    with pytest.raises(InputError) as info:
        to_simai(f, gpu_type="B200")
    assert info.value.field == "gpu_type"
    with pytest.raises(InputError) as info:
        to_simai(f, error_rate=1.5)
    assert info.value.field == "error_rate"
