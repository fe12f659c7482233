"""report.fabric / report.demo / report.text: every figure a fabric has reaches the table,
text keeps its columns."""

from __future__ import annotations

import io

from rich.console import Console

from hpnsim.fabrics import build_fabric
from hpnsim.fabrics.analysis import fabric_report
from hpnsim.report.demo import print_demo
from hpnsim.report.fabric import fabric_rows, fabric_table


def _render(renderable_or_fn, *args) -> str:
    out = io.StringIO()
    console = Console(file=out, width=160)
    if callable(renderable_or_fn):
        renderable_or_fn(*args, console)
    else:
        console.print(renderable_or_fn)
    return out.getvalue()


def test_comparison_keeps_rows_only_the_second_fabric_has():
    hpn, dcn = (fabric_report(build_fabric(t, {"gpus": 2048})) for t in ("hpn7", "dcn_plus"))
    only_dcn = {label for label, _ in fabric_rows(dcn)} - {label for label, _ in fabric_rows(hpn)}
    assert "transceivers 400G-SM" in only_dcn  # DCN+'s core tier uses single-mode optics
    text = _render(fabric_table([hpn, dcn], "t"))
    for label in only_dcn:
        line = next(line for line in text.splitlines() if label in line)
        assert line.split("│")[2].strip() == "-"  # HPN's column says it has none


def test_demo_table_shows_dcn_single_mode_optics():
    from types import SimpleNamespace

    reports = [fabric_report(build_fabric(t, {"gpus": 2048})) for t in ("hpn7", "dcn_plus")]
    dcn_optics = reports[1]["bom"]["transceivers"]["400G-SM"]
    train = {"fabric": "hpn7", "iteration_time": 1.0, "compute_time": 1.0,
             "exposed_comm": {"tp": 0.0}, "bubble": 0.0, "optimizer_time": 0.0, "mfu": 0.5,
             "tokens_per_second": 1.0}
    result = SimpleNamespace(
        config={"pod_gpus": 2048, "allreduce_size": 2**30, "allreduce_algo": "ring",
                "allreduce_gpus": 16, "model": "m", "tp": 8, "pp": 1, "dp": 2},
        fabrics=reports, allreduce=[], training=[train, {**train, "fabric": "dcn_plus"}])
    line = next(line for line in _render(print_demo, result).splitlines()
                if "transceivers 400G-SM" in line)
    assert f"{dcn_optics:,}" in line
