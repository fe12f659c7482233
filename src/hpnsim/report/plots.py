"""Plots of sweeps: weak-scaling linearity, and collective bus bandwidth per fabric/routing."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpnsim.report.canvas import pyplot, save


def plot_linearity(result, path: str | Path) -> Path:
    """:func:`linearity_figure` written to a PNG file.

    Examples
    --------
    >>> import tempfile, os
    >>> from hpnsim.training.scaling import ScalingPoint, ScalingResult
    >>> r = ScalingResult("m", 8, 1, 4, [ScalingPoint("hpn7", 8, 1, 1.0, 10.0, 0.4, 1.0, 0.0,
    ...                                               "hpn_dual_plane")])
    >>> plot_linearity(r, os.path.join(tempfile.mkdtemp(), "lin.png")).exists()
    True
    """
    return save(linearity_figure(result), path, dpi=110)


def linearity_figure(result):
    """Weak-scaling linearity against GPUs, one line per fabric and routing.

    ``result`` is a :class:`~hpnsim.training.scaling.ScalingResult`. Left, linearity on an
    axis from 0 (the curves sit near 1: scaling is nearly linear on both fabrics); right,
    what is lost to scaling, ``1 - linearity`` in percent, also from 0, beside each run's
    exposed DP communication as a share of its iteration, so a reader sees how much of
    the loss the DP collectives explain. Lines are labelled ``fabric / routing``; the
    legend sits below the axes.

    Examples
    --------
    >>> from hpnsim.training.scaling import ScalingPoint, ScalingResult
    >>> r = ScalingResult("m", 8, 1, 4, [ScalingPoint("hpn7", 8, 1, 1.0, 10.0, 0.4, 1.0, 0.0,
    ...                                               "hpn_dual_plane"),
    ...                                  ScalingPoint("hpn7", 16, 2, 1.01, 19.8, 0.4, 0.99,
    ...                                               0.01, "hpn_dual_plane")])
    >>> fig = linearity_figure(r)
    >>> [float(a.get_ylim()[0]) for a in fig.axes], fig.legends[0].get_texts()[0].get_text()
    ([0.0, 0.0], 'hpn7 / hpn_dual_plane: throughput lost')
    """
    plt = pyplot()
    fig, (ax, loss) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    gaps: list[float] = []
    for i, key in enumerate(dict.fromkeys((p.fabric, p.routing) for p in result.points)):
        pts = sorted((p for p in result.points if (p.fabric, p.routing) == key),
                     key=lambda p: p.gpus)
        gpus = [p.gpus for p in pts]
        label = f"{key[0]} / {key[1]}" if key[1] else key[0]
        color = f"C{i}"
        ax.plot(gpus, [p.linearity for p in pts], marker="o", color=color, label=label)
        ax.annotate(f"{pts[-1].linearity:.3f}", (gpus[-1], pts[-1].linearity),
                    textcoords="offset points", xytext=(0, -12 - 10 * i), ha="center",
                    fontsize=8, color=color)
        loss.plot(gpus, [100 * (1 - p.linearity) for p in pts], marker="o", color=color,
                  label=f"{label}: throughput lost")
        dp_share = [100 * p.exposed_dp / p.iteration_time for p in pts]
        loss.plot(gpus, dp_share, marker="o", ms=11, mfc="none", ls="none", color=color,
                  label=f"{label}: exposed DP comm / iteration")
        gaps.extend(abs(100 * (1 - p.linearity) - d) for p, d in zip(pts, dp_share,
                                                                      strict=True))
    ax.axhline(1.0, color="#999999", lw=0.8, ls=":")
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("linearity (1 = perfectly linear; axis from 0)")
    ax.set_title("linearity", fontsize=10)
    loss.set_ylim(bottom=0)
    if gaps and max(gaps) < 0.05:
        loss.text(0.03, 0.95, "rings sit on the lines: all the loss is exposed DP "
                  "communication", transform=loss.transAxes, va="top", fontsize=8)
    loss.set_ylabel("% of linear throughput (axis from 0)")
    loss.set_title("what scaling costs, and the exposed DP communication", fontsize=10)
    sizes = sorted({p.gpus for p in result.points})
    for a in (ax, loss):
        a.set_xscale("log", base=2)
        a.set_xticks(sizes, [f"{n:,}" for n in sizes])
        a.minorticks_off()
        a.set_xlabel("GPUs")
        a.grid(alpha=0.3)
    fig.suptitle(f"{result.model} weak scaling: TP{result.tp} x PP{result.pp} and "
                 f"{result.micro_batches} micro-batches per pipeline fixed, DP grows",
                 fontsize=11)
    handles, labels = loss.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig


def plot_collective_panels(rows: list[dict], counts, path: str | Path, *, patterns,
                           fabrics, routings, colors: dict[str, str],
                           hatches: dict[str, str]) -> Path:
    """Mean (over seeds) bus bandwidth of the slowest job, one panel per pattern.

    ``rows`` hold ``fabric``, ``routing``, ``pattern``, ``n_gpus`` and ``busbw_GBps``; one
    bar group per GPU count in ``counts``, one bar per (fabric, routing) in it: a hue per
    fabric (``colors``), a hatch per routing (``hatches``), the legend below the panels.
    """
    plt = pyplot()
    patterns = list(patterns)
    fig, axes = plt.subplots(1, len(patterns), figsize=(6 * len(patterns), 4.8), sharey=True)
    combos = [(f, r) for f in fabrics for r in routings]
    width = 0.8 / len(combos)
    for ax, pattern in zip(np.atleast_1d(axes), patterns, strict=True):
        for i, (fname, routing) in enumerate(combos):
            values = [np.mean([r["busbw_GBps"] for r in rows if r["fabric"] == fname
                               and r["routing"] == routing and r["pattern"] == pattern
                               and r["n_gpus"] == n]) for n in counts]
            ax.bar(np.arange(len(counts)) + i * width, values, width, color=colors[fname],
                   hatch=hatches[routing], edgecolor="#333333", linewidth=0.3,
                   label=f"{fname} / {routing}")
        ax.set_xticks(np.arange(len(counts)) + 0.4 - width / 2, [str(n) for n in counts])
        ax.set_title(f"{pattern} (1 GiB)")
        ax.set_xlabel("GPUs (spread across segments)")
        ax.grid(axis="y", alpha=0.3)
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("busbw of slowest job (GB/s)")
    handles, labels = first.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(fabrics), fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    return save(fig, path, dpi=120)
