"""The user's edge, class by class (issue 21): every output of every command checked before
any work; work beyond a stated limit refused with the variable that raises it; every time
field bounded; YAML read with duplicate keys and alias bombs refused; --out folders never
mixed or silently replaced; files written under the user's umask; sweeps that resume only
their own grid and workers that die with their parent.

Each class is one table (or one walk over the CLI / the scenario models), so a new command,
output flag or time field is covered without a new test."""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import typer

from hpnsim.cli.main import app, run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: the functions that do each command's long work (a refusal must come before all of them)
_WORK = ("hpnsim.scenario.runner.run", "hpnsim.scenario.cluster.run_cluster",
         "hpnsim.sweep.execute.run_sweep", "hpnsim.demo.pipeline.run_demo",
         "hpnsim.training.scaling.scaling_linearity", "hpnsim.training.simulate_iteration",
         "hpnsim.collectives.run_collective", "hpnsim.fabrics.build_fabric",
         "hpnsim.cli.collective.build_fabric", "hpnsim.report.html.write_report",
         "hpnsim.faults.reliability.compare_designs", "hpnsim.design.design_space")

#: a valid, small invocation of every command that writes an output file or folder
BASE = {
    "demo": ["demo", "--quick"],
    "run": ["run", EXAMPLES / "two_jobs.yaml"],
    "fabric": ["fabric", "fat_tree", "--k", "4"],
    "collective": ["collective", "--fabric", "fat_tree", "--k", "4", "--sizes", "1M"],
    "traffic": ["traffic", "--model", "llama3-8b", "--tp", "8", "--dp", "2"],
    "aicb": ["aicb", "{aicb}"],
    "train": ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2"],
    "scaling": ["scaling", "--model", "llama3-8b", "--dp", "1,2", "--fabrics", "hpn7"],
    "bench": ["bench", "--quick"],
    "reliability": ["reliability", "--gpus", "16", "--gpu-hour-price", "2"],
    "report": ["report", "{results}"],
    "sweep": ["sweep", EXAMPLES / "sweep.yaml"],
    "cluster": ["cluster", EXAMPLES / "cluster.yaml"],
    "calibrate": ["calibrate", "{logs}"],
    "wiring plan": ["wiring", "plan", "fat_tree", "--k", "4"],
    "kernels": ["kernels", "{trace}"],
    "design": ["design"],
}

_OUTPUT_FLAGS = ("--plot", "--out", "--csv", "--parquet", "--trace")
_FOLDER_OUT = {"demo", "run", "sweep", "cluster"}       # their --out is a folder
_EXTENSION = {"--plot": "png", "--csv": "csv", "--parquet": "parquet", "--trace": "json"}
_FILE_OUT_EXTENSION = {"report": "html", "calibrate": "yaml", "wiring plan": "csv", "kernels": "csv"}


def _output_flags() -> list[tuple[str, str]]:
    """(command, flag) for every output option of every command, read from the CLI itself."""
    def commands(group, prefix=""):    # a command group's (hpnsim wiring) subcommands
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", command

    return [(name, opt) for name, command in commands(typer.main.get_command(app))
            for param in command.params for opt in param.opts if opt in _OUTPUT_FLAGS]


def test_every_command_with_an_output_has_a_base_invocation():
    assert {name for name, _ in _output_flags()} <= set(BASE)


def _bad_values(command: str, flag: str) -> list[tuple[str, str]]:
    """(what is wrong, the value) for one output flag; ``{file}`` is an existing file."""
    if flag == "--out" and command in _FOLDER_OUT:
        return [("unwritable", "/proc/hpnsim-edge-out"), ("a file", "{file}"),
                ("under a file", "{file}/sub"), ("not empty", "{full}")]
    ext = _FILE_OUT_EXTENSION.get(command, _EXTENSION.get(flag, "txt"))
    cases = [("unwritable", f"/proc/hpnsim-edge.{ext}"), ("a folder", "{folder}")]
    if (command, flag) != ("report", "--out"):   # report makes the page's folder
        cases.append(("missing folder", f"no/such/folder/out.{ext}"))
    if flag == "--plot" or (command, flag) == ("report", "--out"):
        cases.append(("format", "out.docx"))
    return cases


_CASES = [(command, flag, what, value) for command, flag in _output_flags()
          for what, value in _bad_values(command, flag)]


