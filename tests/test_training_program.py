"""The training program and its one compiler: a TrainJob and the equivalent AICB file are the
same ops; a pipeline-parallel AICB file against a hand-derived 1F1B timeline; EP all-to-alls
as graph tasks that a competing transfer slows; NVLink TP replay against the simulated
collective. Expected values are derived here, not taken from the code's own sums."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpnsim.collectives import run_collective
from hpnsim.engine import TaskGraph, simulate
from hpnsim.errors import InputError
from hpnsim.fabrics import fat_tree, hpn7
from hpnsim.routing import route
from hpnsim.training import (
    Collective,
    Compute,
    Pass,
    account,
    build_iteration_graph,
    program_from_aicb,
    program_from_job,
    simulate_aicb,
    simulate_iteration,
)
from hpnsim.training.job import TrainJob
from hpnsim.workloads import models
from hpnsim.workloads.aicb import parse_aicb

H800_RATE = 989.4e12 * 0.45            # achieved FLOP/s of an H800 at 45% MFU
BASE, NVLINK_HOP, NET_HOP = 8.4e-6, 3.4e-6, 14e-6   # NCCL Simple: base, NVLink hop, net hop
NIC = 50e9                              # 400 Gb/s

# two layers of h 1024, 8 heads of 128 (no GQA), SwiGLU 4096, vocab 1000, 1024 tokens
SMALL = models.ModelSpec("small", layers=2, hidden=1024, heads=8, ffn=4096, vocab=1000,
                         seq_len=1024)


def _key(op):
    """An op without its label: what the two sources must agree on."""
    if isinstance(op, Compute):
        return ("compute", round(op.seconds, 11), op.after)
    if isinstance(op, Collective):
        return ("collective", op.op, op.group, op.size, op.blocking, op.after, op.follows,
                op.row)
    return op


def test_train_job_and_equivalent_aicb_file_are_the_same_program():
    job = TrainJob(SMALL, tp=2, dp=2, global_batch=4, bucket_params=10**12,  # 2 micro-batches
                   compute_efficiency=0.45)   # the AICB file's times: the constant model's
    tokens, tp = 1024, 2
    # per token: attention 2*(4 h^2) + 4 s h = 12 * 1024^2; SwiGLU 2*3*h*ffn; head 2*v*h
    attn = 12 * 1024**2 * tokens / tp / H800_RATE
    mlp = 2 * 3 * 1024 * 4096 * tokens / tp / H800_RATE
    head = 2 * 1000 * 1024 * tokens / tp / H800_RATE
    ar = tokens * 1024 * 2                                     # b s h, BF16
    # parameters per TP rank: 2 layers of (4 h^2 + 3 h ffn + 2 h norms) and the embedding and
    # head tables (v h each) split over tp; the final norm (h) whole; gradients in BF16
    params = (2 * (4 * 1024**2 + 3 * 1024 * 4096 + 2 * 1024) + 2 * 1000 * 1024) / tp + 1024
    update = 28 * params / 3.35e12                             # Adam: 28 HBM bytes/param
    ps = 1e-12  # the file in picoseconds

    def t(seconds):
        return round(seconds / ps)

    lines = [f"embedding -1 0 NONE 0 0 NONE 0 0 ALLREDUCE {round(2 * params)} {t(update)}"]
    for i in range(2):
        lines.append(f"attention_{i} -1 {t(attn)} ALLREDUCE {ar} {t(attn)} ALLREDUCE {ar} "
                     f"{t(attn)} NONE 0 0")
        lines.append(f"mlp_{i} -1 {t(mlp)} ALLREDUCE {ar} {t(mlp)} ALLREDUCE {ar} "
                     f"{t(mlp)} NONE 0 0")
    lines.append(f"head -1 {t(head)} NONE 0 {t(head)} NONE 0 {t(head)} NONE 0 0")
    text = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 "
            f"ga: 2 all_gpus: 4\n{len(lines)}\n" + "\n".join(lines) + "\n")
    from_file = program_from_aicb(parse_aicb(text, time_unit=ps))
    from_job = program_from_job(job)
    assert [_key(op) for op in from_job.stages[0]] == [_key(op) for op in from_file.stages[0]]
    # per micro-batch: 4 sub-layers x (fwd + bwd) TP all-reduces; one gradient all-reduce
    ops = from_job.stages[0]
    assert sum(isinstance(op, Collective) and op.group == "tp" for op in ops) == 2 * 4 * 2
    assert [op.size for op in ops if isinstance(op, Collective) and op.group == "dp"] == \
        [2 * params]
    fabric = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    a, b = simulate_iteration(job, fabric), simulate_aicb(parse_aicb(text, time_unit=ps), fabric)
    # the file's times are whole picoseconds: ~60 of them, each within 0.5 ps
    assert a.iteration_time == pytest.approx(b.iteration_time, abs=1e-10)
    assert a.exposed_comm == pytest.approx(b.exposed_comm, abs=1e-10)


def test_pipeline_parallel_aicb_file_follows_the_1f1b_timeline():
    # two stages on two hosts, every link 100 GB/s, no latency: a message of S bytes takes
    # c = S / 100e9 (c < f: a stage's consecutive messages never share the path); one layer
    # per stage: forward f, backward b = input-grad + weight-grad
    fabric = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, rails=1, hop_latency="0s",
                  host_latency="0s")
    fabric = fabric.replace(link_capacity=np.full(fabric.n_links, 100e9))
    text = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 1 pp: 2 vpp: 1 "
            "ga: 2 all_gpus: 2 pp_comm: 100000\n1\n"
            "layer -1 3000 NONE 0 4000 NONE 0 2000 NONE 0 500\n")
    r = simulate_aicb(parse_aicb(text), fabric)
    f, b, c, update = 3e-6, 6e-6, 1e5 / 100e9, 0.5e-6
    # 1F1B, p = 2, m = 2. Stage 0: F0 [0, f], F1 [f, 2f], B0 waits for stage 1's B0 message,
    # B1 for its B1 message. Stage 1: F0 [f + c, 2f + c], B0 until 2f + c + b, F1 (message
    # there since 2f + c) until 3f + c + b, B1 until 3f + c + 2b. Stage 0: B0 from
    # 2f + 2c + b to 2f + 2c + 2b, B1 from max(2f + 2c + 2b, 3f + 2c + 2b) = 3f + 2c + 2b to
    # 3f + 2c + 3b; then the update on each stage: 9 + 2 + 18 + 0.5 = 29.5 us.
    assert r.iteration_time == pytest.approx(3 * f + 2 * c + 3 * b + update, rel=1e-12)
    last = r.per_stage[1]
    assert last["pp"] == pytest.approx(c, rel=1e-12)           # F0's message in flight
    assert last["bubble"] == pytest.approx(f + (c + b), rel=1e-12)  # fill, then drain
    assert r.comm_bytes["pp"] == 2 * 2 * 1e5                    # F and B of 2 micro-batches
    for row in r.per_stage:
        assert sum(v for k, v in row.items() if k != "stage") == \
            pytest.approx(r.iteration_time, rel=1e-12)


def test_pipeline_aicb_file_needs_its_message_size():
    text = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 pp: 2 ga: 2 "
            "all_gpus: 2\n1\nlayer -1 3000 NONE 0 4000 NONE 0 2000 NONE 0 500\n")
    with pytest.raises(InputError, match="pp_comm"):
        program_from_aicb(parse_aicb(text))


MOE1 = models.ModelSpec("moe-one", layers=1, hidden=4096, heads=32, ffn=4096, vocab=1000,
                        seq_len=8192, experts=8, top_k=2)


def test_ep_all_to_alls_are_graph_tasks_slowed_by_a_competing_transfer():
    fabric = fat_tree(4)                       # single-GPU hosts: EP peers across the network
    job = TrainJob(MOE1, dp=2, ep=2, global_batch=2)
    size = job.ep_buffer_bytes                 # 8192 tokens x top-2 x 4096 x 2 B = 128 MiB
    alone = simulate_iteration(job, fabric, routing="spray")
    # direct all-to-all on 2 GPUs: each sends half its buffer to the other at the NIC rate
    # NCCL payload on the NIC: RoCEv2 framing at MTU 4096 (82 bytes a packet)
    eff = 4096 / 4178
    assert alone.ep_alltoall_time == pytest.approx(BASE + NET_HOP + size / 2 / (NIC * eff),
                                                   rel=1e-9)

    graph = TaskGraph()
    it = build_iteration_graph(job, fabric, routing="spray", graph=graph)
    ep = [el for sp in it.passes[0] for el in sp.elements if el.category == "ep"]
    assert len(ep) == 4                        # dispatch + combine, forward and backward
    # another job's transfer from GPU 0 to GPU 2 for the whole iteration: GPU 0's NIC uplink
    # carries it and GPU 0's all-to-all flow to GPU 1, max-min fair: equal rates x, the
    # all-to-all loading the link with x / eff (its framing), the raw transfer with x
    paths = route(fabric, [0], [2], "spray")
    graph.add_transfer_paths(paths, 1e12)
    sim = simulate(graph, fabric.link_capacity)
    shared = account(it, sim.start, sim.finish)
    shared_rate = NIC / (1 + 1 / eff)
    assert shared.ep_alltoall_time == pytest.approx(BASE + NET_HOP + size / 2 / shared_rate,
                                                    rel=1e-9)
    first = ep[0]                              # layer 0's forward dispatch
    assert sim.finish[first.last] - sim.start[first.first] == \
        pytest.approx(BASE + NET_HOP + size / 2 / shared_rate, rel=1e-9)
    assert shared.exposed_comm["ep"] > alone.exposed_comm["ep"]


def test_nvlink_tp_replay_equals_the_simulated_collective():
    fabric = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    job = TrainJob("llama3-8b", tp=8, global_batch=2)
    r = simulate_iteration(job, fabric, tp_algo="ring")
    size = 8192 * 4096 * 2
    alone = run_collective(fabric, "allreduce", list(range(8)), size, algo="ring")
    assert r.tp_allreduce_time == pytest.approx(alone.time, rel=1e-12)
    # and the ring closed form on H800 NVLink (200 GB/s per direction, of which NCCL moves
    # payload at 20.6 of 25 GB/s per link, topo.h SM90_NVLINK_BW; 2(n-1) steps)
    ring = 2 * 7 / 8 * size / (200e9 * 20.6 / 25) + BASE + 14 * NVLINK_HOP
    assert r.tp_allreduce_time == pytest.approx(ring, rel=1e-9)
    assert r.exposed_comm["tp"] == pytest.approx(2 * 32 * 4 * ring, rel=1e-9)
    assert not math.isnan(r.mfu)


def test_program_ops_are_checked():
    from hpnsim.training import Program
    from hpnsim.workloads.layout import Layout

    with pytest.raises(InputError, match="group"):
        Program(Layout(), [[Pass("F", 0, 0), Collective("allreduce", "xp", 1.0)]])
    with pytest.raises(InputError, match="earlier op"):
        Program(Layout(), [[Compute(1.0, after=(3,))]])
