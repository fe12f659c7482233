"""NVLS on every Hopper part (H800 included) and NCCL 2.18.3's rules for ``algo: auto``.

NCCL 2.18.3 (the HPN paper's version; src/graph/tuning.cc, src/enqueue.cc at v2.18.3-1):
all-gather and reduce-scatter run ring only, NVLS runs inside one node only, NVLS_TREE
across nodes only, both Simple only. Expected times below come from the NVLS byte counts
written out here ((k+1)/k of the buffer each way per GPU over NVLink x 0.85).
"""

from __future__ import annotations

import numpy as np
import pytest

import hpnsim as hs
from hpnsim.collectives import run_collective
from hpnsim.collectives.closed_form.model import GroupShape, choose_algorithm, model_time
from hpnsim.collectives.nccl.params import NVLS_GPUS, NcclParams
from hpnsim.engine import TaskGraph, simulate
from hpnsim.fabrics import hpn7
from hpnsim.training import account, compile_program, program_from_job
from hpnsim.workloads.gpus import GPUS

H800_NVLINK = 200e9          # 400 GB/s bidirectional
SIZES = [2.0**k for k in range(20, 33, 2)]   # 1 MiB .. 4 GiB


@pytest.fixture(scope="module")
def h800_hosts():
    return hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2)


def test_every_hopper_part_has_nvls_and_the_two_catalogs_agree():
    assert {g for g, spec in GPUS.items() if spec.nvls} == set(NVLS_GPUS)
    assert {"h100", "h800", "h200"} <= set(NVLS_GPUS) and "a100" not in NVLS_GPUS
    assert NcclParams.for_gpu("h800").nvls and not NcclParams.for_gpu("a100").nvls


def test_nvls_on_one_h800_host_matches_its_byte_count(h800_hosts):
    k, size = 8, 2.0**32
    nccl = NcclParams.for_gpu("h800")
    r = run_collective(h800_hosts, "allreduce", range(k), size, nccl=nccl)
    assert (r.algo, r.protocol) == ("nvls", "simple")
    rate = H800_NVLINK * (20.6 / 25) * 0.85
    expect = 25e-6 + size * (k + 1) / k / rate     # tuning.cc NVLS: 25 us NVLink hop
    assert r.time == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("hosts", [1, 2, 4])
def test_auto_takes_nvls_for_large_h800_allreduces_and_never_for_allgather(h800_hosts, hosts):
    nccl = NcclParams.for_gpu("h800")
    shape = GroupShape.from_fabric(h800_hosts, np.arange(8 * hosts), nccl=nccl)
    want = "nvls" if hosts == 1 else "nvlstree"
    big = [choose_algorithm("allreduce", shape, s, nccl=nccl) for s in SIZES if s >= 2**28]
    assert big and all(c == (want, "simple") for c in big)
    for op in ("allgather", "reducescatter"):
        assert all(choose_algorithm(op, shape, s, nccl=nccl)[0] not in ("nvls", "nvlstree")
                   for s in SIZES)
    # without NVLink SHARP the same group never gets it
    plain = NcclParams.for_gpu("h800", nvls=False)
    shape0 = GroupShape.from_fabric(h800_hosts, np.arange(8 * hosts), nccl=plain)
    assert all(choose_algorithm("allreduce", shape0, s, nccl=plain)[0] not in
               ("nvls", "nvlstree") for s in SIZES)


def test_nvls_tree_only_across_hosts_and_nvls_only_inside_one():
    one = GroupShape(1, 8, 164.8e9, 49e9, nic_ports=2, nvls=True)
    many = GroupShape(4, 8, 164.8e9, 49e9, nic_ports=2, nvls=True)
    from hpnsim.collectives.closed_form.model import auto_candidates

    assert "nvls" in auto_candidates("allreduce", one)
    assert "nvlstree" not in auto_candidates("allreduce", one)
    assert "nvlstree" in auto_candidates("allreduce", many)
    assert "nvls" not in auto_candidates("allreduce", many)


def _iteration(job, fabric, nccl=None):
    it = compile_program(program_from_job(job), TaskGraph(), fabric, nccl=nccl)
    sim = simulate(it.graph, fabric.link_capacity)
    return account(it, sim.start, sim.finish)


def test_a_job_runs_with_its_gpus_nccl_parameters_by_default():
    fabric = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    job = hs.TrainJob("llama3-8b", tp=8, global_batch=1)
    default = _iteration(job, fabric)
    assert default.exposed_comm["tp"] == _iteration(job, fabric, NcclParams.for_gpu("h800")) \
        .exposed_comm["tp"]
    # the TP all-reduces are exposed back to back: the ratio of the two runs is the ratio of
    # one all-reduce's closed forms, NVLS against what auto takes without NVLS
    plain = NcclParams.for_gpu("h800", nvls=False)
    without = _iteration(job, fabric, plain)
    nccl = NcclParams.for_gpu("h800")
    shape = GroupShape.from_fabric(fabric, range(8), nccl=nccl)
    size = job.activation_bytes
    t_nvls = model_time("allreduce", "nvls", "simple", shape, size, nccl=nccl)
    shape0 = GroupShape.from_fabric(fabric, range(8), nccl=plain)
    algo, proto = choose_algorithm("allreduce", shape0, size, nccl=plain)
    t_old = model_time("allreduce", algo, proto, shape0, size, nccl=plain)
    assert default.exposed_comm["tp"] / without.exposed_comm["tp"] == \
        pytest.approx(t_nvls / t_old, rel=1e-6)
    assert t_nvls < t_old
