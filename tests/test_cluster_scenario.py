"""Cluster scenarios and ``hpnsim cluster``: the ``cluster:`` section, bad traces refused by
YAML path in one line (exit 2), jobs that queue, and every scheduler on one trace."""

from __future__ import annotations

import json

import pytest
import yaml

from hpnsim.cli.main import run as cli
from hpnsim.errors import InputError
from hpnsim.fabrics import fat_tree
from hpnsim.scenario.cluster import run_cluster
from hpnsim.scenario.prepare import build_scenario_fabric
from hpnsim.scenario.spec import check_against_fabric, parse_scenario
from hpnsim.sched.names import SCHEDULERS

# a k=4 fat-tree with one GPU per host: 16 GPUs; a 12-GPU and an 8-GPU job cannot run together
TRACE = """\
fabric: {template: fat_tree, k: 4, gpus_per_host: 1}
jobs:
  - {name: a, model: bert-large, dp: 12, zero: 1, iterations: 3}
  - {name: b, model: bert-large, dp: 8, zero: 1, iterations: 3, arrival: 0.01}
cluster:
  scheduler: crux
  K: 2
"""


def _cli(argv, capsys):
    with pytest.raises(SystemExit) as end:
        cli(argv)
    out = capsys.readouterr()
    return end.value.code, out.out, out.err


def test_probe_budget_zero_probes_every_component_phase_level():
    fabric = fat_tree(4, gpus_per_host=1)
    trace = TRACE.replace("dp: 12", "dp: 8")        # both jobs run at once and share links
    budget = parse_scenario(yaml.safe_load(trace.replace("  K: 2", "  K: 2\n  probe_budget: 0")))
    default = run_cluster(parse_scenario(yaml.safe_load(trace)), fabric)
    phase = run_cluster(budget, fabric)
    assert default.phase_probes == 0 and default.probes > 0
    assert phase.phase_probes == phase.probes == default.probes


@pytest.mark.parametrize("old, new, field", [
    ("  K: 2", "  K: 0", "cluster.K"),
    ("scheduler: crux", "scheduler: fifo", "cluster.scheduler"),
    ("arrival: 0.01", "arrival: -1", "jobs[1].arrival"),
    ("dp: 12", "dp: 32", "jobs[0].dp"),
    ("  K: 2", "  K: 2\n  tolerance: 2", "cluster.tolerance"),
    ("  K: 2", "  K: 2\n  probe_budget: -1", "cluster.probe_budget"),
])
def test_bad_trace_exits_2_naming_the_field(tmp_path, capsys, old, new, field):
    path = tmp_path / "bad.yaml"
    assert old in TRACE
    path.write_text(TRACE.replace(old, new))
    code, out, err = _cli(["cluster", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {field}: ")
    assert "(line " in err and "Traceback" not in err


def test_cli_flags_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text(TRACE)
    for argv, field in ((["--scheduler", "fifo"], "--scheduler"),
                        (["--allocator", "best"], "--allocator"),
                        (["--compare", "--scheduler", "crux"], "--compare")):
        code, _, err = _cli(["cluster", str(path), *argv], capsys)
        assert code == 2 and err.startswith(f"error: {field}: ") and err.count("\n") == 1
    code, _, err = _cli(["cluster"], capsys)
    assert code == 2 and err.startswith("error: scenario: ")


def test_jobs_queue_only_with_a_cluster_section():
    data = {"fabric": {"template": "fat_tree", "k": 4, "gpus_per_host": 1},
            "jobs": [{"model": "bert-large", "dp": 12}, {"model": "bert-large", "dp": 8}]}
    fabric = fat_tree(4, gpus_per_host=1)
    with pytest.raises(InputError, match="need 20 GPUs together"):
        check_against_fabric(parse_scenario(data), fabric)
    check_against_fabric(parse_scenario({**data, "cluster": {}}), fabric)   # they queue
    # prepared, a trace keeps its jobs unplaced: its allocator places them as they arrive
    from hpnsim.scenario.prepare import prepare

    prepared = prepare({**data, "cluster": {}})
    assert prepared.placements == () and prepared.gpu_counts == (12, 8)
    # ... and `hpnsim run` points a cluster trace to `hpnsim cluster`
    from hpnsim.scenario.runner import run

    with pytest.raises(InputError) as err:
        run({**data, "cluster": {}})
    assert err.value.field == "cluster"


def test_a_queued_job_starts_when_the_first_leaves():
    s = parse_scenario({"fabric": {"template": "fat_tree", "k": 4, "gpus_per_host": 1},
                        "jobs": [{"name": "a", "model": "bert-large", "dp": 12, "zero": 1,
                                  "iterations": 3},
                                 {"name": "b", "model": "bert-large", "dp": 8, "zero": 1,
                                  "iterations": 2, "arrival": 0.01}],
                        "cluster": {"exact": True}})
    r = run_cluster(s, build_scenario_fabric(s))
    a, b = r.jobs
    # 12 + 8 > 16 GPUs: b waits for a; neither shares the fabric with the other, so each
    # runs at its alone iteration time
    assert a.finish == pytest.approx(3 * a.alone_iteration_time, rel=1e-9)
    assert b.start == pytest.approx(a.finish, rel=1e-12)
    assert b.wait == pytest.approx(a.finish - 0.01, rel=1e-12)
    assert b.finish == pytest.approx(b.start + 2 * b.alone_iteration_time, rel=1e-9)
    # utilization: computation (GPUs x compute per iteration x iterations) over 16 x makespan
    work = a.work * 3 + b.work * 2
    assert r.gpu_utilization == pytest.approx(work / (16 * b.finish), rel=1e-9)


def test_compare_lists_every_scheduler(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text(TRACE)
    code, out, err = _cli(["cluster", str(path), "--compare", "--json",
                           "--plot", str(tmp_path / "u.png"), "--out", str(tmp_path / "o")],
                          capsys)
    assert code in (0, None), err
    runs = json.loads(out)["schedulers"]
    assert [r["scheduler"] for r in runs] == list(SCHEDULERS)
    # the two jobs never run together (they queue), so no scheduler can change anything:
    # every one gives the utilization of the jobs run back to back
    first = runs[0]
    a, b = first["jobs"]
    assert b["start"] == pytest.approx(a["finish"])
    for r in runs:
        assert r["gpu_utilization"] == pytest.approx(first["gpu_utilization"], rel=1e-9)
        assert r["mean_jct"] == pytest.approx((a["jct"] + b["jct"]) / 2, rel=1e-9)
    assert (tmp_path / "u.png").stat().st_size > 0
    assert (tmp_path / "o" / "cluster_crux.json").exists()
    assert (tmp_path / "o" / "utilization.png").exists()