@pytest.fixture
def tripwired(monkeypatch, tmp_path):
    """An empty working folder, every long computation replaced by a tripwire, and the
    inputs BASE refers to."""
    inputs = tmp_path / "inputs"
    (inputs / "results").mkdir(parents=True)
    (inputs / "results" / "results.json").write_text("{}")
    (inputs / "file.txt").write_text("not a folder")
    (inputs / "folder").mkdir()
    (inputs / "full").mkdir()
    (inputs / "full" / "mine.txt").write_text("the user's own file")
    (inputs / "logs.txt").write_text("")
    (inputs / "trace.json").write_text(json.dumps({"deviceProperties": [
        {"id": 0, "name": "NVIDIA H100"}], "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1, "args": {"device": 0}}]}))

    def tripwire(*args, **kwargs):
        raise AssertionError("the command started its work before refusing its output")

    for target in _WORK:
        module_name, name = target.rsplit(".", 1)
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            monkeypatch.setattr(module, name, tripwire)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    from hpnsim.workloads.aicb import example_path

    return {"work": work, "file": str(inputs / "file.txt"), "folder": str(inputs / "folder"),
            "full": str(inputs / "full"), "results": str(inputs / "results"),
            "logs": str(inputs / "logs.txt"), "aicb": str(example_path()),
            "trace": str(inputs / "trace.json")}


def _cli(capsys, argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        run([str(a) for a in argv])
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def _refused(capsys, argv, field) -> str:
    """Exit 2, one line ``error: FIELD: ...`` on stderr, nothing on stdout, no traceback."""
    code, out, err = _cli(capsys, argv)
    assert code == 2, (out, err)
    assert "Traceback" not in err and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), err
    return lines[0]


@pytest.mark.parametrize(("command", "flag", "what", "value"), _CASES,
                         ids=[f"{c}{f}-{w.replace(' ', '-')}" for c, f, w, _ in _CASES])
def test_every_output_is_checked_before_any_work(capsys, tripwired, command, flag, what,
                                                 value):
    if command == "calibrate":
        pytest.importorskip("yaml")
    argv = [str(a).format(**tripwired) for a in BASE[command]]
    line = _refused(capsys, [*argv, flag, value.format(**tripwired)], flag)
    expected = {"unwritable": "not writable", "a file": "is a file", "under a file": "is a file",
                "not empty": "--force", "missing folder": "does not exist",
                "a folder": "is a folder", "format": "cannot write a .docx"}[what]
    assert expected in line
    assert list(tripwired["work"].iterdir()) == []          # nothing written
    assert os.listdir(tripwired["full"]) == ["mine.txt"]    # nothing of the user's touched


# --- unbounded work: refused from an estimate, naming what raises the limit ------------------

_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True))

_HUGE = [
    (["train", "--model", "llama3-8b", "--gpus", "16", "--iterations", "100000000"],
     "--iterations", "HPNSIM_MAX_TASKS"),
    (["run", "{huge_iterations}"], "jobs[0].iterations", "HPNSIM_MAX_TASKS"),
    (["cluster", "--lingjun", "--jobs", "1000000"], "--jobs", "HPNSIM_MAX_JOBS"),
    (["sweep", "{huge_grid}"], "grid", "HPNSIM_MAX_POINTS"),
    (["run", "{bomb}"], "scenario", "1,000,000 values"),
    (["collective", "--fabric", "fat_tree", "--k", "4", "--channels", "100000"], "--channels",
     "less than or equal to 32"),
]


@pytest.fixture
def huge_inputs(tmp_path):
    huge = tmp_path / "huge.yaml"
    huge.write_text("jobs:\n  - model: llama3-8b\n    dp: 2\n    iterations: 1000000000\n")
    grid = tmp_path / "grid.yaml"
    grid.write_text(textwrap.dedent(f"""\
        base: {EXAMPLES / 'one_job.yaml'}
        grid:
          seed: {list(range(400))}
          jobs[0].micro_batch: {list(range(1, 201))}
        """))
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_BOMB)
    return {"huge_iterations": str(huge), "huge_grid": str(grid), "bomb": str(bomb)}


@pytest.mark.parametrize(("argv", "field", "names"), _HUGE,
                         ids=["train-iterations", "run-iterations", "cluster-jobs",
                              "sweep-grid", "yaml-alias-bomb", "collective-channels"])
