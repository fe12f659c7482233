"""A run with faults says what they did (issue 28): the fault window, throughput over time,
the time lost and which links and flows moved, in the printed table, the JSON and the HTML
report (examples/failure.yaml); and the report's figures close what they open."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpnsim.scenario.runner import run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "failure.yaml"


@pytest.fixture(scope="module")
def failure():
    data = yaml.safe_load(EXAMPLE.read_text())          # 12 iterations, down 2 s .. 12 s
    healthy = {k: v for k, v in data.items() if k not in ("faults", "failover")}
    return data, run(data), run(healthy)


def test_time_lost_is_the_finish_against_the_healthy_run(failure):
    _, faulted, healthy = failure
    f = faulted.jobs[0].faults
    # one job alone: the healthy run is its iterations at the nominal time
    assert healthy.makespan == pytest.approx(12 * f["nominal_iteration_time"], rel=1e-3)
    assert f["time_lost"] == pytest.approx(faulted.jobs[0].finish - healthy.makespan, rel=1e-3,
                                           abs=1e-6)
    assert f["time_lost"] > 0


def test_the_moves_are_the_failed_port_and_back(failure):
    data, faulted, _ = failure
    f = faulted.jobs[0].faults
    fault, delay = data["faults"][0], 0.3                  # failover.convergence_delay
    at, back = 2.0, 12.0                                   # at 2s, 10s down
    assert f["windows"] == [{"kind": "link", "target": fault["target"], "start": at,
                             "end": back}]
    off, on = f["moves"]
    # routing learns of the failure after its convergence delay; the repair at once
    assert off["time"] == pytest.approx(at + delay) and on["time"] == pytest.approx(back)
    # GPU 17 is host 2, rail 1: its port 0 link is among those left, port 1 among those taken
    assert "pod0/seg0/host2/nic-r1->pod0/seg0/tor-r1-p0[port0]" in off["left"]
    assert all("[port1]" in name for name in off["took"])
    assert set(on["left"]) == set(off["took"]) and set(on["took"]) == set(off["left"])
    assert off["flows"] >= off["transfers"] > 0


def test_the_table_json_and_report_carry_the_faults(failure, tmp_path):
    from rich.console import Console

    from hpnsim.report.canvas import pyplot
    from hpnsim.report.html import write_report
    from hpnsim.report.scenario import print_run, run_sections

    _, faulted, _ = failure
    console = Console(record=True, width=400)
    print_run(faulted, console)
    text = console.export_text()
    f = faulted.jobs[0].faults
    assert "time lost" in text and "job0: fault link gpu17.port0 down from 2 s to 12 s" in text
    assert f"at 2.3 s {f['moves'][0]['transfers']:,} transfers" in text
    assert "throughput through faults" in text                       # the timeline table
    d = faulted.to_dict()
    assert {"windows", "moves", "time_lost", "timeline"} <= set(d["jobs"][0]["faults"])
    sections = {anchor: parts for anchor, _, parts in run_sections(d)}
    figure, table = sections["faults"]
    assert figure.stem == "fault_throughput" and len(figure.fig.axes[0].patches) == 1
    assert table.rows[0][0] == "job0" and "link gpu17.port0 2-12 s" in table.rows[0][1]
    faulted.save(tmp_path)
    write_report(tmp_path, svg=False)
    assert "Faults: throughput through them" in (tmp_path / "index.html").read_text()
    assert pyplot().get_fignums() == []                 # every figure closed what it opened
