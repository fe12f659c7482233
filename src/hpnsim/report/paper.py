"""The HPN paper's collective experiments (``experiments/hpn_vs_clos_collectives.py``) in one
figure: bus bandwidth against size, per case, and HPN 7.0's gain over DCN+ beside the
published range."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpnsim.report.canvas import save, subplots

__all__ = ["plot_paper_collectives"]


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
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    cases = list(dict.fromkeys(r["case"] for r in rows))

    def busbw(variant, system, case, size):
        return np.array([r["busbw_GBps"] for r in rows if r["variant"] == variant
                         and r["system"] == system and r["case"] == case
                         and r["size"] == size])

    fig, (sweep, bars, gain) = subplots(1, 3, figsize=(17, 5), layout="constrained")
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
