"""The demo's figures: all-reduce bus bandwidth per fabric and routing, iteration breakdown."""

from __future__ import annotations

import textwrap
from pathlib import Path

from hpnsim.report.canvas import pyplot, save
from hpnsim.report.faults import throughput_steps

#: the parts of an iteration in the order they stack (keys of IterationResult)
ITERATION_PARTS = ("compute", "tp", "pp", "dp", "ep", "bubble", "optimizer")
#: what a reader should call each template
FABRIC_NAMES = {"hpn7": "HPN 7.0 (2-tier, dual-plane)", "dcn_plus": "DCN+ (3-tier Clos)"}
_FABRIC_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b")
#: busiest-link kinds as a reader knows them (LinkKind names, lower case)
LINK_WORDS = {"nvlink": "NVLink (in host)", "pcie": "PCIe (in host)",
               "access": "NIC-ToR link", "uplink": "ToR uplink", "core": "core link"}
#: hatch of bars whose busiest link is NVLink: the network is not what limits them
NVLINK_HATCH = "///"


def fabric_colors(fabrics) -> dict[str, str]:
    """One colour per fabric, in order of first appearance.

    >>> fabric_colors(["hpn7", "dcn_plus", "hpn7"])
    {'hpn7': '#1f77b4', 'dcn_plus': '#d62728'}
    """
    names = list(dict.fromkeys(fabrics))
    return {f: _FABRIC_COLORS[i % len(_FABRIC_COLORS)] for i, f in enumerate(names)}


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

    plt = pyplot()
    colors = fabric_colors(r["fabric"] for r in rows)
    labels = [f"{r['fabric']} / {r['routing']}" + (" (ideal)" if r["routing"] == "spray"
                                                    else "") for r in rows]
    values = [r["busbw"] for r in rows]
    fig, ax = plt.subplots(figsize=(8.5, 0.55 * len(rows) + 2.6), layout="constrained")
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

    plt = pyplot()
    gens = list(dict.fromkeys(r.get("host_gpu") for r in rows))
    colors = fabric_colors(r["fabric"] for r in rows)
    per_panel = max((sum(r.get("host_gpu") == g for r in rows) for g in gens), default=1)
    fig, axes = plt.subplots(1, len(gens), figsize=(6.8 * len(gens), 0.55 * per_panel + 3.0),
                             layout="constrained", sharex=True, squeeze=False)
    top = max((r["busbw"] for r in rows), default=1.0) or 1.0
    for ax, gen in zip(axes[0], gens, strict=True):
        mine = [r for r in rows if r.get("host_gpu") == gen]
        labels = [f"{r['fabric']} / {r['routing']}"
                  + (" (ideal)" if r["routing"] == "spray" else "") for r in mine]
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


