"""Shared docstring entries: a family of functions with one calling contract (the stage
builders, the closed forms) describes each shared parameter once.

A docstring line holding only ``{name, name, ...}`` (at the indentation of the section's
entries) stands for those entries, one after another; :meth:`DocEntries.fill` writes them in
when the module loads, so ``help()``, the rendered docs and the doctests see the whole
numpy-style docstring.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)\{(?P<names>\w+(?:, *\w+)*)\}[ \t]*$",
                          re.MULTILINE)


class DocEntries:
    """Named docstring entries and the decorator that writes them into docstrings.

    Parameters
    ----------
    **entries : str
        Entry text by name, unindented: a numpy-style parameter (``"size : float\\n
        Bytes."``) or any other block a section repeats (a Returns entry).

    Examples
    --------
    >>> docs = DocEntries(size="size : float\\n    Bytes.", seconds="float\\n    Seconds.")
    >>> @docs.fill
    ... def wire_time(size, rate):
    ...     '''Time to put ``size`` bytes on a wire.
    ...
    ...     Parameters
    ...     ----------
    ...     {size}
    ...     rate : float
    ...         Bytes per second.
    ...
    ...     Returns
    ...     -------
    ...     {seconds}
    ...     '''
    ...     return size / rate
    >>> print(wire_time.__doc__.split("----------")[1].split("Returns")[0].rstrip())
    <BLANKLINE>
        size : float
            Bytes.
        rate : float
            Bytes per second.
    """

    def __init__(self, **entries: str) -> None:
        self.entries = {name: textwrap.dedent(text).strip("\n") for name, text in entries.items()}

    def fill(self, func: F) -> F:
        """Write the named entries into ``func``'s docstring in place of its placeholders.

        Parameters
        ----------
        func : callable
            A function whose docstring has ``{name, ...}`` lines.

        Returns
        -------
        callable
            ``func`` itself, its ``__doc__`` filled (unchanged when Python runs with ``-OO``).

        Raises
        ------
        KeyError
            A placeholder names an entry this object lacks (a typo fails at import).
        """
        if func.__doc__:
            func.__doc__ = _PLACEHOLDER.sub(self._expand, func.__doc__)
        return func

    def _expand(self, match: re.Match) -> str:
        names = [name.strip() for name in match["names"].split(",")]
        missing = [name for name in names if name not in self.entries]
        if missing:
            raise KeyError(f"no docstring entry {', '.join(missing)}; "
                           f"known: {', '.join(sorted(self.entries))}")
        text = "\n".join(self.entries[name] for name in names)
        return textwrap.indent(text, match["indent"])
