"""Shared CLI plumbing: error handling (exit 2, one line), pass-through options, JSON output."""

from __future__ import annotations

import functools
import json
import sys
from contextlib import contextmanager
from typing import Any

import typer

from hpnsim.cli.outputs import (  # noqa: F401  (re-exported: every command checks here)
    OutputFolder,
    check_figure_file,
    check_output_dir,
    check_output_file,
)
from hpnsim.errors import InputError
from hpnsim.jsonable import to_jsonable

#: typer ``context_settings`` for commands that accept free ``--param value`` options
#: (fabric parameters pass through to the builder).
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def fail(field: str, message: str) -> None:
    """Print ``error: field: message`` to stderr and exit with code 2."""
    typer.echo(f"error: {field}: {message}", err=True)
    raise typer.Exit(code=2)


#: field names that are not a flag's own name, but name a flag all the same
_FIELD_ALIASES = {"template": "fabric"}


def flag_in_command(field: str, params, extra_args=()) -> str:
    """The flag the user typed for an error's ``field``: the long option of the command
    parameter it names (by Python name, ``dps`` of ``--dp``, or by option name,
    ``micro_batches`` or ``micro-batches`` of ``--micro-batches``), or ``--NAME`` for a
    pass-through option given as ``--NAME`` in ``extra_args``; anything else (a YAML path,
    a flag already, a file and line, an argument) as it is.

    >>> from types import SimpleNamespace as P
    >>> params = [P(name="dps", opts=["--dp"], param_type_name="option"),
    ...           P(name="micro_batches", opts=["--micro-batches"], param_type_name="option"),
    ...           P(name="fabric", opts=["--fabric"], param_type_name="option"),
    ...           P(name="scenario", opts=["scenario"], param_type_name="argument")]
    >>> [flag_in_command(f, params, ["--segments", "2"]) for f in
    ...  ("dps", "micro_batches", "template", "segments", "jobs[0].tp", "scenario", "--seed")]
    ['--dp', '--micro-batches', '--fabric', '--segments', 'jobs[0].tp', 'scenario', '--seed']
    """
    import re

    if not re.fullmatch(r"[A-Za-z][\w-]*", field):
        return field
    key = field.replace("-", "_")
    key = _FIELD_ALIASES.get(key, key)
    for param in params:
        longs = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
        if getattr(param, "param_type_name", "") != "option" or not longs:
            continue
        names = {param.name, *(o[2:].replace("-", "_") for o in longs)}
        if key in names:
            return longs[0]
    given = {a[2:].split("=", 1)[0].replace("-", "_") for a in extra_args
             if isinstance(a, str) and a.startswith("--")}
    return "--" + key.replace("_", "-") if key in given else field


def _in_flags(message: str, params) -> str:
    """``message`` with the Python names of the command's options (those with an
    underscore, ``allow_cross_host_tp``) written as the flags (``--allow-cross-host-tp``)."""
    import re

    for param in params:
        longs = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
        name = getattr(param, "name", None) or ""
        if longs and "_" in name and getattr(param, "param_type_name", "") == "option":
            message = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", longs[0], message)
    return message


