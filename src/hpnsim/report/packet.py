"""Packet-engine outputs: the per-size table of what the fabric did (queues, ECN marks, CNPs,
PFC pauses), the queue at chosen ports over time (the kind of plot the HPN paper shows for a
ToR's two downstream ports), and the HTML report's section.

Everything reads the JSON form of a packet run
(:meth:`~hpnsim.collectives.packet.run.PacketCollectiveResult.to_dict`: its ``packet`` key).
"""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import save, subplots
from hpnsim.report.section import Figure, Table

__all__ = ["packet_table", "ports_table", "queue_figure", "plot_queue", "packet_sections",
           "params_table", "queue_trace", "jobs_packet_text", "transport"]


#: the HTML columns of the RC transport's counters (:func:`transport`)
TRANSPORT_HEADS = ("rewinds", "resent (KB)", "timeouts")


def transport(packet: dict) -> tuple[int, float, int]:
    """Go-back-N rewinds, resent bytes and timeouts of a run's ``packet`` figures (JSON
    written before they were reported reads as zeros).

    >>> transport({"rewinds": 1, "resent_bytes": 8192.0, "timeouts": 0}), transport({})
    ((1, 8192.0, 0), (0, 0.0, 0))
    """
    return (int(packet.get("rewinds", 0)), float(packet.get("resent_bytes", 0.0)),
            int(packet.get("timeouts", 0)))


def _transport_cells(packet: dict) -> list[str]:
    rewinds, resent, timeouts = transport(packet)
    return [str(rewinds), f"{resent / 1e3:.1f}", str(timeouts)]


def packet_table(rows: list[dict]) -> str:
    """One line per size: steps simulated, the share extrapolated, events, ECN marks, CNPs,
    PFC pauses, time paused (all ports), drops, go-back-N rewinds, bytes resent, timeouts,
    and the fullest queue.

    >>> row = {"size": 1024, "packet": {"steps": 30, "steps_simulated": 4,
    ...        "extrapolated": 0.867, "stable": True, "events": 10, "ecn_marks": 0, "cnps": 0,
    ...        "pfc_pauses": 0, "paused_time": 0.0, "drops": 0, "ports": []}}
    >>> packet_table([row]).splitlines()[1].split()[:4]
    ['1024', '4/30', '86.7', '10']
    >>> row["packet"]["rail_copies"] = 8
    >>> packet_table([row]).splitlines()[2][:40]
    '# one rail simulated for all 8 (they run'
    """
    head = (f"#{'size':>12} {'steps':>9} {'extrap%':>7} {'events':>10} {'marks':>8} "
            f"{'CNPs':>7} {'pauses':>7} {'paused(us)':>10} {'drops':>5} {'rewinds':>7} "
            f"{'resent(KB)':>10} {'timeouts':>8} {'q_max(KB)':>9}")
    lines = [head]
    for r in rows:
        p = r["packet"]
        q = max((port["q_max"] for port in p["ports"]), default=0.0)
        steps = f"{p['steps_simulated']}/{p['steps']}" + ("" if p["stable"] else "*")
        rewinds, resent, timeouts = transport(p)
        lines.append(f" {int(r['size']):>12d} {steps:>9} {100 * p['extrapolated']:>7.1f} "
                     f"{p['events']:>10d} {p['ecn_marks']:>8d} {p['cnps']:>7d} "
                     f"{p['pfc_pauses']:>7d} {p['paused_time'] * 1e6:>10.1f} {p['drops']:>5d} "
                     f"{rewinds:>7d} {resent / 1e3:>10.1f} {timeouts:>8d} {q / 1e3:>9.1f}")
    if any(not r["packet"]["stable"] for r in rows):
        lines.append("# *: the window reached --max-packets before the per-step time settled: "
                     "time and busbw project a still-moving rate (raise --max-packets to "
                     "simulate further)")
    copies = max((int(r["packet"].get("rail_copies", 1)) for r in rows), default=1)
    if copies > 1:
        lines.append(f"# one rail simulated for all {copies} (they run alike): events are "
                     "its own, marks, pauses and queues every rail's (--no-share-rails: "
                     "simulate each)")
    if any(r["packet"]["extrapolated"] > 0 for r in rows):
        lines.append("# queue, mark and pause figures are over the simulated steps; time and "
                     "busbw extrapolate the rest")
    return "\n".join(lines)


