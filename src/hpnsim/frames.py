"""Tables of results as pandas DataFrames, with pandas as an optional dependency.

A leaf module (it imports nothing from hpnsim), so a result type of any layer -- the
engine's :class:`~hpnsim.engine.SimResult` as much as a scenario's
:class:`~hpnsim.results.RunResult` -- builds its ``to_frame()`` from its ``rows()`` here.
pandas comes with the ``frames`` extra: ``pip install 'hpnsim[frames]'``.
"""

from __future__ import annotations

__all__ = ["to_frame"]

INSTALL_HINT = "pip install 'hpnsim[frames]'"


def to_frame(rows: list[dict], columns: list[str] | None = None):
    """A pandas DataFrame with one row per dict of ``rows``.

    Parameters
    ----------
    rows : list of dict
        The table, one dict per row; columns are the keys in first-seen order.
    columns : list of str, optional
        Columns to use (their order); gives an empty table its columns.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    ImportError
        When pandas is not installed; the message says how to install it.

    Examples
    --------
    >>> to_frame([{"stage": 0, "compute": 1.5}, {"stage": 1, "compute": 2.0}])
       stage  compute
    0      0      1.5
    1      1      2.0
    >>> list(to_frame([], columns=["stage", "compute"]).columns)
    ['stage', 'compute']
    """
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError(f"to_frame needs pandas, an optional dependency of hpnsim: "
                          f"{INSTALL_HINT}") from exc
    return pd.DataFrame(list(rows), columns=columns)
