"""The demo's transport and incast part (:mod:`hpnsim.demo.transport`) on the terminal and in
the HTML report: one computed takeaway line each, queue-over-time figures and per-port
tables. Every figure is read from the packet runs' counters in ``demo.json``.
"""

from __future__ import annotations

from hpnsim.report.packet import queue_figure
from hpnsim.report.section import Figure, Table

__all__ = ["incast_takeaway", "rail_takeaway", "transport_lines", "transport_section"]

_NAMES = {"dcn_plus": "DCN+", "hpn7": "HPN"}


def format_time(seconds: float) -> str:
    """Three significant digits in us, ms or s.

    >>> format_time(4.9e-4), format_time(0.0346), format_time(2.1)
    ('490 us', '34.6 ms', '2.1 s')
    """
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _fullest(f: dict) -> str:
    if not f["ports"]:
        return "no queue anywhere"
    p = f["ports"][0]
    return f"queue up to {p['q_max'] / 1e3:,.0f} KB at {p['port']}"


def rail_takeaway(rail: dict) -> str:
    """One line: where queues built on each fabric and what RoCE did about them.

    >>> f = {"fabric": "dcn_plus", "routing": "ecmp", "time": 3.4e-4, "ideal": 1.7e-4,
    ...      "ecn_marks": 1071, "cnps": 180, "qps_cut": 4, "flows": 32, "pfc_pauses": 6,
    ...      "ports": [{"port": "tor->nic", "q_max": 3.7e6}]}
    >>> h = {**f, "fabric": "hpn7", "routing": "hpn_dual_plane", "time": 2.6e-4,
    ...      "pfc_pauses": 0, "ports": []}
    >>> print(rail_takeaway({"hosts": 16, "gpu": "h100", "fabrics": [f, h]}))
    Transport (rail 0 of 16 H100-class hosts as packets, default RoCE): DCN+ ECMP: queue up to 3,700 KB at tor->nic, 1,071 ECN marks, 180 CNPs, DCQCN cut 4 of 32 QPs, 6 PFC pauses, 340 us (2.00x line rate); HPN dual-plane: no queue anywhere, 1,071 ECN marks, 180 CNPs, DCQCN cut 4 of 32 QPs, 0 PFC pauses, 260 us (1.53x line rate).
    """
    parts = []
    for f in rail["fabrics"]:
        routing = "ECMP" if f["routing"] == "ecmp" else "dual-plane"
        parts.append(f"{_NAMES.get(f['fabric'], f['fabric'])} {routing}: {_fullest(f)}, "
                     f"{f['ecn_marks']:,} ECN marks, {f['cnps']:,} CNPs, DCQCN cut "
                     f"{f['qps_cut']} of {f['flows']} QPs, {f['pfc_pauses']:,} PFC pauses, "
                     f"{format_time(f['time'])} ({f['time'] / f['ideal']:.2f}x line rate)")
    return (f"Transport (rail 0 of {rail['hosts']} {rail['gpu'].upper()}-class hosts as "
            f"packets, default RoCE): " + "; ".join(parts) + ".")


def _run(incast: dict, case: str) -> dict | None:
    return next((r for r in incast["runs"] if r["case"] == case), None)


def incast_takeaway(incast: dict) -> str:
    """One line: the incast with and without DCQCN, how far PFC pauses spread upstream,
    and the victim's time with PFC against without it and alone.

    >>> run = {"case": "PFC, no DCQCN", "pfc": True, "cc": False, "incast_time": 1.37e-3,
    ...        "victim_time": 4.9e-4, "incast_q_max": 12.7e6, "pfc_pauses": 218,
    ...        "cnps": 0, "qps_cut": 0, "drops": 0,
    ...        "upstream": [{"hops": 1, "links": 5}, {"hops": 2, "links": 2}]}
    >>> cc = {**run, "case": "PFC + DCQCN", "cc": True, "victim_time": 4.4e-4, "cnps": 1411,
    ...       "qps_cut": 9, "pfc_pauses": 210}
    >>> lossy = {**run, "case": "no PFC (lossy), DCQCN", "pfc": False, "cc": True,
    ...          "victim_time": 1.76e-4, "incast_time": 3.5e-2, "pfc_pauses": 0,
    ...          "drops": 2621, "upstream": []}
    >>> d = {"senders": 8, "ideal": 1.37e-3, "victim_alone": 1.75e-4,
    ...      "runs": [run, cc, lossy]}
    >>> print(incast_takeaway(d))
    Incast (8:1 across two HPN segments): queue up to 12.7 MB at the receiver's port; PFC pauses spread 2 hops upstream (5 links into the receiver's ToR, 2 into the Aggs feeding it) and stop a victim flow that shares no bottleneck: 490 us with PFC and no DCQCN (2.80x its 175 us alone), 440 us with DCQCN (1,411 CNPs, 9 QPs cut), 176 us without PFC, where the incast drops 2,621 packets instead (35 ms).
    """
    base, cc, lossy = (_run(incast, c) for c in ("PFC, no DCQCN", "PFC + DCQCN",
                                                  "no PFC (lossy), DCQCN"))
    if base is None:
        return ""
    alone = incast["victim_alone"]
    levels = {u["hops"]: u["links"] for u in base["upstream"]}
    words = {1: "into the receiver's ToR", 2: "into the Aggs feeding it",
             3: "into the senders' ToR"}
    spread = ", ".join(f"{levels[h]} links {words[h]}" if i == 0 else f"{levels[h]} {words[h]}"
                       for i, h in enumerate(sorted(levels)))
    line = (f"Incast ({incast['senders']}:1 across two HPN segments): queue up to "
            f"{base['incast_q_max'] / 1e6:.1f} MB at the receiver's port; PFC pauses spread "
            f"{max(levels, default=0)} hops upstream ({spread or 'none'}) and stop a victim "
            f"flow that shares no bottleneck: {format_time(base['victim_time'])} with PFC and "
            f"no DCQCN ({base['victim_time'] / alone:.2f}x its {format_time(alone)} alone)")
    if cc is not None:
        line += (f", {format_time(cc['victim_time'])} with DCQCN ({cc['cnps']:,} CNPs, "
                 f"{cc['qps_cut']} QPs cut)")
    if lossy is not None:
        incast_time = ("never" if lossy["incast_time"] is None
                       else format_time(lossy["incast_time"]))
        line += (f", {format_time(lossy['victim_time'])} without PFC, where the incast drops "
                 f"{lossy['drops']:,} packets instead ({incast_time})")
    return line + "."


