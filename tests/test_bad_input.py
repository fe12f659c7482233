"""Bad input on the command line: one line ``error: FIELD: ...`` on stderr, exit code 2, no
traceback, and refused before any simulation runs (nothing is computed, nothing written)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from hpnsim.cli.main import run
from hpnsim.workloads.aicb import example_path

#: the functions that do a command's long work; the refusals below must come before any of
#: them (``traffic`` is closed-form: its checks sit in the calculator itself)
_WORK = ("hpnsim.training.simulate_iteration",
         "hpnsim.training.simulate.simulate_aicb",
         "hpnsim.collectives.run_collective",
         "hpnsim.demo.pipeline.run_demo",
         "hpnsim.fabrics.build_fabric",
         "hpnsim.cli.collective.build_fabric")


@pytest.fixture
def no_work(monkeypatch, tmp_path):
    """Run in an empty folder with every simulation (and fabric build for jobs) replaced by
    a tripwire; returns the folder."""

    def tripwire(*args, **kwargs):
        raise AssertionError("the command started its work before refusing the input")

    for target in _WORK:
        module_name, name = target.rsplit(".", 1)
        try:
            module = importlib.import_module(module_name)
        except ImportError:   # moved by a refactor: the other tripwires still stand
            continue
        if hasattr(module, name):
            monkeypatch.setattr(module, name, tripwire)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def files(tmp_path_factory):
    """A file that is not UTF-8, a path that does not exist and a folder."""
    root = tmp_path_factory.mktemp("inputs")
    binary = root / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00\x81 not text\n")
    return {"BINARY": str(binary), "MISSING": str(root / "missing.txt"), "FOLDER": str(root)}


def _refused(capsys, argv, field):
    """Run the CLI; assert exit 2 and exactly one ``error: field: ...`` line; return it."""
    with pytest.raises(SystemExit) as done:
        run([str(a) for a in argv])
    out = capsys.readouterr()
    assert done.value.code == 2, (out.out, out.err)
    assert "Traceback" not in out.err and "Traceback" not in out.out
    assert out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err
    assert lines[0].startswith(f"error: {field}: "), lines[0]
    assert len(lines[0]) > len(f"error: {field}: ") + 5   # says what is allowed
    return lines[0]


# --- files: not UTF-8, missing, a folder --------------------------------------------------

_FILE_COMMANDS = [
    (["aicb", "{}"], "workload-file"),
    (["train", "--workload", "{}"], "--workload"),
    (["traffic", "--model", "llama3-8b", "--model-file", "{}"], "--model-file"),
    (["fabric", "lingjun", "--path", "{}"], "--path"),
]


@pytest.mark.parametrize("kind", ["BINARY", "MISSING", "FOLDER"])
@pytest.mark.parametrize(("argv", "field"), _FILE_COMMANDS,
                         ids=[a[0] + ("-" + a[1] if a[1].startswith("--") else "")
                              for a, _ in _FILE_COMMANDS])
def test_unreadable_files(capsys, no_work, files, argv, field, kind):
    line = _refused(capsys, [a.format(files[kind]) for a in argv], field)
    assert files[kind] in line
    if kind == "BINARY":
        assert "not UTF-8" in line and "0xff" in line


def test_non_utf8_file_in_a_subprocess(files):
    done = subprocess.run([sys.executable, "-m", "hpnsim.cli.main", "aicb", files["BINARY"]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: workload-file: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


# --- outputs checked before the run ---------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2"],
    ["scaling", "--model", "llama3-8b", "--dp", "1,2", "--fabrics", "hpn7"],
], ids=["train", "scaling"])
def test_plot_into_a_missing_folder(capsys, no_work, argv):
    line = _refused(capsys, [*argv, "--plot", "no/such/folder/out.png"], "--plot")
    assert "no/such/folder" in line and "does not exist" in line
    assert list(no_work.iterdir()) == []


def test_plot_onto_a_folder(capsys, no_work):
    (no_work / "figs").mkdir()
    line = _refused(capsys, ["train", "--model", "llama3-8b", "--plot", "figs"], "--plot")
    assert "is a folder" in line


def test_demo_out_is_an_existing_file(capsys, no_work):
    target = no_work / "results"
    target.write_text("keep me")
    line = _refused(capsys, ["demo", "--quick", "--out", target], "--out")
    assert "is a file" in line
    assert target.read_text() == "keep me" and sorted(no_work.iterdir()) == [target]


# --- seeds ----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", ["-1", "99999999999999999999"])
@pytest.mark.parametrize("argv", [
    ["collective", "--gpus", "16", "--sizes", "1M"],
    ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2"],
    ["demo", "--quick"],
], ids=["collective", "train", "demo"])
def test_seed_out_of_range(capsys, no_work, argv, seed):
    line = _refused(capsys, [*argv, "--seed", seed], "--seed")
    assert line.endswith(f"got {seed}") and "0..2^63-1" in line
    assert list(no_work.iterdir()) == []


def test_seed_out_of_range_in_a_subprocess():
    done = subprocess.run([sys.executable, "-m", "hpnsim.cli.main", "collective", "--seed", "-1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: --seed: ") and done.stderr.count("\n") == 1


# --- values that were silently replaced -----------------------------------------------------

@pytest.mark.parametrize(("argv", "field", "echo"), [
    (["traffic", "--model", "llama3-8b", "--tp", "0"], "--tp", "got 0"),
    (["traffic", "--model", "llama3-8b", "--pp", "0"], "--pp", "got 0"),
    (["traffic", "--model", "llama3-8b", "--dp", "0"], "--dp", "got 0"),
    (["traffic", "--model", "llama3-8b", "--article", "--tp", "0"], "--tp", "got 0"),
    (["traffic", "--model", "llama3-8b", "--dataset-tokens", "-5"], "--dataset-tokens", "-5"),
    (["traffic", "--model", "llama3-8b", "--algorithm", "tree"], "--algorithm", "'tree'"),
    (["scaling", "--model", "llama3-8b", "--fabrics", ""], "--fabrics", "hpn7"),
    (["scaling", "--model", "llama3-8b", "--fabrics", "hpn7,nope"], "--fabrics", "'nope'"),
    (["scaling", "--model", "llama3-8b", "--micro-batches", "0"], "--micro-batches",
     "got 0"),
], ids=["tp0", "pp0", "dp0", "article-tp0", "dataset-tokens", "algorithm-dp1", "fabrics-empty",
        "fabrics-unknown", "micro-batches0"])
def test_values_no_longer_replaced(capsys, no_work, argv, field, echo):
    assert echo in _refused(capsys, argv, field)


@pytest.mark.parametrize(("flag", "value"), [("--tp", "4"), ("--dp", "1"), ("--gpu", "h100"),
                                             ("--zero", "1")])
def test_workload_file_refuses_the_flags_it_fixes(capsys, no_work, flag, value):
    line = _refused(capsys, ["train", "--workload", example_path(), flag, value], flag)
    assert "--workload" in line and f"drop {flag}" in line


# --- a job larger than the fabric -----------------------------------------------------------

def test_train_job_larger_than_the_default_fabric(capsys, no_work):
    line = _refused(capsys, ["train", "--model", "llama3-70b", "--tp", "8", "--pp", "8",
                             "--dp", "512"], "--dp")     # the flag that made the job large
    assert "32,768" in line and "15,360" in line and "--pods 3" in line and "--gpus 32768" in line


def test_train_job_larger_than_the_sized_fabric(capsys, no_work):
    line = _refused(capsys, ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "512",
                             "--segments", "2"], "--dp")
    assert "4,096" in line and "--segments 2" in line and "2,048" in line


def test_scaling_refuses_before_the_first_point(capsys, no_work):
    line = _refused(capsys, ["scaling", "--model", "llama3-8b", "--tp", "8", "--dp",
                             "1,4096"], "--dp")
    assert "32,768" in line and "--pods" in line


def test_collective_group_larger_than_the_fabric(capsys, no_work):
    line = _refused(capsys, ["collective", "--gpus", "20000"], "--gpus")
    assert "2..15,360" in line and "got 20000" in line and "--pods 2" in line


def test_sizing_options_that_grow_the_fabric_say_so():
    from hpnsim.workloads.sizing import check_fabric_for_job

    notes = []
    assert check_fabric_for_job("hpn7", 20000, {"pods": "2"}, notes.append) == {"pods": "2"}
    assert notes == ["fabric: hpn7 with --pods 2 holds 30,720 GPUs (without sizing options: "
                     "up to 15,360); the job uses 20,000"]
    check_fabric_for_job("hpn7", 2048, {"segments": "2"}, notes.append)   # not grown: quiet
    assert len(notes) == 1


# --- messages that named the wrong field or printed internals -------------------------------

@pytest.mark.parametrize(("argv", "field", "says"), [
    (["traffic", "--model", "llama3-8b", "--gpus-per-host", "0"], "--gpus-per-host", "got 0"),
    (["fabric", "hpn7", "--gpus", "100000000"], "--gpus", "must be 1..1,966,080 for hpn7"),
    (["fabric", "rail_only", "--gpus", "15360"], "--gpus", "must be 1..8,192 for rail_only"),
    (["fabric", "hpn7", "--port-speed", "-400G"], "--port-speed", "got '-400G'"),
    (["scaling"], "--model", "required option not given"),
    (["traffic"], "--model", "required option not given"),
    (["aicb"], "path", "required argument not given"),
    (["train", "--model", "llama3-8b", "--megatron-core", "v2.6", "--no-overlap-grad-reduce",
      "--attention", "flash"], "--attention", "Megatron-LM before Megatron-Core lacks it"),
    (["train", "--model", "llama3-8b", "--attention", "sdpa"], "--attention",
     "Input should be 'flash', 'cudnn', 'flash2' or 'unfused'"),
    (["train", "--model", "llama3-8b", "--tp", "2", "--cp", "2", "--attention", "unfused"],
     "--attention", "Megatron's CP runs through fused attention only"),
    (["train", "--model", "llama3-8b", "--gpu-variation", "-0.1"], "--gpu-variation",
     "greater than or equal to 0"),
], ids=["gpus-per-host", "hpn7-gpus", "rail-only-gpus", "port-speed", "scaling-model",
        "traffic-model", "aicb-file", "flash-before-megatron-had-it", "attention-name",
        "unfused-with-cp", "gpu-variation"])
def test_messages_name_the_field_typed(capsys, no_work, argv, field, says):
    assert says in _refused(capsys, argv, field)


def test_python_api_callers_get_the_same_checks(tmp_path):
    from hpnsim.errors import InputError
    from hpnsim.fabrics import build_fabric
    from hpnsim.training.scaling import scaling_linearity
    from hpnsim.workloads.layout import Layout, check_layout
    from hpnsim.workloads.models import load_yaml

    with pytest.raises(InputError, match="^gpus_per_host: "):
        check_layout(Layout(), "llama3-8b", gpus_per_host=0)
    with pytest.raises(InputError, match="^gpus: must be 1..1,966,080 for hpn7"):
        build_fabric("hpn7", {"gpus": 10**8})
    with pytest.raises(InputError, match="^micro_batches: "):
        scaling_linearity("llama3-8b", tp=8, pp=1, dps=[1], micro_batches=0)
    with pytest.raises(InputError, match="^seed: "):
        scaling_linearity("llama3-8b", tp=8, pp=1, dps=[1], seed=-1)
    binary = tmp_path / "models.yaml"
    binary.write_bytes(b"name: \x80\x81\n")
    with pytest.raises(InputError, match="^model-file: .* is not UTF-8 text .* line 1"):
        load_yaml(binary)
