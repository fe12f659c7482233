"""NCCL's own latency prediction per release (collectives/nccl/tuner.py) worked by hand from
tuning.cc at v2.16.5-1, v2.18.3-1 and v2.29.7-1; hpnsim's simulated ring against it; the proxy
overhead by host CPU; NCCL's log2i in its tree formula; NVLS-tree at a few bytes."""

from __future__ import annotations

import pytest

from hpnsim.collectives.closed_form.cost import nccl_time
from hpnsim.collectives.closed_form.model import model_time
from hpnsim.collectives.closed_form.shape import GroupShape
from hpnsim.collectives.nccl.params import NcclParams, net_overhead_for
from hpnsim.collectives.nccl.steps import ring_step_latencies
from hpnsim.collectives.nccl.tuner import log2i, tuner_latency
from hpnsim.errors import InputError

US = 1e-6


def _us(**kw):
    return tuner_latency(**kw) / US


def test_two_dgx_a100_ring_ll_per_release():
    # NVIDIA/nccl#812's case: 16 ranks on 2 hosts, ring all-reduce, LL (8 B).
    ring = dict(op="allreduce", algo="ring", protocol="ll", ranks=16, hosts=2)
    # 2.16.5: base 3.6; 30 steps, 2 nNodes = 4 across at 2.7, 26 on NVLink at .47 x 1.8
    assert _us(**ring, version="2.16.5") == pytest.approx(3.6 + 26 * 0.47 * 1.8 + 4 * 2.7)
    # 2.18.3: base 6.6; NVLink steps floored at the proxy's post, 1 us Intel, 2 us AMD
    assert _us(**ring, version="2.18.3") == pytest.approx(6.6 + 26 * 1.0 + 4 * 2.7)
    assert _us(**ring, version="2.18.3", cpu="amd") == pytest.approx(6.6 + 26 * 2.0 + 4 * 2.7)
    # 2.29.7: 2 (nNodes - 1) = 2 crossings
    assert _us(**ring, version="2.29.7", cpu="amd") == pytest.approx(6.6 + 28 * 2.0 + 2 * 2.7)
    # the CPU does not matter to 2.16.5, which had no proxy term
    assert _us(**ring, version="2.16.5", cpu="amd") == _us(**ring, version="2.16.5")


def test_one_rank_per_host_and_the_tree():
    pair = dict(op="allreduce", algo="ring", protocol="ll", ranks=2, hosts=2)
    # 2.29.7: ppn = 1 takes the tree's network hop (5.0) for both steps
    assert _us(**pair, version="2.29.7") == pytest.approx(6.6 + 2 * 5.0)
    # 2.18.3 charges 2 nNodes = 4 crossings against 2 steps, as written
    assert _us(**pair, version="2.18.3") == pytest.approx(6.6 + (2 - 4) * 1.0 + 4 * 2.7)
    # tree LL, 16 ranks on 2 hosts: 6.8 + 2 (7 x .6 + 1 x 5)
    tree = dict(op="allreduce", algo="tree", protocol="ll")
    assert _us(**tree, ranks=16, hosts=2) == pytest.approx(6.8 + 2 * (7 * 0.6 + 5.0))
    # 56 hosts: log2i(56) = 5 network levels in NCCL's formula
    assert log2i(56) == 5 and log2i(64) == 6 and log2i(1) == 0
    assert _us(**tree, ranks=448, hosts=56) == pytest.approx(6.8 + 2 * (7 * 0.6 + 5 * 5.0))
    # tree Simple base: 0 in 2.18.3, 8.4 in 2.29.7 (NVLink 4, network 14 in both)
    simple = dict(op="allreduce", algo="tree", protocol="simple", ranks=16, hosts=2)
    assert _us(**simple, version="2.18.3") == pytest.approx(2 * (7 * 4.0 + 14.0))
    assert _us(**simple, version="2.29.7") == pytest.approx(8.4 + 2 * (7 * 4.0 + 14.0))


def test_simulated_ring_is_the_tuners_where_the_crossings_agree():
    # 16 ranks on 2 hosts: the slowest walk crosses 4 times, as 2.18.3's 2 nNodes; hpnsim's
    # latency (base + the walk) is then exactly 2.18.3's prediction, on either CPU.
    for cpu in ("intel", "amd"):
        nccl = NcclParams.for_gpu("a100", cpu=cpu)
        walk = ring_step_latencies("allreduce", "ll", ranks=16, hosts=2, nccl=nccl)
        ours = nccl.latencies("ring", "ll")[0] + walk.sum()
        assert ours == pytest.approx(tuner_latency("allreduce", "ring", "ll", ranks=16,
                                                   hosts=2, cpu=cpu), rel=1e-12)


def test_net_overhead_by_cpu():
    assert net_overhead_for("amd") == 2.0 and net_overhead_for("Intel") == 1.0
    assert NcclParams.for_gpu("a100", cpu="amd").net_overhead_us == 2.0
    assert NcclParams.for_gpu("a100").net_overhead_us == 1.0
    # an explicit override wins over the CPU
    assert NcclParams.for_gpu("a100", cpu="amd", net_overhead_us=3.0).net_overhead_us == 3.0


def test_nccl_time_tree_counts_log2i_levels():
    # NCCL's own model of a 448-rank tree: 5 levels (log2i 56), not log2(56) = 5.81
    t = nccl_time("allreduce", "tree", "ll", 448, 56, 8.0, 1e12)
    latency = (6.8 + 2 * (7 * 0.6 + 5 * 5.0)) * US
    assert latency < t < latency * (1 + 1e-6)


def test_nvlstree_few_bytes_pay_latency_not_a_loop():
    # 8 bytes on 2 hosts of 8 H100: NVLS-tree's latency (25 us NVLink + 2 x 1 level x 20.9)
    # and the bytes, no fill of a 4 MiB loop (16 channels x 8 heads x 32 KiB)
    shape = GroupShape(2, 8, 164.8e9, 49e9, nic_ports=2, nvls=True)
    t = model_time("allreduce", "nvlstree", "simple", shape, 8.0,
                   nccl=NcclParams.for_gpu("h100"))
    assert (25.0 + 2 * 20.9) * US < t < (25.0 + 2 * 20.9 + 0.01) * US


def test_bad_input_names_the_argument():
    ring = dict(op="allreduce", algo="ring", protocol="ll", ranks=16, hosts=2)
    with pytest.raises(InputError, match="^version: "):
        tuner_latency(**ring, version="2.10")
    with pytest.raises(InputError, match="^cpu: "):
        tuner_latency(**ring, cpu="power")
    with pytest.raises(InputError, match="^cpu: "):
        NcclParams.for_gpu("a100", cpu="arm64")
    with pytest.raises(InputError, match="^algo: "):
        tuner_latency("allgather", "tree", "ll", ranks=16, hosts=2)
    with pytest.raises(InputError, match="^hosts: "):
        tuner_latency("allreduce", "ring", "ll", ranks=6, hosts=4)
