"""Read YAML with the line of every key, and name validation errors by YAML path and line.

``yaml.safe_load`` forgets where a value came from; a user who mistyped ``tp: 3`` in the
second job wants ``jobs[1].tp: ... (line 14)``. :func:`load_yaml` composes the document
(safe constructors only, like ``safe_load``) and records the line of every mapping key and
sequence item by its path.
"""

from __future__ import annotations

import yaml

from hpnsim.errors import (  # noqa: F401  (MAX_YAML_NODES, format_path: re-exported)
    MAX_YAML_NODES,
    InputError,
    format_path,
    read_user_yaml,
)

#: a path into a YAML document: keys and list indices, e.g. ("jobs", 1, "tp")
YamlPath = tuple


def _record_lines(node, path: YamlPath, lines: dict) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = (*path, key.value if isinstance(key, yaml.ScalarNode) else str(key.value))
            lines[sub] = key.start_mark.line + 1
            _record_lines(value, sub, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record_lines(item, (*path, i), lines)


def load_yaml(text: str, source: str = "scenario") -> tuple[object, dict]:
    """Parse YAML text safely; returns ``(data, lines)`` with ``lines[path]`` the 1-based line.

    Read by :func:`~hpnsim.errors.read_user_yaml`: a key given twice in one mapping, an alias
    that refers to its own node and a document that expands beyond
    :data:`~hpnsim.errors.MAX_YAML_NODES` are refused before any value is built.

    >>> data, lines = load_yaml("jobs:\\n  - name: a\\n    tp: 3\\n")
    >>> data["jobs"][0]["tp"], lines[("jobs", 0, "tp")]
    (3, 3)
    >>> load_yaml("a: [1, 2")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: scenario: not valid YAML: expected ',' or ']', but got '<stream end>' (line 1)
    >>> load_yaml("jobs:\\n  - tp: 2\\n    tp: 4\\n")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].tp: duplicate key (lines 2 and 3); give each key once
    >>> bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\\n" + "".join(
    ...     f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\\n"
    ...     for p, c in zip("abcdefgh", "bcdefghi"))
    >>> load_yaml(bomb)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: scenario: the document expands to more than 1,000,000 values ...
    """
    data, node = read_user_yaml(text, source)
    lines: dict = {}
    if node is not None:
        _record_lines(node, (), lines)
    return data, lines


def seconds_field(value):
    """A scenario time field: a number of seconds or a string with a unit (``"30s"``,
    ``"1.5ms"``, ``"24h"``) as seconds, at most :data:`~hpnsim.units.MAX_TIME_S`; ``None`` and other types pass through for pydantic to
    judge. Raises ``ValueError`` (pydantic's way) for booleans and unparsable strings.

    >>> seconds_field("1.5ms"), seconds_field(3), seconds_field(None)
    (0.0015, 3.0, None)
    """
    from hpnsim.units import check_time_range, parse_time

    if isinstance(value, bool):
        raise ValueError("must be a time such as 30s, 1.5ms or 24h, got a boolean")
    if isinstance(value, str | int | float):
        try:
            return check_time_range(parse_time(value, "time"), "time", value)
        except InputError as exc:
            raise ValueError(exc.message) from None
    return value


def line_of(lines: dict, path: YamlPath) -> int | None:
    """The line of ``path``, or of its nearest ancestor that has one.

    >>> line_of({("jobs",): 2, ("jobs", 0): 3}, ("jobs", 0, "tp"))
    3
    """
    path = tuple(path)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get(())


def located(error: InputError, lines: dict, path: YamlPath) -> InputError:
    """``error`` renamed to the YAML path, with the line appended when known."""
    line = line_of(lines, path) if lines else None
    suffix = f" (line {line})" if line else ""
    return InputError(format_path(path), f"{error.message}{suffix}")
