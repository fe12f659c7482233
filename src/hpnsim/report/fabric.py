"""A fabric in figures: switches, cables, oversubscription, paths, bill of materials, the
frontend network; as a rich table (``hpnsim fabric``, the demo) and as a report section."""

from __future__ import annotations

from typing import Any

from hpnsim.report.section import Table
from hpnsim.units import format_bandwidth

__all__ = ["built_for_gpus", "fabric_rows", "fabric_section", "fabric_table", "frontend_rows", "merge_labels"]


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
             ("network cost per GPU (÷ GPUs present)",
              f"${bom['network_cost_per_gpu_usd']:,.0f}"),
             ("GPUs per MW (GPUs present ÷ total power)", f"{bom['gpus_per_mw']:,.0f}")]
    full = built_for_gpus(report)
    if full is not None:
        rows += [("Agg tier built for (a whole pod)", f"{full:,} GPUs")]
    return rows


def built_for_gpus(report: dict[str, Any]) -> int | None:
    """GPUs of the full pod whose Agg tier a one-pod tiered fabric builds whole though it
    holds fewer segments (:mod:`hpnsim.fabrics.tiered`: a pod's Aggs are all built); None
    when the fabric is whole pods (or has no pods).

    The per-GPU cost and GPUs per MW divide by the GPUs present: with a pod part-built, they
    count the Aggs of GPUs that are not there.

    >>> built_for_gpus({"template": "hpn7", "gpus": 2048,
    ...                 "options": {"pods": 1, "segments": 2}})
    15360
    >>> built_for_gpus({"template": "hpn7", "gpus": 15360, "options": {"segments": 15}}) is None
    True
    """
    from hpnsim.fabrics.registry import option_default, template_parameters

    options = report.get("options") or {}
    params = template_parameters(report["template"])
    if "pods" not in params or "segments" not in params or options.get("pods", 1) != 1:
        return None
    unsized = {k: v for k, v in options.items() if k != "segments"}
    full = int(option_default(report["template"], "segments", unsized))
    segments = int(options.get("segments", full))
    if segments >= full:
        return None
    return report["gpus"] // segments * full


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
    from rich.table import Table as RichTable

    table = RichTable(title=title)
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


def fabric_section(reports: list[dict], fallback: dict | None = None):
    """Fabric overview: one column per fabric report (switches, links, BOM when present), or
    the run's fabric summary (template, GPUs, hosts, links, options) without one."""
    if reports:
        rows = [dict(fabric_rows(r)) for r in reports]
        labels = merge_labels([list(r) for r in rows])
        table = Table([""] + [r["template"] for r in reports],
                      [[label] + [r.get(label, "-") for r in rows] for label in labels],
                      "The fabric as the template built it: every tier it builds counts in "
                      "switches, cost and power, however few GPUs a small fabric has.")
    elif fallback:
        options = ", ".join(f"{k}={v}" for k, v in (fallback.get("options") or {}).items())
        table = Table(["", fallback.get("template", "")],
                      [["GPUs", f"{fallback.get('gpus', 0):,}"],
                       ["hosts", f"{fallback.get('hosts', 0):,}"],
                       ["links (directed, incl. in-host)", f"{fallback.get('links', 0):,}"],
                       ["options", options or "-"]],
                      "Add `report_fabric: true` to the scenario for switch counts and the "
                      "bill of materials.")
    else:
        return None
    return ("fabric", "Fabric overview", [table])