def test_huge_work_is_refused_before_it_runs(capsys, monkeypatch, huge_inputs, argv, field,
                                             names):
    def tripwire(*args, **kwargs):
        raise AssertionError("the work started")

    import hpnsim.scenario.runner as runner
    import hpnsim.sweep.execute as execute

    monkeypatch.setattr(runner, "simulate", tripwire)
    monkeypatch.setattr(execute, "run_sweep", tripwire)
    line = _refused(capsys, [a.format(**huge_inputs) for a in argv], field)
    assert names in line


def test_the_limit_is_raised_by_its_variable(monkeypatch):
    from hpnsim.errors import check_work

    monkeypatch.setenv("HPNSIM_MAX_POINTS", "100000")
    check_work(80_000, "points", "grid", "80,000 points")      # now allowed
    monkeypatch.setenv("HPNSIM_MAX_POINTS", "-3")
    with pytest.raises(Exception, match="HPNSIM_MAX_POINTS: must be a positive integer"):
        check_work(1, "points", "grid", "one point")


# --- every time field of a scenario: negative and beyond the clock's precision refused ------

def _time_fields() -> list[tuple[str, dict]]:
    """(YAML path, a scenario with that field set to ``{value}``) for every time field of
    every scenario model, found by the validator the field carries."""
    from hpnsim.scenario import cluster, faults, jobs
    from hpnsim.scenario.yaml import seconds_field

    time_validators = {seconds_field, getattr(faults, "_seconds", seconds_field)}
    shapes = {
        jobs.JobSpec: ("jobs[0]", lambda k: {"jobs": [{"model": "llama3-8b", "dp": 2, k: "V"}]}),
        faults.FaultSpec: ("faults[0]", lambda k: {
            "jobs": [{"model": "llama3-8b", "dp": 2}],
            "faults": [{"kind": "flap", "target": "gpu0.port0", "period": "500d", "down": "1s",
                        "count": 2, k: "V"}]}
            if k != "duration" else {
            "jobs": [{"model": "llama3-8b", "dp": 2}],
            "faults": [{"kind": "link", "target": "gpu0.port0", k: "V"}]}),
        faults.FailoverSpec: ("failover", lambda k: {"jobs": [{"model": "llama3-8b", "dp": 2}],
                                                     "failover": {k: "V"}}),
        cluster.ClusterSpec: ("cluster", lambda k: {"jobs": [{"model": "llama3-8b", "dp": 2}],
                                                    "cluster": {k: "V"}}),
    }
    out = []
    for model, (prefix, make) in shapes.items():
        for name, info in model.model_fields.items():
            validators = [getattr(m, "func", None) for m in info.metadata]
            annotation = info.annotation
            for arg in getattr(annotation, "__args__", ()):
                validators += [getattr(m, "func", None)
                               for m in getattr(arg, "__metadata__", ())]
            if time_validators & set(validators):
                out.append((f"{prefix}.{name}", make(name)))
    return out


_TIME_FIELDS = _time_fields()


def test_the_time_fields_are_found():
    paths = {p for p, _ in _TIME_FIELDS}
    assert {"jobs[0].arrival", "faults[0].at", "faults[0].duration", "failover.timeout",
            "cluster.horizon"} <= paths


def _with(data, value):
    return json.loads(json.dumps(data).replace('"V"', json.dumps(value)))


@pytest.mark.parametrize(("path", "data"), _TIME_FIELDS, ids=[p for p, _ in _TIME_FIELDS])
@pytest.mark.parametrize("value", ["1e15s", 1e15, "-1s", -1, "600d"])
def test_every_time_field_refuses_what_the_clock_cannot_hold(path, data, value):
    from hpnsim.errors import InputError
    from hpnsim.scenario.spec import parse_scenario

    with pytest.raises(InputError) as refused:
        parse_scenario(_with(data, value))
    assert refused.value.field == path


@pytest.mark.parametrize(("path", "data"), _TIME_FIELDS, ids=[p for p, _ in _TIME_FIELDS])
def test_every_time_field_takes_a_day(path, data):
    from hpnsim.scenario.spec import parse_scenario

    parse_scenario(_with(data, "24h"))


