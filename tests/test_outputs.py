"""Outputs people can use: ``--csv``/``--parquet`` hold what ``--json`` says, bad paths are
refused before any work, and ``--trace`` writes valid Chrome-trace JSON of the timeline."""

from __future__ import annotations

import csv
import json

import pytest

from hpnsim.cli.main import run

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

SMALL_HPN = ["--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "4",
             "--backup-hosts", "0"]
TRAIN = ["train", "--model", "llama3-8b", "--tp", "8", "--pp", "2", "--dp", "2",
         "--global-batch", "8", "--seq-len", "1024", *SMALL_HPN]
COLLECTIVE = ["collective", "--fabric", "fat_tree", "--k", "4", "--sizes", "1M,4M",
              "--algo", "ring"]
FABRIC = ["fabric", "fat_tree", "--k", "4"]


def _cli(capsys, argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        run([str(a) for a in argv])
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def _ok_json(capsys, argv):
    code, out, err = _cli(capsys, [*argv, "--json"])
    assert code == 0, err
    return json.loads(out)


def _csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _same(cell, value) -> bool:
    if value is None:
        return cell in ("", None) or (isinstance(cell, float) and cell != cell)
    if isinstance(value, bool) or isinstance(value, str):
        return str(cell) == str(value)
    return float(cell) == pytest.approx(float(value), rel=1e-12, abs=0.0)


# --- --csv / --parquet equal --json ------------------------------------------------------

def test_train_csv_and_parquet_are_the_json_per_stage_breakdown(capsys, tmp_path):
    data = _ok_json(capsys, TRAIN)
    code, _, err = _cli(capsys, [*TRAIN, "--csv", tmp_path / "t.csv",
                                 "--parquet", tmp_path / "t.parquet"])
    assert code == 0, err
    parts = ["compute", "tp", "pp", "dp", "ep", "bubble", "optimizer", "straggler"]
    rows, frame = _csv(tmp_path / "t.csv"), pd.read_parquet(tmp_path / "t.parquet")
    assert list(rows[0]) == ["stage", *parts] and list(frame.columns) == ["stage", *parts]
    assert len(rows) == len(frame) == 2 == len(data["per_stage"])
    for row, (_, rec), stage in zip(rows, frame.iterrows(), data["per_stage"], strict=True):
        for key in ["stage", *parts]:
            assert _same(row[key], stage[key]) and _same(rec[key], stage[key]), key
        # each stage's parts split the iteration time with no remainder
        assert sum(float(row[p]) for p in parts) == pytest.approx(data["iteration_time"],
                                                                  rel=1e-9)


def test_collective_csv_and_parquet_are_the_json_sizes(capsys, tmp_path):
    data = _ok_json(capsys, COLLECTIVE)
    code, _, err = _cli(capsys, [*COLLECTIVE, "--csv", tmp_path / "c.csv",
                                 "--parquet", tmp_path / "c.parquet"])
    assert code == 0, err
    rows, frame = _csv(tmp_path / "c.csv"), pd.read_parquet(tmp_path / "c.parquet")
    assert [float(r["size"]) for r in rows] == [2.0**20, 4 * 2.0**20] == list(frame["size"])
    for row, (_, rec), size in zip(rows, frame.iterrows(), data, strict=True):
        for key in ("size", "time_us", "algbw", "busbw", "n_gpus", "op", "algo"):
            assert _same(row[key], size[key]) and _same(rec[key], size[key]), key
        # nccl-tests: busbw = algbw * 2(n-1)/n for an all-reduce
        n = size["n_gpus"]
        assert float(row["busbw"]) == pytest.approx(float(row["algbw"]) * 2 * (n - 1) / n,
                                                    rel=1e-9)


def test_fabric_csv_and_parquet_flatten_the_json_report(capsys, tmp_path):
    data = _ok_json(capsys, FABRIC)
    code, _, err = _cli(capsys, [*FABRIC, "--csv", tmp_path / "f.csv",
                                 "--parquet", tmp_path / "f.parquet"])
    assert code == 0, err
    [row], frame = _csv(tmp_path / "f.csv"), pd.read_parquet(tmp_path / "f.parquet")
    assert len(frame) == 1
    # k=4 fat tree (Al-Fares et al.): k^3/4 = 16 hosts, k^2/2 = 8 edge switches
    assert int(row["gpus"]) == 16 == data["gpus"]
    for key, value in (("switches_tor", data["switches"]["tor"]),
                       ("bom_power_w_network", data["bom"]["power_w"]["network"]),
                       ("bisection_bandwidth", data["bisection_bandwidth"])):
        assert _same(row[key], value) and _same(frame[key][0], value), key
    assert int(row["switches_tor"]) == 8


# --- bad paths: one line, exit 2, before any work ----------------------------------------

@pytest.fixture
def tripwire(monkeypatch):
    """``hpnsim.scenario.runner.run`` (every command here runs through it) must not be reached."""
    import hpnsim.scenario.runner

    def boom(*args, **kwargs):
        raise AssertionError("the command started its work before refusing the output path")

    monkeypatch.setattr(hpnsim.scenario.runner, "run", boom)


@pytest.mark.parametrize("argv", [TRAIN, COLLECTIVE, FABRIC], ids=["train", "collective",
                                                                    "fabric"])
@pytest.mark.parametrize("flag,where,says", [
    ("--csv", "missing/t.csv", "does not exist"),
    ("--parquet", ".", "is a folder; give a file path, e.g. "),
    ("--csv", "afile/t.csv", "is not a folder"),
])
def test_bad_output_paths_exit_2_with_one_line(capsys, tmp_path, tripwire, argv, flag, where,
                                               says):
    (tmp_path / "afile").write_text("x")
    code, out, err = _cli(capsys, [*argv, flag, tmp_path / where])
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(f"error: {flag}: ") and says in err


def test_parquet_without_pyarrow_says_how_to_install(capsys, tmp_path, tripwire, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)   # import pyarrow -> ImportError
    code, out, err = _cli(capsys, [*TRAIN, "--parquet", tmp_path / "t.parquet"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: --parquet: ") and "pip install 'hpnsim[frames]'" in err
    assert not (tmp_path / "t.parquet").exists()


# --- Chrome trace / Perfetto ---------------------------------------------------------------

PHASES = {"X", "M", "s", "f", "C"}   # the phases hpnsim writes (Trace Event Format)


def _check_trace_format(trace: dict) -> None:
    """The Trace Event Format's rules as a viewer applies them."""
    assert set(trace) == {"traceEvents", "displayTimeUnit"} and trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    named_processes, named_threads, used = set(), set(), set()
    for e in events:
        assert {"name", "ph", "pid"} <= set(e) and e["ph"] in PHASES, e
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index",
                                 "thread_sort_index")
            key = "name" if e["name"].endswith("_name") else "sort_index"
            assert key in e["args"]
            if e["name"] == "process_name":
                named_processes.add(e["pid"])
            elif e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["args"], dict)
            used.add((e["pid"], e["tid"]))
        if e["ph"] in ("s", "f"):
            assert "id" in e and "tid" in e
    # every process and every thread with slices is named
    assert {pid for pid, _ in used} <= named_processes and used <= named_threads
    # complete events on one thread nest or are disjoint (else a viewer drops or misdraws)
    by_thread: dict = {}
    for e in events:
        if e["ph"] == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        stack = []
        for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= a + 1e-6:
                stack.pop()
            assert not stack or b <= stack[-1] + 1e-6, "partially overlapping slices"
            stack.append(b)
    # each flow has one start and one finish
    starts = sorted(e["id"] for e in events if e["ph"] == "s")
    assert starts == sorted(e["id"] for e in events if e["ph"] == "f")


def test_train_trace_is_the_json_timeline_in_microseconds(capsys, tmp_path):
    from hpnsim.report.trace import timeline_rows

    data = _ok_json(capsys, [*TRAIN, "--timeline"])
    code, _, err = _cli(capsys, [*TRAIN, "--trace", tmp_path / "t.json"])
    assert code == 0, err
    trace = json.loads((tmp_path / "t.json").read_text())
    _check_trace_format(trace)
    timeline = data["timeline"]
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and "stage" in e["args"]]
    assert len(slices) == len(timeline)

    def key(r):
        return r["stage"], r["kind"], r["micro_batch"], r["chunk"]

    by_key = {key(e["args"]): e for e in slices}
    for row in timeline:
        e = by_key[key(row)]
        assert e["ts"] == pytest.approx(row["start"] * 1e6, rel=1e-12, abs=1e-9)
        assert e["dur"] == pytest.approx((row["finish"] - row["start"]) * 1e6, rel=1e-9,
                                         abs=1e-6)
    # the rows come back from the slices
    back = sorted(timeline_rows(trace), key=key)
    for got, want in zip(back, sorted(timeline, key=key), strict=True):
        assert key(got) == key(want)
        assert got["start"] == pytest.approx(want["start"], abs=1e-12)
        assert got["finish"] == pytest.approx(want["finish"], abs=1e-12)
    # one process (the job); per stage a compute thread and a dp thread, plus iterations
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {"iterations", "stage 0 compute", "stage 0 dp", "stage 1 compute",
                       "stage 1 dp"}
    assert len({e["pid"] for e in trace["traceEvents"]}) == 1
    # 1F1B, pp=2, 4 micro-batches: each forward sent 0->1 and each backward 1->0
    micro_batches = data["job"]["micro_batches"]
    assert sum(e["ph"] == "s" for e in trace["traceEvents"]) == 2 * (2 - 1) * micro_batches
    [it] = [e for e in trace["traceEvents"] if e["name"] == "iteration 0"]
    assert it["dur"] == pytest.approx(data["iteration_time"] * 1e6, rel=1e-12)


