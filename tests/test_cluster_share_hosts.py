"""Jobs that share hosts: sub-host allocation never puts two jobs on one GPU, keeps a small
job inside one host, and leaves whole-host jobs to the allocator."""

import itertools

import numpy as np
import pytest
from cluster_tiny import program

from hpnsim.errors import InputError
from hpnsim.fabrics import fat_tree
from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster
from hpnsim.training.program import Compute, Layout, Pass, Program


def _solo(compute: float, gpus: int) -> Program:
    """A job of ``gpus`` data-parallel ranks that only computes (no traffic)."""
    return Program(Layout(dp=gpus), [[Pass("F", 0, 0), Compute(compute)]])


def _overlap(a, b) -> bool:
    return a.start < b.finish and b.start < a.finish


def test_sub_host_allocation_never_places_two_jobs_on_one_gpu():
    # a k=8 fat-tree with 4 GPUs per host (32 hosts, 128 GPUs); 60 seeded jobs of
    # 1-8 GPUs arriving over 1 s, each staying 0.05-0.5 s: hosts fill with small jobs
    f = fat_tree(8, gpus_per_host=4)
    rng = np.random.default_rng(7)
    sizes = rng.choice([1, 2, 3, 4, 8], size=60)
    jobs = [ClusterJob(f"j{i}", _solo(0.01, int(n)), arrival=float(t),
                       duration=float(d))
            for i, (n, t, d) in enumerate(zip(sizes, np.sort(rng.uniform(0, 1, 60)),
                                              rng.uniform(0.05, 0.5, 60), strict=True))]
    r = simulate_cluster(f, jobs, share_hosts=True)
    assert len(r.jobs) == 60 and not r.unfinished
    shared = 0
    for a, b in itertools.combinations(r.jobs, 2):
        if _overlap(a, b):
            assert not set(a.gpu_ids) & set(b.gpu_ids), (a.name, b.name)
            shared += bool(set(a.hosts) & set(b.hosts))
    assert shared > 0                                   # hosts were in fact shared
    for job in r.jobs:
        assert len(set(job.gpu_ids)) == job.gpus
        if job.gpus < 4:
            assert len(job.hosts) == 1                  # a small job stays in one host
        else:
            assert len(job.hosts) == job.gpus // 4      # larger jobs take whole hosts
            busy = [o for o in r.jobs if o is not job and _overlap(o, job)]
            assert not any(set(o.hosts) & set(job.hosts) for o in busy)


def test_whole_hosts_by_default_and_sharing_starts_jobs_earlier():
    # a job holding 31 of the 32 hosts (4 GPUs each) and two 1-GPU jobs: with whole hosts
    # the small jobs take the last host one after the other; shared, both run on it at once
    f = fat_tree(8, gpus_per_host=4)
    big = ClusterJob("big", _solo(0.01, 124), duration=1.0)
    a = ClusterJob("a", _solo(0.01, 1), duration=1.0)
    b = ClusterJob("b", _solo(0.01, 1), duration=1.0)
    whole = simulate_cluster(f, [big, a, b])
    shared = simulate_cluster(f, [big, a, b], share_hosts=True)
    assert [j.start for j in whole.jobs] == [0.0, 0.0, pytest.approx(1.0)]
    assert [j.start for j in shared.jobs] == [0.0, 0.0, 0.0]
    assert shared.jobs[1].hosts == shared.jobs[2].hosts == [31]


def test_a_job_no_allocator_can_place_is_refused_before_running(tiny):
    # tiny: 4 hosts of one GPU; a given placement on a GPU outside the fabric
    with pytest.raises(InputError, match="not in the fabric"):
        simulate_cluster(tiny, [ClusterJob("a", program(0.01, 1e8), iterations=1,
                                           gpus=[0, 9])], allocator="given")


def test_a_pcie_link_that_binds_sets_t_j():
    # Gen3 x4 PCIe (3.94 GB/s per direction) behind 400G NICs (50 GB/s): a 2-GPU ring's
    # 1 GB per GPU crosses each GPU's PCIe link once each way, so the job's bottleneck
    # transfer time t_j is 1 GB / 3.94 GB/s, the PCIe link's, not the NIC's 0.02 s
    from hpnsim.fabrics.assembly import parse_pcie
    from hpnsim.sched.cluster.jobs import TemplateCache

    f = fat_tree(4, gpus_per_host=1, pcie="Gen3x4")
    pcie = parse_pcie("Gen3x4")
    job = ClusterJob("a", program(0.01, 1e9), iterations=1)
    tpl = TemplateCache(f).get(job, [0, 4], 0)
    sched = tpl.sched_job("a", 2, f.link_capacity)
    on_pcie = tpl.link_bytes[f.link_kind[tpl.links] == 1]
    assert on_pcie.size == 4 and np.allclose(on_pcie, on_pcie[0])
    assert 1e9 <= on_pcie[0] <= 1.1e9        # the ring's 1 GB and NCCL's protocol overhead
    assert sched.transfer_time(f.link_capacity) == pytest.approx(on_pcie[0] / pcie, rel=1e-12)
    assert tpl.iteration_time == pytest.approx(0.01 + on_pcie[0] / pcie, rel=0.02)
