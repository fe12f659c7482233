"""Expert parallelism (MoE) in the iteration simulator: all-to-all time against the closed
form on a non-blocking fabric, bytes against the traffic calculator, expert-DP gradients."""

import pytest

from hpnsim.errors import InputError
from hpnsim.fabrics import fat_tree, hpn7
from hpnsim.training import simulate_iteration
from hpnsim.training.job import TrainJob
from hpnsim.workloads import models
from hpnsim.workloads.traffic import iteration_traffic

NIC = 50e9 * 4096 / 4178  # 400G as NCCL payload: RoCEv2 framing at MTU 4096 (82 B/packet)
BASE, NET_HOP = 8.4e-6, 14e-6  # NCCL Simple protocol: base latency, one network hop

# Every layer MoE, 8 experts, top-2; a 2 x 8192 x 4096 x 2-byte (128 MiB) all-to-all buffer:
# large enough that NCCL picks the Simple protocol.
MOE = models.ModelSpec("moe-test", layers=2, hidden=4096, heads=32, ffn=4096, vocab=1000,
                       seq_len=8192, experts=8, top_k=2)


def test_ep_buffer_is_routed_tokens_times_top_k_times_hidden():
    job = TrainJob(MOE, dp=8, ep=8)
    assert job.ep_buffer_bytes == 1 * 8192 * 2 * 4096 * 2
    sp = TrainJob(MOE, tp=2, dp=8, ep=8, sequence_parallel=True)
    assert sp.ep_buffer_bytes == job.ep_buffer_bytes / 2  # each TP rank routes its slice
    cost = job.stage_cost(0)
    # dispatch + combine per MoE layer, forward and backward
    assert (cost.forward_ep_ops, cost.backward_ep_ops) == (4, 4)
    # each GPU holds experts / ep of the routed experts
    expert = MOE.mlp_parameters() * MOE.experts / 8
    assert cost.expert_params_per_gpu == pytest.approx(2 * expert)
    assert cost.params_per_gpu + 8 * cost.expert_params_per_gpu == MOE.num_parameters()


def test_ep_only_exposed_time_is_the_closed_form_all_to_all():
    fabric = fat_tree(4)  # 16 single-GPU hosts: every EP peer is across the network
    job = TrainJob(MOE, dp=8, ep=8, global_batch=16)  # 2 micro-batches
    r = simulate_iteration(job, fabric, routing="spray")
    n, size = 8, job.ep_buffer_bytes
    # direct all-to-all: every GPU sends S/n to each of n-1 peers through its 400G NIC
    a2a = BASE + NET_HOP + (n - 1) / n * size / NIC
    assert r.ep_alltoall_time == pytest.approx(a2a, rel=1e-9)
    calls = job.micro_batches * MOE.layers * 4  # dispatch+combine, forward and backward
    # The all-to-alls are tasks of the iteration graph, so gradient traffic slows them. One
    # does overlap: the first 40M-parameter bucket (layer 1's attention and router, 67M
    # dense parameters) is ready when layer 1's backward of the last micro-batch ends, the
    # moment layer 0's combine all-to-all starts (later buckets wait for layer 0's end,
    # after its all-to-alls). The ring all-reduce (80 MB, 2(n-1)/n of it per GPU at
    # 6.25 GB/s: it outlasts the all-to-all) moves bytes after BASE + 2(n-1) NET_HOP, the
    # all-to-all after BASE + NET_HOP; from then on each NIC carries 7 all-to-all flows and
    # one ring flow, max-min fair: the all-to-all runs at 7/8 of the NIC.
    head_start = (BASE + 2 * (n - 1) * NET_HOP) - (BASE + NET_HOP)
    rest = (n - 1) / n * size - NIC * head_start
    shared = rest / (7 / 8 * NIC) - rest / NIC
    assert shared == pytest.approx(316.26176e-6, rel=1e-9)   # 309.54 us at the raw 50 GB/s
    assert r.exposed_comm["ep"] == pytest.approx(calls * a2a + shared, rel=1e-9)
    assert r.exposed_comm["tp"] == r.exposed_comm["pp"] == 0.0
    parts = (r.compute_time + sum(r.exposed_comm.values()) + r.bubble + r.optimizer_time
             + r.straggler_time)
    assert parts == pytest.approx(r.iteration_time, rel=1e-12)
    # edp = 1: expert gradients need no sync; only the dense ones are all-reduced
    dense = MOE.num_parameters() - MOE.expert_parameters()
    assert r.comm_bytes["dp"] == pytest.approx(n * 2 * (n - 1) / n * 2 * dense, rel=1e-12)


