"""report figures: what a reader relies on (axes from zero, legends off the data, what is
held fixed and what bounds each bar, a readable Gantt of many micro-batches)."""

from __future__ import annotations

import pytest

from hpnsim.report.collective import busbw_figure
from hpnsim.report.demo import allreduce_subtitle
from hpnsim.report.gantt import gantt_figure
from hpnsim.report.scaling import linearity_figure
from hpnsim.training.scaling import ScalingPoint, ScalingResult


def _legend_off_the_axes(fig) -> None:
    """The figure has a legend, and it overlaps no axes' data area."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert fig.legends, "no legend"
    box = fig.legends[0].get_window_extent(renderer)
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()


ROWS = [  # the demo's shape: HPN rows NVLink-bound, DCN+/ECMP bound by its NIC-ToR links
    {"fabric": "hpn7", "routing": "ecmp", "busbw": 154.6, "bottleneck_kind": "nvlink",
     "bottleneck_utilization": 0.84, "hash_collisions": 1994, "protocol": "ll128"},
    {"fabric": "hpn7", "routing": "hpn_dual_plane", "busbw": 154.6, "bottleneck_kind": "nvlink",
     "bottleneck_utilization": 0.84, "hash_collisions": 0, "protocol": "ll128"},
    {"fabric": "dcn_plus", "routing": "ecmp", "busbw": 154.6, "bottleneck_kind": "access",
     "bottleneck_utilization": 0.84, "hash_collisions": 2054, "protocol": "ll128"},
    {"fabric": "dcn_plus", "routing": "spray", "busbw": 172.8, "bottleneck_kind": "nvlink",
     "bottleneck_utilization": 0.82, "hash_collisions": 0, "protocol": "ll128"},
]
CONFIG = {"allreduce_gpus": 2048, "allreduce_size": 4 * 2**30, "allreduce_algo": "ring",
          "gpu": "h800", "hosts": {t: {"nvlink_bandwidth": 400e9, "nic_bandwidth": 50e9}
                                   for t in ("hpn7", "dcn_plus")}}


def test_busbw_bars_start_at_zero_and_nvlink_bound_bars_are_marked():
    fig = busbw_figure(ROWS, "t", allreduce_subtitle(CONFIG, ROWS))
    ax = fig.axes[0]
    assert ax.get_xlim()[0] == 0.0
    assert ax.get_xlim()[1] > max(r["busbw"] for r in ROWS)
    hatched = [bool(p.get_hatch()) for p in ax.patches]
    assert hatched == [r["bottleneck_kind"] == "nvlink" for r in ROWS]
    notes = [t.get_text() for t in ax.texts]
    assert sum("NVLink" in n for n in notes) == 3
    assert any("NIC-ToR" in n and "2,054 hash collisions" in n for n in notes)
    # a colour per fabric, named in the legend, plus the NVLink-bound hatch
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:2] == ["HPN 7.0 (2-tier, dual-plane)", "DCN+ (3-tier Clos)"]
    assert "NVLink" in legend[2]
    assert {p.get_facecolor() for p in ax.patches[:2]} != {p.get_facecolor()
                                                            for p in ax.patches[2:]}
    _legend_off_the_axes(fig)


def test_busbw_subtitle_names_what_was_held_fixed_and_what_bounds_the_bars():
    text = allreduce_subtitle(CONFIG, ROWS)
    for fixed in ("2,048 GPUs", "H800", "NVLink 400 GB/s", "NIC 400 Gb/s", "ring (LL128)"):
        assert fixed in text
    assert "3 of 4 bars are NVLink-bound" in text
    assert "(ideal)" in text  # spray is labelled a reference, not a deployed policy
    fig = busbw_figure(ROWS, "t", text)
    assert fig.axes[0].get_title(loc="left") == text
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[-1] == "dcn_plus / spray (ideal)"


def _pipeline(stages: int, micro: int) -> list[dict]:
    """A GPipe-like timeline: stage s runs F of micro-batch m in slot s + m, B after."""
    rows = []
    for s in range(stages):
        for m in range(micro):
            f = s + m
            b = 2 * (stages + micro) - s - (micro - m)
            rows.append({"stage": s, "kind": "F", "micro_batch": m, "chunk": 0,
                         "start": f, "finish": f + 1.0})
            rows.append({"stage": s, "kind": "B", "micro_batch": m, "chunk": 0,
                         "start": b, "finish": b + 1.0})
        end = 2 * (stages + micro) - s + 1
        rows.append({"stage": s, "kind": "dp", "micro_batch": -1, "chunk": -1,
                     "start": end - 3.0, "finish": end})
    return rows


def _bars(fig) -> int:
    """Rectangles drawn by broken_barh over all axes."""
    return sum(len(c.get_paths()) for ax in fig.axes for c in ax.collections)


@pytest.mark.parametrize("micro", [128, 512])
def test_gantt_of_many_micro_batches_draws_a_bounded_number_of_bars(micro):
    from types import SimpleNamespace

    rows = _pipeline(8, micro)
    end = max(r["finish"] for r in rows)
    result = SimpleNamespace(timeline=rows, iteration_time=end,
                             job={"model": "m", "tp": 8, "pp": 8, "dp": 2,
                                  "micro_batches": micro})
    fig = gantt_figure(result)
    assert len(rows) > 2000
    # overview: a few merged spans a stage; each zoom: at most 32 passes a stage
    assert _bars(fig) < 8 * 10 + 2 * 8 * 33
    overview, first, last = fig.axes
    assert overview.get_xlim() == (0.0, end)
    # the zooms show the first and the last micro-batches, numbered
    assert {"0", "1", "2"} <= {t.get_text() for t in first.texts}
    assert {str(micro - k) for k in (1, 2, 3)} <= {t.get_text() for t in last.texts}
    assert first.get_xlim()[1] < 0.2 * end and last.get_xlim()[0] > 0.8 * end
    assert f"{micro} micro-batches" in fig.get_suptitle()
    _legend_off_the_axes(fig)


def test_gantt_of_few_micro_batches_draws_every_pass_and_keeps_its_legend_off_the_rows():
    from types import SimpleNamespace

    rows = _pipeline(4, 8)
    result = SimpleNamespace(timeline=rows, iteration_time=max(r["finish"] for r in rows),
                             job={"model": "m"})
    fig = gantt_figure(result)
    assert len(fig.axes) == 1
    assert _bars(fig) == len(rows)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "forward", "backward", "DP gradient sync"]
    _legend_off_the_axes(fig)


def test_linearity_axes_start_at_zero_and_lines_name_fabric_and_routing():
    points = []
    for fabric, routing, lost in (("hpn7", "hpn_dual_plane", 0.005), ("dcn_plus", "ecmp", 0.01)):
        for k, gpus in enumerate((8, 16, 32)):
            t = 1.0 / (1 - lost * k)
            points.append(ScalingPoint(fabric, gpus, gpus // 8, t, gpus / t, 0.4, 1 - lost * k,
                                       t - 1.0, routing))
    fig = linearity_figure(ScalingResult("m", 8, 1, 4, points))
    assert [a.get_ylim()[0] for a in fig.axes] == [0.0, 0.0]
    assert fig.axes[0].get_ylim()[1] > 1.0
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels[:2] == ["hpn7 / hpn_dual_plane", "dcn_plus / ecmp"]
    lost = fig.axes[1].get_lines()[2].get_ydata()  # dcn_plus: % of linear throughput lost
    assert list(lost) == pytest.approx([0.0, 1.0, 2.0])
    # exposed DP explains the whole loss here, and the figure says so
    assert any("exposed DP" in t.get_text() for t in fig.axes[1].texts)
    _legend_off_the_axes(fig)
