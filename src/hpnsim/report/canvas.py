"""The one place hpnsim loads matplotlib: the Agg backend (files, no display), then pyplot."""

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


def save(fig, path: str | Path, dpi: int) -> Path:
    """Write ``fig`` to ``path`` and close it (pyplot keeps open figures alive)."""
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path