@pytest.mark.parametrize("name, tp, pp, dp, ep", [
    ("deepseek-moe-16b", 2, 1, 8, 8),   # first layer dense; EP spans two hosts
    ("mixtral-8x7b", 2, 2, 4, 4),       # EP over hosts, two pipeline stages
])
def test_ep_bytes_match_the_traffic_calculator(name, tp, pp, dp, ep):
    model = models.get(name)
    fabric = hpn7(segments=1, hosts_per_segment=tp * pp * dp // 8, backup_hosts=0)
    job = TrainJob(model, tp=tp, pp=pp, dp=dp, ep=ep, seq_len=1024, global_batch=2 * dp,
                   bucket_params=10**12)
    r = simulate_iteration(job, fabric)
    expected = iteration_traffic(model, job.layout, seq_len=1024).by_dimension()["ep"]
    assert r.comm_bytes["ep"] == pytest.approx(expected["total_bytes"], rel=1e-12)
    assert r.exposed_comm["ep"] > 0 and r.ep_alltoall_time > 0


def test_expert_gradients_reduce_over_the_expert_data_parallel_group():
    model = models.ModelSpec("moe-small", layers=2, hidden=1024, heads=8, ffn=2048, vocab=1000,
                             seq_len=1024, experts=8, top_k=2)
    fabric = fat_tree(4)
    job = TrainJob(model, dp=16, ep=4, global_batch=16)  # edp = 4
    r = simulate_iteration(job, fabric, dp_algo="ring", routing="spray")
    by_dim = iteration_traffic(model, job.layout, gpus_per_host=1).by_dimension()
    assert r.comm_bytes["dp"] == pytest.approx(by_dim["dp"]["total_bytes"]
                                               + by_dim["edp"]["total_bytes"], rel=1e-12)
    # ZeRO-1 shards the dense optimizer state over dp and the expert one over edp
    z1 = TrainJob(model, dp=16, ep=4, global_batch=16, zero=1)
    dense = model.num_parameters() - model.expert_parameters()
    expert = model.expert_parameters() / 4
    # Megatron's step at 0.9 of H800's 3.35 TB/s: norm, Adam and copy (38 B) per parameter of
    # the shard, zeroing the whole gradient buffer (4 B per local parameter); each of its
    # kernels launches once here (under 320 x 65,536 elements), a 2.06 us gap after each and
    # one 5 us launch after the norm's host sync
    shard = int(dense / 16 + expert / 4)
    local = dense + model.expert_parameters() / 4
    assert z1.optimizer_time(0) == pytest.approx(
        (38.0 * shard + 4.0 * local) / (0.9 * 3.35e12) + 4 * 2.06e-6 + 5e-6, rel=1e-9)


def test_ep_validation():
    with pytest.raises(InputError, match="ep"):
        TrainJob("llama3-8b", dp=8, ep=2)         # no experts
    with pytest.raises(InputError, match="ep"):
        TrainJob("mixtral-8x7b", dp=6, ep=4)      # ep must divide dp
    with pytest.raises(InputError, match="ep"):
        TrainJob("mixtral-8x7b", dp=16, ep=16)    # and the 8 experts


def test_zero3_with_experts_gathers_dense_over_dp_and_experts_over_edp():
    model = models.ModelSpec("moe-small", layers=2, hidden=1024, heads=8, ffn=2048, vocab=1000,
                             seq_len=1024, experts=8, top_k=2)
    job = TrainJob(model, dp=16, ep=4, global_batch=32, zero=3)  # 2 micro-batches, edp 4
    r = simulate_iteration(job, fat_tree(4), dp_algo="ring", routing="spray")
    by_dim = iteration_traffic(model, job.layout, gpus_per_host=1).by_dimension()
    assert r.comm_bytes["dp"] == pytest.approx(by_dim["dp"]["total_bytes"]
                                               + by_dim["edp"]["total_bytes"], rel=1e-12)
    parts = (r.compute_time + sum(r.exposed_comm.values()) + r.bubble + r.optimizer_time
             + r.straggler_time)
    assert parts == pytest.approx(r.iteration_time, rel=1e-12)
    assert r.exposed_comm["dp"] > 0 and r.exposed_comm["ep"] > 0