def test_run_trace_places_every_iteration_of_every_job(capsys, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "fabric: {template: hpn7, segments: 1, hosts_per_segment: 4, backup_hosts: 0}\n"
        "jobs:\n"
        "  - {name: a, model: llama3-8b, tp: 8, dp: 2, global_batch: 2, seq_len: 1024,\n"
        "     iterations: 2, hosts: [0, 1]}\n"
        "  - {name: b, model: llama3-8b, tp: 8, pp: 2, global_batch: 2, seq_len: 1024,\n"
        "     arrival: 0.25s, hosts: [2, 3]}\n")
    data = _ok_json(capsys, ["run", scenario])
    code, _, err = _cli(capsys, ["run", scenario, "--trace", tmp_path / "r.json"])
    assert code == 0, err
    trace = json.loads((tmp_path / "r.json").read_text())
    _check_trace_format(trace)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "process_name"}
    assert sorted(n.split(":")[0] for n in names.values()) == ["a", "b"]
    for pid, name in names.items():
        job = next(j for j in data["jobs"] if j["job"] == name.split(":")[0])
        its = sorted((e for e in trace["traceEvents"] if e["pid"] == pid
                      and e["name"].startswith("iteration ")), key=lambda e: e["ts"])
        assert len(its) == job["iterations"]
        # back to back from the arrival; the last ends when the run says the job finished
        assert its[0]["ts"] == pytest.approx(job["arrival"] * 1e6, abs=1e-6)
        for first, second in zip(its, its[1:], strict=False):
            assert second["ts"] == pytest.approx(first["ts"] + first["dur"], rel=1e-12)
        assert (its[-1]["ts"] + its[-1]["dur"]) / 1e6 == pytest.approx(job["finish"],
                                                                        rel=1e-12)
        for e, per in zip(its, job["per_iteration"], strict=True):
            assert e["dur"] / 1e6 == pytest.approx(per["iteration_time"], rel=1e-12)