def test_the_time_limit_is_where_float64_still_resolves_10_ns():
    import numpy as np

    from hpnsim.units import MAX_TIME_S

    assert np.spacing(MAX_TIME_S) == pytest.approx(1e-8, rel=0.5)   # ulp = 2^-52 x value
    assert np.spacing(1e15) == 0.125                                  # the 1e15 s


# --- YAML: duplicate keys anywhere, bombs, self-reference -----------------------------------

@pytest.mark.parametrize(("text", "path"), [
    ("seed: 1\nseed: 2\n", "seed"),
    ("fabric:\n  template: hpn7\n  template: dcn_plus\n", "fabric.template"),
    ("jobs:\n  - model: llama3-8b\n    tp: 8\n    tp: 4\n", "jobs[0].tp"),
    ("jobs:\n  - model: a\n  - model: b\n    dp: 2\n    dp: 4\n", "jobs[1].dp"),
])
def test_duplicate_keys_are_refused_at_their_path(text, path):
    from hpnsim.errors import InputError
    from hpnsim.scenario.yaml import load_yaml

    with pytest.raises(InputError) as refused:
        load_yaml(text)
    assert refused.value.field == path and "duplicate key" in refused.value.message


def test_a_merge_key_and_shared_anchors_still_load():
    from hpnsim.scenario.yaml import load_yaml

    data, _ = load_yaml("a: &x {p: 1}\nb:\n  <<: *x\n  q: 2\nc: [*x, *x]\n")
    assert data == {"a": {"p": 1}, "b": {"p": 1, "q": 2}, "c": [{"p": 1}, {"p": 1}]}


def test_a_bomb_is_measured_without_being_built():
    from hpnsim.errors import InputError
    from hpnsim.scenario.yaml import MAX_YAML_NODES, load_yaml

    start = time.perf_counter()
    with pytest.raises(InputError, match="expands to more than"):
        load_yaml(_BOMB)           # 10^9 values once expanded
    assert time.perf_counter() - start < 5   # refused from 100 nodes, not built
    assert MAX_YAML_NODES == 1_000_000


# --- output folders: refused when not empty, --force clears only hpnsim's files, umask -------

def test_run_out_is_never_mixed_and_force_clears_only_what_hpnsim_wrote(capsys, tmp_path):
    out = tmp_path / "r"
    code, _, err = _cli(capsys, ["run", EXAMPLES / "collective.yaml", "--out", out])
    assert code == 0, err
    first = sorted(p.name for p in out.iterdir())
    assert "results.json" in first and ".hpnsim-files" in first
    listed = (out / ".hpnsim-files").read_text().split()
    assert sorted(listed) == [n for n in first if n != ".hpnsim-files"]
    line = _refused(capsys, ["run", EXAMPLES / "collective.yaml", "--out", out], "--out")
    assert "--force" in line
    (out / "stale.csv").write_text("an earlier hpnsim file")
    (out / ".hpnsim-files").write_text("\n".join([*listed, "stale.csv"]) + "\n")
    (out / "mine.txt").write_text("the user's")
    code, _, err = _cli(capsys, ["run", EXAMPLES / "collective.yaml", "--out", out, "--force"])
    assert code == 0, err
    after = sorted(p.name for p in out.iterdir())
    assert "stale.csv" not in after and "mine.txt" in after and "results.json" in after


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_get_the_umask_mode(tmp_path, umask):
    from hpnsim.results import write_atomic, write_json

    old = os.umask(umask)
    try:
        paths = [write_atomic(tmp_path / "a.txt", "x"), write_json(tmp_path / "b.json", {})]
    finally:
        os.umask(old)
    for path in paths:
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask


# --- sweeps: a resume checks the grid; workers die with their parent ------------------------

def test_resume_refuses_another_grid(tmp_path):
    from hpnsim.errors import InputError
    from hpnsim.results import write_json
    from hpnsim.sweep.execute import grid_fingerprint, prepare_out
    from hpnsim.sweep.spec import parse_sweep

    base = {"fabric": {"template": "fat_tree", "k": 4},
            "jobs": [{"model": "llama3-8b", "dp": 2}]}
    first = parse_sweep({"base": base, "grid": {"seed": [1, 2]}}, check=False)
    other = parse_sweep({"base": base, "grid": {"seed": [3, 4]}}, check=False)
    write_json(tmp_path / "sweep.json", {"base_hash": first.base_hash,
                                         "grid_hash": grid_fingerprint(first)})
    (tmp_path / "rows.jsonl").write_text("")
    assert prepare_out(first, tmp_path, resume=True) == []
    with pytest.raises(InputError, match="another grid"):
        prepare_out(other, tmp_path, resume=True)


