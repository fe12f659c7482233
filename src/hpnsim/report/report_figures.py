"""Figures of the HTML report that no command draws on its own: each job's iteration split
(stacked bars) and bus bandwidth against message size; :func:`save_figure` writes any figure
as PNG and SVG."""

from __future__ import annotations

import textwrap
from pathlib import Path

from hpnsim.report.canvas import pyplot

#: the parts of an iteration in the order they stack, and what a reader calls them
PARTS = (("compute", "compute"), ("tp", "exposed TP"), ("pp", "exposed PP"),
         ("dp", "exposed DP"), ("ep", "exposed EP"), ("bubble", "pipeline bubble"),
         ("optimizer", "optimizer"))
_PART_COLORS = {"compute": "#4c72b0", "tp": "#dd8452", "pp": "#937860", "dp": "#c44e52",
                "ep": "#8172b3", "bubble": "#bbbbbb", "optimizer": "#55a868"}
#: resolution of the PNGs (the SVGs are resolution-free)
DPI = 110


def plain(text) -> str:
    """``text`` as matplotlib draws it literally (``$`` would start mathtext).

    >>> plain("cost $5 and $6")
    'cost \\\\$5 and \\\\$6'
    """
    return str(text).replace("$", r"\$")


def save_figure(fig, folder: str | Path, stem: str, svg: bool = True) -> tuple[Path, Path | None]:
    """Write ``fig`` as ``stem.png`` and (unless ``svg`` is false) ``stem.svg`` in ``folder``
    and close it; the SVG's path is None when it was not written.

    >>> import tempfile
    >>> fig = pyplot().figure(figsize=(1, 1))
    >>> [p.suffix for p in save_figure(fig, tempfile.mkdtemp(), "x")]
    ['.png', '.svg']
    """
    folder = Path(folder)
    png, vector = folder / f"{stem}.png", folder / f"{stem}.svg" if svg else None
    fig.savefig(png, dpi=DPI)
    if vector is not None:
        fig.savefig(vector)
    pyplot().close(fig)
    return png, vector


def breakdown_figure(rows: list[dict], title: str, held: str):
    """One stacked horizontal bar per row: where an iteration's time goes.

    ``rows`` hold ``label``, ``parts`` (seconds per :data:`PARTS` key; they sum to the
    iteration time) and ``iterations`` (how many were averaged). Each bar ends with its
    total and names its largest part, what bounds it; the time axis starts at zero; the
    legend sits below the axes; ``held`` (what every bar shares) is the subtitle.

    Examples
    --------
    >>> rows = [{"label": "a", "iterations": 1,
    ...          "parts": {"compute": 1.0, "tp": 0.5, "bubble": 0.1}}]
    >>> fig = breakdown_figure(rows, "t", "H800")
    >>> float(fig.axes[0].get_xlim()[0]), [t.get_text() for t in fig.legends[0].get_texts()]
    (0.0, ['compute', 'exposed TP', 'pipeline bubble'])
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(rows) + 2.4), layout="constrained")
    labels = [plain(r["label"]) for r in rows]
    left = [0.0] * len(rows)
    for key, name in PARTS:
        values = [float(r["parts"].get(key, 0.0)) for r in rows]
        if not any(values):
            continue
        ax.barh(range(len(rows)), values, left=left, color=_PART_COLORS[key], label=name,
                height=0.6)
        left = [a + b for a, b in zip(left, values, strict=True)]
    top = max(left, default=1.0) or 1.0
    for i, (row, total) in enumerate(zip(rows, left, strict=True)):
        key, value = max(row["parts"].items(), key=lambda kv: kv[1])
        share = value / total if total else 0.0
        ax.text(total + 0.01 * top, i, f"{total:.3f} s; largest: {dict(PARTS)[key]} "
                f"{100 * share:.0f}%", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), labels)
    ax.set_xlim(0, 1.45 * top)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per iteration (axis from 0; the parts add up to the iteration time)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    fig.suptitle(plain(title), fontsize=11)
    ax.set_title(textwrap.fill(plain(held), 120), fontsize=8, loc="left", color="#444444")
    fig.legend(loc="outside lower center", ncol=4, fontsize=8, frameon=False)
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
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.8), layout="constrained")
    sizes = sorted({s for c in curves for s in c["sizes"]})
    for i, c in enumerate(curves):
        label = plain(c["label"]) + (f" (largest size: {c['bound']})" if c.get("bound") else "")
        ax.plot(c["sizes"], c["busbw"], marker="o", ms=4, color=f"C{i}", label=label)
        ax.annotate(f"{c['busbw'][-1]:.1f}", (c["sizes"][-1], c["busbw"][-1]),
                    textcoords="offset points", xytext=(6, 0), va="center", fontsize=8,
                    color=f"C{i}")
    ax.set_xscale("log", base=2)
    step = -(-len(sizes) // 8)   # at most 8 labels: they must not run together
    ax.set_xticks(sizes[::step], [_size_label(s) for s in sizes[::step]])
    ax.minorticks_off()
    if sizes:
        ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 2.2)   # room for the last value
    ax.set_ylim(0, 1.12 * max((max(c["busbw"]) for c in curves), default=1.0))
    ax.set_xlabel("message size (log scale: sizes double)")
    ax.set_ylabel("bus bandwidth (GB/s, nccl-tests; axis from 0)")
    ax.grid(alpha=0.3)
    fig.suptitle(plain(title), fontsize=11)
    ax.set_title(textwrap.fill(plain(held), 120), fontsize=8, loc="left", color="#444444")
    fig.legend(loc="outside lower center", ncol=1, fontsize=8, frameon=False)
    return fig


def _size_label(size: float) -> str:
    """``1048576`` -> ``'1 MiB'``.

    >>> _size_label(2**20), _size_label(3 * 2**30), _size_label(512)
    ('1 MiB', '3 GiB', '512 B')
    """
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"
