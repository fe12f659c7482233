"""The demo's transport and incast part (issue 28): each takeaway line says what the packet
runs' own counters say, and the incast's victim, which shares no bottleneck, is slower with
PFC than without it."""

from __future__ import annotations

import numpy as np
import pytest

from hpnsim.demo.pipeline import DemoConfig
from hpnsim.demo.transport import incast, rail_traffic
from hpnsim.report.transport import incast_takeaway, rail_takeaway, transport_section


@pytest.fixture(scope="module")
def rail():
    return rail_traffic(DemoConfig(), lambda message: None)


@pytest.fixture(scope="module")
def burst():
    return incast(DemoConfig(), lambda message: None)


def test_the_rail_line_is_the_runs_counters(rail):
    line = rail_takeaway(rail)
    for f in rail["fabrics"]:
        name = "DCN+ ECMP" if f["fabric"] == "dcn_plus" else "HPN dual-plane"
        part = line.split(name + ": ", 1)[1].split(";")[0]
        top = f["ports"][0]
        # the fullest port named is the fullest of every port the run watched (its queue
        # samples never exceed the run's q_max there)
        assert f"queue up to {top['q_max'] / 1e3:,.0f} KB at {top['port']}" in part
        assert top["q_max"] == max(p["q_max"] for p in f["ports"])
        assert max(max(s) for s in f["queue"]["bytes"]) <= top["q_max"]
        assert (f"{f['ecn_marks']:,} ECN marks, {f['cnps']:,} CNPs, DCQCN cut "
                f"{f['qps_cut']} of {f['flows']} QPs, {f['pfc_pauses']:,} PFC pauses") in part
        assert f"({f['time'] / f['ideal']:.2f}x line rate)" in part
        # marks need a queue above Kmin (800 KB): the fullest port has one and was marked
        assert top["q_max"] > 800e3 and f["ecn_marks"] >= sum(p["marks"] for p in f["ports"])
        # a cut QP got a CNP, and a CNP answers a mark
        assert 0 < f["qps_cut"] <= f["flows"] and f["cnps"] <= f["ecn_marks"]
        assert f["time"] > f["ideal"]            # the queues cost time over the line rate
    dcn, hpn = rail["fabrics"]
    assert rail["gpu"] == "h100" and rail["nvlink"] == "900GB/s"   # the network decides


def test_the_incast_line_is_the_runs_counters(burst):
    line = incast_takeaway(burst)
    base, cc, lossy = burst["runs"]
    assert (base["case"], cc["case"], lossy["case"]) == (
        "PFC, no DCQCN", "PFC + DCQCN", "no PFC (lossy), DCQCN")
    assert f"queue up to {base['incast_q_max'] / 1e6:.1f} MB at the receiver's port" in line
    levels = {u["hops"]: u["links"] for u in base["upstream"]}
    assert f"PFC pauses spread {max(levels)} hops upstream" in line
    assert sum(u["pauses"] for u in base["upstream"]) == base["pfc_pauses"]
    assert f"{cc['cnps']:,} CNPs, {cc['qps_cut']} QPs cut" in line
    assert f"drops {lossy['drops']:,} packets" in line
    # without DCQCN no CNP; without PFC no pause, and the full buffer drops instead
    assert base["cnps"] == 0 and cc["cnps"] > 0
    assert lossy["pfc_pauses"] == 0 and lossy["drops"] > 0 and base["drops"] == cc["drops"] == 0
    # pauses spread beyond the receiver's ToR: into the Aggs feeding it
    assert levels.get(1, 0) > 0 and levels.get(2, 0) > 0
    # the receiver's queue reaches PFC's level (far above Kmax 3.2 MB)
    assert base["incast_q_max"] > 3.2e6


def test_the_victim_shares_no_bottleneck_and_is_slowed_by_pfc(burst):
    base, cc, lossy = burst["runs"]
    # no link the victim crosses is offered more than its capacity (flows at line rate)
    assert burst["victim_headroom"] >= 1.0
    assert burst["victim_shared"]               # but it shares an Agg->ToR link
    alone = burst["victim_alone"]
    assert lossy["victim_time"] == pytest.approx(alone, rel=0.01)   # no PFC: untouched
    assert base["victim_time"] > 1.5 * lossy["victim_time"]          # PFC: blocked
    # DCQCN's cuts hold the incast under PFC's level, so the victim is blocked less than
    # with PFC alone, and never faster than alone (with dequeue marking, the default, it is
    # not blocked at all: 689 us, its time alone; with enqueue marking 873 us, 1.27x)
    assert alone * 0.99 <= cc["victim_time"] < base["victim_time"]


def test_the_section_has_queue_figures_and_port_tables(rail, burst):
    from hpnsim.report.section import Figure, Table

    anchor, _, parts = transport_section({"transport": rail, "incast": burst})
    assert anchor == "transport"
    figures = [p for p in parts if isinstance(p, Figure)]
    tables = [p for p in parts if isinstance(p, Table)]
    assert len(figures) == 2 + 3 and len(tables) == 2 + 2
    assert all(len(f.fig.axes[0].lines) >= 1 for f in figures)
    first = tables[0]
    assert first.headers[0] == "port" and first.rows[0][0] == rail["fabrics"][0]["ports"][0]["port"]
    assert transport_section({}) is None


def test_quick_skips_it_and_says_so():
    from rich.console import Console

    from hpnsim.demo.pipeline import DemoResult
    from hpnsim.report.demo import print_takeaways

    console = Console(record=True, width=200)
    print_takeaways(DemoResult({"packet": False}), console)
    assert "skipped by --quick" in console.export_text()
    assert DemoConfig.quick().packet is False and DemoConfig().packet is True


def test_the_numbers_are_per_flow_arrays_summed():
    """The counters are sums over the run's arrays (a tiny run checked by hand)."""
    from types import SimpleNamespace

    from hpnsim.demo.transport import _counters

    r = SimpleNamespace(marks=np.array([2, 3]), cnps=np.array([0, 4, 1]),
                        pauses=np.array([1, 0]), paused_time=np.array([1e-6, 0.0]),
                        drops=np.array([0, 0]), rewinds=np.array([0, 0, 0]), events=10)
    assert _counters(r) == {"ecn_marks": 5, "cnps": 5, "qps_cut": 2, "pfc_pauses": 1,
                            "paused_time": 1e-6, "drops": 0, "rewinds": 0, "events": 10}
