"""Utilization over a window (Crux's Definition 1), jobs that leave at their duration, exact
mode sized by the horizon, and the window's bad input."""

import math

import pytest
from cluster_tiny import program

from hpnsim.errors import InputError
from hpnsim.sched.cluster.driver import ClusterDriver, ClusterJob, simulate_cluster


def _trace():
    # a holds all four hosts for 1 s; b arrives at 0.5 s, waits for a, then runs on two
    # hosts far past the window: one job at a time, so each runs at its alone period
    return [ClusterJob("a", program(0.02, 2e8, dp=4), duration=1.0),
            ClusterJob("b", program(0.01, 1e8), arrival=0.5, iterations=100_000)]


@pytest.mark.parametrize("exact", [True, False])
def test_window_utilization_by_hand(tiny, exact):
    t0, t1 = 0.6, 1.4
    r = simulate_cluster(tiny, _trace(), exact=exact, window=(t0, t1))
    a, b = r.jobs
    assert r.makespan == pytest.approx(t1)                 # the window ends the run
    assert a.finish == pytest.approx(1.0) and b.start == pytest.approx(1.0)
    # each job alone: its compute, then its all-reduce of S bytes per GPU on 50 GB/s links
    # (a 4-GPU ring moves 2 (n-1)/n S per GPU, a 2-GPU ring S), NCCL overheads within 5%
    assert a.alone_iteration_time - 0.02 == pytest.approx(1.5 * 2e8 / 50e9, rel=0.05)
    assert b.alone_iteration_time - 0.01 == pytest.approx(1e8 / 50e9, rel=0.05)
    assert a.work == pytest.approx(4 * 0.02) and b.work == pytest.approx(2 * 0.01)
    # Definition 1: computation the GPUs finish in [t0, t1], GPUs x compute per iteration x
    # iterations in the window (a from t0 to its departure at 1 s, b from 1 s to t1)
    done = (4 * 0.02 * (1.0 - t0) / a.alone_iteration_time
            + 2 * 0.01 * (t1 - 1.0) / b.alone_iteration_time)
    assert r.window_utilization == pytest.approx(done / (4 * (t1 - t0)), rel=1e-9)
    held = 4 * (1.0 - t0) + 2 * (t1 - 1.0)
    assert r.window_held_utilization == pytest.approx(done / held, rel=1e-9)
    rates = r.window_rates()
    assert rates[0] == pytest.approx(1 / a.alone_iteration_time, rel=1e-9)
    assert rates[1] == pytest.approx(1 / b.alone_iteration_time, rel=1e-9)
    s = r.summary()
    assert (s["window_start"], s["window_end"]) == (t0, t1)
    assert [row["window_rate"] for row in r.rows()] == rates


def test_a_timed_job_leaves_at_its_duration_whatever_its_speed(tiny):
    # a and b share the uplinks and slow each other; a still leaves at its 0.7 s
    jobs = [ClusterJob("a", program(0.01, 1e9), duration=0.7, gpus=[0, 2]),
            ClusterJob("b", program(0.01, 1e9), duration=2.0, gpus=[1, 3])]
    for exact in (True, False):
        r = simulate_cluster(tiny, jobs, allocator="given", exact=exact)
        a, b = r.jobs
        assert a.finish == pytest.approx(0.7) and b.finish == pytest.approx(2.0)
        assert a.slowdown > 1.5                         # it did fewer iterations, not longer
        assert a.iterations == pytest.approx(0.7 / a.iteration_time)


def test_exact_mode_sizes_the_graph_by_the_horizon(tiny):
    # ten million iterations asked, a 0.3 s horizon: the graph holds what 0.3 s of compute
    # allows (no iteration is shorter than its compute), not ten million copies
    job = ClusterJob("a", program(0.01, 1e8), iterations=10**7)
    d = ClusterDriver(tiny, [job], exact=True, horizon=0.3)
    r = d.run()
    assert d.mode.sized[0] == math.ceil(0.3 / 0.01) + 1
    assert r.jobs[0].iterations == pytest.approx(0.3 / r.jobs[0].alone_iteration_time)
    assert r.unfinished == ["a"]


@pytest.mark.parametrize("window, horizon, match", [
    ((2.0, 1.0), None, "start < end"),
    ((0.0, 2.0), 1.0, "end by the horizon"),
    ((0.0, 0.4), None, "before the first job arrives"),
    ((10.0, 11.0), None, "after the trace"),
])
def test_bad_windows_name_the_field(tiny, window, horizon, match):
    jobs = [ClusterJob("a", program(0.01, 1e8), arrival=0.5, duration=1.0),
            ClusterJob("b", program(0.01, 1e8), arrival=0.6, duration=2.0)]
    with pytest.raises(InputError, match=match) as err:
        simulate_cluster(tiny, jobs, window=window, horizon=horizon)
    assert err.value.field == "window"


TRACE = """\
fabric: {template: fat_tree, k: 4, gpus_per_host: 1}
jobs:
  - {name: a, model: bert-large, dp: 8, zero: 1, duration: 50ms}
  - {name: b, model: bert-large, dp: 8, zero: 1, iterations: 3, arrival: 0.01}
cluster:
  scheduler: crux
  window: [10ms, 40ms]
"""


def _cli(argv, capsys):
    from hpnsim.cli.main import run as cli

    with pytest.raises(SystemExit) as end:
        cli(argv)
    out = capsys.readouterr()
    return end.value.code, out.out, out.err


def test_scenario_window_and_duration(tmp_path, capsys):
    import json

    path = tmp_path / "t.yaml"
    path.write_text(TRACE)
    code, out, err = _cli(["cluster", str(path), "--json"], capsys)
    assert code in (0, None), err
    r = json.loads(out)
    assert (r["window_start"], r["window_end"], r["makespan"]) == (0.01, 0.04, 0.04)
    assert 0 < r["window_utilization"] <= r["window_held_utilization"] <= 1
    code, out, err = _cli(["cluster", str(path), "--json", "--window", "0,20ms",
                           "--horizon", "30ms"], capsys)
    assert code in (0, None), err
    r = json.loads(out)
    assert (r["window_start"], r["window_end"], r["makespan"]) == (0.0, 0.02, 0.03)


@pytest.mark.parametrize("edit, argv, field", [
    (("window: [10ms, 40ms]", "window: [40ms, 10ms]"), [], "cluster.window"),
    (("window: [10ms, 40ms]", "window: [10ms]"), [], "cluster.window"),
    (("window: [10ms, 40ms]", "window: [10ms, 40ms]\n  horizon: 20ms"), [], "cluster.window"),
    (("a", "a"), ["--window", "1h"], "--window"),
    (("duration: 50ms}", "duration: 50ms, arrival: 5ms}"), ["--window", "0,1ms"],
     "--window"),                                              # before the first arrival
    (("a", "a"), ["--horizon", "20ms"], "cluster.window"),    # the YAML window ends later
    (("a", "a"), ["--window", "2h,3h", "--horizon", "4h"], "--window"),  # after the trace
])
def test_bad_window_exits_2_naming_the_field(tmp_path, capsys, edit, argv, field):
    text = TRACE.replace(*edit)
    if "--window" in argv and "2h" in argv[1]:
        text = text.replace("iterations: 3", "duration: 50ms")   # every job timed
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, out, err = _cli(["cluster", str(path), *argv], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {field}: "), err


def test_duration_needs_a_cluster_trace(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(TRACE.split("cluster:")[0])
    code, out, err = _cli(["run", str(path)], capsys)
    assert code == 2 and err.startswith("error: jobs[0].duration: only a cluster trace")
