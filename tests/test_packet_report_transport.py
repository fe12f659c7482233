"""The RC transport's counters in results: a run with one forced drop (the hand count of
tests/test_packet_transport.py) reports one go-back-N rewind and the resent bytes derived
there, in the run totals, the text tables and the HTML report's packet section; a lossy
collective carries them in its JSON and CSV rows."""

from __future__ import annotations

import numpy as np
from test_packet_transport import _one_drop_setup, one_drop_by_hand

from hpnsim.report.packet import jobs_packet_text, packet_sections, packet_table

N = 400


def _one_drop_counters():
    res, p, r, m, s = _one_drop_setup(N)
    drop, started = one_drop_by_hand(N, p, r, m, s)
    return res, p, drop, started


def test_one_forced_drop_reports_one_rewind_and_the_resent_bytes_by_hand():
    res, p, drop, started = _one_drop_counters()
    resent = (started - drop) * p.mtu_bytes       # the dropped packet and those after it
    assert res.transport_counters() == {"rewinds": 1, "resent_bytes": resent, "timeouts": 0,
                                        "discards": started - drop - 1}
    s = res.summary()
    assert (s["drops"], s["rewinds"], s["resent_bytes"], s["timeouts"]) == (1, 1, resent, 0)


def test_text_tables_and_html_section_show_the_forced_drops_rewind():
    res, p, drop, started = _one_drop_counters()
    resent_kb = f"{(started - drop) * p.mtu_bytes / 1e3:.1f}"
    packet = {"steps": 1, "steps_simulated": 1, "extrapolated": 0.0, "stable": True,
              "events": res.events, "ecn_marks": 0, "cnps": 0, "pfc_pauses": 0,
              "paused_time": 0.0, "drops": int(res.drops.sum()), "ports": [],
              **res.transport_counters()}
    head, line = packet_table([{"size": N * p.mtu_bytes, "packet": packet}]).splitlines()
    cells = dict(zip(head.lstrip("#").split(), line.split(), strict=True))
    assert (cells["drops"], cells["rewinds"], cells["resent(KB)"], cells["timeouts"]) == \
        ("1", "1", resent_kb, "0")
    text = jobs_packet_text({**packet, "makespan": 1.0, "flow_makespan": 1.0})
    assert f"1 go-back-N rewinds ({resent_kb} KB resent), 0 timeouts" in text
    (_, _, parts), = packet_sections({"collectives": [{"name": "c", "per_size": [
        {"size": N * p.mtu_bytes, "busbw": 1.0, "packet": packet}]}]})
    table = parts[0]
    row = dict(zip(table.headers, table.rows[0], strict=True))
    assert (row["drops"], row["rewinds"], row["resent (KB)"], row["timeouts"]) == \
        ("1", "1", resent_kb, "0")


def test_a_lossy_collective_reports_its_rewinds_in_json_and_rows():
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    from hpnsim.fabrics import build_fabric
    from hpnsim.packet import PacketParams

    # the ECMP collision of tests/test_packet_collective.py (DCN+, 1:1 200G uplinks, up to 6
    # ring flows on one), lossy (no PFC, no CC) with a 200 KB switch buffer: the collided
    # uplink drops; go-back-N must resend at least each dropped packet and finish every flow
    f = build_fabric("dcn_plus", {"segments": 2, "hosts_per_segment": 2, "tor_uplinks": 2,
                                  "aggs_per_pod": 2, "uplink_speed": "200G"})
    gpus = list(range(8)) + list(range(16, 24))
    params = PacketParams(pfc=False, cc=False, ecn=False, buffer_bytes=200e3)
    r = run_collective_packet(f, "allreduce", gpus, 2**24, algo="ring", seed=1,
                              run=PacketRun(params=params))
    assert np.isfinite(r.time)
    d = r.to_dict()["packet"]
    assert d["drops"] >= 1 and d["rewinds"] >= 1
    assert d["resent_bytes"] >= d["rewinds"] * params.mtu_bytes
    row, = r.rows()
    assert {k: row[k] for k in ("rewinds", "resent_bytes", "timeouts", "discards")} == \
        {k: d[k] for k in ("rewinds", "resent_bytes", "timeouts", "discards")}
