"""Pipelines as people build them: uneven layer splits (Megatron-Core's options), their bubbles
against a hand derivation and an independent list scheduler, and the refusals."""

import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.errors import InputError
from hpnsim.fabrics import hpn7
from hpnsim.training import simulate_iteration
from hpnsim.training.job import TrainJob
from hpnsim.training.schedule import pipeline_schedule
from hpnsim.training.stages import split_layers
from hpnsim.workloads import models


def _ideal_fabric(hosts):
    """HPN segment with zero latency and (practically) infinite link capacity: PP messages
    take no time, so every wait is a bubble."""
    fabric = hpn7(segments=1, hosts_per_segment=hosts, backup_hosts=0, rails=1,
                  hop_latency="0s", host_latency="0s")
    return fabric.with_link_capacity(None, 1e30)


def _flat_model(layers):
    return models.ModelSpec("flat", layers=layers, hidden=1024, heads=8, ffn=4096, vocab=1,
                            seq_len=1024)


def _list_schedule(schedule, f, b, w=None):
    """Iteration time of per-stage pass orders with pass times ``f[u]``, ``b[u]`` (``w[u]``:
    weight-gradient passes) per virtual stage ``u = chunk * p + stage`` and free messages, by
    list scheduling (a pass starts when its stage is free and its input exists): independent
    of the simulator's graph and engine."""
    p = len(schedule)
    last = max(k for ops in schedule for _, _, k in ops) * p + p - 1
    done: dict = {}
    free = [0.0] * p
    cursor = [0] * p
    while any(cursor[s] < len(schedule[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while cursor[s] < len(schedule[s]):
                kind, j, k = schedule[s][cursor[s]]
                u = k * p + s
                if kind == "W":
                    need = ("B", j, u)
                elif kind == "F":
                    need = ("F", j, u - 1) if u > 0 else None
                else:
                    need = ("B", j, u + 1) if u < last else ("F", j, u)
                if need is not None and need not in done:
                    break
                start = max(free[s], done[need] if need else 0.0)
                free[s] = start + {"F": f, "B": b, "W": w}[kind][u]
                done[(kind, j, u)] = free[s]
                cursor[s] += 1
                moved = True
        assert moved
    return max(free)


def test_megatron_split_options_follow_megatron_core():
    # get_num_layers_to_build (Megatron-Core 0.20): 30 layers + embedding + loss = 32 over
    # 4 stages = 8 each, the first and last building one fewer
    assert split_layers(30, 4, embedding=True, loss=True) == (7, 8, 8, 7)
    # first/last stage given: the rest even over the middle; with vpp each stage's count is
    # split over its chunks, virtual stage u = k * pp + s
    assert split_layers(32, 4, 2, first=4, last=4) == (2, 6, 6, 2, 2, 6, 6, 2)
    assert split_layers(28, 2, first=10) == (10, 18)
    with pytest.raises(InputError, match="left must divide"):
        split_layers(31, 4, first=4, last=4)


def test_uneven_two_stage_pipeline_has_the_bubble_of_the_slowest_stage():
    # stage 1 holds 3 of 4 layers: it is the slowest and, once fed, never waits
    # (f0 + b0 <= f1 + b1), so by hand T = f0 + m (f1 + b1) + b0; stage 1 idles f0 + b0
    m = 6
    job = TrainJob(_flat_model(4), pp=2, global_batch=m, stage_layers=(1, 3),
                   optimizer_bytes_per_param=0, gpu_variation=0)
    (f0, b0), (f1, b1) = [(job.stage_cost(s).forward_compute, job.stage_cost(s).backward_compute)
                          for s in (0, 1)]
    assert f1 > 2.9 * f0                                   # 3 layers against 1
    r = simulate_iteration(job, _ideal_fabric(2))
    total = f0 + m * (f1 + b1) + b0
    assert r.iteration_time == pytest.approx(total, rel=1e-9)
    bubbles = [row["bubble"] for row in r.per_stage]
    assert bubbles[1] == pytest.approx(f0 + b0, rel=1e-9)
    assert bubbles[0] == pytest.approx(total - m * (f0 + b0), rel=1e-9)
    assert r.exposed_comm["pp"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("counts,m", [((2, 5, 1), 5), ((4, 1, 3), 4), ((0, 4, 4), 3)])
def test_uneven_pipeline_matches_a_list_scheduler(counts, m):
    p = len(counts)
    job = TrainJob(_flat_model(sum(counts)), pp=p, global_batch=m, stage_layers=counts,
                   optimizer_bytes_per_param=0, gpu_variation=0)
    f = [job.stage_cost(s).forward_compute for s in range(p)]
    b = [job.stage_cost(s).backward_compute for s in range(p)]
    expected = _list_schedule(pipeline_schedule("1f1b", p, m), f, b)
    r = simulate_iteration(job, _ideal_fabric(p))
    assert r.iteration_time == pytest.approx(expected, rel=1e-9)
    for s, row in enumerate(r.per_stage):
        assert row["bubble"] == pytest.approx(expected - m * (f[s] + b[s]), rel=1e-6,
                                              abs=1e-12)


def test_embedding_only_first_stage_holds_no_layer():
    job = TrainJob("llama3-8b", pp=4, stage_layers=(0, 11, 11, 10))
    first = job.stage_cost(0)
    assert [blk.name for blk in first.blocks] == ["embedding"]
    (embedding,) = first.blocks       # the lookup only: memory-bound, no GEMM or attention
    assert embedding.gemm == embedding.attention == 0.0
    assert first.forward_compute == embedding.forward_compute
    assert embedding.memory + embedding.gaps == pytest.approx(
        embedding.forward_compute + embedding.backward_compute, rel=1e-12)
    assert first.params_per_gpu == 128256 * 4096
    assert list(job.chunk_layers(3)) == list(range(22, 32))


@pytest.mark.parametrize("args,message", [
    (["--stage-layers", "8,8,8,7"], "error: --stage-layers: 8+8+8+7 = 31 layers; the model has 32"),
    (["--stage-layers", "16,16"], "error: --stage-layers: needs pp*virtual_stages = 4*1 = 4 "
                                  "counts (one per virtual stage), got 2"),
    (["--first-stage-layers", "6"], "error: --first-stage-layers: the 26 layers left must "
                                    "divide evenly over the 3 middle stages"),
])
def test_uneven_stage_lists_that_do_not_fit_are_refused(args, message):
    result = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--pp", "4", *args])
    assert result.exit_code == 2
    assert result.output.strip() == message


@pytest.mark.parametrize("p,m", [(4, 8), (3, 5), (2, 6), (4, 4)])
def test_zb_h1_bubble_is_a_third_of_1f1b(p, m):
    # equal stages, m >= p; on the flat model input- and weight-gradient passes each cost a
    # forward (F = B = W = f), so ZB-H1's bubble is (p - 1)(F + B - W) = (p - 1) f (Qi et al.,
    # section 3.1), a third of 1F1B's 3 (p - 1) f: the constant compute model, whose
    # input- and weight-gradient passes each cost exactly a forward
    job = TrainJob(_flat_model(2 * p), pp=p, global_batch=m, schedule="zb-h1",
                   optimizer_bytes_per_param=0, compute_efficiency=0.45)
    f = job.stage_cost(0).forward_compute
    r = simulate_iteration(job, _ideal_fabric(p))
    head = job.stage_cost(p - 1).forward_compute - f     # the 1-word head: 3e-5 of a pass
    assert r.iteration_time == pytest.approx((3 * m + p - 1) * f, rel=1e-4)
    # (the head adds 3e-5 of a pass to the last stage: the other stages wait that too)
    assert r.bubble_fraction == pytest.approx((p - 1) / (3 * m + p - 1), rel=1e-3)
    fs = [job.stage_cost(s).forward_compute for s in range(p)]
    expected = _list_schedule(pipeline_schedule("zb-h1", p, m), fs, fs, fs)
    assert r.iteration_time == pytest.approx(expected, rel=1e-9)
    assert head < 1e-4 * f


def test_zb_h1_with_few_micro_batches_matches_the_list_scheduler():
    p, m = 4, 2      # fewer micro-batches than stages: no closed form, the list scheduler
    job = TrainJob(_flat_model(8), pp=p, global_batch=m, schedule="zb-h1",
                   stage_layers=(1, 3, 2, 2), optimizer_bytes_per_param=0,
                   compute_efficiency=0.45)     # F = B = W per layer, as the scheduler below
    fs = [job.stage_cost(s).forward_compute for s in range(p)]
    r = simulate_iteration(job, _ideal_fabric(p))
    assert r.iteration_time == pytest.approx(
        _list_schedule(pipeline_schedule("zb-h1", p, m), fs, fs, fs), rel=1e-9)


def test_zb_h1_splits_the_backward_and_keeps_its_work():
    one = TrainJob("llama3-8b", tp=8, pp=2, global_batch=4)
    zb = TrainJob("llama3-8b", tp=8, pp=2, global_batch=4, schedule="zb-h1")
    from hpnsim.training import program_from_job
    from hpnsim.training.program import Collective, Compute, Pass

    a, b = program_from_job(one), program_from_job(zb)
    assert sum(op.seconds for op in a.ops(Compute)) == pytest.approx(
        sum(op.seconds for op in b.ops(Compute)), rel=1e-12)
    assert len(a.ops(Collective)) == len(b.ops(Collective))
    kinds = [op.kind for op in b.stages[0] if isinstance(op, Pass)]
    assert kinds.count("W") == kinds.count("B") == 4
    w_labels = {op.label for ops in b.stages for op in ops if isinstance(op, Compute)}
    assert "mlp wg" in w_labels and "head wg" in w_labels


def test_zb_h1_with_zero3_is_refused():
    with pytest.raises(InputError, match="schedule: zb-h1 splits"):
        TrainJob("llama3-8b", dp=2, zero=3, schedule="zb-h1")


def test_selective_recompute_replays_core_attention_only():
    from hpnsim.training.tp_overlap import gemm_shares

    spec = _flat_model(4)
    m = 3
    base = TrainJob(spec, pp=2, global_batch=m, optimizer_bytes_per_param=0)
    sel = TrainJob(spec, pp=2, global_batch=m, optimizer_bytes_per_param=0,
                   selective_recompute=True)
    fabric = _ideal_fabric(2)
    r0, r1 = simulate_iteration(base, fabric), simulate_iteration(sel, fabric)
    qkv, proj, _, _ = gemm_shares(spec, 1024)
    # the score/value products: 4 s q of the layer's attention FLOPs per token
    attn = next(b for b in base.stage_cost(0).blocks if b.name == "layer0").forward_attention
    core = attn * (1 - qkv - proj)
    assert core == pytest.approx(attn * 4 * 1024 * 1024 / (2 * 4 * 1024**2 + 4 * 1024**2))
    # every stage recomputes it once per layer and micro-batch (2 layers a stage)
    assert r1.compute_time - r0.compute_time == pytest.approx(m * 2 * core, rel=1e-9)
    with pytest.raises(InputError, match="selective_recompute"):
        TrainJob(spec, recompute=True, selective_recompute=True)


@pytest.mark.parametrize("counts,m", [((1, 3, 2, 2), 4), ((2, 1, 0, 3, 1, 1), 6)])
def test_interleaved_uneven_virtual_stages_match_the_list_scheduler(counts, m):
    # virtual stage u = k * p + s holds counts[u] layers: (1,3 | 2,2) on p=2, v=2 and
    # (2,1,0 | 3,1,1) on p=3, v=2, an empty virtual stage included
    v = 2
    p = len(counts) // v
    job = TrainJob(_flat_model(sum(counts)), pp=p, virtual_stages=v, global_batch=m,
                   stage_layers=counts, optimizer_bytes_per_param=0, gpu_variation=0)
    f = [job.stage_cost(u).forward_compute for u in range(p * v)]
    b = [job.stage_cost(u).backward_compute for u in range(p * v)]
    expected = _list_schedule(pipeline_schedule("interleaved", p, m, v), f, b)
    r = simulate_iteration(job, _ideal_fabric(p))
    assert r.iteration_time == pytest.approx(expected, rel=1e-9)
