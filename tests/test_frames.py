"""Every result type has ``rows()`` and ``to_frame()``: the frame holds the rows and columns a
user relies on, with the values of the result's attributes, and without pandas it says how
to install it. ``hpnsim.results`` finds every result type."""

from __future__ import annotations

import sys

import pytest

import hpnsim.results as results
from hpnsim.collectives import run_collective
from hpnsim.demo.pipeline import DemoConfig, run_demo
from hpnsim.engine import TaskGraph, simulate
from hpnsim.fabrics import hpn7
from hpnsim.scenario.runner import run
from hpnsim.training import TrainJob, simulate_iteration
from hpnsim.training.iteration import PARTS
from hpnsim.training.scaling import scaling_linearity
from hpnsim.workloads.layout import Layout
from hpnsim.workloads.traffic import iteration_traffic

pytest.importorskip("pandas")   # the frames extra, also in dev

SMALL = {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0}


@pytest.fixture(scope="module")
def fabric():
    return hpn7(**SMALL)


@pytest.fixture(scope="module")
def sim():
    g = TaskGraph()
    a = g.add_transfer([0], 1.0, 100.0, name="send")
    g.add_delay(1.0, deps=[a], name="compute")
    return simulate(g, [10.0])


@pytest.fixture(scope="module")
def collective(fabric):
    return run_collective(fabric, "allreduce", range(16), 2**20, algo="ring")


@pytest.fixture(scope="module")
def iteration(fabric):
    return simulate_iteration(TrainJob("llama3-8b", tp=8, pp=2, global_batch=2), fabric)


@pytest.fixture(scope="module")
def traffic():
    return iteration_traffic("llama3-8b", Layout(tp=8, pp=2, dp=2, global_batch=8),
                             dataset_tokens=1e9)


@pytest.fixture(scope="module")
def scaling():
    return scaling_linearity("llama3-8b", tp=8, pp=1, dps=[1, 2], fabrics=["hpn7"],
                             micro_batches=1)


@pytest.fixture(scope="module")
def demo():
    return run_demo(DemoConfig(pod_gpus=128, allreduce_gpus=16, allreduce_size=2**20,
                               model="llama3-8b", tp=8, pp=1, dp=2))


@pytest.fixture(scope="module")
def run_result():
    return run({"fabric": {"template": "hpn7", **SMALL},
                "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 4,
                          "iterations": 2}],
                "collectives": [{"op": "allreduce", "sizes": "1M:2M", "algo": "ring"}]})


def test_sim_frame_is_one_row_per_task(sim):
    df = sim.to_frame()
    assert list(df.columns) == ["name", "start", "finish", "duration"]
    assert df["name"].tolist() == ["send", "compute"]
    assert df["start"].tolist() == sim.start.tolist()
    assert df["finish"].tolist() == sim.finish.tolist() == [10.0, 11.0]
    assert df["duration"].tolist() == [10.0, 1.0]


def test_collective_frame_is_one_row_in_si_units(collective):
    df = collective.to_frame()
    assert len(df) == 1
    row = df.iloc[0]
    for name in ("op", "algo", "routing", "n_gpus", "size", "time", "algbw", "busbw",
                 "bottleneck", "hash_collisions"):
        assert row[name] == getattr(collective, name), name
    assert row["busbw"] == collective.busbw          # bytes/s, not to_dict's GB/s
    assert "link_bytes" not in df.columns and "top_links" not in df.columns


def test_iteration_frame_is_one_row_per_stage_with_its_parts(iteration):
    df = iteration.to_frame()
    assert list(df.columns) == ["stage", *PARTS]
    assert df["stage"].tolist() == [0, 1]
    for s, stage in enumerate(iteration.per_stage):
        for part in PARTS:
            assert df.loc[s, part] == stage[part], (s, part)
    # each stage's parts split the iteration time with no remainder
    assert df[list(PARTS)].sum(axis=1).tolist() == pytest.approx(
        [iteration.iteration_time] * 2, rel=1e-9)
    assert df["compute"].mean() == pytest.approx(iteration.compute_time, rel=1e-12)


def test_traffic_frame_is_one_row_per_dimension(traffic):
    df = traffic.to_frame().set_index("dimension")
    dims = traffic.by_dimension()
    assert list(df.index) == list(dims) == ["tp", "pp", "dp"]
    for dim, sums in dims.items():
        for key, value in sums.items():
            assert df.loc[dim, key] == value, (dim, key)
    assert df["total_bytes"].sum() == pytest.approx(traffic.total_bytes, rel=1e-12)
    assert df["per_epoch_bytes"].sum() == pytest.approx(traffic.per_epoch_bytes, rel=1e-12)


