"""Scenario files: validation by YAML path and line, before anything is simulated; a fuzz
test of malformed scenarios through the command line."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hpnsim.cli.main import run as cli
from hpnsim.errors import InputError
from hpnsim.scenario.spec import load_scenario, parse_scenario

GOOD = textwrap.dedent("""\
    name: t
    fabric:
      template: hpn7
      segments: 1
      hosts_per_segment: 4
      backup_hosts: 0
    routing: ecmp
    seed: 3
    jobs:
      - name: a
        model: llama3-8b
        tp: 8
        dp: 2
        global_batch: 4
      - name: b
        model: llama3-8b
        tp: 8
        dp: 2
        global_batch: 4
        arrival: 1.5ms
    """)


def _write(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _cli(capsys, *argv):
    with pytest.raises(SystemExit) as done:
        cli(list(argv))
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def test_a_good_scenario_parses_units_and_defaults(tmp_path):
    s = load_scenario(_write(tmp_path, GOOD))
    assert s.jobs[1].arrival == pytest.approx(1.5e-3)
    assert s.jobs[0].iterations == 1 and s.jobs[0].pp == 1 and s.seed == 3
    assert s.fabric.options() == {"segments": 1, "hosts_per_segment": 4, "backup_hosts": 0}


@pytest.mark.parametrize(("old", "new", "message"), [
    ("    tp: 8\n    dp: 2\n    global_batch: 4\n    arrival",
     "    tp: 3\n    dp: 2\n    global_batch: 4\n    arrival",
     "error: jobs[1].tp: must divide the GPUs per host (8), got 3 (line 17)"),
    ("arrival: 1.5ms", "arrival: -2s",
     "error: jobs[1].arrival: must be finite and >= 0, got '-2s' (line 20)"),
    ("arrival: 1.5ms", "arrival: 3 parsecs",
     "error: jobs[1].arrival: cannot parse time '3 parsecs'"),
    ("    tp: 8\n    dp: 2\n    global_batch: 4\n  - name: b",
     "    tp: 0\n    dp: 2\n    global_batch: 4\n  - name: b",
     "error: jobs[0].tp: Input should be greater than or equal to 1, got 0 (line 12)"),
    ("seed: 3", "seed: -1", "error: seed: Input should be greater than or equal to 0, got -1 "
                            "(line 8)"),
    ("routing: ecmp", "routing: magic", "error: routing: Input should be 'ecmp', "),
    ("    global_batch: 4\n  - name: b", "    global_batch: 4\n    colour: red\n  - name: b",
     "error: jobs[0].colour: unknown key (line 15)"),
    ("  segments: 1", "  segments: 1\n  sgements: 2",
     "error: fabric.sgements: not a parameter of hpn7; allowed:"),
    ("  template: hpn7", "  template: hpn8", "error: fabric.template: unknown fabric 'hpn8'"),
    ("  - name: b\n    model: llama3-8b", "  - name: a\n    model: llama3-8b",
     "error: jobs[1].name: 'a' is used by another job"),
    ("    model: llama3-8b\n    tp: 8\n    dp: 2\n    global_batch: 4\n  - name: b",
     "    tp: 8\n    dp: 2\n    global_batch: 4\n  - name: b",
     "error: jobs[0]: give model (a catalog name) or workload (an AICB file), exactly one "
     "(line 10)"),
    ("  hosts_per_segment: 4", "  hosts_per_segment: 1",
     "error: jobs[0].tp: the job needs 16 GPUs; the fabric has 8"),
])
def test_errors_name_the_yaml_path_and_line(tmp_path, capsys, old, new, message):
    text = GOOD.replace(old, new, 1)
    assert text != GOOD
    code, out, err = _cli(capsys, "run", str(_write(tmp_path, text)))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(message), err


def test_a_missing_file_and_a_non_utf8_file_are_one_line(tmp_path, capsys):
    code, _, err = _cli(capsys, "run", str(tmp_path / "none.yaml"))
    assert code == 2 and err.startswith("error: scenario: ")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"jobs:\n  - model: \xff\n")
    code, _, err = _cli(capsys, "run", str(bad))
    assert code == 2 and "not UTF-8" in err and "line 2" in err


def test_broken_yaml_names_the_line(tmp_path, capsys):
    code, _, err = _cli(capsys, "run", str(_write(tmp_path, "jobs: [1, 2\nseed: 1\n")))
    assert code == 2 and err.startswith("error: scenario: not valid YAML") and "(line" in err


def test_placement_errors_are_caught_before_running():
    with pytest.raises(InputError, match=r"^jobs\[1\]\.gpus: GPU 8 is already given"):
        from hpnsim.scenario.runner import run

        run({"fabric": {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0},
             "jobs": [{"model": "llama3-8b", "tp": 8, "hosts": [1]},
                      {"model": "llama3-8b", "tp": 8, "gpus": list(range(8, 16))}]})
    with pytest.raises(InputError, match=r"^jobs\[0\]\.hosts: host 9 does not exist"):
        from hpnsim.scenario.runner import run

        run({"fabric": {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0},
             "jobs": [{"model": "llama3-8b", "tp": 8, "hosts": [9]}]})


def test_a_workload_fixes_the_parallelism():
    with pytest.raises(InputError, match=r"^jobs\[0\]\.tp: fixed by the workload file"):
        parse_scenario({"jobs": [{"workload": "w.txt", "tp": 4}]})



def test_a_workload_names_a_fixed_key_as_written():
    for key in ("vpp", "virtual_stages"):
        with pytest.raises(InputError, match=rf"^jobs\[0\]\.{key}: fixed by the workload file"):
            parse_scenario({"jobs": [{"workload": "w.txt", key: 2}]})


def test_renamed_job_keys_take_the_train_job_names_and_accept_the_old_ones():
    old = parse_scenario({"jobs": [{"model": "llama3-8b", "pp": 2, "vpp": 2,
                                    "schedule": "interleaved", "prefetch": False}]}).jobs[0]
    new = parse_scenario({"jobs": [{"model": "llama3-8b", "pp": 2, "virtual_stages": 2,
                                    "schedule": "interleaved", "fsdp_prefetch": False}]}).jobs[0]
    assert old == new and (new.virtual_stages, new.fsdp_prefetch) == (2, False)
    job = new.train_job()
    assert (job.virtual_stages, job.fsdp_prefetch) == (2, False)
    # a run echoes the scenario under the keys it always had
    dumped = new.model_dump(mode="json", by_alias=True)
    assert dumped["vpp"] == 2 and dumped["prefetch"] is False
    with pytest.raises(InputError, match=r"^jobs\[0\]\.vpp: Input should be greater"):
        parse_scenario({"jobs": [{"model": "llama3-8b", "vpp": 0}]})
    # ``hpnsim schema`` lists the old keys too, deprecated, so editors accept them
    from hpnsim.scenario.jobs import JobSpec

    properties = JobSpec.model_json_schema()["properties"]
    assert properties["vpp"]["deprecated"] is True and properties["prefetch"]["type"] == "boolean"


def test_prepare_returns_everything_it_read_and_stores_nothing_on_the_scenario():
    import dataclasses

    from hpnsim.scenario.prepare import prepare

    data = {"fabric": {"template": "fat_tree", "k": 4, "units": {"gpu": {"cost_usd": 1}}},
            "jobs": [{"model": "llama3-8b", "dp": 4, "iterations": 2},
                     {"model": "llama3-8b", "dp": 2, "gpus": [9, 8]}],
            "faults": [{"kind": "link", "target": "gpu1.port0", "at": 0.1, "duration": 1}]}
    p = prepare(data)
    assert [g.tolist() for g in p.placements] == [[0, 1, 2, 3], [9, 8]]
    assert p.gpu_counts == (4, 2) and p.workloads == (None, None) and p.nccl is None
    assert [(f.kind, f.target) for f in p.faults] == [("link", "gpu1.port0")]
    assert p.fabric.meta["units"] == {"gpu": {"cost_usd": 1}}
    assert not any(key.startswith("_") for key in vars(p.scenario))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.fabric = None
    with pytest.raises(ValueError, match="read-only"):
        p.placements[0][0] = 5
    with pytest.raises(TypeError):
        p.fabric.meta["units"] = None


def test_prepare_errors_carry_the_yaml_line(tmp_path):
    from hpnsim.scenario.prepare import prepare
    from hpnsim.scenario.spec import read_scenario

    path = _write(tmp_path, GOOD.replace("  tp: 8\n    dp: 2\n    global_batch: 4\n  "
                                         "  arrival", "  tp: 3\n    dp: 2\n    global_batch: 4\n"
                                                      "    arrival"))
    scenario, lines = read_scenario(path)
    with pytest.raises(InputError, match=r"^jobs\[1\]\.tp: .* \(line 17\)$"):
        prepare(scenario, lines=lines)
    with pytest.raises(InputError, match=r"^jobs\[1\]\.tp: .* \(line 17\)$"):
        prepare(path)


# ---------------------------------------------------------------------------- fuzzing
#: (path into GOOD's dict, a bad value) -- wrong types, negative numbers, bad units
_BAD_VALUES = st.sampled_from([-1, -2.5, "abc", "", [], {}, True, None, "4 lightyears", 1e400,
                               "-3s"])
_PATHS = [("seed",), ("routing",), ("fabric", "template"), ("fabric", "segments"),
          ("jobs", 0, "tp"), ("jobs", 0, "dp"), ("jobs", 1, "arrival"), ("jobs", 1, "iterations"),
          ("jobs", 0, "model"), ("jobs", 0, "zero"), ("jobs", 1, "global_batch"),
          ("jobs", 0, "gpus"), ("jobs", 1, "mfu"), ("compare_alone",), ("jobs",), ("fabric",)]


def _set(data, path, value):
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _dotted(path):
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


#: (path, value) pairs of the lists above that are valid after all
_VALID = [(("compare_alone",), True), (("compare_alone",), None), (("jobs", 1, "mfu"), None),
          (("jobs", 1, "global_batch"), None), (("jobs", 0, "gpus"), None), (("fabric",), {}),
          # hpn7 derives its segments from the chip when unset (fabrics/hpn_sizing.py)
          (("fabric", "segments"), None)]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_malformed_scenarios_exit_2_naming_the_path(tmp_path, capsys, data):
    scenario = yaml.safe_load(GOOD)
    kind = data.draw(st.sampled_from(["value", "unknown", "missing"]))
    if kind == "value":
        path = data.draw(st.sampled_from(_PATHS))
        value = data.draw(_BAD_VALUES)
        assume(not any(path == p and value == v and type(value) is type(v)
                       for p, v in _VALID))
        _set(scenario, path, value)
    elif kind == "unknown":
        where = data.draw(st.sampled_from([(), ("jobs", 0), ("jobs", 1), ("jobs", 0, "zzz")]))
        node = scenario
        for key in where[:2]:
            node = node[key]
        node["zzz_unknown"] = 1
        path = (*where[:2], "zzz_unknown")
    else:
        del scenario["jobs"]
        path = ("jobs",)
    file = tmp_path / "fuzz.yaml"
    file.write_text(yaml.safe_dump(scenario))
    code, out, err = _cli(capsys, "run", str(file))
    assert code == 2 and out == "", (scenario, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    # the message names the bad path, or the job / section holding it
    named = [_dotted(path[:n]) for n in range(len(path), 0, -1)]
    assert any(lines[0].startswith(f"error: {p}: ") for p in named), (named, lines[0])
