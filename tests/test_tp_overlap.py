"""TP communication as frameworks issue it: sequence parallelism as reduce-scatter + all-gather."""

import pytest

from hpnsim.fabrics import hpn7
from hpnsim.training import program_from_job, simulate_iteration
from hpnsim.training.job import TrainJob
from hpnsim.training.program import Collective

# NCCL Simple-protocol ring latencies (collectives.closed_form.cost): base, NVLink hop
BASE, NVLINK_HOP = 8.4e-6, 3.4e-6
SEQ8 = 8192


def test_sequence_parallel_issues_reduce_scatter_and_all_gather_pairs():
    plain = program_from_job(TrainJob("llama3-8b", tp=8, global_batch=2))
    sp = program_from_job(TrainJob("llama3-8b", tp=8, global_batch=2, sequence_parallel=True))
    ops = lambda p: [op.op for op in p.ops(Collective) if op.group == "tp"]  # noqa: E731
    assert set(ops(plain)) == {"allreduce"}
    # every all-reduce of the buffer becomes one reduce-scatter and one all-gather of it, and
    # the backward gathers each part's sharded input again for its weight gradient: one more
    # all-gather per part and backward, a quarter of the all-reduces (2 of 4 per layer are
    # the backward's, one per part)
    n = len(ops(plain))
    assert ops(sp).count("reducescatter") == n
    assert ops(sp).count("allgather") == n + n // 2
    assert {op.size for op in sp.ops(Collective)} == {op.size for op in plain.ops(Collective)}


def test_sequence_parallel_moves_the_all_reduce_ring_bytes_in_two_launches():
    fabric = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    m = 2
    plain = simulate_iteration(TrainJob("llama3-8b", tp=8, global_batch=m), fabric,
                               tp_algo="ring")
    sp = simulate_iteration(TrainJob("llama3-8b", tp=8, global_batch=m,
                                     sequence_parallel=True), fabric, tp_algo="ring")
    # a ring all-reduce is a ring reduce-scatter then a ring all-gather: same bytes; and the
    # backward's re-gather of each part's input for its weight gradient (one all-gather, half
    # an all-reduce's bytes, per part and backward: 2 of the 4 all-reduces' worth a layer)
    assert sp.comm_bytes["tp"] == pytest.approx(1.25 * plain.comm_bytes["tp"], rel=1e-12)
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


def _ring(size):
    """Ring all-gather or reduce-scatter of ``size`` bytes over the 8 NVLink GPUs of an H800
    host: (n-1)/n of the buffer at NCCL's NVLink payload rate, n-1 hops."""
    return 7 / 8 * size / (200e9 * 20.6 / 25) + BASE + 7 * NVLINK_HOP


