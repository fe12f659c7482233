"""Rich tables of results: fabric reports, the demo, one training iteration, scaling.

Each ``*_table`` function builds a :class:`rich.table.Table` from a result object or its
dict; each ``print_*`` function prints a whole report (tables and the lines under them) on
a console the caller chooses (the CLI's is 120 columns wide into files and pipes).
"""

from __future__ import annotations

from typing import Any

from hpnsim.units import format_bandwidth, format_bytes, format_time


def fabric_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows of a :func:`~hpnsim.fabrics.analysis.fabric_report` dict.

    Examples
    --------
    >>> from hpnsim.fabrics import fat_tree
    >>> from hpnsim.fabrics.analysis import fabric_report
    >>> dict(fabric_rows(fabric_report(fat_tree(4))))["ECMP paths cross pod"]
    '4'
    """

    def ratio(value):
        return "-" if value is None else f"{value:.3f}:1"

    def opt(value):
        return "-" if value is None else f"{value:,}"

    bom = report["bom"]
    rows = [("GPUs", f"{report['gpus']:,}"), ("hosts (active)", f"{report['hosts']:,}"),
            ("backup hosts", f"{report['backup_hosts']:,}")]
    rows += [(f"{tier} switches", f"{n:,}") for tier, n in report["switches"].items()]
    rows += [("cables (incl. in-host)", f"{report['cables']:,}")]
    rows += [(f"oversubscription {t}", ratio(v)) for t, v in report["oversubscription"].items()]
    rows += [("bisection bandwidth", format_bandwidth(report["bisection_bandwidth"]))]
    rows += [(f"ECMP paths {k.replace('_', ' ')}", opt(v))
             for k, v in report["path_choices"].items()]
    rows += [(f"switch ports {s}", f"{n:,}") for s, n in sorted(bom["switch_ports"].items())]
    rows += [(f"transceivers {t}", f"{n:,}") for t, n in sorted(bom["transceivers"].items())]
    rows += [("network power", f"{bom['power_w']['network'] / 1e3:,.0f} kW")]
    rows += frontend_rows(report)
    rows += [("total power (GPUs + networks)", f"{bom['power_w']['total'] / 1e6:,.2f} MW"),
             ("  of which backup hosts", f"{bom['power_w']['backup_hosts'] / 1e6:,.2f} MW"),
             ("network cost", f"${bom['cost_usd']['network'] / 1e6:,.1f} M"),
             ("network cost per GPU", f"${bom['network_cost_per_gpu_usd']:,.0f}"),
             ("GPUs per MW", f"{bom['gpus_per_mw']:,.0f}")]
    return rows


def frontend_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the frontend network (none without one)."""
    front = report.get("frontend")
    if not front:
        return []
    bom = report["bom"]["frontend"]
    rows = [("frontend hosts", f"{front['hosts']:,}"),
            ("storage hosts", f"{front['storage_hosts']:,}")]
    rows += [(f"frontend {tier} switches", f"{n:,}") for tier, n in front["switches"].items()]
    rows += [(f"frontend oversubscription {t}", "-" if v is None else f"{v:.3f}:1")
             for t, v in front["oversubscription"].items()]
    rows += [(f"frontend transceivers {t}", f"{n:,}")
             for t, n in sorted(bom["transceivers"].items())]
    check = front["checkpoint"]
    rows += [("checkpoint 30 GB/GPU at least",
              f"{check['seconds']:.1f} s ({check['bottleneck'].replace('_', ' ')})"),
             ("frontend network power", f"{bom['power_w']['network'] / 1e3:,.0f} kW"),
             ("frontend network cost", f"${bom['cost_usd']['network'] / 1e6:,.1f} M")]
    return rows