def test_cluster_trace_by_hand():
    import numpy as np

    from hpnsim.report.trace import cluster_trace
    from hpnsim.sched.cluster.result import ClusterResult, JobOutcome

    # a: 2 GPUs, arrives at 1 s, waits to 2 s, 2 iterations at 0.5 it/s then 2 at 1 it/s;
    # b: 2 GPUs, runs 0-4 s, 4 iterations; each iteration W = 2 GPUs x 1 s of compute
    a = JobOutcome("a", 2, [0], 1.0, 2.0, 8.0, 4.0, 2.0, 1.0,
                   ((2.0, 6.0, 8.0), (0.0, 2.0, 4.0)))   # 2 it in 4 s, then 2 in 2 s
    b = JobOutcome("b", 2, [1], 0.0, 0.0, 4.0, 4.0, 2.0, 1.0, ((0.0, 4.0), (0.0, 4.0)))
    r = ClusterResult("none", "packed", True, 0.01, 4, [a, b], np.array([0.0, 1.0, 4.0, 8.0]))
    trace = cluster_trace([r])
    _check_trace_format(trace)
    threads = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
               if e["name"] == "thread_name"}
    assert sorted(threads.values()) == ["a (2 GPUs)", "b (2 GPUs)"]
    spans = sorted((threads[e["tid"]][0], e["name"], e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6)
                   for e in trace["traceEvents"] if e["ph"] == "X")
    assert spans == [("a", "0.5 it/s", 2.0, 6.0), ("a", "1 it/s", 6.0, 8.0),
                     ("a", "queued", 1.0, 2.0), ("a", "running", 2.0, 8.0),
                     ("b", "1 it/s", 0.0, 4.0), ("b", "running", 0.0, 4.0)]
    # utilization = GPU-seconds of work done / (4 GPUs x interval), W = 2 x 1 s per iteration
    util = [(e["ts"] / 1e6, e["args"]["utilization"]) for e in trace["traceEvents"]
            if e["ph"] == "C"]
    # [0,1): b does 1 it -> 2/4; [1,4): b 3 it + a 1 it -> 8/12; [4,8): a 3 it -> 6/16
    assert util == [(0.0, pytest.approx(0.5)), (1.0, pytest.approx(8 / 12)),
                    (4.0, pytest.approx(6 / 16))]
