"""The demo's figures: all-reduce bus bandwidth per fabric and routing, iteration breakdown."""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import pyplot, save

#: the parts of an iteration in the order they stack (keys of IterationResult)
ITERATION_PARTS = ("compute", "tp", "pp", "dp", "ep", "bubble", "optimizer")
#: what a reader should call each template
FABRIC_NAMES = {"hpn7": "HPN 7.0 (2-tier, dual-plane)", "dcn_plus": "DCN+ (3-tier Clos)"}
_FABRIC_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b")
#: busiest-link kinds as a reader knows them (LinkKind names, lower case)
_LINK_WORDS = {"nvlink": "NVLink (in host)", "pcie": "PCIe (in host)",
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


def _bar_note(row: dict) -> str:
    """What bounds one bar: its busiest link (and how busy), and ECMP hash collisions."""
    kind = row.get("bottleneck_kind")
    if not kind:
        return ""
    note = f"busiest: {_LINK_WORDS.get(kind, kind)}"
    if row.get("bottleneck_utilization") is not None:
        note += f", {100 * row['bottleneck_utilization']:.0f}% busy"
    if row.get("hash_collisions"):
        note += f"; {row['hash_collisions']:,} hash collisions"
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

    ``result`` is a :class:`~hpnsim.demo.DemoResult`: ``allreduce_busbw.png`` from its
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
