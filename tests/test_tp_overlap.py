"""TP communication as frameworks issue it: sequence parallelism as reduce-scatter + all-gather."""

import pytest

from hpnsim.fabrics import hpn7
from hpnsim.training import program_from_job, simulate_iteration
from hpnsim.training.job import TrainJob
from hpnsim.training.program import Collective

# NCCL Simple-protocol ring latencies (collectives.cost): base, NVLink hop
BASE, NVLINK_HOP = 8.4e-6, 3.4e-6
SEQ8 = 8192


def test_sequence_parallel_issues_reduce_scatter_and_all_gather_pairs():
    plain = program_from_job(TrainJob("llama3-8b", tp=8, global_batch=2))
    sp = program_from_job(TrainJob("llama3-8b", tp=8, global_batch=2, sequence_parallel=True))
    ops = lambda p: [op.op for op in p.ops(Collective) if op.group == "tp"]  # noqa: E731
    assert set(ops(plain)) == {"allreduce"}
    # every all-reduce of the buffer becomes one reduce-scatter and one all-gather of it
    assert ops(sp).count("reducescatter") == ops(sp).count("allgather") == len(ops(plain))
    assert {op.size for op in sp.ops(Collective)} == {op.size for op in plain.ops(Collective)}


def test_sequence_parallel_moves_the_all_reduce_ring_bytes_in_two_launches():
    fabric = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    m = 2
    plain = simulate_iteration(TrainJob("llama3-8b", tp=8, global_batch=m), fabric,
                               tp_algo="ring")
    sp = simulate_iteration(TrainJob("llama3-8b", tp=8, global_batch=m,
                                     sequence_parallel=True), fabric, tp_algo="ring")
    # a ring all-reduce is a ring reduce-scatter then a ring all-gather: same bytes
    assert sp.comm_bytes["tp"] == pytest.approx(plain.comm_bytes["tp"], rel=1e-12)
    size = SEQ8 * 4096 * 2                      # b*s*h BF16 hidden state
    bw = 200e9 * 20.6 / 25                      # H800 NVLink payload rate per direction
    half = 7 / 8 * size / bw + BASE + 7 * NVLINK_HOP        # RS or AG: n-1 steps
    allreduce = 2 * 7 / 8 * size / bw + BASE + 14 * NVLINK_HOP
    launches = m * 32 * 4                       # micro-batches x layers x (2 fwd + 2 bwd)
    assert plain.exposed_comm["tp"] == pytest.approx(launches * allreduce, rel=1e-9)
    # the pair costs one more NCCL launch latency than the all-reduce it replaces
    assert sp.exposed_comm["tp"] == pytest.approx(launches * 2 * half, rel=1e-9)
    assert sp.exposed_comm["tp"] - plain.exposed_comm["tp"] == pytest.approx(
        launches * BASE, rel=1e-6)