def test_overlapped_tp_collectives_hide_min_of_comm_and_gemm_per_chunk():
    from hpnsim.training.tp_overlap import gemm_shares
    from hpnsim.training.userbuffers import PIPELINE_SPLITS as RS_SPLITS
    from hpnsim.workloads import models

    spec = models.ModelSpec("one-layer", layers=1, hidden=4096, heads=32, kv_heads=8,
                            ffn=14336, vocab=1, seq_len=SEQ8)
    fabric = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    # the constant compute model: input and weight gradients each cost a forward, as below
    kw = dict(tp=8, global_batch=1, sequence_parallel=True, optimizer_bytes_per_param=0,
              compute_efficiency=0.45)
    job = TrainJob(spec, tp_comm_overlap=True, **kw)
    # NCCL's Simple protocol at every size, so every chunk has the ring closed form
    r = simulate_iteration(job, fabric, tp_algo="ring", protocol="simple")
    plain = simulate_iteration(TrainJob(spec, **kw), fabric, tp_algo="ring", protocol="simple")
    layer = next(b for b in job.stage_cost(0).blocks if b.name == "layer0")
    attn, mlp = layer.forward_attention, layer.forward_compute - layer.forward_attention
    qkv, proj, fc1, fc2 = gemm_shares(spec, SEQ8)
    size = SEQ8 * 4096 * 2
    def pipelined(gemm, k):
        # reduce-scatter: k chunks of c seconds of collective and g of GEMM, each chunk after
        # its slice: (k-1) min(c, g) hidden, the last chunk exposed
        c, g = _ring(size / k), gemm / k
        return k * c - (k - 1) * min(c, g)

    def ring_exchange(gemm, k):
        # all-gather: the own shard's slice first, then k-1 shifts of one shard (a send/recv
        # to the next rank: one NVLink hop, Simple) each feeding the next slice: a shift
        # longer than a slice exposes the difference
        c, g = size / k / (200e9 * 20.6 / 25) + BASE + NVLINK_HOP, gemm / k
        return (k - 1) * max(0.0, c - g)

    def bulk(gemm):
        return _ring(size) - min(_ring(size), gemm)

    # backward: per part, the gradient's ring exchange, the input's re-gather beside the
    # QKV/FC1 input-gradient GEMM, the input gradient's reduce-scatter beside the weight
    # gradient (each input- and weight-gradient part costs its forward here)
    exposed = (ring_exchange(attn * qkv, 8) + pipelined(attn * proj, RS_SPLITS)   # forward
               + ring_exchange(mlp * fc1, 8) + pipelined(mlp * fc2, RS_SPLITS)
               + ring_exchange(mlp * fc2, 8) + bulk(mlp * fc1) + bulk(mlp)        # backward
               + ring_exchange(attn * proj, 8) + bulk(attn * qkv) + bulk(attn))
    assert r.exposed_comm["tp"] == pytest.approx(exposed, rel=1e-9)
    assert r.compute_time == pytest.approx(plain.compute_time, rel=1e-12)
    assert r.iteration_time == pytest.approx(r.compute_time + exposed, rel=1e-9)
    # a shift moves one shard to each GPU, k-1 of them the all-gather's (k-1)/k of the buffer
    assert r.comm_bytes["tp"] == pytest.approx(plain.comm_bytes["tp"], rel=1e-12)
    assert r.exposed_comm["dp"] == 0.0
    assert r.iteration_time < plain.iteration_time


