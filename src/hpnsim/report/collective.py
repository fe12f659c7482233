"""Collectives: bus bandwidth by fabric and routing (bars, one panel per host generation)
and against message size (lines); the demo's all-reduce table; the sections of a run's
collectives and of the demo's sizes."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from hpnsim.report.canvas import save, subplots
from hpnsim.report.section import Figure, Table
from hpnsim.report.style import (
    FABRIC_NAMES,
    LINK_WORDS,
    NVLINK_HATCH,
    fabric_colors,
    gpu_label,
    link_kind,
    plain,
    run_nvlink,
    size_label,
)
from hpnsim.units import format_time

__all__ = ["allreduce_table", "busbw_by_size_figure", "busbw_figure", "busbw_size_figure",
           "collective_sections", "generations_busbw_figure", "plot_busbw", "size_section",
           "spread"]


def _bar_note(row: dict, short: bool = False) -> str:
    """What bounds one bar: its busiest link (and how busy), and ECMP hash collisions;
    ``short`` enough to sit inside a bar: ``busiest: NVLink 86% busy``."""
    kind = row.get("bottleneck_kind")
    if not kind:
        return ""
    link = LINK_WORDS.get(kind, kind)
    note = f"busiest: {link.replace(' (in host)', '') if short else link}"
    if row.get("bottleneck_utilization") is not None:
        note += f"{' ' if short else ', '}{100 * row['bottleneck_utilization']:.0f}% busy"
    if row.get("hash_collisions"):
        note += f"; {row['hash_collisions']:,} {'' if short else 'hash '}collisions"
    return note


def plot_busbw(rows: list[dict], path: str | Path, title: str = "",
               subtitle: str = "") -> Path:
    """:func:`busbw_figure` written to a PNG file.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "bw.png")
    >>> rows = [{"fabric": "hpn7", "routing": "ecmp", "busbw": 40.0,
    ...          "bottleneck_kind": "nvlink", "bottleneck_utilization": 0.8}]
    >>> plot_busbw(rows, out, "all-reduce", "H800, ring").exists()
    True
    """
    return save(busbw_figure(rows, title, subtitle), path, dpi=120)


def bar_label(row: dict) -> str:
    """``fabric / routing`` of a bar, ``(ideal)`` for spraying, the algorithm when forced.

    >>> bar_label({"fabric": "hpn7", "routing": "ecmp", "forced_algo": "ring"})
    'hpn7 / ecmp, ring forced'
    """
    return (f"{row['fabric']} / {row['routing']}"
            + (" (ideal)" if row["routing"] == "spray" else "")
            + (f", {row['forced_algo']} forced" if row.get("forced_algo") else ""))


def busbw_figure(rows: list[dict], title: str = "", subtitle: str = ""):
    """Horizontal bars of bus bandwidth (GB/s) for each ``fabric / routing`` row.

    ``rows`` are :meth:`CollectiveResult.to_dict` outputs with a ``fabric`` key added (and,
    from the demo, ``bottleneck_kind``). A colour per fabric; bars whose busiest link is
    NVLink are hatched and every bar says what bounds it, so equal bars are not read as
    "routing does not matter". The bandwidth axis starts at zero; the legend sits below the
    axes; ``subtitle`` should name what was held fixed.

    Examples
    --------
    >>> rows = [{"fabric": "hpn7", "routing": "ecmp", "busbw": 40.0,
    ...          "bottleneck_kind": "nvlink", "bottleneck_utilization": 0.8}]
    >>> fig = busbw_figure(rows, "all-reduce", "H800, ring")
    >>> float(fig.axes[0].get_xlim()[0]), str(fig.axes[0].patches[0].get_hatch())
    (0.0, '///')
    """
    from matplotlib.patches import Patch

    colors = fabric_colors(r["fabric"] for r in rows)
    labels = [bar_label(r) for r in rows]
    values = [r["busbw"] for r in rows]
    fig, ax = subplots(figsize=(8.5, 0.55 * len(rows) + 2.6), layout="constrained")
    bound = [r.get("bottleneck_kind") == "nvlink" for r in rows]
    bars = ax.barh(labels, values, color=[colors[r["fabric"]] for r in rows],
                   hatch=[NVLINK_HATCH if b else "" for b in bound], edgecolor="white",
                   linewidth=0.0)
    ax.bar_label(bars, labels=[f"{v:.1f}" for v in values], padding=3)
    top = max(values, default=1.0) or 1.0
    ax.set_xlim(0, 1.12 * top)
    for bar, row in zip(bars, rows, strict=True):
        note = _bar_note(row)
        if not note:
            continue
        inside = bar.get_width() > 0.6 * top
        x = 0.01 * top if inside else bar.get_width() + 0.12 * top
        ax.text(x, bar.get_y() + bar.get_height() / 2, note, va="center", ha="left",
                fontsize=7.5, color="white" if inside else "#333333",
                bbox={"boxstyle": "round,pad=0.15", "lw": 0,
                      "fc": colors[row["fabric"]]} if inside else None)
    ax.invert_yaxis()
    ax.set_xlabel("bus bandwidth (GB/s, nccl-tests definition; axis from 0)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    if title:
        fig.suptitle(title, fontsize=11)
    if subtitle:
        ax.set_title(subtitle, fontsize=8, loc="left", color="#444444")
    handles = [Patch(facecolor=c, label=FABRIC_NAMES.get(f, f)) for f, c in colors.items()]
    if any(bound):
        handles.append(Patch(facecolor="#777777", edgecolor="white", hatch=NVLINK_HATCH,
                             label="busiest link is NVLink: bound inside the host"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 3),
               fontsize=8, frameon=False)
    return fig


def generations_busbw_figure(rows: list[dict], title: str, panels: dict[str, str]):
    """:func:`busbw_figure`'s bars, one panel per host generation side by side.

    ``rows`` carry ``host_gpu`` (rows without it form one panel); ``panels`` maps each
    host GPU to its panel's title (what its hosts are and what bounds its bars). Both
    panels share one bandwidth axis from zero, so the generations compare by length;
    NVLink-bound bars are hatched and every bar names its busiest link.

    Examples
    --------
    >>> rows = [{"host_gpu": g, "fabric": f, "routing": "ecmp", "busbw": b,
    ...          "bottleneck_kind": k, "bottleneck_utilization": 0.9}
    ...         for g, f, b, k in (("h800", "hpn7", 130.0, "nvlink"),
    ...                            ("h100", "hpn7", 250.0, "access"))]
    >>> fig = generations_busbw_figure(rows, "t", {"h800": "H800", "h100": "H100"})
    >>> [a.get_title(loc="left") for a in fig.axes], float(fig.axes[1].get_xlim()[0])
    (['H800', 'H100'], 0.0)
    >>> [str(a.patches[0].get_hatch()) for a in fig.axes]
    ['///', '']
    """
    from matplotlib.patches import Patch

    gens = list(dict.fromkeys(r.get("host_gpu") for r in rows))
    colors = fabric_colors(r["fabric"] for r in rows)
    per_panel = max((sum(r.get("host_gpu") == g for r in rows) for g in gens), default=1)
    fig, axes = subplots(1, len(gens), figsize=(6.8 * len(gens), 0.55 * per_panel + 3.0),
                             layout="constrained", sharex=True, squeeze=False)
    top = max((r["busbw"] for r in rows), default=1.0) or 1.0
    for ax, gen in zip(axes[0], gens, strict=True):
        mine = [r for r in rows if r.get("host_gpu") == gen]
        labels = [bar_label(r) for r in mine]
        bars = ax.barh(labels, [r["busbw"] for r in mine],
                       color=[colors[r["fabric"]] for r in mine], edgecolor="white",
                       hatch=[NVLINK_HATCH if r.get("bottleneck_kind") == "nvlink" else ""
                              for r in mine], linewidth=0.0)
        ax.bar_label(bars, labels=[f"{r['busbw']:.1f}" for r in mine], padding=3)
        for bar, row in zip(bars, mine, strict=True):
            note = _bar_note(row, short=True)
            # a 7-pt character takes up to ~1/85 of a 6.8-inch panel's width (1.15 x top)
            inside = bar.get_width() > (len(note) / 85 * 1.15 + 0.02) * top
            x = 0.01 * top if inside else bar.get_width() + 0.15 * top
            ax.text(x, bar.get_y() + bar.get_height() / 2, note, va="center", ha="left",
                    fontsize=7, color="white" if inside else "#333333",
                    bbox={"boxstyle": "round,pad=0.15", "lw": 0,
                          "fc": colors[row["fabric"]]} if inside else None)
        ax.set_xlim(0, 1.15 * top)
        ax.invert_yaxis()
        ax.set_xlabel("bus bandwidth (GB/s, nccl-tests definition; axis from 0)")
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        ax.set_title("\n".join(textwrap.fill(part, 80) for part in
                               panels.get(gen, str(gen)).split("\n")),
                     fontsize=8, loc="left", color="#333333")
    fig.suptitle(title, fontsize=11)
    handles = [Patch(facecolor=c, label=FABRIC_NAMES.get(f, f)) for f, c in colors.items()]
    handles.append(Patch(facecolor="#777777", edgecolor="white", hatch=NVLINK_HATCH,
                         label="busiest link is NVLink: bound inside the host"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8,
               frameon=False)
    return fig


def busbw_size_figure(curves: list[dict], title: str, held: str):
    """Bus bandwidth (GB/s, from 0) against message size (log 2 axis), one line a curve.

    ``curves`` hold ``label``, ``sizes`` (bytes), ``busbw`` (GB/s) and ``bound`` (what bounds
    the largest size: its busiest link and how busy), written at the line's end and in the
    legend, which sits below the axes.

    Examples
    --------
    >>> c = [{"label": "ar", "sizes": [2**20, 2**21], "busbw": [10.0, 20.0], "bound": "NVLink"}]
    >>> fig = busbw_size_figure(c, "t", "held")
    >>> float(fig.axes[0].get_ylim()[0]), fig.axes[0].get_xscale()
    (0.0, 'log')
    """
    fig, ax = subplots(figsize=(9, 4.8), layout="constrained")
    sizes = sorted({s for c in curves for s in c["sizes"]})
    top = 1.12 * max((max(c["busbw"]) for c in curves), default=1.0)
    ends = spread([c["busbw"][-1] for c in curves], 0.045 * top)
    for i, (c, end) in enumerate(zip(curves, ends, strict=True)):
        label = plain(c["label"]) + (f" (largest size: {c['bound']})" if c.get("bound") else "")
        ax.plot(c["sizes"], c["busbw"], marker="o", ms=4, color=f"C{i}", label=label)
        ax.annotate(f"{c['busbw'][-1]:.1f}", (c["sizes"][-1], c["busbw"][-1]),
                    xytext=(c["sizes"][-1] * 1.15, end), va="center", fontsize=8,
                    color=f"C{i}")
    ax.set_xscale("log", base=2)
    step = -(-len(sizes) // 12)   # every size up to 12; beyond, labels would run together
    ax.set_xticks(sizes[::step], [size_label(s) for s in sizes[::step]])
    ax.minorticks_off()
    if sizes:
        ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 2.2)   # room for the last value
    ax.set_ylim(0, top)
    ax.set_xlabel("message size (log scale)")
    ax.set_ylabel("bus bandwidth (GB/s, nccl-tests; axis from 0)")
    ax.grid(alpha=0.3)
    fig.suptitle(plain(title), fontsize=11)
    ax.set_title(textwrap.fill(plain(held), 120), fontsize=8, loc="left", color="#444444")
    fig.legend(loc="outside lower center", ncol=1, fontsize=8, frameon=False)
    return fig


def spread(values: list[float], gap: float) -> list[float]:
    """Label heights for ``values``: each as near its value as can be while labels stay at
    least ``gap`` apart (kept in the values' order; pushed up from the lowest).

    >>> spread([10.0, 10.5, 30.0, 10.2], 1.0)
    [10.0, 12.0, 30.0, 11.0]
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = list(values)
    for prev, i in zip(order, order[1:], strict=False):
        out[i] = max(values[i], out[prev] + gap)
    return out


def busbw_by_size_figure(rows: list[dict], held: str):
    """Bus bandwidth against message size, one line per ``fabric / routing``; points whose
    busiest link is NVLink get a black ring (bound inside the host, where routing has no
    say). ``rows`` are the demo's ``busbw_by_size`` rows; axes from zero (bandwidth).

    >>> rows = [{"fabric": "hpn7", "routing": "ecmp", "size": s, "busbw": b,
    ...          "bottleneck_kind": "nvlink"} for s, b in ((2**20, 1.0), (2**22, 3.0))]
    >>> fig = busbw_by_size_figure(rows, "H800")
    >>> float(fig.axes[0].get_ylim()[0]), len(fig.axes[0].lines)
    (0.0, 2)
    """
    curves = []
    gens = len({r.get("host_gpu") for r in rows})
    for key in dict.fromkeys((r["fabric"], r["routing"], r.get("host_gpu")) for r in rows):
        pts = sorted((r for r in rows
                      if (r["fabric"], r["routing"], r.get("host_gpu")) == key),
                     key=lambda r: r["size"])
        last = pts[-1].get("bottleneck_kind")
        hosts = f", {str(key[2]).upper()} hosts" if gens > 1 else ""
        curves.append({"label": f"{FABRIC_NAMES.get(key[0], key[0])} / {{}}{hosts}",
                       "routings": [key[1]],
                       "sizes": [r["size"] for r in pts], "busbw": [r["busbw"] for r in pts],
                       "bound": f"busiest link {LINK_WORDS.get(last, last)}" if last else "",
                       "nvlink": [r.get("bottleneck_kind") == "nvlink" for r in pts]})
    curves = _merge_identical(curves)
    bound = sum(sum(c["nvlink"]) * c["merged"] for c in curves)
    note = (f" Black rings: {bound} of {len(rows)} points whose busiest link is NVLink (bound "
            "inside the host; routing has no say there).") if bound else ""
    fig = busbw_size_figure(curves, "All-reduce bus bandwidth against message size",
                            held + note)
    ax = fig.axes[0]
    for c in curves:
        xs = [s for s, b in zip(c["sizes"], c["nvlink"], strict=True) if b]
        ys = [v for v, b in zip(c["busbw"], c["nvlink"], strict=True) if b]
        if xs:
            ax.plot(xs, ys, ls="none", marker="o", ms=9, mfc="none", mec="black", mew=0.8)
    return fig


def _merge_identical(curves: list[dict]) -> list[dict]:
    """One line for curves of one fabric and hosts with the same points under different
    routings (one would hide the other), the routings joined, ``merged`` counting them."""
    out: list[dict] = []
    for c in curves:
        same = next((o for o in out if o["label"] == c["label"] and o["sizes"] == c["sizes"]
                     and np.allclose(o["busbw"], c["busbw"], rtol=1e-9, atol=0.0)
                     and o["bound"] == c["bound"]), None)
        if same is None:
            out.append({**c, "merged": 1})
        else:
            same["routings"] += c["routings"]
            same["merged"] += 1
    for c in out:
        routings = " = ".join(c["routings"])
        c["label"] = c["label"].format(routings + (" (identical)" if c["merged"] > 1 else ""))
    return out


def allreduce_table(rows: list[dict[str, Any]], title: str):
    """The demo's all-reduce rows: time, bus bandwidth, collisions and the bottleneck kind."""
    from rich.table import Table as RichTable

    table = RichTable(title=title)
    for column in ("fabric", "routing", "algo", "time", "busbw GB/s", "hash collisions",
                   "max flows on a link", "bottleneck (busy)"):
        table.add_column(column, justify="left" if column in ("fabric", "routing", "algo")
                         else "right")
    for r in rows:
        algo = str(r.get("algo", "")) + (" (forced)" if r.get("forced_algo") else "")
        table.add_row(r["fabric"], r["routing"], algo, format_time(r["time"]),
                      f"{r['busbw']:.1f}",
                      f"{r['hash_collisions']}", f"{r['max_link_flows']:.2g}",
                      f"{r['bottleneck_kind']} {100 * r['bottleneck_utilization']:.0f}%")
    return table


def collective_sections(run: dict) -> list:
    """Bus bandwidth against message size, one curve per collective, and their table."""
    runs = [c for c in run.get("collectives", []) if c.get("per_size")]
    if not runs:
        return []
    fabric = run.get("fabric", {})
    curves, rows, algos, routings = [], [], set(), set()
    for c in runs:
        sizes = sorted(c["per_size"], key=lambda r: r["size"])
        last = sizes[-1]
        bound = link_kind(last.get("bottleneck"))
        if bound and last.get("bottleneck_utilization") is not None:
            bound += f" {100 * last['bottleneck_utilization']:.0f}% busy"
        curves.append({"label": f"{c['name']}: {c['op']} on {c['n_gpus']:,} GPUs",
                       "sizes": [r["size"] for r in sizes], "busbw": [r["busbw"] for r in sizes],
                       "bound": f"busiest link {bound}" if bound else ""})
        algos |= {f"{r['algo']}/{r['protocol']}" for r in sizes}
        routings |= {r["routing"] for r in sizes}
        for r in sizes:
            rows.append([c["name"], r["op"], f"{r['n_gpus']:,}", f"{r['size']:,.0f}",
                         f"{r['time_us']:,.1f}", f"{r['algbw']:.2f}", f"{r['busbw']:.2f}",
                         r["algo"], r["protocol"], str(r.get("hash_collisions", "-")),
                         link_kind(r.get("bottleneck")) or str(r.get("bottleneck") or "-")])
    held = (f"Held fixed: fabric {fabric.get('template', '')} ({fabric.get('gpus', 0):,} "
            f"GPUs), {run_nvlink(run) or 'NVLink: the template default'}, routing "
            f"{', '.join(sorted(routings))}; algorithm/protocol per size: "
            f"{', '.join(sorted(algos))}. Each size runs alone on an idle fabric.")
    fig = busbw_size_figure(curves, "Bus bandwidth against message size", held)
    table = Table(["collective", "op", "GPUs", "size (B)", "time (us)", "algbw (GB/s)",
                   "busbw (GB/s)", "algo", "proto", "hash collisions", "busiest link"], rows)
    return [("collectives", "Collectives", [Figure(
        fig, "collective_busbw", "Small sizes are latency-bound; large sizes approach the "
        "bandwidth of the busiest link named in the legend."), table])]


def size_section(demo: dict):
    """The demo's all-reduce bus bandwidth against message size (``busbw_by_size``)."""
    rows = demo.get("busbw_by_size") or []
    if not rows:
        return None
    cfg = demo["config"]
    held = (f"Held fixed: the same {cfg['allreduce_gpus']:,} GPUs on each fabric, "
            f"{gpu_label(cfg)}, {cfg['allreduce_algo']} all-reduce; each size alone on an idle "
            "fabric.")
    table = Table(["fabric", "routing", "size (B)", "time", "busbw (GB/s)", "hash collisions",
                   "busiest link kind"],
                  [[r["fabric"], r["routing"], f"{r['size']:,.0f}", format_time(r["time"]),
                    f"{r['busbw']:.1f}", str(r["hash_collisions"]), r["bottleneck_kind"]]
                   for r in rows])
    return ("sizes", "All-reduce bus bandwidth by message size", [
        Figure(busbw_by_size_figure(rows, held), "busbw_by_size",
               "Small messages are latency-bound; large ones reach the bandwidth of the "
               "busiest link, named per point in the table."), table])
