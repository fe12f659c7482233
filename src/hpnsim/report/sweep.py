"""A sweep's summary: a table of every point, and the headline metric against the first
swept parameter (one line per combination of the others)."""

from __future__ import annotations

from pathlib import Path

from hpnsim.report.canvas import save, subplots


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def sweep_table(result):
    """A :class:`rich.table.Table`: one row per point (by index), its overrides, then its
    figures (seconds, GB/s, MFU as a fraction, as in ``summary.csv``).

    ``result`` is a :class:`~hpnsim.sweep.execute.SweepResult` (anything with ``name``,
    ``parameters`` and ``table_rows()``).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> r = SimpleNamespace(name="s", parameters=["routing"], table_rows=lambda: [
    ...     {"point": 0, "key": "ab", "routing": "ecmp", "job0.iteration_time_s": 0.4512}])
    >>> t = sweep_table(r)
    >>> [c.header for c in t.columns], t.row_count
    (['point', 'routing', 'job0.\\niteration_time_s'], 1)
    """
    from rich.table import Table

    rows = result.table_rows()
    columns = [c for c in (rows[0] if rows else {}) if c != "key"]
    table = Table(title=f"sweep {result.name}: {len(rows)} point(s)")
    for name in columns:   # "job-a.iteration_time_s" on two lines: narrower columns
        table.add_column(name.replace(".", ".\n", 1), min_width=len(name.split(".")[0]),
                         justify="left" if name in result.parameters else "right",
                         no_wrap=name in result.parameters, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row[c]) for c in columns))
    return table


def _series(result, metric: str):
    """(x values in first-seen order, {label of the other parameters: {x: y}})."""
    first, others = result.parameters[0], result.parameters[1:]
    xs, lines = [], {}
    for row in result.rows:
        if first not in row or row.get(metric) is None:
            continue
        x = row[first]
        if x not in xs:
            xs.append(x)
        label = ", ".join(f"{p}={row.get(p, 'base')}" for p in others) or metric
        lines.setdefault(label, {})[x] = row[metric]
    return xs, lines


def sweep_figure(result, metric: str):
    """``metric`` against the first swept parameter, a line per combination of the others.

    A numeric parameter is a numeric axis; any other (e.g. routing) a categorical one in
    the sweep's order. The y axis starts at zero; the legend sits below the axes.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> r = SimpleNamespace(name="s", parameters=["jobs[0].dp", "routing"], rows=[
    ...     {"jobs[0].dp": d, "routing": k, "t": d * (1 if k == "ecmp" else 0.9)}
    ...     for d in (2, 4) for k in ("ecmp", "precise")])
    >>> fig = sweep_figure(r, "t")
    >>> [line.get_label() for line in fig.axes[0].lines]
    ['routing=ecmp', 'routing=precise']
    """
    xs, lines = _series(result, metric)
    numeric = all(isinstance(x, int | float) and not isinstance(x, bool) for x in xs)
    fig, ax = subplots(figsize=(7, 4.2), layout="constrained")
    for label, values in lines.items():
        keys = [x for x in xs if x in values]
        pos = keys if numeric else [xs.index(x) for x in keys]
        ax.plot(pos, [values[x] for x in keys], marker="o", label=label)
    if numeric:
        ax.set_xticks(xs)
    else:
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_xlabel(result.parameters[0])
    ax.set_ylabel(metric)
    top = max((v for values in lines.values() for v in values.values()), default=1.0)
    ax.set_ylim(0, 1.1 * top or 1.0)   # from zero; headroom so the top markers show whole
    ax.set_title(f"sweep {result.name}: {metric} by {result.parameters[0]}")
    ax.grid(alpha=0.3)
    if len(lines) > 1:
        fig.legend(loc="outside lower center", ncols=min(3, len(lines)), fontsize="small")
    return fig


def plot_sweep(result, metric: str, path: str | Path) -> Path:
    """:func:`sweep_figure` written to a PNG file."""
    return save(sweep_figure(result, metric), path, dpi=110)