_PARENT = """
import os, sys, time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing
from hpnsim.sweep.execute import _die_with_parent

def pid_then_sleep(_):
    return os.getpid()

if __name__ == "__main__":
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_die_with_parent, initargs=(os.getpid(), 0.2))
    pids = sorted(set(pool.map(pid_then_sleep, range(8))))
    print(" ".join(map(str, pids)), flush=True)
    time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat")
    return not (state.exists() and state.read_text().split()[2] == "Z")


def test_sweep_workers_die_when_their_parent_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert workers and all(_alive(p) for p in workers)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in workers)
    finally:
        if parent.poll() is None:
            parent.kill()


# --- silent nonsense and wrong names: each refused, naming what the user typed --------------

@pytest.fixture
def bad_files(tmp_path):
    (tmp_path / "not_a_job.yaml").write_text("jobs: [3]\n")
    (tmp_path / "units.yaml").write_text("switch_51.2T: [1,\n")
    return {"not_a_job": str(tmp_path / "not_a_job.yaml"), "units": str(tmp_path / "units.yaml")}


_NONSENSE = [
    (["collective", "--fabric", "fat_tree", "--k", "4", "--sizes", "1P"], "--sizes",
     "GiB of memory of a GPU"),
    (["train", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "1000000000"], "--seq-len",
     "lower --seq-len or --micro-batch"),
    (["reliability", "--gpus", "7"], "--gpus", "whole hosts"),
    (["scaling", "--model", "llama3-8b", "--dp", "0,2"], "--dp", "got [0, 2]"),
    (["reliability", "--gpus", "16", "--fabric", "torus"], "--fabric", "'torus'"),
    (["traffic", "--model", "llama3-8b", "--tp", "3"], "--tp", "--allow-cross-host-tp lifts"),
    (["fabric", "hpn7", "--units", "{units}"], "--units", "not valid YAML"),
    (["run", "{not_a_job}"], "jobs[0]", "must be a mapping of keys to values"),
]


@pytest.mark.parametrize(("argv", "field", "says"), _NONSENSE,
                         ids=["sizes-1P", "seq-len-1e9", "partial-host", "scaling-dp",
                              "reliability-fabric", "traffic-tp", "units-yaml", "not-a-job"])
def test_nonsense_is_refused_by_the_name_typed(capsys, bad_files, argv, field, says):
    line = _refused(capsys, [a.format(**bad_files) for a in argv], field)
    assert says in line
    assert "Spec" not in line and "_" not in line.split(":")[1]   # no class or Python name


def test_a_fault_after_the_run_says_it_touched_nothing(tmp_path):
    """Several jobs: the run's end depends on how they share, so the run says afterwards
    that the fault touched nothing (one job alone is refused before the run:
    tests/test_edge_classes.py)."""
    import yaml

    from hpnsim.scenario.runner import run as run_scenario

    data = yaml.safe_load((EXAMPLES / "failure.yaml").read_text())
    job = {**data["jobs"][0], "dp": 4, "global_batch": 32, "iterations": 2}
    data["jobs"] = [{**job, "name": "a"}, {**job, "name": "b"}]
    data["faults"][0]["at"] = "1000s"
    result = run_scenario(data)
    assert result.makespan < 1000
    assert any(n.startswith("faults[0]: at 1000 s, after the run ended") for n in result.notes)


def test_the_cluster_example_shows_what_a_scheduler_changes():
    """examples/cluster.yaml's comment: Crux raises GPU utilization and lengthens the mean
    JCT against no scheduler; Sincronia gives the lowest mean JCT; without a scheduler every
    job is contended."""
    from hpnsim.scenario.cluster import run_cluster
    from hpnsim.scenario.prepare import build_scenario_fabric, scenario_and_lines

    spec, lines = scenario_and_lines(str(EXAMPLES / "cluster.yaml"))
    fabric = build_scenario_fabric(spec, lines)
    by = {name: run_cluster(spec, fabric, scheduler=name).to_dict()
          for name in ("none", "crux", "sincronia")}
    assert by["crux"]["gpu_utilization"] > by["none"]["gpu_utilization"]
    assert by["crux"]["mean_jct"] > by["none"]["mean_jct"]
    assert by["sincronia"]["mean_jct"] < min(by["none"]["mean_jct"], by["crux"]["mean_jct"])
    assert by["none"]["contended_job_share"] == 1.0 > by["crux"]["contended_job_share"]


def test_the_two_jobs_comment_on_routing_holds():
    """examples/two_jobs.yaml: precise removes the slowdown, hpn_dual_plane does not."""
    import yaml

    from hpnsim.scenario.runner import run as run_scenario

    data = yaml.safe_load((EXAMPLES / "two_jobs.yaml").read_text())
    slowdown = {}
    for routing in ("ecmp", "hpn_dual_plane", "precise"):
        result = run_scenario({**data, "routing": routing})
        slowdown[routing] = max(job.slowdown for job in result.jobs)
    assert slowdown["precise"] == pytest.approx(1.0)
    assert slowdown["hpn_dual_plane"] >= slowdown["ecmp"] > 1.0


# --- every reader of a user's YAML file: the same bounds --------------------------------------

def _readers():
    from hpnsim.collectives.nccl.calibration import load_calibration
    from hpnsim.faults.reliability import load_rates
    from hpnsim.scenario.spec import read_scenario
    from hpnsim.sweep.spec import load_sweep
    from hpnsim.workloads import models

    return {"scenario": read_scenario, "sweep": load_sweep, "calibration": load_calibration,
            "rates": load_rates, "model-file": models.load_yaml}


@pytest.mark.parametrize("reader", ["scenario", "sweep", "calibration", "rates", "model-file"])
@pytest.mark.parametrize(("text", "says"), [
    ("seed: 1\nseed: 2\n", "duplicate key (lines 1 and 2)"),
    (_BOMB, "expands to more than 1,000,000 values"),
    ("a: &a [*a]\n", "must not refer to itself"),
], ids=["duplicate", "bomb", "self-reference"])
def test_every_user_yaml_reader_has_the_same_bounds(tmp_path, reader, text, says):
    from hpnsim.errors import InputError

    path = tmp_path / "user.yaml"
    path.write_text(text)
    start = time.perf_counter()
    with pytest.raises(InputError, match=re.escape(says)):
        _readers()[reader](path)
    assert time.perf_counter() - start < 5


# --- every count of a job x a huge value: refused at once, at the job ------------------------

def _count_fields() -> list[str]:
    """The integer fields of a scenario job (read from the model), but ``bucket_params``: a
    bucket larger than the model is one bucket, no more work."""
    import typing

    from hpnsim.scenario.jobs import JobSpec

    out = []
    for name, info in JobSpec.model_fields.items():
        kinds = typing.get_args(info.annotation) or (info.annotation,)
        base = [typing.get_args(k)[0] if typing.get_args(k) else k for k in kinds]
        if int in base and name != "bucket_params":
            out.append(name)
    return out


def test_the_count_fields_are_found():
    assert {"tp", "pp", "dp", "micro_batch", "global_batch", "seq_len",
            "iterations"} <= set(_count_fields())


@pytest.mark.parametrize("name", _count_fields())
def test_every_count_field_refuses_a_huge_value_before_any_work(name):
    from hpnsim.errors import InputError
    from hpnsim.scenario.prepare import prepare
    from hpnsim.scenario.runner import JobsTogether

    data = {"fabric": {"template": "fat_tree", "k": 4},
            "jobs": [{"model": "llama3-8b", "dp": 2, name: 10**12}]}
    start = time.perf_counter()
    with pytest.raises(InputError) as refused:
        JobsTogether(prepare(data)).check_work()
    assert refused.value.field.startswith("jobs[0]")
    assert time.perf_counter() - start < 10


def test_a_failed_write_still_lists_what_it_wrote(tmp_path):
    """--force after an interrupted run removes its files too (and only those)."""
    from hpnsim.cli.outputs import MANIFEST, OutputFolder

    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with OutputFolder(out) as folder:
            (folder / "half.json").write_text("{")
            raise RuntimeError("interrupted")
    assert (out / MANIFEST).read_text() == "half.json\n"
    (out / "mine.txt").write_text("the user's")
    with OutputFolder(out, force=True) as folder:
        assert sorted(p.name for p in folder.iterdir()) == ["mine.txt"]
