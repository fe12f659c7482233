"""Gantt chart of a simulated iteration: one row per pipeline stage."""

from __future__ import annotations

from pathlib import Path

COLORS = {"F": "#4c72b0", "B": "#55a868", "dp": "#c44e52", "optimizer": "#8c8c8c",
          "allgather": "#dd8452", "fsdp-ag": "#dd8452", "fsdp-rs": "#c44e52"}
_THIN = ("dp", "allgather", "fsdp-ag", "fsdp-rs")


def plot_gantt(result, path: str | Path, *, title: str | None = None) -> Path:
    """Draw ``result.timeline`` (an :class:`IterationResult`) to a PNG file.

    Forward passes are blue, backward green; the DP gradient traffic of a stage is a thin red
    bar under its row (it overlaps backward), the optimizer grey; ZeRO-3 parameter gathers
    (orange) and gradient reduce-scatters (red) are thin bars too.

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
    from matplotlib.patches import Patch

    from hpnsim.report.canvas import pyplot, save

    plt = pyplot()

    rows = result.timeline
    stages = 1 + max((row["stage"] for row in rows), default=0)
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.5 * stages))
    for kind in COLORS:
        for s in range(stages):
            spans = [(r["start"], r["finish"] - r["start"]) for r in rows
                     if r["kind"] == kind and r["stage"] == s]
            if not spans:
                continue
            if kind in _THIN:
                ax.broken_barh(spans, (s + 0.3, 0.15), facecolors=COLORS[kind])
            else:
                ax.broken_barh(spans, (s - 0.35, 0.6), facecolors=COLORS[kind],
                               edgecolor="white", linewidth=0.2)
    ax.set_yticks(range(stages))
    ax.set_yticklabels([f"stage {s}" for s in range(stages)])
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_xlim(0, max(result.iteration_time, 1e-12))
    job = result.job
    ax.set_title(title or f"{job.get('model', '')} iteration: {result.iteration_time:.3f} s")
    shown = {row["kind"] for row in rows}
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items() if k in shown],
              loc="upper right", fontsize=7, ncol=5)
    fig.tight_layout()
    return save(fig, path, dpi=110)
