"""Typed errors. Every error a user can cause is an :class:`InputError` naming the field."""

from __future__ import annotations


class HpnsimError(Exception):
    """Base class for all hpnsim errors."""


class InputError(HpnsimError, ValueError):
    """Bad user input: names the offending field and what is allowed.

    The CLI prints ``error: <field>: <message>`` on one line and exits with code 2.

    Examples
    --------
    >>> e = InputError("segments", "must be a positive integer, got -1")
    >>> str(e)
    'segments: must be a positive integer, got -1'
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


#: largest seed: seeds are mixed as 64-bit signed integers (``hpnsim.routing.hashing.mix64``)
MAX_SEED = 2**63 - 1


def check_seed(seed, field: str = "seed") -> int:
    """Return ``seed`` if it is an integer in ``0..2**63-1``, else raise :class:`InputError`.

    >>> check_seed(7)
    7
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: seed: must be an integer in 0..2^63-1 (9223372036854775807), got -1
    """
    import numbers

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) \
            or not 0 <= seed <= MAX_SEED:
        raise InputError(field, f"must be an integer in 0..2^63-1 ({MAX_SEED}), got {seed!r}")
    return int(seed)


def read_user_text(path, field: str, what: str = "file") -> str:
    """Read a user's UTF-8 text file; a missing file, a directory or bytes that are not UTF-8
    raise :class:`InputError` naming ``field`` (what the user typed), never a traceback.

    Newlines are kept as they are in the file (for CSV readers).

    >>> read_user_text("/nonexistent/x.txt", "model-file")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: model-file: cannot read /nonexistent/x.txt: No such file or directory
    """
    from pathlib import Path

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(field, f"cannot read {path}: {error.strerror or error}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError(field, f"{path} is not UTF-8 text (byte 0x{data[error.start]:02x} "
                                f"on line {line}); give a UTF-8 text {what}") from None


#: the largest work a command takes on without being asked, by kind; each is raised by the
#: environment variable ``HPNSIM_MAX_<KIND>`` (e.g. ``HPNSIM_MAX_TASKS=20000000``). Tasks: the
#: engine runs about 10^5 tasks a second (docs/benchmarks.md: a Mixtral EP8 iteration of
#: 121,106 tasks in 1.3 s), so 5,000,000 is about a minute of simulation and a few GiB.
#: Jobs: a cluster trace's jobs (the published Lingjun day has hundreds). Points: a sweep's
#: points (each a whole run).
WORK_LIMITS = {"tasks": 5_000_000, "jobs": 20_000, "points": 10_000}


def work_limit(kind: str) -> int:
    """The limit of ``kind`` (a key of :data:`WORK_LIMITS`), raised by ``HPNSIM_MAX_<KIND>``.

    >>> work_limit("points")
    10000
    """
    import os

    name = f"HPNSIM_MAX_{kind.upper()}"
    text = os.environ.get(name)
    if text is None:
        return WORK_LIMITS[kind]
    try:
        value = int(text)
    except ValueError:
        raise InputError(name, f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise InputError(name, f"must be a positive integer, got {text!r}")
    return value


def check_work(amount: float, kind: str, field: str, what: str) -> None:
    """Refuse, before running it, work of ``amount`` ``kind`` beyond :func:`work_limit`;
    the message names ``field`` (what the user typed that makes the work) and the variable
    that raises the limit.

    >>> check_work(3, "points", "grid", "the grid has 3 points")
    >>> check_work(80_000, "points", "grid", "the grid has 80,000 points")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: grid: the grid has 80,000 points; hpnsim runs at most 10,000 points unless HPNSIM_MAX_POINTS=N raises it
    """
    limit = work_limit(kind)
    if amount > limit:
        raise InputError(field, f"{what}; hpnsim runs at most {limit:,} {kind} unless "
                                f"HPNSIM_MAX_{kind.upper()}=N raises it")


def format_path(path: tuple) -> str:
    """``("jobs", 1, "tp")`` -> ``"jobs[1].tp"``.

    >>> format_path(("jobs", 1, "tp")), format_path(()), format_path(("fabric",))
    ('jobs[1].tp', 'scenario', 'fabric')
    """
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "scenario"


#: most nodes a YAML document may hold once its aliases are expanded: a scenario of 10,000 jobs
#: of 20 keys each is 200,000; an alias bomb ("billion laughs") is refused before it is built
MAX_YAML_NODES = 1_000_000


def _check_nodes(root, source: str, limit: int = MAX_YAML_NODES) -> None:
    import yaml

    """Refuse a composed document whose expansion (every alias copied out, as the constructed
    data will hold it) exceeds ``limit`` nodes, that refers to itself, or that repeats a key in
    a mapping. Sizes are counted once per node (aliases share their node), so a bomb costs
    no more to measure than to read."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node, path) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise InputError(format_path(path) if path else source,
                             f"an alias refers to a node that contains it (line "
                             f"{node.start_mark.line + 1}); YAML data must not refer to itself")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for k, v in node.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else None
                if name is not None and name != "<<":
                    if name in seen:
                        raise InputError(format_path((*path, name)),
                                         f"duplicate key (lines {seen[name]} and "
                                         f"{k.start_mark.line + 1}); give each key once")
                    seen[name] = k.start_mark.line + 1
                total += size(k, path) + size(v, (*path, name if name is not None else "?"))
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(item, (*path, i)) for i, item in enumerate(node.value))
        open_nodes.discard(key)
        sizes[key] = total
        if total > limit:
            raise InputError(source, f"the document expands to more than {limit:,} values "
                                     f"(its aliases copied out); hpnsim reads at most "
                                     f"{limit:,}: write the data out or split the file")
        return total

    size(root, ())


def read_user_yaml(text: str, source: str):
    """Parse a user's YAML (or JSON) text safely and within bounds; returns ``(data, node)``
    (``node``: the composed document, for line numbers; None when empty).

    Safe constructors only (like ``yaml.safe_load``); composed first and checked before any
    value is built (:func:`_check_nodes`): a repeated key, a self-referencing alias and a
    document expanding past :data:`MAX_YAML_NODES` raise :class:`InputError` naming
    ``source``, as does text that is not YAML.

    >>> read_user_yaml("a: 1\\nb: [2, 3]\\n", "rates")[0]
    {'a': 1, 'b': [2, 3]}
    >>> read_user_yaml("a: 1\\na: 2\\n", "rates")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: a: duplicate key (lines 1 and 2); give each key once
    """
    import yaml

    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_nodes(node, source)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(source, f"not valid YAML: {problem}{where}") from None
    except RecursionError:
        raise InputError(source, "not valid YAML: nested too deeply") from None
    return data, node
