"""What a network architect reads off the report: the denominators of per-GPU figures, the
throughput drawn during a stall, every message size in the bus-bandwidth figure."""

import pytest

from hpnsim.fabrics.analysis import fabric_report
from hpnsim.fabrics.registry import build_fabric
from hpnsim.report.fabric import built_for_gpus, fabric_rows


def test_per_gpu_cost_divides_by_the_gpus_present_and_says_the_pod_is_part_built():
    report = fabric_report(build_fabric("hpn7", {"gpus": 2048}))
    rows = dict(fabric_rows(report))
    network = report["bom"]["cost_usd"]["network"]
    assert rows["network cost per GPU (÷ GPUs present)"] == f"${network / 2048:,.0f}"
    # 2 of 15 segments of 1,024 GPUs (128 hosts x 8): the Aggs of a 15,360-GPU pod are built
    assert report["switches"]["agg"] == build_fabric("hpn7", {"gpus": 15360}).meta[
        "tiers"]["agg"]["switches"]
    assert built_for_gpus(report) == 15 * 1024
    assert rows["Agg tier built for (a whole pod)"] == "15,360 GPUs"


def test_whole_pods_have_no_part_built_row():
    report = fabric_report(build_fabric("dcn_plus", {"gpus": 2048}))
    assert built_for_gpus(report) is None
    assert "Agg tier built for (a whole pod)" not in dict(fabric_rows(report))


def test_a_stalled_job_is_drawn_at_zero_during_its_stall():
    from hpnsim.demo.parts import failure
    from hpnsim.demo.pipeline import DemoConfig
    from hpnsim.report.faults import throughput_steps

    # the fault lands inside the second iteration (0.201 s each since issue 26's gaps and
    # slowest-GPU term; at 0.2 s it now falls on the first iteration's last kernels)
    config = DemoConfig(failure_iterations=4, failure_at=0.25, failure_duration=0.5)
    single = failure(config, lambda _: None)["designs"][0]
    assert single["dual_tor"] == "single" and not single["restarts"]
    # the NIC's only ToR link is down 0.25..0.75 s: the job is cut off exactly then
    assert single["stalls"] == [{"start": 0.25, "end": 0.75}]
    assert single["worst_samples_per_s"] == 0.0
    [row] = [r for r in single["timeline"] if r["start"] < 0.25 < r["end"]]
    assert row["end"] > 0.75   # the iteration waits out the stall
    xs, ys = throughput_steps(single["timeline"], single["stalls"])
    # by hand: the row's samples over the time it was not stalled, 0 while stalled
    samples = row["samples_per_s"] * (row["end"] - row["start"])
    rate = samples / ((row["end"] - row["start"]) - 0.5)
    i = xs.index(0.25)
    assert xs[i:i + 4] == [0.25, 0.25, 0.75, 0.75]
    assert ys[i:i + 4] == pytest.approx([rate, 0.0, 0.0, rate], rel=1e-12)
    assert xs[i - 1] == row["start"] and xs[i + 4] == row["end"]
    # the average over the stall (what was drawn before) is well above 0
    assert 0.0 < row["samples_per_s"] < rate


def _size_rows():
    # two routings give the same curve (NVLink-bound: routing has no say), two are close at
    # the largest size: the shapes of the quick demo's busbw_by_size rows
    curves = {("hpn7", "ecmp", "h800"): (0.59, 8.51, 53.41),
              ("hpn7", "hpn_dual_plane", "h800"): (0.59, 8.51, 53.41),
              ("dcn_plus", "ecmp", "h800"): (0.59, 8.62, 58.12),
              ("dcn_plus", "ecmp", "h100"): (0.59, 8.65, 59.57)}
    return [{"fabric": f, "routing": r, "host_gpu": g, "size": 2.0 ** (20 + 4 * k),
             "busbw": b[k], "bottleneck_kind": "nvlink" if g == "h800" else "access"}
            for (f, r, g), b in curves.items() for k in range(3)]


def test_busbw_by_size_shows_every_size_every_series_and_apart_labels():
    from hpnsim.report.collective import busbw_by_size_figure
    from hpnsim.report.style import size_label

    rows = _size_rows()
    ax = busbw_by_size_figure(rows, "held").axes[0]
    sizes = sorted({r["size"] for r in rows})
    series = [line for line in ax.lines if line.get_linestyle() != "None"]
    # no series drawn under another: the identical pair is one line, labelled with both
    assert len(series) == 3
    drawn = {tuple(line.get_ydata()) for line in series}
    assert drawn == {(0.59, 8.51, 53.41), (0.59, 8.62, 58.12), (0.59, 8.65, 59.57)}
    assert all(list(line.get_xdata()) == sizes for line in series)
    legend = " ".join(t.get_text() for t in ax.figure.legends[0].get_texts())
    assert "ecmp" in legend and "hpn_dual_plane" in legend and "identical" in legend
    # every size ticked and labelled
    assert [t.get_text() for t in ax.get_xticklabels()] == [size_label(s) for s in sizes]
    # end values 58.1 and 59.6 sit 1.5 GB/s apart: their labels are pushed apart
    heights = sorted(t.xyann[1] for t in ax.texts)
    gap = 0.045 * ax.get_ylim()[1]
    assert all(b - a >= gap - 1e-9 for a, b in zip(heights, heights[1:], strict=False))
    assert sorted(t.get_text() for t in ax.texts) == ["53.4", "58.1", "59.6"]


def test_scheduler_section_says_they_give_the_same_result_and_why():
    from hpnsim.demo.parts import cluster
    from hpnsim.demo.pipeline import DemoConfig
    from hpnsim.report.cluster import cluster_section

    c = cluster(DemoConfig.quick(), lambda _: None)
    none, crux = c["runs"]
    # by hand from the jobs: every job finishes at the same time under both, none slowed
    assert [j["jct"] for j in none["jobs"]] == [j["jct"] for j in crux["jobs"]]
    assert all(j["slowdown"] <= 1.0 + 1e-2 for j in none["jobs"])
    _, _, (_, table) = cluster_section({"cluster": c})
    assert "none and crux give the same result: no job ran more than the tolerance slower " \
        "than alone" in table.caption


def test_scheduler_verdict_names_the_difference():
    from hpnsim.report.cluster import scheduler_verdict

    run = {"scheduler": "none", "makespan": 10.0, "mean_jct": 8.0, "gpu_utilization": 0.5,
           "mean_slowdown": 1.3, "contended_job_share": 0.5}
    crux = {**run, "scheduler": "crux", "mean_jct": 6.0, "makespan": 9.0}
    assert scheduler_verdict([run, crux]).startswith("crux against none: mean JCT 6.000 s vs "
                                                     "8.000 s (-25.0%)")
    assert "the order the scheduler chose changed no job's finish" in scheduler_verdict(
        [run, {**run, "scheduler": "crux"}])
