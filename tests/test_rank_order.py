"""rank_order: how ranks map to GPUs (Megatron-Core's default tp-cp-dp-pp, or tp-cp-pp-dp,
its --use-tp-pp-dp-mapping, the order Llama 3 states). Placements are checked against the
rank numbering written out by hand; the pipeline messages of a compiled job against the
segments its hosts sit in."""

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.fabrics import hpn7
from hpnsim.scenario.jobs import JobSpec
from hpnsim.training import TrainJob, build_iteration_graph
from hpnsim.workloads.layout import Layout
from hpnsim.workloads.placement import place


def _groups_by_hand(tp, pp, dp, pp_inner):
    """PP and DP groups from the rank numbering itself (TP fastest, then PP or DP)."""
    def rank(t, p, d):
        return t + tp * (p + pp * d) if pp_inner else t + tp * (d + dp * p)
    pp_groups = sorted([rank(t, p, d) for p in range(pp)] for d in range(dp) for t in range(tp))
    dp_groups = sorted([rank(t, p, d) for d in range(dp)] for p in range(pp) for t in range(tp))
    return pp_groups, dp_groups


@pytest.mark.parametrize("order, pp_inner", [("tp-cp-pp-dp", True), ("tp-cp-dp-pp", False)])
def test_the_groups_follow_the_rank_numbering(order, pp_inner):
    placement = place(Layout(tp=8, pp=4, dp=3, global_batch=12, rank_order=order))
    pp_groups, dp_groups = _groups_by_hand(8, 4, 3, pp_inner)
    assert sorted(placement.groups("pp").tolist()) == pp_groups
    assert sorted(placement.groups("dp").tolist()) == dp_groups


def test_unset_keeps_hpnsims_order():
    # TP x CP fills the host: hpnsim's default is Megatron's, DP before PP
    default = place(Layout(tp=8, pp=4, dp=3, global_batch=12))
    assert sorted(default.groups("pp").tolist()) == _groups_by_hand(8, 4, 3, False)[0]


def _p2p_pairs(job, fabric):
    it = build_iteration_graph(job, fabric)
    records = [r for r in it.routes if r.op == "p2p"]
    assert records
    return it, records


def test_pipeline_messages_stay_in_their_segment_with_pp_before_dp():
    # two segments of 4 hosts; TP 8 x PP 4 x DP 2 = 8 hosts. PP before DP: pipeline d on
    # hosts 4d..4d+3, one segment. DP before PP: stage s on hosts 2s, 2s+1, so stage 1 -> 2
    # goes from segment 0 to segment 1.
    fabric = hpn7(segments=2, hosts_per_segment=4, backup_hosts=0)
    per_segment = 4 * fabric.gpus_per_host

    def crossing(order):
        job = TrainJob("llama3-8b", tp=8, pp=4, dp=2, global_batch=8, rank_order=order)
        _, records = _p2p_pairs(job, fabric)
        src = np.concatenate([r.groups[0] for r in records])
        dst = np.concatenate([r.groups[1] for r in records])
        return int(np.sum(src // per_segment != dst // per_segment)), src.size

    inside, total = crossing("tp-cp-pp-dp")
    assert inside == 0 and total > 0
    across, total = crossing("tp-cp-dp-pp")
    assert 0 < across < total


def test_a_same_rail_message_under_one_tor_takes_four_links():
    # GPU -> NIC (PCIe), NIC -> ToR, ToR -> NIC, NIC -> GPU: no aggregation switch
    fabric = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    job = TrainJob("llama3-8b", tp=8, pp=4, global_batch=4, rank_order="tp-cp-pp-dp")
    it, records = _p2p_pairs(job, fabric)
    task, ptr, _, _ = it.graph.member_paths()
    p2p = np.isin(task, [r.first for r in records])
    assert p2p.any()
    assert set(np.diff(ptr)[p2p].tolist()) == {4}


def test_megatron_before_0_7_lacks_the_mapping():
    with pytest.raises(InputError, match=r"--use-tp-pp-dp-mapping arrived in 0.7") as refused:
        TrainJob("llama3-8b", tp=8, pp=2, global_batch=2, rank_order="tp-cp-pp-dp",
                 megatron_core="0.6")
    assert refused.value.field == "rank_order"
    # the default order needs no flag
    TrainJob("llama3-8b", tp=8, pp=2, global_batch=2, rank_order="tp-cp-dp-pp",
             megatron_core="0.6")


def test_an_order_megatron_does_not_offer_is_refused():
    with pytest.raises(InputError, match="one of tp-cp-dp-pp, tp-cp-pp-dp") as refused:
        Layout(tp=8, pp=2, rank_order="pp-dp-tp-cp")
    assert refused.value.field == "rank_order"


def test_cli_refuses_a_bad_order_in_one_line(refused_cli):
    assert "--rank-order" in refused_cli("train", "--model", "llama3-8b", "--tp", "8",
                                         "--pp", "2", "--rank-order", "tp-pp-dp")


def test_the_yaml_field_reaches_the_job(refused_yaml):
    job = JobSpec(model="llama3-8b", tp=8, pp=2, global_batch=2,
                  rank_order="tp-cp-pp-dp").train_job()
    assert job.layout.rank_order == "tp-cp-pp-dp"
    line = refused_yaml("fabric: {template: hpn7, segments: 1, hosts_per_segment: 2}\n"
                        "jobs:\n  - {model: llama3-8b, tp: 8, pp: 2, rank_order: dp-pp}\n")
    assert "jobs[0].rank_order" in line
