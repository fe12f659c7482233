"""NCCL's per-step costs (collectives/nccl/steps.py): a ring's latency is the sum over the
steps of its slowest walk, each step at NCCL's hop latency of its protocol, floored at the
proxy's post overhead when the ring spans hosts; the step payload at n ranks."""

from __future__ import annotations

import pytest

from hpnsim.collectives import run_collective
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.collectives.nccl.steps import (
    chunk_payload,
    ring_loops,
    ring_step_bytes,
    ring_step_latencies,
)
from hpnsim.errors import InputError
from hpnsim.fabrics import hpn7

US = 1e-6


def _latency_in_simulation(gpus, op, protocol, nccl):
    """What the flow engine adds for latency: the run minus the same run at zero latency."""
    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)
    kw = dict(algo="ring", protocol=protocol, routing="hpn_dual_plane", channels=2)
    with_lat = run_collective(f, op, gpus, 4096.0, nccl=nccl, **kw).time
    without = run_collective(f, op, gpus, 4096.0, nccl=nccl.replace(latency_scale=0.0), **kw).time
    return with_lat - without


def test_two_hosts_of_two_ll_all_reduce_by_hand():
    # ring 0 -> 1 | 2 -> 3 | back to 0: edges intra, cross, intra, cross. An all-reduce walks
    # 6 of them from its rank: whatever the start, the 2 left out are one intra and one
    # cross, so every walk is 3 crossings (2.7 us, LL network hop) and 3 NVLink steps at
    # max(0.6, 1.0) us (the LL NVLink hop floored at the proxy's 1 us post overhead, since
    # the ring spans hosts); base 6.6 us (tuning.cc ring LL).
    by_hand = 6.6 + 3 * 2.7 + 3 * 1.0
    steps = ring_step_latencies("allreduce", "ll", ranks=4, hosts=2)
    assert len(steps) == 6
    assert 6.6 * US + steps.sum() == pytest.approx(by_hand * US, rel=1e-12)
    simulated = _latency_in_simulation([0, 1, 8, 9], "allreduce", "ll", NcclParams())
    assert simulated == pytest.approx(by_hand * US, rel=1e-9)


def test_three_per_host_simple_all_reduce_slowest_walk():
    # 2 hosts x 3 GPUs: edges i i c i i c. A walk of 10 steps leaves out 2 consecutive edges;
    # the slowest leaves out two NVLink edges, so it crosses 4 times (2 x hosts, where NCCL
    # v2.29's tuner counts 2 (hosts - 1) = 2): 6 x 3.4 + 4 x 14 + base 8.4 us (Simple).
    by_hand = 8.4 + 6 * 3.4 + 4 * 14.0
    steps = ring_step_latencies("allreduce", "simple", ranks=6, hosts=2)
    assert 8.4 * US + steps.sum() == pytest.approx(by_hand * US, rel=1e-12)
    simulated = _latency_in_simulation([0, 1, 2, 8, 9, 10], "allreduce", "simple", NcclParams())
    assert simulated == pytest.approx(by_hand * US, rel=1e-9)


def test_all_gather_walk_and_amd_overhead():
    # all-gather, 2 hosts x 3: a walk of 5 edges leaves out one; the slowest leaves out an
    # NVLink edge: 2 crossings, 3 NVLink steps. On an AMD host the proxy's post costs 2 us,
    # times 3 for Simple: 6 us > the 3.4 us NVLink hop, so each NVLink step costs 6 us.
    amd = NcclParams(net_overhead_us=2.0)
    by_hand = 8.4 + 3 * 6.0 + 2 * 14.0
    steps = ring_step_latencies("allgather", "simple", ranks=6, hosts=2, nccl=amd)
    assert 8.4 * US + steps.sum() == pytest.approx(by_hand * US, rel=1e-12)
    simulated = _latency_in_simulation([0, 1, 2, 8, 9, 10], "allgather", "simple", amd)
    assert simulated == pytest.approx(by_hand * US, rel=1e-9)


def test_two_dgx_a100_hosts_ring_ll_on_amd_by_hand():
    # NVIDIA/nccl#812's group: 2 hosts x 8, ring all-reduce, LL. The slowest walk crosses 4
    # times (2.7 us); its other 26 steps are NVLink hops at max(0.6, 2.0) us, the proxy's
    # post on the DGX A100's AMD EPYC hosts (tuning.cc getNetOverhead); base 6.6 us.
    amd = NcclParams.for_gpu("a100", cpu="amd")
    by_hand = 6.6 + 26 * 2.0 + 4 * 2.7
    steps = ring_step_latencies("allreduce", "ll", ranks=16, hosts=2, nccl=amd)
    assert 6.6 * US + steps.sum() == pytest.approx(by_hand * US, rel=1e-12)
    simulated = _latency_in_simulation(list(range(16)), "allreduce", "ll", amd)
    assert simulated == pytest.approx(by_hand * US, rel=1e-9)


def test_one_host_has_no_overhead_floor():
    # inside one host no proxy posts: the LL NVLink hop stays 0.6 us (7 steps of 8 GPUs)
    steps = ring_step_latencies("allgather", "ll", ranks=8, hosts=1)
    assert steps.sum() == pytest.approx(7 * 0.6 * US, rel=1e-12)


def test_step_payload_at_hundreds_of_ranks():
    # Simple: a chunk is 4 of 8 slots of the 4 MiB buffer (2 MiB). 448 ranks, 16 channels:
    # even 4 GiB fits in one loop (16 x 448 x 2 MiB = 14 GiB), so a step carries
    # S / (16 x 448); 16 ranks need 8 loops of full 2 MiB chunks for 4 GiB.
    assert chunk_payload("simple") == 2 * 2**20
    assert chunk_payload("ll128") == pytest.approx(4800 * 1024 / 8 * 15 / 16)
    assert ring_loops("allreduce", "simple", 4 * 2**30, ranks=448, channels=16) == 1
    assert ring_step_bytes("allreduce", "simple", 256 * 2**20, ranks=448, channels=16) == \
        pytest.approx(256 * 2**20 / (16 * 448))
    assert ring_step_bytes("allreduce", "simple", 4 * 2**30, ranks=16, channels=16) == \
        pytest.approx(2 * 2**20)
    # LL: a 64 KiB slot of 16-byte lines carries 32 KiB
    assert ring_step_bytes("allgather", "ll", 2**30, ranks=8, channels=16) == 32 * 2**10


def test_bad_input_names_the_field():
    with pytest.raises(InputError, match="^op: "):
        ring_step_bytes("alltoall", "simple", 1e6, ranks=8, channels=2)
    with pytest.raises(InputError, match="^hosts: "):
        ring_step_latencies("allreduce", "simple", ranks=6, hosts=4)
    with pytest.raises(InputError, match="nccl.net_overhead_us"):
        NcclParams(net_overhead_us=-1.0)
