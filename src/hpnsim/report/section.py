"""What a section of the HTML report is made of: a :class:`Table` or a :class:`Figure`.

A section is ``(anchor, heading, parts)``. Each subject module of :mod:`hpnsim.report` makes
its own sections, only for the data a result has (no placeholders); nothing there writes
HTML (see :mod:`hpnsim.report.html`), so every user string stays raw until the page
escapes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Figure", "Table"]


@dataclass
class Table:
    """A table: ``headers`` and ``rows`` of plain strings (escaped when written)."""

    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Figure:
    """A matplotlib figure, the file stem it is saved under, and what it shows."""

    fig: Any
    stem: str
    caption: str
