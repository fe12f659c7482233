"""The one place hpnsim loads matplotlib: the Agg backend (files, no display), then pyplot.

Report figures are made with :func:`subplots` / :func:`figure`, outside pyplot's registry of
open figures: a figure lives as long as something refers to it, so one that a report section
builds but never saves (a test, a sweep of packet runs) frees itself instead of piling up in
pyplot (its "more than 20 figures" warning).
"""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib.pyplot on the Agg backend (figures go to files; no display needed).

    Examples
    --------
    >>> pyplot().get_backend().lower()
    'agg'
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(**kwargs):
    """A matplotlib ``Figure`` that pyplot does not keep open (keywords of ``Figure``).

    >>> import gc
    >>> fig = figure(figsize=(2, 1)); n = len(pyplot().get_fignums()); del fig; _ = gc.collect()
    >>> n
    0
    """
    pyplot()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)          # drawn and saved by Agg, as pyplot's figures are
    return fig


def subplots(*args, figsize=None, layout=None, **kwargs):
    """``pyplot.subplots`` on a :func:`figure` that pyplot does not keep open.

    >>> fig, ax = subplots(figsize=(2, 1))
    >>> len(fig.axes), pyplot().get_fignums()
    (1, [])
    """
    fig = figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(*args, **kwargs)


def save(fig, path: str | Path, dpi: int) -> Path:
    """Write ``fig`` to ``path`` and close it (pyplot keeps open figures alive)."""
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path