def transport_lines(demo: dict) -> list[str]:
    """The takeaway lines of the packet part (none when the demo skipped it)."""
    out = []
    if demo.get("transport"):
        out.append(rail_takeaway(demo["transport"]))
    if demo.get("incast"):
        out.append(incast_takeaway(demo["incast"]))
    return [line for line in out if line]


def _port_table(rows: list[dict], caption: str) -> Table:
    return Table(["port", "max queue (KB)", "mean queue (KB)", "ECN marks", "PFC pauses",
                  "paused (us)"],
                 [[p["port"], f"{p['q_max'] / 1e3:,.1f}", f"{p['q_mean'] / 1e3:,.1f}",
                   f"{p['marks']:,}", f"{p['pauses']:,}", f"{p['paused_time'] * 1e6:.1f}"]
                  for p in rows], caption)


def transport_section(demo: dict):
    """The report's section: per fabric, the queue at its fullest ports over time and its
    port table; the incast's queues per case and the pause levels. None without data."""
    rail, incast = demo.get("transport"), demo.get("incast")
    if not (rail or incast):
        return None
    parts: list = []
    if rail:
        why = (f"{rail['gpu'].upper()}-class hosts (NVLink {rail['nvlink']}): only the NICs' "
               "legs run as packets, so the network decides")
        for f in rail["fabrics"]:
            name = f"{_NAMES.get(f['fabric'], f['fabric'])} ({f['routing']})"
            if f["queue"]["ports"]:
                parts.append(Figure(queue_figure(f["queue"], f"Rail 0 of {rail['hosts']} "
                                                 f"hosts on {name}: the fullest queues"),
                                    f"transport_queue_{f['fabric']}",
                                    f"Egress queue over time at the ports where the hash put "
                                    f"two QPs on one link; {why}."))
            parts.append(_port_table(f["ports"], f"{name}: ports with a queue, mark or "
                                                 f"pause; {rail_takeaway({**rail, 'fabrics': [f]})}"))
    if incast:
        for r in incast["runs"]:
            parts.append(Figure(queue_figure(r["queue"], f"Incast {incast['senders']}:1, "
                                             f"{r['case']}"),
                                "incast_queue_" + "".join(c if c.isalnum() else "_"
                                                          for c in r["case"].lower()),
                                "The receiver's port and the Agg->ToR link the victim "
                                "shares with the incast."))
        parts.append(Table(
            ["case", "incast", "victim", "victim alone", "max queue (MB)", "CNPs", "QPs cut",
             "PFC pauses", "links paused (1 / 2 / 3 hops up)", "drops"],
            [[r["case"], "never" if r["incast_time"] is None else format_time(r["incast_time"]),
              format_time(r["victim_time"]), format_time(incast["victim_alone"]),
              f"{r['incast_q_max'] / 1e6:.2f}", f"{r['cnps']:,}", str(r["qps_cut"]),
              f"{r['pfc_pauses']:,}",
              " / ".join(str(next((u["links"] for u in r["upstream"] if u["hops"] == h), 0))
                         for h in (1, 2, 3)), f"{r['drops']:,}"]
             for r in incast["runs"]], incast_takeaway(incast)))
        worst = max(incast["runs"], key=lambda r: r["pfc_pauses"])
        parts.append(_port_table(worst["ports"], f"Incast, {worst['case']}: the ports with a "
                                                 "queue, mark or pause"))
    return ("transport", "Transport and incast: queues, marks, rate cuts, pauses", parts)
