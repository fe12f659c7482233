"""Gantt chart of a simulated iteration: one row per pipeline stage.

With few micro-batches every forward and backward pass is a bar. With many (128
micro-batches make 2,048 bars a few pixels wide) the chart becomes an overview, where
each stage's back-to-back passes merge into busy spans so the pipeline bubbles show as
gaps, above two zooms that draw the first and the last few micro-batches pass by pass.
"""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import figure, save, subplots

COLORS = {"F": "#4c72b0", "B": "#55a868", "W": "#8172b3", "dp": "#c44e52",
          "optimizer": "#8c8c8c", "allgather": "#dd8452", "fsdp-ag": "#dd8452",
          "fsdp-rs": "#c44e52"}
LABELS = {"F": "forward", "B": "backward", "W": "weight gradients", "dp": "DP gradient sync",
          "optimizer": "optimizer", "allgather": "parameter all-gather", "fsdp-ag": "FSDP gather",
          "fsdp-rs": "FSDP reduce-scatter"}
#: merged forward+backward passes in the overview
BUSY_COLOR = "#7f96b2"
_THIN = ("dp", "allgather", "fsdp-ag", "fsdp-rs")
#: up to this many passes per stage every pass is drawn (32 micro-batches' forward and
#: backward, ~18 px each); beyond, the overview and zooms
MAX_DETAIL_PASSES = 64
#: micro-batches drawn pass by pass at each end of a long iteration
EDGE_MICRO_BATCHES = 3
#: overview: passes closer than this fraction of the iteration merge into one span
_MERGE_FRACTION = 0.002


def merge_spans(spans, gap: float) -> list[tuple[float, float]]:
    """Merge ``(start, width)`` spans whose gap is at most ``gap`` into ``(start, width)``.

    Examples
    --------
    >>> merge_spans([(0.0, 1.0), (1.0, 1.0), (2.5, 1.0), (3.75, 0.25)], gap=0.25)
    [(0.0, 2.0), (2.5, 1.5)]
    """
    merged: list[list[float]] = []
    for start, width in sorted(spans):
        if merged and start <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], start + width)
        else:
            merged.append([start, start + width])
    return [(a, b - a) for a, b in merged]


def _title(result) -> str:
    job = result.job
    shape = " x ".join(f"{k.upper()}{job[k]}" for k in ("tp", "pp", "dp") if k in job)
    if job.get("ep", 1) > 1:
        shape += f" (EP{job['ep']})"
    micro = f", {job['micro_batches']} micro-batches" if "micro_batches" in job else ""
    schedule = f" ({job['schedule']})" if job.get("schedule") else ""
    return (f"{job.get('model', '')} {shape}{micro}{schedule}: "
            f"iteration {result.iteration_time:.3f} s").strip()


def _draw(ax, rows, stages: int, merge_gap: float | None = None,
          window: tuple[float, float] | None = None) -> None:
    """Bars of ``rows`` on ``ax``; passes merged when ``merge_gap`` is given, only those
    overlapping ``window`` when it is."""
    if window is not None:
        rows = [r for r in rows if r["finish"] >= window[0] and r["start"] <= window[1]]
    for s in range(stages):
        mine = [r for r in rows if r["stage"] == s]
        if merge_gap is not None:
            busy = [(r["start"], r["finish"] - r["start"]) for r in mine if r["kind"] in "FB"]
            ax.broken_barh(merge_spans(busy, merge_gap), (s - 0.35, 0.6), facecolors=BUSY_COLOR)
        for kind, color in COLORS.items():
            if merge_gap is not None and kind in ("F", "B"):
                continue
            spans = [(r["start"], r["finish"] - r["start"]) for r in mine if r["kind"] == kind]
            if not spans:
                continue
            if merge_gap is not None:
                spans = merge_spans(spans, merge_gap)
            if kind in _THIN:
                ax.broken_barh(spans, (s + 0.3, 0.15), facecolors=color)
            else:
                ax.broken_barh(spans, (s - 0.35, 0.6), facecolors=color,
                               edgecolor="white", linewidth=0.2)
    ax.set_yticks(range(stages))
    ax.set_yticklabels([f"stage {s}" for s in range(stages)])
    ax.set_ylim(stages - 0.4, -0.6)  # stage 0 on top


def _label_micro_batches(ax, rows, window: tuple[float, float]) -> None:
    """Write the micro-batch number in every pass bar wide enough to hold it."""
    width = window[1] - window[0]
    for r in rows:
        if r["kind"] in ("F", "B") and r["start"] >= window[0] and r["finish"] <= window[1] \
                and r["finish"] - r["start"] > 0.025 * width:
            ax.text((r["start"] + r["finish"]) / 2, r["stage"] - 0.05, str(r["micro_batch"]),
                    ha="center", va="center", fontsize=6, color="white")