def test_traffic_keeps_its_per_collective_rows_in_to_dict(traffic):
    d = traffic.to_dict()
    assert d["rows"] == [r.to_dict() for r in traffic.collectives]
    assert len(d["rows"]) > len(traffic.rows())


def test_scaling_frame_is_one_row_per_point(scaling):
    df = scaling.to_frame()
    assert list(df.columns) == ["fabric", "gpus", "dp", "iteration_time", "tokens_per_second",
                                "mfu", "linearity", "exposed_dp", "routing"]
    assert df["gpus"].tolist() == [p.gpus for p in scaling.points] == [8, 16]
    assert df["linearity"].tolist() == [p.linearity for p in scaling.points]
    assert df["iteration_time"].tolist() == [p.iteration_time for p in scaling.points]


def test_demo_frame_is_one_row_per_fabric_and_case(demo):
    df = demo.to_frame()
    allreduce = df[df["case"] == "allreduce"]
    iteration = df[df["case"] == "iteration"].set_index("fabric")
    assert list(zip(allreduce["fabric"], allreduce["routing"], strict=True)) == [
        (a["fabric"], a["routing"]) for a in demo.allreduce]
    assert allreduce["busbw"].tolist() == [a["busbw"] for a in demo.allreduce]
    assert allreduce["time"].tolist() == [a["time"] for a in demo.allreduce]
    assert list(iteration.index) == ["hpn7", "dcn_plus"]
    for t in demo.training:
        row = iteration.loc[t["fabric"]]
        assert row["time"] == t["iteration_time"]
        assert row["mfu"] == t["mfu"]
        assert row["exposed_tp"] == t["exposed_comm"]["tp"]
        assert row["compute"] == t["compute_time"]
    assert [r["fabric"] for r in demo.fabric_rows()] == ["hpn7", "dcn_plus"]
    assert demo.fabric_rows()[0]["agg"] == demo.fabrics[0]["switches"]["agg"]


def test_run_frames(run_result):
    jobs = run_result.to_frame()
    job = run_result.job("job0")
    assert jobs["job"].tolist() == ["job0"]
    assert jobs.loc[0, "iteration_time"] == job.iteration_time
    per_iteration = job.to_frame()
    assert per_iteration["iteration"].tolist() == [0, 1]
    assert per_iteration["iteration_time"].tolist() == [
        it.iteration_time for it in job.iterations]
    sizes = run_result.collective("collective0").to_frame()
    assert sizes["size"].tolist() == [2**20, 2**21]


RESULTS = ["sim", "collective", "iteration", "traffic", "scaling", "demo", "run_result"]


@pytest.mark.parametrize("name", RESULTS)
def test_every_result_has_rows_matching_its_frame(name, request):
    result = request.getfixturevalue(name)
    rows = result.rows()
    df = result.to_frame()
    assert len(df) == len(rows) > 0
    assert list(df.columns) == list(rows[0])


@pytest.mark.parametrize("name", RESULTS)
def test_to_frame_without_pandas_says_how_to_install_it(name, request, monkeypatch):
    result = request.getfixturevalue(name)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'hpnsim\[frames\]'"):
        result.to_frame()
    assert result.rows()       # rows need no pandas


def test_hpnsim_results_finds_every_result_type(sim, collective, iteration, traffic, scaling,
                                                demo, run_result):
    from hpnsim.demo import DemoResult
    from hpnsim.results import (
        CollectiveResult,
        CollectiveRun,
        IterationResult,
        JobResult,
        RunResult,
        ScalingResult,
        SimResult,
        TrafficReport,
    )

    assert isinstance(sim, SimResult)
    assert isinstance(collective, CollectiveResult)
    assert isinstance(iteration, IterationResult)
    assert isinstance(traffic, TrafficReport)
    assert isinstance(scaling, ScalingResult)
    assert isinstance(demo, DemoResult)
    assert isinstance(run_result, RunResult)
    assert isinstance(run_result.jobs[0], JobResult)
    assert isinstance(run_result.collectives[0], CollectiveRun)
    for name in ("SimResult", "CollectiveResult", "IterationResult", "TrafficReport",
                 "ScalingResult", "RunResult", "JobResult", "CollectiveRun"):
        assert name in results.__all__ and name in dir(results)
        assert hasattr(getattr(results, name), "to_frame")
    assert hasattr(DemoResult, "to_frame")
    with pytest.warns(DeprecationWarning, match="hpnsim.demo.DemoResult"):
        assert results.DemoResult is DemoResult   # the demo sits above results: one release
    with pytest.raises(AttributeError):
        results.NoSuchResult  # noqa: B018
