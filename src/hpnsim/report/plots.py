"""Plots of sweeps: weak-scaling linearity, and collective bus bandwidth per fabric/routing."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpnsim.report.canvas import pyplot, save


def plot_linearity(result, path: str | Path) -> Path:
    """Linearity against GPUs, one line per fabric, to a PNG.

    ``result`` is a :class:`~hpnsim.workloads.scaling.ScalingResult`.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for template in dict.fromkeys(p.fabric for p in result.points):
        pts = result.curve(template)
        ax.plot([p.gpus for p in pts], [p.linearity for p in pts], marker="o", label=template)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("linearity")
    ax.set_title(f"{result.model} TP{result.tp} x PP{result.pp}: weak-scaling linearity")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return save(fig, path, dpi=110)


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
