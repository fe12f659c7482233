"""Weak scaling of training: linearity as data parallelism grows (``hpnsim train --scaling``,
the demo), as a figure, a rich table and the demo's report section."""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import save, subplots
from hpnsim.report.section import Figure, Table
from hpnsim.report.style import gpu_label
from hpnsim.units import format_time

__all__ = ["linearity_figure", "plot_linearity", "scaling_section", "scaling_table"]


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
    fig, (ax, loss) = subplots(1, 2, figsize=(10, 4.4), layout="constrained")
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


def scaling_table(result):
    """One row per (fabric, size) point of a :class:`~hpnsim.training.scaling.ScalingResult`.

    Examples
    --------
    >>> from hpnsim.training.scaling import ScalingPoint, ScalingResult
    >>> r = ScalingResult("m", 8, 1, 4, [ScalingPoint("hpn7", 8, 1, 1.0, 10.0, 0.4, 1.0, 0.0)])
    >>> scaling_table(r).row_count
    1
    """
    from rich.table import Table as RichTable

    table = RichTable(title=f"{result.model} TP{result.tp} x PP{result.pp}: weak scaling")
    for col in ("fabric", "routing", "GPUs", "iteration s", "exposed DP s", "tokens/s",
                "MFU", "linearity"):
        table.add_column(col)
    for p in result.points:
        table.add_row(p.fabric, p.routing, str(p.gpus), f"{p.iteration_time:.4f}",
                      f"{p.exposed_dp:.4f}",
                      f"{p.tokens_per_second:,.0f}", f"{100 * p.mfu:.1f}%",
                      f"{p.linearity:.4f}")
    return table


def scaling_section(demo: dict):
    """The demo's weak scaling (``scaling``): linearity as DP grows, and its table."""
    from hpnsim.training.scaling import ScalingPoint, ScalingResult

    s = demo.get("scaling")
    if not s:
        return None
    result = ScalingResult(s["model"], s["tp"], s["pp"], s["micro_batches"],
                           [ScalingPoint(**p) for p in s["points"]])
    table = Table(["fabric", "routing", "GPUs", "DP", "iteration", "exposed DP",
                   "tokens/s", "MFU", "linearity"],
                  [[p["fabric"], p["routing"], f"{p['gpus']:,}", str(p["dp"]),
                    format_time(p["iteration_time"]), format_time(p["exposed_dp"]),
                    f"{p['tokens_per_second']:,.0f}", f"{100 * p['mfu']:.1f}%",
                    f"{p['linearity']:.4f}"] for p in s["points"]],
                  f"GPU {gpu_label(demo['config'])}; each fabric sized for each job and under its "
                  "own routing. linearity = throughput / (GPUs / smallest GPUs x throughput "
                  "at the smallest size).")
    return ("scaling", f"{s['model']} weak scaling: linearity", [
        Figure(linearity_figure(result), "linearity",
               "Work per GPU fixed (TP, PP, micro-batches per pipeline); only DP grows, so "
               "what is lost is the network's doing."), table])
