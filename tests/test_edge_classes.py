"""The bad-input classes of issue 28, each one table (as tests/test_edge.py does): a fault or
window outside the run refused before it, naming the run's end or the first arrival; every
duration and timeout field refusing a negative; no note before an error; every error naming
a flag the command has; oversized work named by the flag that made it large; file errors
naming a real line or none. And the fabric's GPU reaching NCCL's parameters."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest
import typer

from hpnsim.cli.main import app, run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _cli(capsys, argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        run([str(a) for a in argv])
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def _refused(capsys, argv) -> str:
    """Exit 2, nothing on stdout, exactly one ``error: ...`` line on stderr; returns it."""
    code, out, err = _cli(capsys, argv)
    assert code == 2, (out, err)
    assert out == "" and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def files(tmp_path):
    late = tmp_path / "late.yaml"
    late.write_text((EXAMPLES / "failure.yaml").read_text()
                    .replace("iterations: 12", "iterations: 2").replace("at: 2s", "at: 2000s"))
    early = tmp_path / "early.yaml"
    early.write_text(textwrap.dedent("""\
        fabric: {template: hpn7, segments: 1, hosts_per_segment: 2, backup_hosts: 0}
        jobs:
          - {model: bert-large, dp: 8, global_batch: 32, iterations: 5, arrival: 40min}
        cluster: {horizon: 30min}
        """))
    empty = tmp_path / "empty.log"
    empty.write_text("")
    aicb = tmp_path / "header_only.txt"
    aicb.write_text("MICRO\n")
    big = tmp_path / "big.yaml"
    big.write_text("fabric: {template: hpn7, segments: 1}\njobs:\n"
                   "  - {model: llama3-8b, tp: 8, dp: 4096}\n")
    return {k: str(v) for k, v in {"late": late, "early": early, "empty": empty,
                                    "aicb": aicb, "big": big}.items()}


@pytest.fixture
def no_work(monkeypatch):
    """Every long computation fails the test: a refusal must come before all of them."""
    import hpnsim.faults.runner as faults_runner
    import hpnsim.sched.cluster.driver as driver

    def tripwire(*args, **kwargs):
        raise AssertionError("the work started")

    monkeypatch.setattr(faults_runner, "simulate_with_faults", tripwire)
    monkeypatch.setattr(driver, "simulate_cluster", tripwire)
    import hpnsim.scenario.runner as runner

    monkeypatch.setattr(runner, "simulate_with_faults", tripwire, raising=False)


# --- outside the run: refused before it, with the run's end or the first arrival ----------

_OUTSIDE = [
    (["run", "{late}"], "faults[0].at", r"the run ends by [\d.]+ s.*\(line \d+\)"),
    (["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--iterations", "3",
      "--fault", "link:gpu0.port0@500s+1s"], "--fault", r"the run ends by [\d.]+ s"),
    (["cluster", "--lingjun", "--jobs", "60", "--seed", "1", "--exact", "--horizon", "30min"],
     "--horizon", r"before the first job arrives \(job\w*[-\w]* at 2381.11 s \(39.69 min\)\)"),
    (["cluster", "{early}"], "cluster.horizon", r"first job arrives \(job0 at 2400 s"),
    (["cluster", "--lingjun", "--jobs", "60", "--seed", "1", "--window", "10min,30min"],
     "--window", r"ends at 1800 s \(30 min\), before the first job arrives"),
]


@pytest.mark.parametrize(("argv", "field", "says"), _OUTSIDE,
                         ids=["run-fault-late", "train-fault-late", "cluster-horizon-early",
                              "scenario-horizon-early", "cluster-window-early"])
def test_outside_the_run_is_refused_before_it(capsys, files, no_work, argv, field, says):
    line = _refused(capsys, [a.format(**files) for a in argv])
    assert line.startswith(f"error: {field}: ") and re.search(says, line), line


def test_the_refused_fault_names_the_end_the_run_would_have(files):
    """The end named is the lone job's arrival plus its iterations at its nominal time: the
    same run without the fault ends there."""
    import yaml

    from hpnsim.errors import InputError
    from hpnsim.scenario.runner import run as run_scenario

    with pytest.raises(InputError) as refused:
        run_scenario(files["late"])
    end = float(re.search(r"ends by ([\d.]+) s", refused.value.message).group(1))
    data = yaml.safe_load(Path(files["late"]).read_text())
    data["faults"][0]["at"] = "0.5s"                 # inside: the run goes through it
    data["faults"][0]["duration"] = "1ms"
    healthy = run_scenario({k: v for k, v in data.items() if k not in ("faults", "failover")})
    assert healthy.makespan == pytest.approx(end, rel=1e-3)


# --- every duration and timeout field refuses a negative ----------------------------------

def _packet_number_fields() -> list[str]:
    from hpnsim.packet import PacketParams

    p = PacketParams()
    return [f.name for f in dataclasses.fields(p)
            if isinstance(getattr(p, f.name), int | float)
            and not isinstance(getattr(p, f.name), bool) and f.name != "seed"]


def test_the_packet_fields_are_found():
    assert {"rto_s", "cnp_interval_s", "rate_decrease_interval_s", "rate_ai_bytes_s",
            "buffer_bytes"} <= set(_packet_number_fields())


@pytest.mark.parametrize("name", _packet_number_fields())
def test_every_packet_parameter_refuses_a_negative(name):
    from hpnsim.errors import InputError
    from hpnsim.packet import PacketParams

    with pytest.raises(InputError) as refused:
        PacketParams().replace(**{name: -1.0}).validate()
    assert refused.value.field in (name, "kmin_bytes", "mtu_bytes")


_NEGATIVE = [
    (["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--timeout", "-5s"],
     "--timeout"),
    (["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--fault",
      "link:gpu0.port0@1s+1s", "--timeout", "-5s"], "--timeout"),
    (["reliability", "--gpus", "16", "--detection=-5min"], "--detection"),
    (["reliability", "--gpus", "16", "--restart=-5s"], "--restart"),
    (["reliability", "--gpus", "16", "--checkpoint-write=-1s"], "--checkpoint-write"),
    (["cluster", "--lingjun", "--jobs", "5", "--horizon=-1h"], "--horizon"),
]


@pytest.mark.parametrize(("argv", "flag"), _NEGATIVE,
                         ids=["timeout-alone", "timeout-with-fault", "detection", "restart",
                              "checkpoint-write", "horizon"])
def test_every_duration_flag_refuses_a_negative(capsys, no_work, argv, flag):
    line = _refused(capsys, argv)
    assert line.startswith(f"error: {flag}: ") and re.search(r"must be (finite and |a "
                                                             r"time )?>=? 0", line), line


def test_a_timeout_without_a_fault_is_refused_not_ignored(capsys):
    line = _refused(capsys, ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2",
                             "--timeout", "5s"])
    assert line.startswith("error: --timeout: ") and "--fault" in line


# --- a note never precedes an error; after success it is said -----------------------------

@pytest.fixture
def old_packet_name(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("control_bytes: 64\n")          # cnp_bytes' old name
    return str(path)


_DEPRECATED = [
    (["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--mfu", "0.5", "--pp", "3"],
     "--pp"),
    (["collective", "--fabric", "fat_tree", "--k", "4", "--engine", "packet",
      "--packet-params", "{old}", "--sizes", "1M", "--gpus", "1"], "--gpus"),
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # the scenario's own, not shown
@pytest.mark.parametrize(("argv", "flag"), _DEPRECATED, ids=["train-mfu", "packet-params"])
def test_a_deprecation_note_never_precedes_an_error(capsys, old_packet_name, argv, flag):
    line = _refused(capsys, [a.format(old=old_packet_name) for a in argv])
    assert line.startswith(f"error: {flag}: ")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_packet_parameters_note_follows_the_output(capsys, old_packet_name):
    code, out, err = _cli(capsys, ["collective", "--fabric", "fat_tree", "--k", "4",
                                   "--engine", "packet", "--packet-params", old_packet_name,
                                   "--sizes", "64K", "--gpus", "4", "--json"])
    assert code in (0, None) and out.startswith("[")
    assert err.strip().splitlines() == ["note: packet parameter control_bytes is deprecated: "
                                        "it is now cnp_bytes; the old name goes in the next "
                                        "release"]


def test_the_note_follows_a_command_that_succeeds(capsys):
    code, out, err = _cli(capsys, ["train", "--model", "bert-large", "--dp", "8",
                                   "--global-batch", "32", "--mfu", "0.5", "--json"])
    assert code in (0, None) and out.startswith("{")
    assert err.strip().splitlines() == [
        "note: --mfu is deprecated (it never was MFU): use --compute-efficiency"]


# --- every error names a flag the command has ---------------------------------------------

_NAMED = [
    ["reliability", "--gpus", "16", "--detection=-5min"],
    ["scaling", "--model", "llama3-8b", "--tp", "8", "--dp", "1,4096", "--fabrics", "hpn7"],
    ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "4096"],
    ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--timeout", "5s"],
    ["cluster", "--lingjun", "--jobs", "60", "--seed", "1", "--horizon", "30min"],
    ["collective", "--gpus", "20000"],
]


def _options(command: str) -> set[str]:
    group = typer.main.get_command(app)
    return {o for p in group.commands[command].params for o in p.opts}


@pytest.mark.parametrize("argv", _NAMED, ids=lambda a: "-".join(a[:2]))
def test_every_error_names_a_flag_the_command_has(capsys, no_work, argv):
    line = _refused(capsys, argv)
    named = line.split(": ", 2)[1]
    assert named in _options(argv[0]) or named.lstrip("-").replace("-", "_") in {
        o.lstrip("-").replace("-", "_") for o in _options(argv[0])}, (named, line)


# --- oversized work names the flag or field that made it large ----------------------------

_OVERSIZED = [
    (["train", "--model", "llama3-8b", "--tp", "8", "--dp", "4096"], "--dp"),
    (["train", "--model", "llama3-70b", "--tp", "8", "--pp", "8", "--dp", "512"], "--dp"),
    (["scaling", "--model", "llama3-8b", "--tp", "8", "--dp", "1,4096"], "--dp"),
    (["run", "{big}"], "jobs[0].dp"),
]


@pytest.mark.parametrize(("argv", "field"), _OVERSIZED,
                         ids=["train-dp", "train-3d", "scaling-dp", "run-scenario"])
def test_oversized_work_names_what_made_it_large(capsys, files, argv, field):
    line = _refused(capsys, [a.format(**files) for a in argv])
    assert line.startswith(f"error: {field}: ") and "GPUs" in line, line


# --- file errors name a real line or none -------------------------------------------------

_FILES = [
    (["calibrate", "{empty}", "--fabric", "hpn7", "--segments", "1"], "{empty}"),
    (["aicb", "{empty}"], "{empty}"),
    (["aicb", "{aicb}"], "{aicb}"),
]


@pytest.mark.parametrize(("argv", "source"), _FILES, ids=["nccl-log-empty", "aicb-empty",
                                                          "aicb-header-only"])
def test_file_errors_name_a_real_line_or_none(capsys, files, argv, source):
    line = _refused(capsys, [a.format(**files) for a in argv])
    path = source.format(**files)
    named = re.match(rf"error: {re.escape(path)}( line (\d+))?: ", line)
    assert named, line
    n_lines = len(Path(path).read_text().splitlines())
    assert named.group(2) is None or 1 <= int(named.group(2)) <= n_lines, line
    assert "line 0" not in line


# --- the fabric's hosts' GPU reaches NCCL's parameters -------------------------------------

def test_every_template_declares_its_hosts_gpu_and_builds_its_nvlink():
    """Each template's GPU has a source, and the builder's default NVLink is that GPU's
    (the catalog's sheet figure), so the fabric and its GPU agree without a flag."""
    from hpnsim.fabrics import LinkKind, build_fabric
    from hpnsim.fabrics.hosts import HOST_GPUS
    from hpnsim.fabrics.registry import TEMPLATES
    from hpnsim.workloads.gpus import get_gpu

    assert set(HOST_GPUS) == set(TEMPLATES)
    assert HOST_GPUS["hpn7"].model == HOST_GPUS["dcn_plus"].model == "h800"
    small = {"hpn7": {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0},
             "dcn_plus": {"segments": 1, "hosts_per_segment": 2},
             "rail_optimized": {"segments": 1, "hosts_per_segment": 2},
             "rail_only": {"segments": 1, "hosts_per_segment": 2}, "fat_tree": {"k": 4,
                                                                              "gpus_per_host": 2},
             "lingjun": {}}
    for template, options in small.items():
        host = HOST_GPUS[template]
        assert host.source and get_gpu(host.model)
        f = build_fabric(template, options)
        nvlink = f.link_capacity[f.link_kind == LinkKind.NVLINK]
        assert 2 * float(nvlink.max()) == pytest.approx(get_gpu(host.model).nvlink_bandwidth), \
            template


def test_nvls_is_chosen_on_an_h800_fabric_without_gpu(capsys):
    """hpn7's hosts are H800s (NVLink SHARP in their NVSwitch): a 448-GPU all-reduce of the
    HPN paper's size plans NVLS without --gpu, as with --gpu h800; an A100 says no."""
    args = ["collective", "--fabric", "hpn7", "--segments", "1", "--gpus", "448", "--algo",
            "auto", "--sizes", "1G", "--json"]
    import json

    algos = {}
    for gpu in (None, "h800", "a100"):
        code, out, _ = _cli(capsys, args + ([] if gpu is None else ["--gpu", gpu]))
        assert code in (0, None)
        algos[gpu] = json.loads(out)[0]["algo"]
    assert algos[None] == algos["h800"] and algos[None].startswith("nvls")
    assert not algos["a100"].startswith("nvls")


def test_the_header_names_the_gpu_and_where_it_came_from(capsys):
    base = ["collective", "--fabric", "fat_tree", "--k", "4", "--sizes", "1M"]
    _, out, _ = _cli(capsys, base)
    assert "GPU H800 (NCCL's parameters, NVLink) from the fat_tree hosts (assumed:" in \
        out.splitlines()[0]
    _, out, _ = _cli(capsys, base + ["--gpu", "h100"])
    assert out.splitlines()[0].endswith("GPU H100 (NCCL's parameters, NVLink) from --gpu")


def test_a_scenario_job_without_gpu_runs_on_its_fabrics_hosts():
    from hpnsim.scenario.spec import parse_scenario

    s = parse_scenario({"fabric": {"template": "rail_optimized", "segments": 1},
                        "jobs": [{"model": "llama3-8b", "tp": 8}],
                        "collectives": [{"gpus": 8, "sizes": "1M"}]})
    assert s.jobs[0].gpu == s.collectives[0].gpu == "h100"
    assert s.gpu_line().startswith("GPU: H100, from the rail_optimized hosts (NVIDIA DGX")
    given = parse_scenario({"jobs": [{"model": "llama3-8b", "gpu": "a100"}],
                            "collectives": [{"gpus": 8, "sizes": "1M"}]})
    assert given.collectives[0].gpu == "a100"          # the jobs' GPU, as before