def _current_context():
    """The running command's click context (typer >= 0.24 vendors click), or None."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer on plain click
        from click import get_current_context
    return get_current_context(silent=True)


#: where a running command keeps its notes (:func:`note`) until it has succeeded
_NOTES = "hpnsim.notes"


def note(message: str) -> None:
    """Say ``note: message`` on stderr once the running command has succeeded: a command that
    fails prints its one error line and no note before it (a deprecated flag's note given
    with another flag's error would make the error two lines). Outside a command: at once.

    >>> note("--mfu is deprecated")     # outside a command: on stderr at once
    """
    ctx = _current_context()
    if ctx is None:
        typer.echo(f"note: {message}", err=True)
        return
    ctx.find_root().meta.setdefault(_NOTES, []).append(message)


def _flush_notes(ctx) -> None:
    for message in dict.fromkeys(ctx.find_root().meta.pop(_NOTES, [])):
        typer.echo(f"note: {message}", err=True)


def guarded(func):
    """Decorate a command so that an :class:`InputError` becomes one line on stderr and exit 2,
    the field named by the flag the user typed (:func:`flag_in_command`); the notes the
    command gave (:func:`note`) follow its output when it succeeds and are dropped when it
    fails."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        ctx = _current_context()
        try:
            out = func(*args, **kwargs)
        except InputError as error:
            if ctx is None or ctx.command is None:
                fail(error.field, error.message)
            ctx.find_root().meta.pop(_NOTES, None)
            params = ctx.command.params
            fail(flag_in_command(error.field, params, ctx.args),
                 _in_flags(error.message, params))
        except typer.Exit as done:
            if ctx is not None and not done.exit_code:
                _flush_notes(ctx)
            raise
        if ctx is not None:
            _flush_notes(ctx)
        return out

    return wrapper


def flag_of(path: str) -> str:
    """The command-line flag of a scenario path: ``jobs[0].micro_batch`` -> ``--micro-batch``,
    ``fabric.template`` -> ``--fabric``, ``fabric.segments`` -> ``--segments``.

    >>> flag_of("jobs[0].micro_batch"), flag_of("fabric.template"), flag_of("seed")
    ('--micro-batch', '--fabric', '--seed')
    >>> flag_of("jobs[0]"), flag_of("--plot"), flag_of("w.txt line 3")
    ('job', '--plot', 'w.txt line 3')
    >>> flag_of("collectives[0].sizes"), flag_of("collectives[0]")
    ('--sizes', 'collective')
    """
    import re

    if not re.fullmatch(r"((jobs|collectives)\[\d+\]|fabric)(\.\w+)?|\w+", path):
        return path   # already a flag, or a file and line
    if path in ("fabric", "fabric.template"):
        return "--fabric"
    last = path.rsplit(".", 1)[-1]
    if "[" in last or last in ("jobs", "collectives"):
        return "collective" if last.startswith("collectives") else "job"
    if last == "scenario":
        return "arguments"
    return "--" + last.replace("_", "-")


def option_of(path: str) -> str:
    """The bare option name of a scenario path, as ``hpnsim collective`` and ``hpnsim
    fabric`` have always named their errors: :func:`flag_of` without dashes.

    >>> option_of("collectives[0].sizes"), option_of("fabric.hosts_per_segment")
    ('sizes', 'hosts_per_segment')
    >>> option_of("fabric.no_such_param"), option_of("--seed")
    ('no_such_param', '--seed')
    """
    flag = flag_of(path)
    if flag != path and flag.startswith("--"):
        return flag[2:].replace("-", "_")
    return flag


@contextmanager
def errors_as_flags(name=flag_of):
    """Name a scenario path in an :class:`InputError` by its command-line flag (see
    :func:`flag_of`; ``name`` renames differently, e.g. :func:`option_of`), for commands
    that run a scenario built from their options.

    >>> with errors_as_flags():
    ...     raise InputError("jobs[0].ep", "must divide dp=6, got 4")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --ep: must divide dp=6, got 4
    """
    try:
        yield
    except InputError as error:
        raise InputError(name(error.field), error.message) from None


def scenario_from_flags(data: dict, model=None, section: str = "", name=flag_of):
    """Validate command-line values as a scenario (or one ``section`` of it, with ``model``
    its pydantic class), so a command and a YAML file share one validation; errors name
    the flag the user typed (see :func:`flag_of`; ``name`` as in :func:`errors_as_flags`).

    >>> scenario_from_flags({"jobs": [{"model": "llama3-8b", "tp": 0}]})
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --tp: Input should be greater than or equal to 1, got 0
    """
    from hpnsim.scenario.spec import parse_scenario, parse_section

    with errors_as_flags(name):
        return parse_scenario(data) if model is None else parse_section(model, data, section)


def force_option():
    """The ``--force`` option of a command that writes an ``--out`` folder."""
    return typer.Option(False, "--force", help="Write into a --out folder that already holds "
                        "files, first removing what hpnsim wrote there (nothing else).")


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


def csv_option():
    """The ``--csv FILE`` option of a command that prints a table."""
    return typer.Option(None, "--csv", help="Also write the table's rows to this CSV file.")


def parquet_option():
    """The ``--parquet FILE`` option (needs pyarrow: ``pip install 'hpnsim[frames]'``)."""
    return typer.Option(None, "--parquet", help="Also write the table's rows to this Parquet "
                                                "file (pip install 'hpnsim[frames]').")


def calibration_option():
    """The ``--calibration FILE`` option of a command that runs NCCL collectives."""
    return typer.Option(None, "--calibration", help="Calibration file from `hpnsim calibrate` "
                                                    "(NCCL efficiencies, latency).")


def packet_params_option():
    """The ``--packet-params FILE`` option of a command with ``--engine packet``."""
    return typer.Option(None, "--packet-params", help="packet: YAML file of parameters "
                                                      "(optional preset: connectx, spectrum4, "
                                                      "dcqcn_paper, simai; field overrides).")


def max_packets_option(default: str = "default 5e7"):
    """The ``--max-packets N`` option of a command with ``--engine packet``; ``default`` is
    what its help says in parentheses about the default."""
    return typer.Option(None, "--max-packets", help="packet: refuse runs estimated beyond "
                                                    f"this many packet hops ({default}).")


def watch_option():
    """The ``--watch PORTS`` option of a command with ``--engine packet``."""
    return typer.Option(None, "--watch", help="packet: comma list of port (link) names whose "
                                              "queues are sampled (default: the busiest "
                                              "switch ports of the paths).")


def flat_row(row: dict) -> dict:
    """A row with nested dicts spread into ``parent_key`` columns and lists as JSON text, so
    every cell is a scalar that CSV and Parquet hold alike.

    >>> flat_row({"design": "single", "inputs": {"gpus": 8, "rates": {"link": 0.5}},
    ...           "hosts": [1, 2]})
    {'design': 'single', 'inputs_gpus': 8, 'inputs_rates_link': 0.5, 'hosts': '[1, 2]'}
    """
    out: dict = {}
    for key, value in to_jsonable(row).items():
        if isinstance(value, dict):
            out.update({f"{key}_{k}": v for k, v in flat_row(value).items()})
        elif isinstance(value, list):
            out[key] = json.dumps(value)
        else:
            out[key] = value
    return out


class TableFiles:
    """The ``--csv`` and ``--parquet`` files of one command: checked when made (before any
    long work: the folder exists, the path is not a folder, pyarrow is installed for
    Parquet), written by :meth:`write` from the rows of the table the command prints.

    >>> TableFiles(None, "/nonexistent/t.parquet")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --parquet: folder /nonexistent does not exist; create it or give another path
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> files = TableFiles(os.path.join(folder, "t.csv"), None)
    >>> [p.name for p in files.write([{"stage": 0, "compute": 1.5}], echo=False)]
    ['t.csv']
    >>> open(os.path.join(folder, "t.csv")).read().splitlines()
    ['stage,compute', '0,1.5']
    """

    def __init__(self, csv: str | None, parquet: str | None) -> None:
        self.csv, self.parquet = csv, parquet
        if csv:
            check_output_file(csv, "--csv")
        if parquet:
            check_output_file(parquet, "--parquet")
            try:
                import pandas  # noqa: F401
                import pyarrow  # noqa: F401
            except ImportError as exc:
                raise InputError("--parquet", f"needs pandas and pyarrow ({exc.name} is "
                                              f"missing): pip install 'hpnsim[frames]'") from None

    def __bool__(self) -> bool:
        return bool(self.csv or self.parquet)

    def write(self, rows: list[dict], echo: bool = True) -> list:
        """Write ``rows`` (flattened by :func:`flat_row`; columns in first-seen order) to the
        files asked for, each atomically; say ``wrote PATH`` on stderr; return the paths."""
        import os
        import tempfile
        from pathlib import Path

        from hpnsim.results import file_mode, write_atomic

        flat = [flat_row(row) for row in rows]
        columns = list(dict.fromkeys(k for row in flat for k in row))
        paths = []
        if self.csv:
            import csv as csv_module
            import io

            buffer = io.StringIO()
            writer = csv_module.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(flat)
            paths.append(write_atomic(self.csv, buffer.getvalue()))
        if self.parquet:
            from hpnsim.frames import to_frame

            target = Path(self.parquet)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                       dir=target.parent)
            os.close(fd)
            try:
                to_frame(flat, columns=columns).to_parquet(tmp, index=False)
                os.chmod(tmp, file_mode())
                os.replace(tmp, target)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            paths.append(target)
        if echo:
            for path in paths:
                typer.echo(f"wrote {path}", err=True)
        return paths
