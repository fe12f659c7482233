"""Shared CLI plumbing: error handling (exit 2, one line), pass-through options, JSON output."""

from __future__ import annotations

import functools
import json
import math
import sys
from typing import Any

import typer

from hpnsim.errors import InputError

#: typer ``context_settings`` for commands that accept free ``--param value`` options
#: (fabric parameters pass through to the builder).
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def fail(field: str, message: str) -> None:
    """Print ``error: field: message`` to stderr and exit with code 2."""
    typer.echo(f"error: {field}: {message}", err=True)
    raise typer.Exit(code=2)


def guarded(func):
    """Decorate a command so that an :class:`InputError` becomes one line on stderr and exit 2."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except InputError as error:
            fail(error.field, error.message)

    return wrapper


def parse_extra_options(args: list[str]) -> dict[str, str]:
    """Turn ``["--segments", "2", "--dual-tor=stacked", "--frontend"]`` into a dict.

    Keys use underscores; a flag without a value becomes ``"true"``.

    Examples
    --------
    >>> parse_extra_options(["--segments", "2", "--dual-tor=stacked", "--frontend"])
    {'segments': '2', 'dual_tor': 'stacked', 'frontend': 'true'}
    """
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("--") or len(token) <= 2:
            raise InputError("arguments", f"unexpected argument {token!r}; use --name value")
        body = token[2:]
        if "=" in body:
            key, value = body.split("=", 1)
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            key, value = body, args[i + 1]
            i += 2
        else:
            key, value = body, "true"
            i += 1
        options[key.replace("-", "_")] = value
    return options


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars and arrays, NaN (to None) and objects with ``to_dict``, recursively.

    >>> import numpy as np
    >>> to_jsonable({"a": np.arange(2), "b": float("nan")})
    {'a': [0, 1], 'b': None}
    """
    import numpy as np

    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        value = float(value)
        return value if math.isfinite(value) else None
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict())
    return value


def emit_json(obj: Any) -> None:
    """Write ``obj`` as JSON to stdout (numpy scalars and arrays converted, NaN as null)."""
    json.dump(to_jsonable(obj), sys.stdout, indent=2)
    sys.stdout.write("\n")


def table_console(stderr: bool = False):
    """A rich console for tables: the terminal's width on a terminal, 120 columns when the
    output goes to a file or a pipe (rich's 80 would cut the wider tables)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 120)
