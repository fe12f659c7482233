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


@pytest.mark.parametrize("pp, m, vpp", [(2, 4, 1), (4, 8, 1), (8, 128, 1), (4, 8, 2), (8, 16, 4)])
def test_bubble_fraction_closed_form(pp, m, vpp):
    lay = Layout(pp=pp, vpp=vpp, global_batch=m)
    assert lay.bubble_fraction() == pytest.approx((pp - 1) / (vpp * m + pp - 1))


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
