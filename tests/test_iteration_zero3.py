"""ZeRO-3 / FSDP in the iteration simulator: exposed gathers and reduce-scatters against
closed forms written out here (ring, Simple protocol, NCCL latencies), and bytes against the
traffic calculator."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpnsim.fabrics import fat_tree, hpn7
from hpnsim.training import simulate_iteration
from hpnsim.training.job import TrainJob
from hpnsim.workloads import models
from hpnsim.workloads.layout import Layout
from hpnsim.workloads.traffic import iteration_traffic

NIC = 50e9 * 4096 / 4178  # 400G per GPU on the k=4 fat-tree, as NCCL payload: RoCEv2
# framing at MTU 4096 costs 82 bytes a packet (NcclParams.network_efficiency)
# NCCL Simple-protocol ring latencies: base once per collective, one network hop per step
BASE, NET_HOP = 8.4e-6, 14e-6

# Units of ~67M parameters (134 MB gathers): big enough that NCCL picks the Simple protocol.
MODEL = models.ModelSpec("fsdp-test", layers=4, hidden=2048, heads=16, ffn=8192, vocab=1000,
                         seq_len=4096)


@pytest.fixture(scope="module")
def tree():
    return fat_tree(4)  # 16 single-GPU hosts; with spraying, non-blocking


def _ring(n, size):
    """Ring all-gather / reduce-scatter of a ``size``-byte buffer on n GPUs, one per host."""
    return BASE + (n - 1) * NET_HOP + (n - 1) / n * size / NIC


def _units_params(model):
    """FSDP units: the embedding joins layer 0, the final norm and head join the last layer."""
    layers = [model.layer_parameters(i) for i in range(model.layers)]
    layers[0] += model.vocab * model.hidden
    layers[-1] += model.vocab * model.hidden + model.hidden
    return layers


def _job(**kw):
    base = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, zero=3)
    base.update(kw)
    return TrainJob(MODEL, **base)


def test_units_hold_every_parameter_once():
    units = _job().fsdp_units(0)
    assert [u.dense_params for u in units] == pytest.approx(_units_params(MODEL))
    assert sum(u.dense_params for u in units) == MODEL.num_parameters()


def test_without_prefetch_every_gather_and_reduce_scatter_is_exposed(tree):
    job = _job(fsdp_prefetch=False)
    r = simulate_iteration(job, tree, dp_algo="ring", routing="spray")
    n, m = 8, job.micro_batches
    # per micro-batch: each unit gathered twice (forward, backward), reduce-scattered once
    comm = m * sum(2 * _ring(n, 2 * p) + _ring(n, 2 * p) for p in _units_params(MODEL))
    assert r.exposed_comm["dp"] == pytest.approx(comm, rel=1e-9)
    # the step on the 1/dp shard at 0.9 of H800's 3.35 TB/s: gradient norm 4, Adam 28 (fp32
    # master, m, v read and written, fp32 main gradient read), master-to-model copy 6 and,
    # the gradients being sharded too, zeroing 4 HBM bytes per parameter; each multi-tensor
    # kernel launches once per 320 chunks of 65,536 elements, a 2.06 us gap after each kernel,
    # one 5 us launch after the norm's host sync
    shard = MODEL.num_parameters() // n
    launches = 3 * -(-shard // (65536 * 320)) + 1
    optimizer = 42.0 * shard / (0.9 * 3.35e12) + launches * 2.06e-6 + 5e-6
    assert r.optimizer_time == pytest.approx(optimizer, rel=1e-9)
    assert r.iteration_time == pytest.approx(r.compute_time + comm + optimizer
                                             + r.straggler_time, rel=1e-9)
    assert r.exposed_comm["tp"] == r.exposed_comm["pp"] == r.exposed_comm["ep"] == 0.0


def test_prefetch_hides_all_but_the_first_gather_and_the_last_reduce_scatter(tree):
    # slow compute (5% of peak): every unit computes longer than one gather + one reduce-scatter
    job = _job(compute_efficiency=0.05)
    r = simulate_iteration(job, tree, dp_algo="ring", routing="spray")
    first = _units_params(MODEL)[0]
    exposed = _ring(8, 2 * first) + _ring(8, 2 * first)  # forward gather, backward RS of unit 0
    assert r.exposed_comm["dp"] == pytest.approx(exposed, rel=1e-9)
    assert r.iteration_time == pytest.approx(r.compute_time + exposed + r.optimizer_time,
                                             rel=1e-9)
    off = simulate_iteration(_job(compute_efficiency=0.05, fsdp_prefetch=False), tree,
                             dp_algo="ring", routing="spray")
    assert off.iteration_time > r.iteration_time + 10 * exposed


def test_zero3_moves_the_bytes_the_traffic_calculator_counts(tree):
    job = _job(global_batch=24)  # 3 micro-batches
    r = simulate_iteration(job, tree, dp_algo="ring", routing="spray")
    layout = Layout(dp=8, zero=3, global_batch=24)
    expected = iteration_traffic(MODEL, layout, gpus_per_host=1).by_dimension()["dp"]
    assert r.comm_bytes["dp"] == pytest.approx(expected["total_bytes"], rel=1e-12)
    # and in closed form: per micro-batch 2 gathers + 1 reduce-scatter of P 2-byte values
    n, p = 8, MODEL.num_parameters()
    assert r.comm_bytes["dp"] == pytest.approx(3 * 3 * n * (n - 1) / n * 2 * p, rel=1e-12)


def test_zero3_timeline_has_one_row_per_collective_step(tree):
    job = _job()
    r = simulate_iteration(job, tree, dp_algo="ring", routing="spray")
    rows = [row for row in r.timeline if row["kind"].startswith("fsdp")]
    units = len(job.fsdp_units(0))
    assert sum(row["kind"] == "fsdp-ag" for row in rows) == 2 * units * job.micro_batches
    assert sum(row["kind"] == "fsdp-rs" for row in rows) == units * job.micro_batches
    assert all(0 <= row["start"] < row["finish"] <= r.iteration_time for row in rows)


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([0, 1, 3]), st.booleans(), st.integers(1, 2), st.sampled_from([1, 2]))
def test_parts_add_up_to_the_iteration_time(zero, prefetch, pp, dp):
    fabric = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    model = models.ModelSpec("small", layers=4, hidden=512, heads=8, ffn=2048, vocab=500,
                             seq_len=512)
    job = TrainJob(model, tp=4, pp=pp, dp=dp, global_batch=2 * pp * dp, zero=zero,
                   fsdp_prefetch=prefetch)
    r = simulate_iteration(job, fabric)
    for row in r.per_stage:
        total = sum(v for k, v in row.items() if k != "stage")
        assert total == pytest.approx(r.iteration_time, rel=1e-9)
        assert min(v for k, v in row.items() if k != "stage") > -1e-12
    if zero == 3 and dp > 1:
        assert r.exposed_comm["dp"] > 0