def test_userbuffer_gemms_run_on_the_sms_their_communication_leaves():
    """Per-operation model: TransformerEngine's pipelined reduce-scatters and bulk overlaps
    (the reduce-scatters beside the weight gradients, the inputs' re-gathers beside the QKV
    and FC1 input gradients) launch their GEMMs on 132 - 16 SMs; the ring-exchange
    all-gathers copy with the copy engines. Each overlapped GEMM piece is longer by its
    kernels' wave ratio, by hand."""
    from hpnsim.training.compute import gemm_time
    from hpnsim.training.compute.gemm import TILES, calibration
    from hpnsim.training.tp_overlap import gemm_shares
    from hpnsim.workloads import models
    from hpnsim.workloads.gpus import get_gpu

    spec = models.ModelSpec("one-layer", layers=1, hidden=4096, heads=32, kv_heads=8,
                            ffn=14336, vocab=1, seq_len=SEQ8)
    fabric = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    kw = dict(tp=8, global_batch=1, sequence_parallel=True, optimizer_bytes_per_param=0,
              gpu_variation=0)
    job = TrainJob(spec, tp_comm_overlap=True, **kw)
    r = simulate_iteration(job, fabric, tp_algo="ring")
    plain = simulate_iteration(TrainJob(spec, **kw), fabric, tp_algo="ring")
    h800 = get_gpu("h800")

    def waves(m, n, k, sms):
        # the least padded work over Hopper's tiles at sms SMs against all 132, by hand; the
        # fitted shortest-kernel time is paid once, not per wave
        t = gemm_time(m, n, k, "bf16", h800)
        floor = calibration(h800, "bf16").floor_s

        def area(count):
            return min(-(-(-(-m // a) * -(-n // b)) // count) * a * b
                       for a, b in TILES["hopper"])
        return (floor + (t.compute_s - floor) * area(sms) / area(132)) / t.compute_s

    # the O projection [8192, 4096] @ [4096, 4096/8 ...]: forward M = tokens, N = hidden,
    # K = local heads x 128; FC2 K = ffn / tp
    s_proj = waves(SEQ8, 4096, 4096 // 8, 116)
    s_fc2 = waves(SEQ8, 4096, 14336 // 8, 116)
    layer = next(b for b in job.stage_cost(0).blocks if b.name == "layer0")
    attn, mlp = layer.forward_attention, layer.forward_compute - layer.forward_attention
    qkv, proj, fc1, fc2 = gemm_shares(spec, SEQ8)
    forward = (s_proj - 1) * attn * proj + (s_fc2 - 1) * mlp * fc2
    assert job.overlap_slowdown("layer0", 16, ("forward",), names=("o_proj",)) == (
        pytest.approx(s_proj, rel=1e-12))
    backward = ((job.overlap_slowdown("layer0", 16, ("weight_grad",), part="mlp") - 1)
                * layer.mlp_wg
                + (job.overlap_slowdown("layer0", 16, ("weight_grad",), part="attention") - 1)
                * layer.attention_wg
                # the bulk re-gathers of the QKV and FC1 inputs beside their input gradients
                + (job.overlap_slowdown("layer0", 16, ("input_grad",), names=("qkv",)) - 1)
                * layer.attention_ig * qkv
                + (job.overlap_slowdown("layer0", 16, ("input_grad",), names=("fc1",)) - 1)
                * layer.mlp_ig * fc1)
    assert r.compute_by_class["contention"] == pytest.approx(forward + backward, rel=1e-9)
    # without userbuffers, NCCL's ring all-gather of each part's input (16 SMs) runs beside
    # that part's input-gradient kernels, launched for every SM (persistent on Hopper), for
    # the all-gather's own time
    import numpy as np

    from hpnsim.collectives.planning.options import CollectiveOptions
    from hpnsim.training.comm import time_groups
    from hpnsim.training.compute.contention import Launch

    plain_job = TrainJob(spec, **kw)
    gather, _ = time_groups(fabric, "allgather", np.arange(8)[None, :],
                            plain_job.activation_bytes, CollectiveOptions(algo="ring"))
    regathers = sum((plain_job.overlap_slowdown("layer0", 16, ("input_grad",), part=part,
                                                launch=Launch.FULL) - 1)
                    * min(seconds, gather) for part, seconds in (("attention", layer.attention_ig),
                                                                 ("mlp", layer.mlp_ig)))
    assert plain.compute_by_class["contention"] == pytest.approx(regathers, rel=1e-9)
    assert r.compute_time - forward - backward == pytest.approx(
        plain.compute_time - regathers, rel=1e-9)


def test_tp_comm_overlap_needs_sequence_parallelism():
    from hpnsim.errors import InputError

    with pytest.raises(InputError, match="tp_comm_overlap: overlaps sequence parallelism"):
        TrainJob("llama3-8b", tp=8, tp_comm_overlap=True)


def test_without_overlap_grad_reduce_gradients_reduce_in_one_bucket_after_the_backward():
    from hpnsim.fabrics import fat_tree

    fabric = fat_tree(4)
    late = TrainJob("llama3-8b", dp=8, global_batch=16, overlap_grad_reduce=False)
    one = TrainJob("llama3-8b", dp=8, global_batch=16, bucket_params=10**12)
    early = TrainJob("llama3-8b", dp=8, global_batch=16)
    r_late, r_one, r_early = (simulate_iteration(j, fabric, dp_algo="ring")
                              for j in (late, one, early))
    # one bucket ready when the backward ends (test_iteration has its closed form)
    assert r_late.iteration_time == pytest.approx(r_one.iteration_time, rel=1e-12)
    assert r_late.comm_bytes["dp"] == pytest.approx(r_early.comm_bytes["dp"], rel=1e-9)
    assert r_early.exposed_comm["dp"] < 0.5 * r_late.exposed_comm["dp"]


def test_overlap_param_gather_moves_the_gathers_into_the_next_forward():
    from hpnsim.fabrics import fat_tree

    fabric = fat_tree(4)
    kw = dict(dp=8, global_batch=16, zero=1)
    def run(**more):
        return simulate_iteration(TrainJob("llama3-8b", **kw, **more), fabric, dp_algo="ring")

    # one bucket: its gather is needed by the first block, so it is as exposed at the start
    # of the iteration as after the optimizer
    one_late, one_early = run(bucket_params=10**12), run(bucket_params=10**12,
                                                         overlap_param_gather=True)
    assert one_early.iteration_time == pytest.approx(one_late.iteration_time, rel=1e-9)
    # Megatron's 40M-parameter buckets: all but the first hide behind the forward
    late, early = run(), run(overlap_param_gather=True)
    assert early.comm_bytes["dp"] == pytest.approx(late.comm_bytes["dp"], rel=1e-12)
    assert early.exposed_comm["dp"] < late.exposed_comm["dp"]
    assert early.iteration_time < late.iteration_time


def test_overlap_param_gather_needs_the_distributed_optimizer():
    from hpnsim.errors import InputError

    with pytest.raises(InputError, match="overlap_param_gather: needs the distributed"):
        TrainJob("llama3-8b", dp=2, overlap_param_gather=True)


def test_overlap_param_gather_with_interleaving_dispatches_as_megatron_aligns_it():
    """Megatron-Core's align_param_gather (on with the interleaved schedule): chunks 0 and 1
    gathered when the schedule starts, chunk c + 1 at the forward whose index plus the
    stage's rank is c * pp (the first micro-batch of chunk c)."""
    from hpnsim.training.program import Pass

    pp, vp = 2, 4
    job = TrainJob("llama3-8b", pp=pp, dp=2, virtual_stages=vp, global_batch=8, zero=1,
                   overlap_param_gather=True)
    prog = program_from_job(job)
    # by hand from the rule: stage 0 gathers chunk 2 at forward 2, chunk 3 at forward 4;
    # stage 1 (rank 1) chunk 2 at forward 1, chunk 3 at forward 3
    expected = {0: {0: (0, 1), 2: (2,), 4: (3,)}, 1: {0: (0, 1), 1: (2,), 3: (3,)}}
    for s, ops in enumerate(prog.stages):
        at: dict[int, float] = {}
        forwards = 0
        for op in ops:
            if isinstance(op, Pass) and op.kind == "F":
                forwards += 1
            elif isinstance(op, Collective) and op.op == "allgather":
                at[forwards] = at.get(forwards, 0.0) + op.size
        bytes_of = {c: sum(params for params, _ in job.buckets(c * pp + s)) * 2
                    for c in range(vp)}
        assert at == pytest.approx({f: sum(bytes_of[c] for c in chunks)
                                    for f, chunks in expected[s].items()}, rel=1e-12)
    # dispatched ahead, the gathers hide behind the schedule: less DP time exposed than
    # gathering after the optimizer, same bytes
    fabric = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    late = simulate_iteration(TrainJob("llama3-8b", pp=pp, dp=4, virtual_stages=vp,
                                       global_batch=8, zero=1), fabric)
    early = simulate_iteration(job.__class__("llama3-8b", pp=pp, dp=4, virtual_stages=vp,
                                             global_batch=8, zero=1,
                                             overlap_param_gather=True), fabric)
    assert early.comm_bytes["dp"] == pytest.approx(late.comm_bytes["dp"], rel=1e-12)
    assert early.exposed_comm["dp"] < late.exposed_comm["dp"]