def plot_iteration_breakdown(rows: list[dict], path: str | Path, title: str = "") -> Path:
    """Stacked bars of one iteration's time split (compute, exposed comm, bubble, optimizer).

    ``rows`` are :meth:`IterationResult.to_dict` outputs with a ``fabric`` key added.

    >>> import tempfile, os
    >>> row = {"fabric": "hpn7", "compute_time": 1.0, "bubble": 0.2, "optimizer_time": 0.01,
    ...        "exposed_comm": {"tp": 0.3, "pp": 0.1, "dp": 0.05, "ep": 0.0}}
    >>> out = os.path.join(tempfile.mkdtemp(), "it.png")
    >>> plot_iteration_breakdown([row], out).exists()
    True
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.7 * len(rows) + 2.0))
    left = [0.0] * len(rows)
    labels = [r["fabric"] for r in rows]
    for part in ITERATION_PARTS:
        values = [_part_time(r, part) for r in rows]
        if not any(values):
            continue
        ax.barh(labels, values, left=left, label=part)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("seconds per iteration")
    ax.set_title(title)
    ax.legend(ncol=7, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.3),
              frameon=False)
    fig.tight_layout()
    return save(fig, path, dpi=120)


def _part_time(row: dict, part: str) -> float:
    if part == "compute":
        return float(row["compute_time"])
    if part == "bubble":
        return float(row["bubble"])
    if part == "optimizer":
        return float(row["optimizer_time"])
    return float(row["exposed_comm"].get(part, 0.0))


def allreduce_subtitle(config: dict, rows: list[dict]) -> str:
    """What the demo's all-reduce bars share (GPU, NVLink, NIC, algorithm) and what bounds them.

    Examples
    --------
    >>> cfg = {"allreduce_gpus": 16, "allreduce_size": 2**30, "allreduce_algo": "ring",
    ...        "gpu": "h800", "hosts": {"hpn7": {"nvlink_bandwidth": 4e11,
    ...                                          "nic_bandwidth": 5e10}}}
    >>> print(allreduce_subtitle(cfg, [{"bottleneck_kind": "nvlink", "protocol": "ll128"}]))
    Held fixed: the same 16 GPUs (H800, NVLink 400 GB/s, NIC 400 Gb/s per GPU), ring (LL128).
    1 of 1 bars are NVLink-bound (hatched): their limit is inside the host, where routing has no say.
    """
    hosts = {(h["nvlink_bandwidth"], h["nic_bandwidth"])
             for h in config.get("hosts", {}).values()}
    gpu = str(config.get("gpu", "")).upper()
    if len(hosts) == 1:
        nvlink, nic = hosts.pop()
        gpu += f"{', ' if gpu else ''}NVLink {nvlink / 1e9:g} GB/s, NIC {8 * nic / 1e9:g} Gb/s per GPU"
    protocols = {str(r.get("protocol", "")).upper() for r in rows} - {""}
    algo = config["allreduce_algo"] + (f" ({protocols.pop()})" if len(protocols) == 1 else "")
    held = f"the same {config['allreduce_gpus']:,} GPUs" + (f" ({gpu})" if gpu else "")
    bound = sum(r.get("bottleneck_kind") == "nvlink" for r in rows)
    text = (f"Held fixed: {held}, {algo}.\n{bound} of {len(rows)} bars are NVLink-bound "
            "(hatched): their limit is inside the host, where routing has no say.")
    if any(r.get("routing") == "spray" for r in rows):
        text += ("\n(ideal) = per-packet spraying, no hash collisions: a reference, not a "
                 "deployed policy.")
    return text


def demo_figures(result, out: str | Path) -> list[Path]:
    """Write the demo's figures into directory ``out``; returns their paths.

    ``result`` is a :class:`~hpnsim.demo.pipeline.DemoResult`: ``allreduce_busbw.png`` from its
    all-reduce rows, ``iteration_breakdown.png`` from its training rows.
    """
    out = Path(out)
    cfg = result.config
    return [
        plot_busbw(result.allreduce, out / "allreduce_busbw.png",
                   f"{cfg['allreduce_size'] / 2**30:g} GiB all-reduce over "
                   f"{cfg['allreduce_gpus']:,} GPUs: bus bandwidth by fabric and routing",
                   allreduce_subtitle(cfg, result.allreduce)),
        plot_iteration_breakdown(result.training, out / "iteration_breakdown.png",
                                 f"{cfg['model']} TP{cfg['tp']} PP{cfg['pp']} DP{cfg['dp']}"),
    ]


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
    from hpnsim.report.report_figures import busbw_size_figure

    curves = []
    gens = len({r.get("host_gpu") for r in rows})
    for key in dict.fromkeys((r["fabric"], r["routing"], r.get("host_gpu")) for r in rows):
        pts = sorted((r for r in rows
                      if (r["fabric"], r["routing"], r.get("host_gpu")) == key),
                     key=lambda r: r["size"])
        last = pts[-1].get("bottleneck_kind")
        hosts = f", {str(key[2]).upper()} hosts" if gens > 1 else ""
        curves.append({"label": f"{FABRIC_NAMES.get(key[0], key[0])} / {key[1]}{hosts}",
                       "sizes": [r["size"] for r in pts], "busbw": [r["busbw"] for r in pts],
                       "bound": f"busiest link {LINK_WORDS.get(last, last)}" if last else "",
                       "nvlink": [r.get("bottleneck_kind") == "nvlink" for r in pts]})
    bound = sum(sum(c["nvlink"]) for c in curves)
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


def failure_figure(failure: dict, held: str):
    """Samples/s per iteration against time through the demo's link failure, one line per
    ToR design; the fault window shaded red; both axes from zero; legend below the axes.

    >>> t = [{"start": k * 1.0, "end": k + 1.0, "samples_per_s": 8.0} for k in range(3)]
    >>> f = {"fault": "link:gpu1.port0@1s+1s", "fault_start": 1.0, "fault_duration": 1.0,
    ...      "designs": [{"design": "single ToR", "timeline": t, "time_lost": 0.5}]}
    >>> fig = failure_figure(f, "held")
    >>> [float(v) for v in fig.axes[0].get_xlim()[:1] + fig.axes[0].get_ylim()[:1]]
    [0.0, 0.0]
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.2), layout="constrained")
    start, duration = failure["fault_start"], failure["fault_duration"]
    ax.axvspan(start, start + duration, color="red", alpha=0.12, lw=0,
               label=f"link down ({failure['fault']})")
    for i, d in enumerate(failure["designs"]):
        xs, ys = throughput_steps(d["timeline"])
        ax.plot(xs, ys, lw=1.6, color=_FABRIC_COLORS[i],
                label=f"{d['design']}: {d['time_lost']:.2f} s lost against no fault")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time (s; axis from 0)")
    ax.set_ylabel("samples/s of each iteration (axis from 0)")
    ax.grid(alpha=0.3)
    fig.suptitle("One access link fails and is repaired: single ToR vs non-stacked dual ToR",
                 fontsize=11)
    ax.set_title(held, fontsize=8, loc="left", color="#444444", wrap=True)
    fig.legend(loc="outside lower center", ncol=1, fontsize=8, frameon=False)
    return fig


