"""The design space (``hpnsim design``): the designs' table, the mechanism ladder and the
scale-against-cost figure, all read from the dicts of :mod:`hpnsim.design.records`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpnsim.report.canvas import save, subplots

__all__ = ["compare_table", "design_figure", "designs_table", "ladder_table", "plot_designs"]


def _k(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _columns(headers: list[str], rows: list[list[str]], left: set[int]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i in left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def designs_table(designs: list[dict[str, Any]], title: str = "design space") -> str:
    """Fixed-width text, one row per design: scale, switches, hops and paths, power, cost per
    GPU, binding; the reasons of the designs that cannot be built follow the table.

    >>> print(designs_table([{"name": "x", "tiers": 2, "feasible": False, "segment_gpus": 8,
    ...                       "pod_gpus": 16, "max_gpus": 16, "gpus": 0, "binding": "power",
    ...                       "reason": "too big", "switches": None}]))
    design space
    design  segment  pod  max GPUs  ToR/Agg/core  hops  paths (hashes)  MW  $/GPU  binding
    ------  -------  ---  --------  ------------  ----  --------------  --  -----  -------
    x             8   16        16             -     -               -   -      -  power *
    <BLANKLINE>
    * cannot be built: x: too big
    """
    sized = any(x["feasible"] and x["gpus"] != x["max_gpus"] for x in designs)
    headers = ["design", "segment", "pod", "max GPUs"] + (["built"] if sized else []) \
        + ["ToR/Agg/core", "hops", "paths (hashes)", "MW", "$/GPU", "binding"]
    rows, notes = [], []
    for x in designs:
        head = [x["name"], _k(x["segment_gpus"]), _k(x["pod_gpus"]), _k(x["max_gpus"])]
        if not x["feasible"]:
            rows.append(head + ["-"] * (6 if sized else 5) + [f"{x['binding']} *"])
            notes.append(f"{x['name']}: {x['reason']}")
            continue
        sw = x["switches"]
        rows.append(head + ([_k(x["gpus"])] if sized else []) + [
            f"{sw['tor']:,}/{sw['agg']:,}/{sw.get('core', 0):,}", str(x["hops"]),
            f"{x['ecmp_paths']:,} ({x['hash_decisions']})", f"{x['power_w'] / 1e6:,.1f}",
            f"{x['cost_per_gpu_usd']:,.0f}", x["binding"]])
    lines = [title, *_columns(headers, rows, {0, len(headers) - 1})]
    if notes:
        lines += ["", "* cannot be built: " + notes[0], *("  " + n for n in notes[1:])]
    return "\n".join(lines)


def compare_table(rows: list[dict[str, Any]], title: str) -> str:
    """Fixed-width text: one collective on each design, side by side.

    >>> print(compare_table([{"name": "a", "routing": "ecmp", "algo": "ring", "time_s": 0.01,
    ...                       "busbw_GBps": 40.0, "hash_collisions": 3, "bottleneck": "x",
    ...                       "cost_per_gpu_usd": 2229.0}], "t"))
    t
    design  routing  algo  time ms  busbw GB/s  hash collisions  $/GPU  bottleneck
    ------  -------  ----  -------  ----------  ---------------  -----  ----------
    a       ecmp     ring   10.000        40.0                3  2,229  x
    """
    if rows and "iteration_time_s" in rows[0]:
        headers = ["design", "routing", "iteration ms", "exposed TP ms", "exposed DP ms",
                   "tokens/s", "MFU", "$/GPU"]
        body = [[r["name"], r["routing"], f"{r['iteration_time_s'] * 1e3:.2f}",
                 f"{r['exposed_comm_s'].get('tp', 0.0) * 1e3:.2f}",
                 f"{r['exposed_comm_s'].get('dp', 0.0) * 1e3:.2f}",
                 f"{r['tokens_per_second']:,.0f}", f"{r['mfu']:.3f}",
                 f"{r['cost_per_gpu_usd']:,.0f}"] for r in rows]
        return "\n".join([title, *_columns(headers, body, {0, 1})])
    headers = ["design", "routing", "algo", "time ms", "busbw GB/s", "hash collisions",
               "$/GPU", "bottleneck"]
    body = [[r["name"], r["routing"], r["algo"], f"{r['time_s'] * 1e3:.3f}",
             f"{r['busbw_GBps']:.1f}", f"{r['hash_collisions']:,}",
             f"{r['cost_per_gpu_usd']:,.0f}", r["bottleneck"]] for r in rows]
    return "\n".join([title, *_columns(headers, body, {0, 1, 2, 7})])


def _scale(step: dict[str, Any], tier: str) -> str:
    value, factor = step[f"{tier}_gpus"], step["factor"][tier]
    if value is None:
        return "-"
    return f"{value:,}" + ("" if factor is None else f" (x{factor:g})")


def ladder_table(steps: list[dict[str, Any]], title: str = "mechanism ladder"):
    """The paper's Table 2 layout: mechanism, tier-1 and tier-2 scale (factor), arithmetic.

    >>> t = ladder_table([{"mechanism": "Clos", "tier1_gpus": 64, "tier2_gpus": 2048,
    ...                    "factor": {"tier1": None, "tier2": None}, "arithmetic": ["a"]}])
    >>> t.row_count
    1
    """
    from rich.table import Table as RichTable

    table = RichTable(title=title)
    table.add_column("mechanism")
    table.add_column("tier-1 scale", justify="right")
    table.add_column("tier-2 scale", justify="right")
    table.add_column("arithmetic")
    for step in steps:
        table.add_row(step["mechanism"], _scale(step, "tier1"), _scale(step, "tier2"),
                      "\n".join(step["arithmetic"]))
    return table


def design_figure(designs: list[dict[str, Any]], title: str = ""):
    """Largest scale (log) against network cost per GPU, one marker per feasible design
    (circles: two tiers, squares: three). Designs at the same point share a number; the
    numbers are listed beside the axes with the designs' names.

    >>> fig = design_figure([{"name": "a", "feasible": True, "tiers": 2, "max_gpus": 15360,
    ...                       "cost_per_gpu_usd": 2228.75}])
    >>> fig.axes[0].get_xscale(), fig.axes[0].get_ylabel()
    ('log', 'network cost per GPU (USD)')
    """
    fig, (ax, side) = subplots(1, 2, figsize=(12, 5.5), layout="constrained",
                               width_ratios=(2.6, 1))
    side.axis("off")
    shown = [x for x in designs if x["feasible"]]
    for tiers, marker in ((2, "o"), (3, "s")):
        pts = [x for x in shown if x["tiers"] == tiers]
        if pts:
            ax.scatter([x["max_gpus"] for x in pts], [x["cost_per_gpu_usd"] for x in pts],
                       marker=marker, s=40, label=f"{tiers} tiers", zorder=3)
    points: dict[tuple[int, float], list[str]] = {}
    for x in shown:
        points.setdefault((x["max_gpus"], round(x["cost_per_gpu_usd"], 2)), []).append(x["name"])
    key = []
    for i, ((gpus, cost), names) in enumerate(sorted(points.items()), start=1):
        ax.annotate(str(i), (gpus, cost), textcoords="offset points",
                    xytext=(0, 7 + 9 * (i % 2)), ha="center", fontsize=8)
        key.append(f"{i}: " + "\n    ".join(names))
    if key:
        side.text(0.0, 0.5, "\n".join(key), fontsize=7, va="center", ha="left",
                  family="monospace", transform=side.transAxes)
    ax.set_xscale("log")
    ax.set_xlabel("largest fabric (GPUs, log scale)")
    ax.set_ylabel("network cost per GPU (USD)")
    top = max((x["cost_per_gpu_usd"] for x in shown), default=1.0)
    ax.set_ylim(0, 1.15 * top)
    ax.grid(True, alpha=0.3)
    if ax.collections:
        ax.legend(loc="lower right")
    if title:
        ax.set_title(title)
    return fig


def plot_designs(designs: list[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """:func:`design_figure` written to ``path`` (closed after).

    >>> import os, tempfile
    >>> plot_designs([], os.path.join(tempfile.mkdtemp(), "d.png")).exists()
    True
    """
    return save(design_figure(designs, title), path, dpi=120)
