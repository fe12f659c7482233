"""Plots of sweeps: weak-scaling linearity, and the HPN paper's collective experiments."""

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


def plot_paper_collectives(rows: list[dict], path: str | Path, *, published=None,
                           headline: float = 4e9) -> Path:
    """The HPN paper's collective experiments (experiments/hpn_vs_clos_collectives.py).

    ``rows`` hold ``variant``, ``system``, ``case``, ``op``, ``size`` and ``busbw_GBps`` (one
    per seed). Left: busbw against size of the 448-GPU all-reduce per system, first variant
    (the paper's H800 hosts), seed min-max as a band; middle: busbw of every case at
    ``headline`` bytes, first variant, seed range as error bars; right: HPN's gain over DCN+
    (ratio of seed means) per case and variant, a ``published`` range (low, high) shaded
    when given (the HPN paper publishes none for HPN over DCN+: its +50–64% is Appendix A's
    dual- over single-plane HPN).

    Examples
    --------
    >>> import os, tempfile
    >>> rows = [{"variant": "h800", "system": s, "case": "allreduce 448", "op": "allreduce",
    ...          "size": 4e9, "busbw_GBps": b} for s, b in (("hpn7", 150.0), ("dcn_plus", 100.0))]
    >>> plot_paper_collectives(rows, os.path.join(tempfile.mkdtemp(), "p.png")).exists()
    True
    """
    plt = pyplot()
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    cases = list(dict.fromkeys(r["case"] for r in rows))

    def busbw(variant, system, case, size):
        return np.array([r["busbw_GBps"] for r in rows if r["variant"] == variant
                         and r["system"] == system and r["case"] == case
                         and r["size"] == size])

    fig, (sweep, bars, gain) = plt.subplots(1, 3, figsize=(17, 5), layout="constrained")
    first = variants[0]
    for i, system in enumerate(systems):
        for case, style in (("allreduce 448", "-"), ("allgather 448", ":")):
            sizes = sorted({r["size"] for r in rows if r["case"] == case})
            if not sizes:
                continue
            values = [busbw(first, system, case, s) for s in sizes]
            x = np.array(sizes) / 1e9
            sweep.plot(x, [v.mean() for v in values], style, marker="o", color=f"C{i}",
                       label=f"{system} {case.split()[0]}")
            sweep.fill_between(x, [v.min() for v in values], [v.max() for v in values],
                               color=f"C{i}", alpha=0.15)
    sweep.set_xscale("log")
    sweep.set_ylim(bottom=0)
    sweep.set_xlabel("buffer (GB)")
    sweep.set_ylabel("busbw (GB/s)")
    sweep.set_title(f"448 GPUs, {first}: busbw against size", fontsize=10)
    sweep.legend(fontsize=7)
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        values = [busbw(first, system, c, headline) for c in cases]
        mean = np.array([v.mean() if v.size else np.nan for v in values])
        low = np.array([v.min() if v.size else np.nan for v in values])
        high = np.array([v.max() if v.size else np.nan for v in values])
        bars.bar(np.arange(len(cases)) + i * width, mean, width, color=f"C{i}", label=system,
                 yerr=[mean - low, high - mean], capsize=2)
    bars.set_xticks(np.arange(len(cases)) + 0.4 - width / 2, cases, rotation=35, ha="right",
                    fontsize=8)
    bars.set_ylabel("busbw of the slowest job (GB/s)")
    bars.set_title(f"{first}, {headline / 1e9:g} GB, seed range as error bars", fontsize=10)
    bars.legend(fontsize=7)
    if published is not None:
        gain.axhspan(100 * published[0], 100 * published[1], color="#bbbbbb", alpha=0.5,
                     label="published")
    width = 0.8 / len(variants)
    for j, variant in enumerate(variants):
        values = []
        for case in cases:
            hpn, dcn = busbw(variant, "hpn7", case, headline), busbw(variant, "dcn_plus", case,
                                                                       headline)
            values.append(100 * (hpn.mean() / dcn.mean() - 1) if hpn.size and dcn.size
                          else np.nan)
        gain.bar(np.arange(len(cases)) + j * width, values, width, color=f"C{j + 3}",
                 label=variant)
    gain.axhline(0, color="#333333", linewidth=0.6)
    gain.set_xticks(np.arange(len(cases)) + 0.4 - width / 2, cases, rotation=35, ha="right",
                    fontsize=8)
    gain.set_ylabel("HPN 7.0 gain over DCN+ (%)")
    gain.set_title(f"hpn7 (its routing) vs dcn_plus (ECMP), {headline / 1e9:g} GB", fontsize=10)
    gain.legend(fontsize=7)
    return save(fig, path, dpi=110)