def merge_labels(lists: list[list[str]]) -> list[str]:
    """Union of row labels keeping groups together: a label missing so far goes right after
    its predecessor in the list that has it (or first), so the order of each list is kept.

    Examples
    --------
    >>> merge_labels([["a", "b", "d"], ["a", "b", "c", "d", "e"], ["x", "a"]])
    ['x', 'a', 'b', 'c', 'd', 'e']
    """
    merged: list[str] = []
    for labels in lists:
        previous = None
        for label in labels:
            if label not in merged:
                merged.insert(0 if previous is None else merged.index(previous) + 1, label)
            previous = label
    return merged


def fabric_table(reports: list[dict[str, Any]], title: str, labels: list[str] | None = None):
    """One column per fabric report, one row per figure (``-`` where a fabric has none).

    ``labels`` picks the rows; by default every row of every report (:func:`merge_labels`).

    Examples
    --------
    >>> from hpnsim.fabrics import fat_tree
    >>> from hpnsim.fabrics.analysis import fabric_report
    >>> t = fabric_table([fabric_report(fat_tree(4)), fabric_report(fat_tree(2))], "k=4, k=2")
    >>> [c.header for c in t.columns]
    ['', 'fat_tree', 'fat_tree']
    """
    from rich.table import Table

    table = Table(title=title)
    table.add_column("")
    for report in reports:
        table.add_column(report["template"], justify="right")
    rows = [fabric_rows(r) for r in reports]
    columns = [dict(r) for r in rows]
    if labels is None:
        labels = merge_labels([[label for label, _ in r] for r in rows])
    for label in labels:
        table.add_row(label, *(c.get(label, "-") for c in columns))
    return table


def allreduce_table(rows: list[dict[str, Any]], title: str):
    """The demo's all-reduce rows: time, bus bandwidth, collisions and the bottleneck kind."""
    from rich.table import Table

    table = Table(title=title)
    for column in ("fabric", "routing", "time", "busbw GB/s", "hash collisions",
                   "max flows on a link", "bottleneck (busy)"):
        table.add_column(column, justify="left" if column in ("fabric", "routing") else "right")
    for r in rows:
        table.add_row(r["fabric"], r["routing"], format_time(r["time"]), f"{r['busbw']:.1f}",
                      f"{r['hash_collisions']}", f"{r['max_link_flows']:.2g}",
                      f"{r['bottleneck_kind']} {100 * r['bottleneck_utilization']:.0f}%")
    return table


def training_table(rows: list[dict[str, Any]], title: str):
    """One column per fabric: iteration, compute, exposed communication, bubble, MFU."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("part")
    for r in rows:
        table.add_column(r["fabric"], justify="right")
    parts = [("iteration", lambda r: r["iteration_time"]),
             ("compute", lambda r: r["compute_time"])]
    parts += [(f"exposed {k}", lambda r, k=k: r["exposed_comm"][k])
              for k in rows[0]["exposed_comm"]
              if any(r["exposed_comm"][k] for r in rows)]
    parts += [("pipeline bubble", lambda r: r["bubble"]),
              ("optimizer", lambda r: r["optimizer_time"])]
    for name, get in parts:
        table.add_row(name, *(format_time(get(r)) for r in rows))
    table.add_row("MFU", *(f"{100 * r['mfu']:.1f}%" for r in rows))
    table.add_row("tokens/s", *(f"{r['tokens_per_second']:,.0f}" for r in rows))
    return table


def print_demo(result, console) -> None:
    """The demo's three tables (fabrics, all-reduce, training) and the bottleneck links."""
    cfg = result.config
    # every fabric's rows: DCN+ has a core tier and single-mode optics that HPN lacks
    console.print(fabric_table(result.fabrics, f"1. A {cfg['pod_gpus']:,}-GPU fabric: HPN 7.0 "
                                               "vs DCN+ (3-tier Clos)"))

    size = cfg["allreduce_size"] / 2**30
    for gpu in dict.fromkeys(r.get("host_gpu") for r in result.allreduce):
        rows = [r for r in result.allreduce if r.get("host_gpu") == gpu]
        nvlink = rows[0].get("nvlink_bandwidth")
        hosts = (f", {gpu.upper()} hosts" + (f" (NVLink {nvlink / 1e9:g} GB/s)" if nvlink
                                             else "")) if gpu else ""
        console.print(allreduce_table(rows, f"2. {size:g} GiB {cfg['allreduce_algo']} "
                                            f"all-reduce over {cfg['allreduce_gpus']:,} GPUs"
                                            f"{hosts}"))
        for r in rows:
            console.print(f"  bottleneck {r['fabric']}/{r['routing']}: {r['bottleneck']}",
                          highlight=False)
    console.print(training_table(
        result.training, f"3. One {cfg['model']} iteration, TP {cfg['tp']} x PP {cfg['pp']} x "
                         f"DP {cfg['dp']} ({cfg['tp'] * cfg['pp'] * cfg['dp']:,} GPUs)"))


