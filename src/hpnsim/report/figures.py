"""The demo's figures: all-reduce bus bandwidth per fabric and routing, iteration breakdown."""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import pyplot, save

#: the parts of an iteration in the order they stack (keys of IterationResult)
ITERATION_PARTS = ("compute", "tp", "pp", "dp", "ep", "bubble", "optimizer")


def plot_busbw(rows: list[dict], path: str | Path, title: str = "") -> Path:
    """Horizontal bars of bus bandwidth (GB/s) for each ``fabric / routing`` row.

    ``rows`` are :meth:`CollectiveResult.to_dict` outputs with a ``fabric`` key added.

    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "bw.png")
    >>> plot_busbw([{"fabric": "hpn7", "routing": "ecmp", "busbw": 40.0}], out).exists()
    True
    """
    plt = pyplot()
    labels = [f"{r['fabric']} / {r['routing']}" for r in rows]
    values = [r["busbw"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(rows) + 1.2))
    bars = ax.barh(labels, values, color=["#1f77b4" if "hpn" in r["fabric"] else "#d62728"
                                          for r in rows])
    ax.bar_label(bars, fmt="%.1f", padding=3)
    ax.invert_yaxis()
    ax.set_xlabel("bus bandwidth (GB/s, nccl-tests definition)")
    ax.set_title(title)
    ax.margins(x=0.15)
    fig.tight_layout()
    return save(fig, path, dpi=120)


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


def demo_figures(result, out: str | Path) -> list[Path]:
    """Write the demo's figures into directory ``out``; returns their paths.

    ``result`` is a :class:`~hpnsim.demo.DemoResult`: ``allreduce_busbw.png`` from its
    all-reduce rows, ``iteration_breakdown.png`` from its training rows.
    """
    out = Path(out)
    cfg = result.config
    return [
        plot_busbw(result.allreduce, out / "allreduce_busbw.png",
                   f"{cfg['allreduce_size'] / 2**30:g} GiB all-reduce, "
                   f"{cfg['allreduce_gpus']:,} GPUs"),
        plot_iteration_breakdown(result.training, out / "iteration_breakdown.png",
                                 f"{cfg['model']} TP{cfg['tp']} PP{cfg['pp']} DP{cfg['dp']}"),
    ]