def cluster_figure(cluster: dict, held: str):
    """Cluster GPU utilization between events over time, one step line per scheduler (its
    overall utilization and mean JCT in the legend); axes from zero, legend below.

    >>> run = {"scheduler": "none", "gpu_utilization": 0.4, "mean_jct": 3.0,
    ...        "timeline": [{"start": 0.0, "end": 1.0, "utilization": 0.4}]}
    >>> fig = cluster_figure({"runs": [run]}, "held")
    >>> float(fig.axes[0].get_ylim()[0])
    0.0
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.2), layout="constrained")
    for i, run in enumerate(cluster["runs"]):
        xs, ys = [], []
        for seg in run["timeline"]:
            xs += [seg["start"], seg["end"]]
            ys += [100 * seg["utilization"]] * 2
        ax.plot(xs, ys, lw=1.6, color=_FABRIC_COLORS[i], ls="-" if i == 0 else "--",
                label=f"scheduler {run['scheduler']}: {100 * run['gpu_utilization']:.2f}% "
                      f"overall, mean JCT {run['mean_jct']:.2f} s")
    ax.set_xlim(left=0)
    ax.set_ylim(0, 100)
    ax.set_xlabel("time (s; axis from 0)")
    ax.set_ylabel("GPU utilization between events (%)")
    ax.grid(alpha=0.3)
    fig.suptitle("A small shared cluster with no scheduler and with Crux", fontsize=11)
    ax.set_title(held, fontsize=8, loc="left", color="#444444", wrap=True)
    fig.legend(loc="outside lower center", ncol=1, fontsize=8, frameon=False)
    return fig
