"""Parallel layout validation, rank -> GPU placement and communication groups."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpnsim.errors import InputError
from hpnsim.workloads.layout import Layout, check_layout, make_layout
from hpnsim.workloads.placement import place


def test_llama3_70b_3d_layout():
    lay = make_layout("llama3-70b", tp=8, pp=8, dp=16, global_batch=2048, n_gpus=1024)
    assert lay.n_gpus == 1024
    assert lay.num_microbatches == 2048 // 16
    assert lay.layers_per_stage(80) == 10


@pytest.mark.parametrize("kwargs, field", [
    (dict(tp=8, pp=8, dp=16, n_gpus=512), "layout"),                  # does not multiply out
    (dict(tp=16, pp=4, dp=16), "tp"),                                  # TP over the host
    (dict(tp=8, pp=3, dp=1), "pp"),                                    # 80 layers / 3
    (dict(tp=8, pp=4, vpp=3, dp=1, global_batch=4), "pp"),             # 80 / (4*3)
    (dict(tp=8, pp=1, dp=3, global_batch=2048), "global_batch"),       # 2048 % 3
    (dict(tp=8, pp=1, dp=4, micro_batch=3, global_batch=16), "global_batch"),
    (dict(dp=8, ep=2), "ep"),                                          # dense model
    (dict(pp=4, vpp=2, global_batch=6), "global_batch"),               # interleaved: m % pp
    (dict(vpp=2), "vpp"),                                              # vpp without pp
    (dict(zero=4), "zero"),
    (dict(tp=0), "tp"),
])
def test_invalid_layouts_name_the_field(kwargs, field):
    with pytest.raises(InputError) as info:
        make_layout("llama3-70b", **kwargs)
    assert info.value.field == field


def test_heads_must_divide_by_tp():
    with pytest.raises(InputError, match="attention heads") as info:
        make_layout("bert-large", tp=32, gpus_per_host=32)   # 16 heads
    assert info.value.field == "tp"


def test_cross_host_tp_allowed_on_request():
    lay = make_layout("llama3-70b", tp=16, pp=1, dp=1, allow_cross_host_tp=True)
    pl = place(lay, 8, allow_cross_host_tp=True)
    assert not pl.tp_in_host
    with pytest.raises(InputError) as info:
        place(lay, 8)
    assert info.value.field == "tp"


def test_moe_expert_parallel_checks():
    make_layout("mixtral-8x7b", tp=2, dp=8, ep=8)
    with pytest.raises(InputError, match="experts"):
        make_layout("mixtral-8x7b", dp=12, ep=3, global_batch=12)
    with pytest.raises(InputError, match="divide dp"):
        make_layout("mixtral-8x7b", dp=4, ep=8)


def test_cnn_only_data_parallel():
    make_layout("resnet-50", dp=64, global_batch=1024)
    with pytest.raises(InputError):
        make_layout("resnet-50", tp=2)


def _schedule(kind: str, p: int, m: int, v: int) -> list[list[tuple[str, int, int]]]:
    """Per-stage order of ``(pass, micro-batch, chunk)`` as Megatron-LM runs them.

    GPipe: all forwards, then all backwards. 1F1B: ``p-s-1`` warm-up forwards on stage ``s``,
    then one forward / one backward alternately, then the remaining backwards. Interleaved
    (``v`` chunks per stage, ``m % p == 0``): the same over ``m*v`` virtual micro-batches,
    ``(p-s-1)*2 + (v-1)*p`` warm-up forwards (all of them when ``m == p``); forward ``k`` is
    micro-batch ``(k // (p*v))*p + k % p`` on chunk ``(k // p) % v``, backwards run the chunks
    in reverse.
    """
    orders = []
    for s in range(p):
        if kind == "gpipe":
            orders.append([("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)])
            continue
        total = m * v

        def fwd(k):
            return ("F", (k // (p * v)) * p + k % p, (k // p) % v)

        def bwd(k):
            return ("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)

        if kind == "1f1b":
            warmup = min(p - s - 1, m)
        else:
            warmup = total if m == p else min((p - s - 1) * 2 + (v - 1) * p, total)
        ops = [fwd(k) for k in range(warmup)]
        for i in range(total - warmup):
            ops += [fwd(warmup + i), bwd(i)]
        ops += [bwd(k) for k in range(total - warmup, total)]
        orders.append(ops)
    return orders


def _simulated_idle_fraction(orders, p: int, v: int, m: int, f: float, b: float) -> float:
    """Run the schedule op by op, each as early as its stage and its input allow.

    Chunk ``c`` of stage ``s`` is virtual stage ``u = c*p + s`` and holds ``1/v`` of the
    stage's layers (forward ``f/v``, backward ``b/v``). ``F`` of ``u`` needs ``F`` of ``u-1``
    for the same micro-batch, ``B`` of ``u`` needs ``B`` of ``u+1``, and ``B`` of the last
    virtual stage needs its own ``F``; communication is free. Returns ``1 - busy / makespan``
    (every stage is busy ``m*(f+b)``).
    """
    finish: dict[tuple[str, int, int], float] = {}
    nxt, free, last = [0] * p, [0.0] * p, p * v - 1
    moved = True
    while moved:
        moved = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                kind, j, c = orders[s][nxt[s]]
                u = c * p + s
                if kind == "F":
                    dep = ("F", u - 1, j) if u > 0 else None
                else:
                    dep = ("B", u + 1, j) if u < last else ("F", u, j)
                if dep is not None and dep not in finish:
                    break                                   # wait for the other stage
                start = max(free[s], finish[dep] if dep else 0.0)
                free[s] = start + (f if kind == "F" else b) / v
                finish[(kind, u, j)] = free[s]
                nxt[s] += 1
                moved = True
    assert nxt == [len(o) for o in orders], "schedule deadlocked"
    makespan = max(free)
    return 1.0 - m * (f + b) / makespan


@pytest.mark.parametrize("schedule, pp, m, vpp", [
    ("1f1b", 1, 5, 1), ("1f1b", 2, 4, 1), ("1f1b", 3, 7, 1), ("1f1b", 4, 2, 1),
    ("1f1b", 4, 8, 1), ("1f1b", 8, 128, 1), ("gpipe", 3, 5, 1), ("gpipe", 4, 8, 1),
    ("interleaved", 2, 4, 2), ("interleaved", 4, 4, 2), ("interleaved", 4, 8, 2),
    ("interleaved", 4, 12, 3), ("interleaved", 8, 16, 4),
])
@pytest.mark.parametrize("f, b", [(1.0, 2.0), (1.0, 1.0), (2.0, 1.0), (1.0, 3.0)])
def test_bubble_fraction_matches_brute_force_schedule(schedule, pp, m, vpp, f, b):
    # Layout.bubble_fraction is a closed form; here the schedule is simulated pass by pass.
    lay = Layout(pp=pp, vpp=vpp, global_batch=m, schedule=schedule)
    simulated = _simulated_idle_fraction(_schedule(schedule, pp, m, vpp), pp, vpp, m, f, b)
    assert lay.bubble_fraction() == pytest.approx(simulated, rel=1e-12, abs=1e-15)


def test_interleaved_stage_of_layer():
    lay = Layout(pp=4, vpp=2, global_batch=4)
    stages = lay.stage_of_layer(16)
    assert stages[:2] == [(0, 0), (0, 0)]
    assert stages[8] == (0, 1) and stages[15] == (3, 1)


def test_placement_3d_llama_groups():
    pl = place(make_layout("llama3-70b", tp=8, pp=8, dp=16, global_batch=2048), 8)
    tp, dp, pp = pl.groups("tp"), pl.groups("dp"), pl.groups("pp")
    assert tp.shape == (128, 8) and dp.shape == (64, 16) and pp.shape == (128, 8)
    assert tp[0].tolist() == list(range(8))
    assert dp[3].tolist() == [3 + 8 * d for d in range(16)]        # rail 3, one host apart
    assert pp[0].tolist() == [128 * s for s in range(8)]
    assert pl.tp_in_host and pl.rail_aligned
    pairs = pl.pp_neighbours()
    assert pairs.shape == (128 * 7, 2)
    assert (pl.host_of(pairs[:, 0]) != pl.host_of(pairs[:, 1])).all()


def test_small_tp_puts_pipeline_stages_in_a_host_and_keeps_rails():
    pl = place(Layout(tp=2, pp=4, dp=4, global_batch=4), 8)
    assert pl.order == ("tp", "cp", "pp", "dp")
    assert pl.rail_aligned and pl.tp_in_host
    assert pl.groups("pp")[0].tolist() == [0, 2, 4, 6]                # one host
    # Megatron order instead spreads a DP group over rails
    assert not place(Layout(tp=2, pp=4, dp=4, global_batch=4), 8,
                     order=("tp", "cp", "dp", "pp")).rail_aligned


def test_job_on_given_gpus():
    gpus = np.arange(16, 32)
    pl = place(Layout(tp=8, dp=2), 8, gpus=gpus)
    assert pl.groups("dp")[0].tolist() == [16, 24]
    with pytest.raises(InputError):
        place(Layout(tp=8, dp=2), 8, gpus=[0, 1, 2])
    with pytest.raises(InputError):
        place(Layout(dp=2), 8, gpus=[5, 5])


def test_expert_groups_split_data_parallel_groups():
    pl = place(Layout(tp=2, dp=8, ep=4), 8)
    ep, edp, dp = pl.groups("ep"), pl.groups("edp"), pl.groups("dp")
    assert ep.shape == (4, 4) and edp.shape == (8, 2)
    dp_sets = [set(g) for g in dp.tolist()]
    assert all(any(set(g) <= s for s in dp_sets) for g in ep.tolist())
    assert all(any(set(g) <= s for s in dp_sets) for g in edp.tolist())


def _is_partition(groups: np.ndarray, n: int) -> bool:
    return sorted(groups.ravel().tolist()) == list(range(n))


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 3, 4]),
       dp=st.sampled_from([1, 2, 4, 6]), cp=st.sampled_from([1, 2]), host=st.sampled_from([8, 16]))
def test_groups_partition_the_gpus(tp, pp, dp, cp, host):
    if tp * cp > host:
        return
    lay = Layout(tp=tp, pp=pp, dp=dp, cp=cp)
    pl = place(lay, host)
    n = lay.n_gpus
    sizes = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "dp_cp": dp * cp}
    for kind, size in sizes.items():
        groups = pl.groups(kind)
        assert groups.shape == (n // size, size)
        assert _is_partition(groups, n)
    # members of a TP group differ only in their TP coordinate
    rank_of_gpu = np.argsort(pl.gpu_of_rank)
    for group in pl.groups("tp"):
        ranks = rank_of_gpu[group]
        for dim in ("pp", "dp", "cp"):
            assert len(set(pl.coord[dim][ranks])) == 1
    assert pl.tp_in_host
    inner = tp * cp
    if inner % host == 0 or (inner * pp) % host == 0:
        assert pl.rail_aligned


def test_check_layout_accepts_unplaced_sizes():
    check_layout(Layout(tp=4, pp=2, dp=2), "llama3-8b", n_gpus=16)