def ports_table(row: dict) -> str:
    """The ports with the fullest queues of one size (name, max/mean/p99 queue in KB, marks,
    pauses, time paused).

    >>> ports_table({"packet": {"ports": [{"port": "a->b", "q_max": 8316.0, "q_mean": 1.0,
    ...     "q_p99": 0.0, "marks": 0, "pauses": 0, "paused_time": 0.0}]}}).splitlines()[1]
    '       8.3       0.0       0.0        0      0        0.0  a->b'
    """
    lines = [f"#{'q_max(KB)':>9} {'mean(KB)':>9} {'p99(KB)':>9} {'marks':>8} {'pauses':>6} "
             f"{'paused(us)':>10}  port"]
    for p in row["packet"]["ports"]:
        lines.append(f" {p['q_max'] / 1e3:>9.1f} {p['q_mean'] / 1e3:>9.1f} "
                     f"{p['q_p99'] / 1e3:>9.1f} {p['marks']:>8d} {p['pauses']:>6d} "
                     f"{p['paused_time'] * 1e6:>10.1f}  {p['port']}")
    return "\n".join(lines)


def jobs_packet_text(packet: dict) -> str:
    """What the fabric did while the jobs ran as packets (a run's ``packet`` figures): the
    run's time beside the flow engine's for the same graph, events, marks, CNPs, pauses,
    drops and what the transport did about them, then the fullest ports
    (:func:`ports_table`).

    >>> text = jobs_packet_text({"makespan": 2.0, "flow_makespan": 1.0, "events": 10,
    ...     "packets_estimated": 5.0, "ecn_marks": 1, "cnps": 1, "pfc_pauses": 0,
    ...     "paused_time": 0.0, "drops": 0, "ports": []})
    >>> text.splitlines()[1]
    '# packets: 2 s (flow engine: 1 s, x2.000); 10 events, 1 ECN marks, 1 CNPs, 0 PFC pauses (0.0 us paused), 0 drops'
    >>> text.splitlines()[2]
    '# transport: 0 go-back-N rewinds (0.0 KB resent), 0 timeouts'
    """
    rewinds, resent, timeouts = transport(packet)
    ratio = packet["makespan"] / packet["flow_makespan"] if packet["flow_makespan"] else 1.0
    return "\n".join([
        "# packet engine (docs/packet.md): the jobs' task graph as packets",
        f"# packets: {packet['makespan']:.4g} s (flow engine: {packet['flow_makespan']:.4g} s, "
        f"x{ratio:.3f}); {packet['events']} events, {packet['ecn_marks']} ECN marks, "
        f"{packet['cnps']} CNPs, {packet['pfc_pauses']} PFC pauses "
        f"({packet['paused_time'] * 1e6:.1f} us paused), {packet['drops']} drops",
        f"# transport: {rewinds} go-back-N rewinds ({resent / 1e3:.1f} KB resent), "
        f"{timeouts} timeouts",
        ports_table({"packet": packet})])


def params_table(params: dict) -> str:
    """The packet parameters in effect with their sources (``hpnsim.packet.params_dict``).

    >>> params_table({"cc": {"value": True, "source": "on"}})
    'cc                        True          on'
    """
    return "\n".join(f"{name:<25} {str(v['value']):<13} {v['source']}"
                     for name, v in params.items())