def iteration_table(r):
    """One :class:`~hpnsim.training.IterationResult`: each part's time, share and bytes."""
    from rich.table import Table

    job = r.job
    shape = f"TP{job['tp']} x PP{job['pp']} x DP{job['dp']}"
    if job.get("ep", 1) > 1:
        shape += f" (EP{job['ep']})"
    if job.get("zero"):
        shape += f", ZeRO-{job['zero']}"
    table = Table(title=f"{job['model']} {shape} "
                        f"({job['gpus']} GPUs, {job['micro_batches']} micro-batches)")
    table.add_column("part")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    table.add_column("bytes sent / iteration", justify="right")
    labels = {"dp": "exposed dp (FSDP gathers + reduce-scatters)" if job.get("zero") == 3
              else "exposed dp", "ep": "exposed ep (MoE all-to-all)"}
    rows = [("compute", r.compute_time, None),
            *((labels.get(k, f"exposed {k}"), v, r.comm_bytes.get(k))
              for k, v in r.exposed_comm.items()),
            ("pipeline bubble", r.bubble, None), ("optimizer", r.optimizer_time, None)]
    for name, value, sent in rows:
        table.add_row(name, format_time(value), f"{100 * value / r.iteration_time:.1f}%",
                      "" if sent is None else format_bytes(sent))
    table.add_row("iteration", format_time(r.iteration_time), "100%", "")
    return table


def print_iteration(r, console) -> None:
    """:func:`iteration_table`, then MFU, tokens/s, the TP all-reduce time and any notes."""
    console.print(iteration_table(r))
    extra = f"   EP all-to-all {format_time(r.ep_alltoall_time)}" if r.ep_alltoall_time else ""
    console.print(f"MFU {100 * r.mfu:.1f}%   {r.tokens_per_second:,.0f} tokens/s   "
                  f"TP all-reduce {format_time(r.tp_allreduce_time)}{extra}   "
                  f"tasks {r.n_tasks}")
    for note in r.notes:
        console.print(f"note: {note}")


def scaling_table(result):
    """One row per (fabric, size) point of a :class:`~hpnsim.training.scaling.ScalingResult`.

    Examples
    --------
    >>> from hpnsim.training.scaling import ScalingPoint, ScalingResult
    >>> r = ScalingResult("m", 8, 1, 4, [ScalingPoint("hpn7", 8, 1, 1.0, 10.0, 0.4, 1.0, 0.0)])
    >>> scaling_table(r).row_count
    1
    """
    from rich.table import Table

    table = Table(title=f"{result.model} TP{result.tp} x PP{result.pp}: weak scaling")
    for col in ("fabric", "routing", "GPUs", "iteration s", "exposed DP s", "tokens/s",
                "MFU", "linearity"):
        table.add_column(col)
    for p in result.points:
        table.add_row(p.fabric, p.routing, str(p.gpus), f"{p.iteration_time:.4f}",
                      f"{p.exposed_dp:.4f}",
                      f"{p.tokens_per_second:,.0f}", f"{100 * p.mfu:.1f}%",
                      f"{p.linearity:.4f}")
    return table