def _zoom_windows(passes, stages: int, micro: int, edge: int, budget: int, end: float):
    """Time windows on the first and the last ``edge`` micro-batches, each cut so that no
    stage has more than ``budget`` passes in it (GPipe runs micro-batch 0's backward last)."""
    by_stage = [sorted((r["start"], r["finish"]) for r in passes if r["stage"] == s)
                for s in range(stages)]
    by_stage = [spans for spans in by_stage if spans]
    first_end = max(r["finish"] for r in passes if r["micro_batch"] < edge)
    first_end = min([first_end] + [spans[min(budget, len(spans)) - 1][1] for spans in by_stage])
    last_start = min(r["start"] for r in passes if r["micro_batch"] >= micro - edge)
    last_start = max([last_start] + [spans[-min(budget, len(spans))][0] for spans in by_stage])
    return (0.0, first_end), (last_start, end)


def plot_gantt(result, path: str | Path, *, title: str | None = None,
               max_passes: int = MAX_DETAIL_PASSES,
               edge: int = EDGE_MICRO_BATCHES) -> Path:
    """Draw ``result.timeline`` (an :class:`IterationResult`) to a PNG file.

    The figure is :func:`gantt_figure`'s; see there for what it shows.

    Examples
    --------
    >>> import tempfile, os
    >>> from types import SimpleNamespace
    >>> rows = [{"stage": 0, "kind": "F", "micro_batch": 0, "chunk": 0, "start": 0.0, "finish": 1.0},
    ...         {"stage": 0, "kind": "B", "micro_batch": 0, "chunk": 0, "start": 1.0, "finish": 3.0}]
    >>> fake = SimpleNamespace(timeline=rows, iteration_time=3.0, job={"model": "m"})
    >>> out = plot_gantt(fake, os.path.join(tempfile.mkdtemp(), "g.png"))
    >>> out.stat().st_size > 0
    True
    """
    fig = gantt_figure(result, title=title, max_passes=max_passes, edge=edge)
    return save(fig, path, dpi=110)


def gantt_figure(result, *, title: str | None = None, max_passes: int = MAX_DETAIL_PASSES,
                 edge: int = EDGE_MICRO_BATCHES):
    """The Gantt chart of ``result.timeline`` as a matplotlib figure.

    Forward passes are blue, backward green; the DP gradient traffic of a stage is a thin red
    bar under its row (it overlaps backward), the optimizer grey; ZeRO-3 parameter gathers
    (orange) and gradient reduce-scatters (red) are thin bars too. Past ``max_passes``
    passes on a stage the top panel merges each stage's back-to-back passes (gaps are pipeline
    bubbles) and two panels below zoom on the first and the last ``edge`` micro-batches
    (at most ``max_passes // 2`` passes a stage each), numbered pass by pass. The legend sits below the axes.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> rows = [{"stage": 0, "kind": "F", "micro_batch": 0, "chunk": 0, "start": 0.0, "finish": 1.0},
    ...         {"stage": 0, "kind": "B", "micro_batch": 0, "chunk": 0, "start": 1.0, "finish": 3.0}]
    >>> fig = gantt_figure(SimpleNamespace(timeline=rows, iteration_time=3.0, job={"model": "m"}))
    >>> [t.get_text() for t in fig.legends[0].get_texts()]
    ['forward', 'backward']
    """
    from matplotlib.patches import Patch

    rows = result.timeline
    end = max(result.iteration_time, 1e-12)
    stages = 1 + max((row["stage"] for row in rows), default=0)
    passes = [r for r in rows if r["kind"] in ("F", "B")]
    micro = 1 + max((r["micro_batch"] for r in passes), default=0)
    shown = {row["kind"] for row in rows}
    handles = [Patch(color=c, label=LABELS[k]) for k, c in COLORS.items() if k in shown]
    if len(passes) <= max_passes * stages:
        fig, ax = subplots(figsize=(12, 1.5 + 0.5 * stages), layout="constrained")
        _draw(ax, rows, stages)
        ax.set_xlim(0, end)
        ax.set_xlabel("time (s)")
        ax.set_title(title or _title(result))
    else:
        fig = figure(figsize=(12, 2.5 + 0.9 * stages), layout="constrained")
        grid = fig.add_gridspec(2, 2, height_ratios=(1, 1))
        overview = fig.add_subplot(grid[0, :])
        _draw(overview, rows, stages, merge_gap=_MERGE_FRACTION * end)
        overview.set_xlim(0, end)
        overview.set_title("whole iteration: each stage's back-to-back passes merged "
                           "(gaps are pipeline bubbles)", fontsize=9)
        first, last = _zoom_windows(passes, stages, micro, edge, max_passes // 2, end)
        for i, (window, name) in enumerate(((first, "start"), (last, "end"))):
            ax = fig.add_subplot(grid[1, i])
            _draw(ax, rows, stages, window=window)
            _label_micro_batches(ax, rows, window)
            ax.set_xlim(*window)
            ax.set_xlabel("time (s)")
            ax.set_title(f"zoom: the {name}, pass by pass (numbers: micro-batch)", fontsize=9)
            overview.axvspan(*window, color="#f2d16b", alpha=0.35, lw=0, zorder=0)
            overview.text(sum(window) / 2, -0.55, "zoom", ha="center", va="bottom", fontsize=7)
        overview.set_xlabel("time (s); shaded: the zooms below")
        handles.insert(0, Patch(color=BUSY_COLOR, label="forward + backward (merged)"))
        fig.suptitle(title or _title(result), fontsize=11)
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8,
               frameon=False)
    return fig