def queue_figure(queue: dict, title: str = ""):
    """Egress queue (KB) over time (us) at the ports of ``queue`` (the ``packet.queue`` of a
    packet run's JSON), one line per port.

    >>> fig = queue_figure({"ports": ["tor->nic0", "tor->nic1"], "time": [0.0, 1e-6],
    ...                     "bytes": [[0.0, 4158.0], [0.0, 0.0]]})
    >>> len(fig.axes[0].lines)
    2
    """
    fig, ax = subplots(figsize=(8, 3.6))
    t = [x * 1e6 for x in queue["time"]]
    for name, series in zip(queue["ports"], queue["bytes"], strict=True):
        ax.plot(t, [b / 1e3 for b in series], lw=1.0, label=name)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("egress queue (KB)")
    ax.set_title(title or "Queue at the watched ports", fontsize=10)
    if queue["ports"]:
        ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def queue_trace(queue: dict, name: str = "packet run") -> dict:
    """The queue at the watched ports as Chrome-trace counter events (``ph: "C"``, one
    counter track per port, KB), for Perfetto (:func:`hpnsim.report.trace.write_trace`).

    >>> t = queue_trace({"ports": ["tor->nic0"], "time": [0.0, 1e-6], "bytes": [[0.0, 4158.0]]})
    >>> [(e["ph"], e["ts"], e["args"]) for e in t["traceEvents"] if e["ph"] == "C"][1]
    ('C', 1.0, {'KB': 4.158})
    """
    events = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
               "args": {"name": name}}]
    for port, series in zip(queue["ports"], queue["bytes"], strict=True):
        events += [{"name": f"queue {port}", "ph": "C", "ts": t * 1e6, "pid": 1, "tid": 0,
                    "args": {"KB": b / 1e3}} for t, b in zip(queue["time"], series,
                                                             strict=True)]
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def plot_queue(row: dict, path: str | Path, title: str = "") -> Path:
    """Save :func:`queue_figure` of one size's JSON row to ``path`` (PNG or SVG)."""
    return save(queue_figure(row["packet"]["queue"], title), path, dpi=150)


def packet_sections(run: dict) -> list:
    """The HTML report's packet section: per collective run as packets, the table of each
    size and the queue at the watched ports of its largest size. Empty without packet runs.

    >>> packet_sections({"collectives": [{"name": "c", "per_size": [{"size": 1}]}]})
    []
    """
    parts = []
    for c in run.get("collectives", []):
        rows = [r for r in c.get("per_size", []) if "packet" in r]
        if not rows:
            continue
        table = Table(["size (B)", "busbw (GB/s)", "steps simulated", "extrapolated",
                       "ECN marks", "CNPs", "PFC pauses", "paused (us)", "drops",
                       *TRANSPORT_HEADS, "max queue (KB)"],
                      [[f"{r['size']:,.0f}", f"{r['busbw']:.2f}",
                        f"{r['packet']['steps_simulated']}/{r['packet']['steps']}",
                        f"{100 * r['packet']['extrapolated']:.0f}%",
                        str(r["packet"]["ecn_marks"]), str(r["packet"]["cnps"]),
                        str(r["packet"]["pfc_pauses"]),
                        f"{r['packet']['paused_time'] * 1e6:.1f}", str(r["packet"]["drops"]),
                        *_transport_cells(r["packet"]),
                        f"{max((p['q_max'] for p in r['packet']['ports']), default=0) / 1e3:.1f}"]
                       for r in rows],
                      caption=f"{c['name']}: packet engine, per size (queues, marks and "
                              f"pauses over the simulated steps)")
        parts.append(table)
        last = max(rows, key=lambda r: r["size"])
        queue = last["packet"].get("queue", {})
        if queue.get("ports"):
            parts.append(Figure(queue_figure(queue, f"{c['name']}: queue at the watched "
                                                    f"ports, {last['size']:,.0f} B"),
                                f"packet_queue_{c['name']}",
                                "Egress queue over the simulated steps at the ports whose "
                                "queue rose highest (or those chosen with watch)."))
    jobs = run.get("packet")
    if jobs:
        q_max = max((p["q_max"] for p in jobs["ports"]), default=0.0)
        parts.append(Table(["packets (s)", "flow engine (s)", "events", "ECN marks", "CNPs",
                            "PFC pauses", "paused (us)", "drops",
                            *TRANSPORT_HEADS, "max queue (KB)"],
                           [[f"{jobs['makespan']:.6g}", f"{jobs['flow_makespan']:.6g}",
                             f"{jobs['events']:,}", str(jobs["ecn_marks"]), str(jobs["cnps"]),
                             str(jobs["pfc_pauses"]), f"{jobs['paused_time'] * 1e6:.1f}",
                             str(jobs["drops"]), *_transport_cells(jobs),
                             f"{q_max / 1e3:.1f}"]],
                           caption="the jobs' iterations as packets, beside the flow "
                                   "engine's time for the same task graph"))
        queue = jobs.get("queue", {})
        if queue.get("ports"):
            parts.append(Figure(queue_figure(queue, "jobs: queue at the watched ports"),
                                "packet_queue_jobs", "Egress queue over the jobs' run at the "
                                "ports whose queue rose highest (or those chosen with watch)."))
    return [("packet", "Packet engine: queues, marks, pauses", parts)] if parts else []
