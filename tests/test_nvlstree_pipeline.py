"""NVLS-tree as NCCL 2.18.3 runs it (collectives/closed_form/nvlstree.py): chunk size,
loops and fill by hand, and busbw equal to the closed-form cap once the pipeline is full,
in closed form and in the flow engine."""

from __future__ import annotations

import pytest

from hpnsim.collectives import run_collective
from hpnsim.collectives.closed_form.model import model_time
from hpnsim.collectives.closed_form.nvlstree import (
    nvlstree_cap_busbw,
    nvlstree_chunk,
    nvlstree_pipeline,
)
from hpnsim.collectives.closed_form.shape import GroupShape
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.fabrics import hpn7

H800 = NcclParams.for_gpu("h800")
NVLINK = 200e9 * 20.6 / 25          # H800: 8 NVLink4 links x 25 GB/s, NCCL's 20.6 GB/s each
NIC = 2 * 200e9 / 8 * 4096 / 4178   # 2 x 200G ports, RoCEv2 framing at MTU 4096
GIB = 2**30


def test_chunk_follows_nccl_size_rules():
    # 16 NVLS channels x 8 heads = 128 chunks per loop; 512 KiB (4 MiB / 8 slots), capped at
    # 256 K under 32 x 128 x 512 K = 2 GiB, at 128 K under 16 x 128 x 256 K = 512 MiB, at
    # 64 K under 4 x 128 x 128 K = 64 MiB (64 MiB itself is not under it)
    assert nvlstree_chunk(4 * GIB, 128) == 512 * 1024
    assert nvlstree_chunk(GIB, 128) == 256 * 1024
    assert nvlstree_chunk(64 * 2**20, 128) == 128 * 1024
    assert nvlstree_chunk(32 * 2**20, 128) == 64 * 1024


def test_fill_and_loops_by_hand_on_two_hosts():
    shape = GroupShape(2, 8, NVLINK, NIC, nic_ports=2, nvls=True)
    p = nvlstree_pipeline(shape, GIB, H800)
    loop = 128 * 256 * 1024                       # 32 MiB per loop: 32 loops
    stage_nv = loop / (NVLINK * 0.85)             # one loop through NVLink at NVLS efficiency
    hop = loop / 8 / NIC                          # a head's share over its NIC
    fill = 2 * stage_nv + 2 * 1 * hop             # NVLS up, 1 hop up, 1 down, NVLS down
    per_loop = 9 / 8 * stage_nv                   # NVLink-bound: (k+1)/k of the loop each way
    assert hop < per_loop
    assert (p.loops, p.stages) == (32, 4)
    assert p.fill == pytest.approx(fill, rel=1e-12)
    assert p.time == pytest.approx(fill + 31 * per_loop, rel=1e-12)


def test_busbw_of_a_full_pipeline_is_the_closed_form_cap():
    # 56 hosts (the paper's 448 GPUs): 8 and 16 GiB both run 512 KiB chunks, 128 and 256
    # loops; the extra 8 GiB cost 128 steady loops, so their busbw is the cap, NVLink's:
    # 2 (n-1)/n x 8/9 x NVLink x 0.85 (the NIC would allow 2k/4 x NIC, far more)
    shape = GroupShape(56, 8, NVLINK, NIC, nic_ports=2, nvls=True)
    cap = 2 * 447 / 448 * 8 / 9 * NVLINK * 0.85
    assert nvlstree_cap_busbw(shape, H800) == pytest.approx(cap, rel=1e-12)
    small, large = (nvlstree_pipeline(shape, s, H800) for s in (8 * GIB, 16 * GIB))
    assert (small.loops, large.loops) == (128, 256)
    marginal = 2 * 447 / 448 * 8 * GIB / (large.time - small.time)
    assert marginal == pytest.approx(cap, rel=1e-12)
    # and below the cap at the paper's sizes: 64 MiB is 4 loops against a 14-stage fill
    at_64m = 2 * 447 / 448 * 2**26 / nvlstree_pipeline(shape, 2**26, H800).time
    assert at_64m < 0.5 * cap
    # the closed form auto weighs pays the same fill (latencies aside)
    t = model_time("allreduce", "nvlstree", "simple", shape, 16 * GIB, nccl=H800)
    t0 = model_time("allreduce", "nvlstree", "simple", shape, 8 * GIB, nccl=H800)
    assert t - t0 == pytest.approx(large.time - small.time, rel=1e-9)


def test_flow_engine_busbw_of_a_full_pipeline_is_the_cap():
    # 4 HPN hosts of H800: from 4 GiB the chunk is 512 KiB (2 GiB = 32 loops of it), so
    # 4 -> 8 GiB adds whole steady loops; the flow engine's extra time gives the cap
    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    kw = dict(algo="nvlstree", protocol="simple", routing="hpn_dual_plane", nccl=H800)
    a, b = (run_collective(f, "allreduce", range(32), s, **kw) for s in (4 * GIB, 8 * GIB))
    shape = GroupShape.from_fabric(f, range(32), nccl=H800)
    marginal = 2 * 31 / 32 * 4 * GIB / (b.time - a.time)
    assert marginal == pytest.approx(nvlstree_cap_busbw(shape, H800), rel=1e-6)
    assert b.busbw < nvlstree_cap_busbw(shape, H800)
