"""``hs.run(scenario)``: several jobs on one fabric in one simulation, arrivals, iterations,
results written atomically, and ``hpnsim run`` / ``hpnsim schema``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hpnsim.cli.main import run as cli
from hpnsim.scenario.runner import run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: two segments of two hosts; one 100G uplink per ToR, so the ToR uplink is the only
#: bottleneck of a DP ring between the segments (access links are 200G, PCIe ~64 GB/s)
SMALL = {"template": "hpn7", "segments": 2, "hosts_per_segment": 2, "backup_hosts": 0,
         "tor_uplinks": 1, "aggs_per_plane": 1, "uplink_speed": "100G"}
UPLINK = 100e9 / 8
#: one gradient bucket (more parameters than the model has): the DP all-reduce starts after
#: the whole backward pass and is entirely exposed
DP_JOB = {"model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 2, "bucket_params": 10**11}


def _cli(capsys, *argv):
    with pytest.raises(SystemExit) as done:
        cli(list(argv))
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def test_two_jobs_sharing_the_only_bottleneck_each_get_half_of_it():
    """Jobs a (hosts 0, 2) and b (hosts 1, 3) each run a DP ring between segment 0 and 1 on
    every rail. Under HPN dual-plane routing each NIC sends one flow per port, so on every
    rail and plane the ToR's single uplink carries one flow of each job. Alone a job's flow
    gets the whole uplink; together each gets half, so its DP all-reduce (fully exposed, one
    bucket) takes twice as long, and the iteration grows by exactly the time its uplink bytes
    take alone: B / C, with B the bytes one GPU sends on one port = (DP bytes of the job) /
    16 GPUs / 2 ports."""
    scenario = {"fabric": SMALL, "routing": "hpn_dual_plane",
                "jobs": [{**DP_JOB, "name": "a", "hosts": [0, 2]},
                         {**DP_JOB, "name": "b", "hosts": [1, 3]}]}
    result = run(scenario)
    for job in result.jobs:
        per_port = job.iterations[0].comm_bytes["dp"] / 16 / 2
        extra = job.iteration_time - job.alone_iteration_time
        # NCCL payload on the uplink: RoCEv2 framing at MTU 4096, 82 bytes a packet
        assert extra == pytest.approx(per_port / (UPLINK * 4096 / 4178), rel=1e-9)
        assert job.slowdown > 1.2
    a, b = result.jobs
    assert a.gpus[:9] == [0, 1, 2, 3, 4, 5, 6, 7, 16] and b.gpus[8] == 24


def test_jobs_on_disjoint_uplinks_do_not_slow_each_other():
    """The same two jobs, each inside one segment: their rings never leave their ToRs."""
    scenario = {"fabric": SMALL, "routing": "hpn_dual_plane",
                "jobs": [{**DP_JOB, "name": "a", "hosts": [0, 1]},
                         {**DP_JOB, "name": "b", "hosts": [2, 3]}]}
    for job in run(scenario).jobs:
        assert job.slowdown == pytest.approx(1.0, rel=1e-12)


def test_arrival_and_iterations_shift_and_chain_in_time():
    """A job alone arriving at 5 s finishes at 5 s + its iterations; each iteration of a job
    alone takes the same time (nothing else changes between them)."""
    fabric = {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0}
    job = {"model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 4}
    at_zero = run({"fabric": fabric, "jobs": [job]}).jobs[0]
    later = run({"fabric": fabric, "jobs": [{**job, "arrival": "5s", "iterations": 3}]}).jobs[0]
    t = at_zero.iteration_time
    assert [it.iteration_time for it in later.iterations] == pytest.approx([t] * 3, rel=1e-12)
    assert later.finish == pytest.approx(5.0 + 3 * t, rel=1e-12)
    assert later.arrival == 5.0 and at_zero.finish == pytest.approx(t, rel=1e-12)


def test_packed_allocation_gives_whole_free_hosts_in_job_order():
    scenario = {"fabric": {"segments": 1, "hosts_per_segment": 4, "backup_hosts": 0},
                "compare_alone": False,
                "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 1, "hosts": [1]},
                         {"model": "llama3-8b", "tp": 4, "dp": 1},
                         {"model": "llama3-8b", "tp": 8, "dp": 2}]}
    jobs = run(scenario).jobs
    assert jobs[0].gpus == list(range(8, 16))
    assert jobs[1].gpus == [0, 1, 2, 3]            # host 0; its other 4 GPUs stay idle
    assert jobs[2].gpus == list(range(16, 32))     # hosts 2 and 3


def test_two_jobs_example_slows_both_jobs(capsys, tmp_path):
    code, out, err = _cli(capsys, "run", str(EXAMPLES / "two_jobs.yaml"), "--json",
                          "--out", str(tmp_path / "res"))
    assert code in (0, None), err
    data = json.loads(out)
    assert [j["job"] for j in data["jobs"]] == ["job-a", "job-b"]
    for job in data["jobs"]:
        assert job["iteration_time"] > job["alone_iteration_time"]
    saved = json.loads((tmp_path / "res" / "results.json").read_text())
    assert saved["makespan"] == data["makespan"]
    with open(tmp_path / "res" / "jobs.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["job"] for r in rows] == ["job-a", "job-b"]
    assert float(rows[0]["slowdown"]) == pytest.approx(data["jobs"][0]["slowdown"])
    assert not list((tmp_path / "res").glob(".*.tmp"))   # no temporary file left behind


def test_one_job_example_runs_its_two_iterations(capsys):
    code, out, err = _cli(capsys, "run", str(EXAMPLES / "one_job.yaml"), "--json")
    assert code in (0, None), err
    job = json.loads(out)["jobs"][0]
    assert job["iterations"] == 2 and job["alone_iteration_time"] is None
    times = [it["iteration_time"] for it in job["per_iteration"]]
    assert job["finish"] == pytest.approx(sum(times), rel=1e-12)


def test_schema_lists_the_scenario_keys(capsys):
    code, out, _ = _cli(capsys, "schema")
    assert code in (0, None)
    schema = json.loads(out)
    assert {"fabric", "jobs", "routing", "seed"} <= set(schema["properties"])
    job = schema["$defs"]["JobSpec"]["properties"]
    assert {"model", "workload", "tp", "pp", "dp", "gpus", "hosts", "arrival",
            "iterations"} <= set(job)


def test_run_refuses_out_that_is_a_file(capsys, tmp_path):
    target = tmp_path / "taken"
    target.write_text("x")
    code, out, err = _cli(capsys, "run", str(EXAMPLES / "one_job.yaml"), "--out", str(target))
    assert code == 2 and err.startswith("error: --out: ") and len(err.splitlines()) == 1


def test_an_aicb_workload_runs_beside_a_model_job_and_chains_its_iterations():
    """AICB workload jobs compile through the same training program as model jobs: on GPUs
    that share no network link with the other job, each of its iterations takes exactly the
    time of the workload simulated alone, and its iterations chain from its arrival."""
    from hpnsim.fabrics import hpn7
    from hpnsim.training import simulate_aicb
    from hpnsim.workloads.aicb import example_path, load_aicb

    workload = load_aicb(example_path())
    hosts = -(-workload.to_layout().n_gpus // 8)
    fabric = {"segments": 1, "hosts_per_segment": hosts + 1, "backup_hosts": 0}
    alone = simulate_aicb(workload, hpn7(**fabric)).iteration_time
    result = run({"fabric": fabric, "compare_alone": False,
                  "jobs": [{"name": "w", "workload": str(example_path()), "iterations": 2,
                            "arrival": "1s"},
                           {"name": "m", "model": "llama3-8b", "tp": 8, "global_batch": 1}]})
    w = result.job("w")
    assert [it.iteration_time for it in w.iterations] == pytest.approx([alone] * 2, rel=1e-12)
    assert w.finish == pytest.approx(1.0 + 2 * alone, rel=1e-12)
    assert w.model == example_path().name


def test_faults_refuse_workload_jobs():
    from hpnsim.errors import InputError
    from hpnsim.workloads.aicb import example_path

    with pytest.raises(InputError, match=r"^jobs\[0\]\.workload: runs through faults take"):
        run({"fabric": {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0},
             "faults": [{"kind": "link", "target": "gpu0.port0", "at": "1s",
                         "duration": "1s"}],
             "jobs": [{"workload": str(example_path())}]})
