"""Sweeps: one base scenario, many points (a grid or a list of overrides), one row per point.

A sweep file names a ``base`` scenario (inline, or the path of a scenario file, relative to
the sweep file) and either a ``grid`` (YAML paths of the scenario, each with a list of
values; every combination is a point, the first path varying slowest) or ``points`` (a
list of overrides, each a mapping of paths to values)::

    base: one_job.yaml
    grid:
      fabric.tor_uplinks: [2, 4]
      jobs[0].dp: [2, 4]
      routing: [ecmp, hpn_dual_plane]

A path is dotted keys and list indices (``jobs[0].dp``); a value replaces what the base has
there (a mapping replaces the whole mapping). :func:`load_sweep` validates every point's
scenario, fabric checks included, before anything runs; an error names the sweep path of
the value that caused it (``grid.jobs[0].dp[1]: ... (line 7)``) or the point.

Each point is identified by its key, a hash of its overrides (:func:`point_key`), so a
resumed sweep skips exactly the points already in ``rows.jsonl``. Running the points (a
process pool or Ray) is :mod:`hpnsim.sweep.execute`.

Examples
--------
>>> s = parse_sweep({"base": {"fabric": {"segments": 1, "hosts_per_segment": 2,
...                                      "backup_hosts": 0},
...                           "jobs": [{"model": "llama3-8b", "tp": 8, "global_batch": 4}]},
...                  "grid": {"jobs[0].dp": [1, 2], "routing": ["ecmp", "precise"]}})
>>> [p.overrides for p in s.points][:2], len(s.points), s.parameters
([{'jobs[0].dp': 1, 'routing': 'ecmp'}, {'jobs[0].dp': 1, 'routing': 'precise'}], 4, ['jobs[0].dp', 'routing'])
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpnsim.errors import InputError, check_work, read_user_text
from hpnsim.scenario.yaml import format_path, line_of, load_yaml

__all__ = ["Sweep", "SweepPoint", "apply_overrides", "load_sweep", "parse_path", "parse_sweep",
           "point_key"]

_PATH = re.compile(r"[A-Za-z_]\w*(\[\d+\])*(\.[A-Za-z_]\w*(\[\d+\])*)*")
_SWEEP_KEYS = ("name", "base", "grid", "points")


@dataclass
class SweepPoint:
    """One point: its index, its overrides (path -> value), its key and full scenario data.

    ``sources`` maps each override path to where its value sits in the sweep file
    (``("grid", "jobs[0].dp", 1)`` or ``("points", 3, "jobs[0].dp")``).
    """

    index: int
    overrides: dict
    key: str
    scenario: dict
    sources: dict = field(default_factory=dict, repr=False)

    def label(self) -> str:
        """``jobs[0].dp=2, routing=ecmp`` (``base`` for a point without overrides)."""
        return ", ".join(f"{k}={v}" for k, v in self.overrides.items()) or "base"


@dataclass
class Sweep:
    """A validated sweep: its points in order, the swept paths, a hash of the base."""

    name: str
    points: list[SweepPoint]
    parameters: list[str]
    base_hash: str


def parse_path(text: Any, field: str = "path") -> tuple:
    """A YAML path string as a tuple of keys and indices.

    >>> parse_path("jobs[0].dp"), parse_path("fabric.tor_uplinks")
    (('jobs', 0, 'dp'), ('fabric', 'tor_uplinks'))
    >>> parse_path("jobs[0.dp", "grid.jobs[0.dp")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: grid.jobs[0.dp: not a scenario path; write keys with dots and list items as [i], e.g. fabric.tor_uplinks or jobs[0].dp
    """
    if not isinstance(text, str) or not _PATH.fullmatch(text):
        raise InputError(field, "not a scenario path; write keys with dots and list items as "
                                "[i], e.g. fabric.tor_uplinks or jobs[0].dp")
    return tuple(int(p) if p.isdigit() else p for p in re.findall(r"[A-Za-z_]\w*|\d+", text))


def point_key(overrides: dict) -> str:
    """A stable hash of a point's overrides (16 hex digits; key order does not matter).

    >>> point_key({"a": 1, "b": "x"}) == point_key({"b": "x", "a": 1})
    True
    >>> point_key({"a": 1}) == point_key({"a": 2})
    False
    """
    text = json.dumps(overrides, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def apply_overrides(base: dict, overrides: dict) -> dict:
    """A deep copy of ``base`` with each path set to its value (missing keys are created;
    list items must exist). Raises :class:`InputError` named by the path.

    >>> apply_overrides({"jobs": [{"dp": 1}]}, {"jobs[0].dp": 4, "fabric.k": 8})
    {'jobs': [{'dp': 4}], 'fabric': {'k': 8}}
    >>> apply_overrides({"jobs": [{"dp": 1}]}, {"jobs[2].dp": 4})
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[2].dp: jobs has 1 item(s) in the base scenario
    """
    data = copy.deepcopy(base)
    for text, value in overrides.items():
        path = parse_path(text, text)
        node = data
        for depth, part in enumerate(path):
            last = depth == len(path) - 1
            where = format_path(path[:depth]) or "scenario"
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    count = f"has {len(node)} item(s)" if isinstance(node, list) \
                        else "is not a list"
                    raise InputError(text, f"{where} {count} in the base scenario")
            elif not isinstance(node, dict):
                raise InputError(text, f"{where} is not a mapping in the base scenario")
            if last:
                node[part] = copy.deepcopy(value)
            else:
                if isinstance(part, str) and part not in node:
                    node[part] = {}
                node = node[part]
    return data


def _absolute_files(data: dict, folder: Path) -> dict:
    """Relative file names of a scenario (workloads, model files, topology) made absolute
    against ``folder``, as :func:`~hpnsim.scenario.spec.load_scenario` resolves them."""
    def fix(mapping, key):
        value = mapping.get(key) if isinstance(mapping, dict) else None
        if isinstance(value, str) and not Path(value).is_absolute():
            mapping[key] = str(folder / value)

    for job in data.get("jobs") or []:
        for key in ("workload", "model_file"):
            fix(job, key)
    fix(data.get("fabric"), "topology")
    return data


def _grid_points(grid: Any, lines: dict) -> list[tuple[dict, dict]]:
    if not isinstance(grid, dict) or not grid:
        raise _at(InputError("grid", "must map scenario paths to lists of values, e.g. "
                                     "jobs[0].dp: [4, 8]"), lines, ("grid",))
    axes = []
    for path, values in grid.items():
        _checked_path(path, f"grid.{path}", lines, ("grid", path))
        if not isinstance(values, list) or not values:
            raise _at(InputError(f"grid.{path}", f"must be a non-empty list of values, got "
                                                 f"{values!r}"), lines, ("grid", path))
        seen = {}
        for k, value in enumerate(values):
            text = json.dumps(value, sort_keys=True)
            if text in seen:
                raise _at(InputError(format_path(("grid", path, k)),
                                     f"repeats {value!r} (item {seen[text]})"),
                          lines, ("grid", path, k))
            seen[text] = k
        axes.append([(path, k, value) for k, value in enumerate(values)])
    size = math.prod(len(axis) for axis in axes)
    check_work(size, "points", "grid", f"the grid has {size:,} points ("
               + " x ".join(str(len(axis)) for axis in axes) + ")")
    return [({p: v for p, _, v in combo}, {p: ("grid", p, k) for p, k, _ in combo})
            for combo in itertools.product(*axes)]


def _list_points(points: Any, lines: dict) -> list[tuple[dict, dict]]:
    if not isinstance(points, list) or not points:
        raise _at(InputError("points", "must be a non-empty list of overrides, e.g. "
                                       "- {jobs[0].dp: 4, routing: ecmp}"), lines, ("points",))
    out = []
    check_work(len(points), "points", "points", f"the list has {len(points):,} points")
    for i, item in enumerate(points):
        if not isinstance(item, dict):
            raise _at(InputError(f"points[{i}]", f"must map scenario paths to values, got "
                                                 f"{item!r}"), lines, ("points", i))
        for path in item:
            _checked_path(path, f"points[{i}].{path}", lines, ("points", i, path))
        out.append((dict(item), {p: ("points", i, p) for p in item}))
    return out


def _checked_path(text: Any, field: str, lines: dict, where: tuple) -> None:
    try:
        parse_path(text, field)
    except InputError as exc:
        raise _at(exc, lines, where) from None


def _at(error: InputError, lines: dict, path: tuple, file: str = "") -> InputError:
    """``error`` with the line of ``path`` in the sweep file appended, when known."""
    line = line_of(lines, path) if lines else None
    where = f" (line {line}{f' of {file}' if file else ''})" if line else ""
    return InputError(error.field, f"{error.message}{where}")


def _blame(error: InputError, point: SweepPoint, grid: bool, lines: dict,
           base_lines: tuple[dict, tuple, str]) -> InputError:
    """Name a point's scenario error by the sweep value that caused it, else by the point."""
    for path, source in point.sources.items():
        if error.field == path or error.field.startswith((f"{path}.", f"{path}[")):
            rest = error.field[len(path):]
            return _at(InputError(format_path(source) + rest, error.message), lines, source)
    blame_lines, prefix, file = base_lines
    try:
        where = (*prefix, *parse_path(error.field))
    except InputError:
        where = prefix
    if grid:
        located = _at(InputError("", error.message), blame_lines, where, file)
        return InputError("grid", f"point {point.index} ({point.label()}): {error.field}: "
                                  f"{located.message}")
    return _at(InputError(f"points[{point.index}]", f"{error.field}: {error.message}"),
               lines, ("points", point.index))


def parse_sweep(data: Any, lines: dict | None = None, folder: str | Path = ".",
                check: bool = True) -> Sweep:
    """Validate a sweep dict and every point's scenario (see the module docstring).

    ``folder`` is where a base given as a file name, and relative file names in the base,
    are found. With ``check`` (default) every point's scenario is validated and its fabric
    checked, so a bad value is reported before anything runs.

    >>> parse_sweep({"base": {"jobs": [{"model": "llama3-8b", "tp": 8}]},
    ...              "grid": {"jobs[0].tp": [8, 3]}})
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: grid.jobs[0].tp[1]: must divide the GPUs per host (8), got 3
    """
    lines = lines or {}
    folder = Path(folder)
    if not isinstance(data, dict):
        raise InputError("sweep", "must be a mapping with base and grid (or points)")
    for key in data:
        if key not in _SWEEP_KEYS:
            raise _at(InputError(str(key), f"unknown key; a sweep has {', '.join(_SWEEP_KEYS)}"),
                      lines, (key,))
    if "base" not in data:
        raise InputError("base", "required: a scenario (inline) or the path of a scenario file")
    if ("grid" in data) == ("points" in data):
        raise InputError("grid", "give grid (values per path) or points (a list of "
                                 "overrides), exactly one")
    base, base_lines = data["base"], (lines, ("base",), "")
    if isinstance(base, str):
        path = folder / base
        base, file_lines = load_yaml(read_user_text(str(path), "base"), "base")
        base_lines = (file_lines, (), path.name)
        folder = path.resolve().parent
    if not isinstance(base, dict):
        raise _at(InputError("base", "must be a scenario (a mapping) or a file name"), lines,
                  ("base",))
    grid = "grid" in data
    specs = _grid_points(data["grid"], lines) if grid else _list_points(data["points"], lines)
    points, seen = [], {}
    for i, (overrides, sources) in enumerate(specs):
        key = point_key(overrides)
        if key in seen:
            raise _at(InputError(f"points[{i}]", f"same overrides as points[{seen[key]}]"),
                      lines, ("points", i))
        seen[key] = i
        try:
            scenario = _absolute_files(apply_overrides(base, overrides), folder)
        except InputError as exc:
            path = sources[exc.field]
            raise _at(InputError(format_path(path), exc.message), lines, path) from None
        points.append(SweepPoint(i, overrides, key, scenario, sources))
    if check:
        _check_points(points, grid, lines, base_lines)
    parameters = list(dict.fromkeys(p for point in points for p in point.overrides))
    base_hash = point_key(base)
    return Sweep(str(data.get("name") or ""), points, parameters, base_hash)


def _check_points(points: list[SweepPoint], grid: bool, lines: dict, base_lines) -> None:
    """Validate every point's scenario and check it against its fabric (each distinct
    fabric built once)."""
    from hpnsim.scenario.runner import build_scenario_fabric
    from hpnsim.scenario.spec import check_against_fabric, parse_scenario

    fabrics: dict[str, Any] = {}
    for point in points:
        try:
            scenario = parse_scenario(point.scenario)
            spec = json.dumps([scenario.fabric.model_dump(mode="json"),
                               sorted({job.gpu for job in scenario.jobs})], sort_keys=True)
            if spec not in fabrics:
                fabrics[spec] = build_scenario_fabric(scenario)
            check_against_fabric(scenario, fabrics[spec])
        except InputError as exc:
            raise _blame(exc, point, grid, lines, base_lines) from None


def load_sweep(path: str | Path, check: bool = True) -> Sweep:
    """Read and validate a sweep file (a base file name in it is relative to the sweep)."""
    data, lines = load_yaml(read_user_text(path, "sweep"), "sweep")
    sweep = parse_sweep(data, lines, Path(path).resolve().parent, check=check)
    sweep.name = sweep.name or Path(path).stem
    return sweep
