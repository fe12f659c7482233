"""Plan files: a cabling plan as CSV or JSON text, and read back against the fabric it names.

CSV: a first line naming the fabric, the column header, one row per cable::

    # hpnsim wiring plan: hpn7 --aggs-per-plane 2 --hosts-per-segment 2 --segments 1
    a_device,a_port,b_device,b_port,speed,medium
    pod0-seg0-host0,nic0p0,pod0-seg0-tor-r0-p0,swp1,200G,200G-MM

JSON: ``{"format": "hpnsim-wiring-plan/1", "fabric": {"template", "options"}, "cables":
[{a_device, a_port, b_device, b_port, speed, medium}, ...]}``.

Reading rebuilds the named fabric and its plan and refuses (:class:`InputError` naming the
file, one line) a file that is not a plan, names a fabric that cannot be built, or whose
rows do not form that fabric's plan: a row that is no cable of it (or has another speed or
medium), a row given twice, a network cable left out. A row may name its cable from either
end; in-host rows are optional.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
from pathlib import Path

from hpnsim.errors import InputError, read_user_text
from hpnsim.wiring.plan import COLUMNS, Cable, CablingPlan, cabling_plan

#: the start of a CSV plan's first line
CSV_MARK = "# hpnsim wiring plan:"
JSON_FORMAT = "hpnsim-wiring-plan/1"
IN_HOST_MEDIA = ("NVLink", "PCIe")


def fabric_words(template: str, options: dict[str, str]) -> str:
    """The fabric as command-line words, options sorted (a canonical spelling).

    >>> fabric_words("hpn7", {"segments": "1", "dual_tor": "single"})
    'hpn7 --dual-tor single --segments 1'
    """
    words = [template]
    for key in sorted(options):
        words += [f"--{key.replace('_', '-')}", str(options[key])]
    return " ".join(shlex.quote(w) for w in words)


def plan_csv(plan: CablingPlan) -> str:
    """The plan as CSV text (module docstring).

    >>> from hpnsim.fabrics import fat_tree
    >>> text = plan_csv(cabling_plan(fat_tree(2), "fat_tree", {"k": "2"}))
    >>> print(text.splitlines()[0]); print(text.splitlines()[2])
    # hpnsim wiring plan: fat_tree --k 2
    pod0-seg0-host0,nic0p0,pod0-seg0-tor,swp1,400G,400G-MM
    """
    out = io.StringIO()
    out.write(f"{CSV_MARK} {fabric_words(plan.template, plan.options)}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for cable in plan.cables:
        writer.writerow([getattr(cable, c) for c in COLUMNS])
    return out.getvalue()


def plan_json(plan: CablingPlan) -> dict:
    """The plan as a JSON-ready dict (module docstring), with its counts."""
    return {"format": JSON_FORMAT,
            "fabric": {"template": plan.template, "options": dict(plan.options)},
            "counts": plan.counts(), "cables": [cable.row() for cable in plan.cables]}


def _rows_from_csv(text: str, where: str) -> tuple[str, dict[str, str], list[tuple[int, list]]]:
    lines = text.splitlines()
    if not lines or not lines[0].startswith(CSV_MARK):
        raise InputError(where, f"not an hpnsim wiring plan: its first line must be "
                                f"'{CSV_MARK} TEMPLATE --option value ...' (as `hpnsim "
                                f"wiring plan` writes it)")
    template, options = parse_words(lines[0][len(CSV_MARK):], where)
    reader = csv.reader(io.StringIO("\n".join(lines[1:])))
    header = next(reader, None)
    if header != list(COLUMNS):
        raise InputError(where, f"line 2: the columns must be {','.join(COLUMNS)}, got "
                                f"{','.join(header or [])!r:.80}")
    rows = []
    for number, row in enumerate(reader, start=3):
        if not row:
            continue
        if len(row) != len(COLUMNS):
            raise InputError(where, f"line {number}: {len(row)} fields, a row has "
                                    f"{len(COLUMNS)} ({','.join(COLUMNS)})")
        rows.append((number, row))
    return template, options, rows


def _rows_from_json(text: str, where: str) -> tuple[str, dict[str, str], list[tuple[int, list]]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(where, f"not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
        raise InputError(where, f"not an hpnsim wiring plan (JSON with format {JSON_FORMAT})")
    fabric = data.get("fabric")
    if not isinstance(fabric, dict) or not isinstance(fabric.get("template"), str) \
            or not isinstance(fabric.get("options", {}), dict):
        raise InputError(where, "fabric: needs {template, options}")
    rows = []
    for i, item in enumerate(data.get("cables") or []):
        if not isinstance(item, dict) or any(not isinstance(item.get(c), str) for c in COLUMNS):
            raise InputError(where, f"cables[{i}]: needs the text fields {', '.join(COLUMNS)}")
        rows.append((i, [item[c] for c in COLUMNS]))
    options = {str(k): str(v) for k, v in fabric.get("options", {}).items()}
    return fabric["template"], options, rows


def parse_words(words: str, where: str) -> tuple[str, dict[str, str]]:
    """``"hpn7 --segments 1"`` -> ``("hpn7", {"segments": "1"})``; InputError naming ``where``.

    >>> parse_words(" hpn7 --segments 1 --dual-tor single", "plan.csv")
    ('hpn7', {'segments': '1', 'dual_tor': 'single'})
    """
    try:
        parts = shlex.split(words)
    except ValueError as exc:
        raise InputError(where, f"line 1: cannot read the fabric: {exc}") from None
    if not parts or parts[0].startswith("--"):
        raise InputError(where, "line 1: names no fabric template")
    options: dict[str, str] = {}
    rest = parts[1:]
    if len(rest) % 2 or any(not key.startswith("--") for key in rest[0::2]):
        raise InputError(where, "line 1: fabric options must be --name value pairs")
    for key, value in zip(rest[0::2], rest[1::2], strict=True):
        options[key[2:].replace("-", "_")] = value
    return parts[0], options


def _build(template: str, options: dict[str, str], where: str) -> CablingPlan:
    from hpnsim.fabrics.registry import build_fabric

    try:
        fabric = build_fabric(template, options)
    except InputError as error:
        raise InputError(where, f"the fabric it names cannot be built: {error}") from None
    return cabling_plan(fabric, template, options, in_host=True)


def read_plan(path: str | Path) -> CablingPlan:
    """The plan in file ``path``, checked against the fabric it names (module docstring);
    returned as that fabric's plan, network cables only (what the check compares).

    >>> import tempfile, os
    >>> from hpnsim.fabrics import fat_tree
    >>> folder = tempfile.mkdtemp()
    >>> good = os.path.join(folder, "plan.csv")
    >>> text = plan_csv(cabling_plan(fat_tree(2), "fat_tree", {"k": "2"}))
    >>> _ = open(good, "w").write(text)
    >>> len(read_plan(good).cables)
    6
    >>> _ = open(good, "w").write(text.replace("swp1,", "swp9,", 1))
    >>> read_plan(good)                            # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: .../plan.csv: line 3: pod0-seg0-host0 nic0p0 - pod0-seg0-tor swp9 is no cable of fat_tree --k 2
    """
    where = str(path)
    text = read_user_text(path, where, "plan file (CSV or JSON)")
    reader = _rows_from_json if text.lstrip().startswith("{") else _rows_from_csv
    template, options, rows = reader(text, where)
    full = _build(template, options, where)
    words = fabric_words(template, options)
    index = {}
    for i, cable in enumerate(full.cables):
        a, b = cable.ends
        index[(a, b)] = index[(b, a)] = i
    seen: dict[int, int] = {}
    for number, row in rows:
        row = [value.strip() for value in row]
        a, b = (row[0], row[1]), (row[2], row[3])
        i = index.get((a, b))
        line = f"line {number}" if reader is _rows_from_csv else f"cables[{number}]"
        if i is None:
            raise InputError(where, f"{line}: {a[0]} {a[1]} - {b[0]} {b[1]} is no cable of "
                                    f"{words}")
        cable = full.cables[i]
        if (row[4], row[5]) != (cable.speed, cable.medium):
            raise InputError(where, f"{line}: this cable is {cable.speed} {cable.medium} in "
                                    f"{words}, not {row[4]} {row[5]}")
        if i in seen:
            raise InputError(where, f"{line}: repeats the cable of "
                                    f"{'line' if reader is _rows_from_csv else 'cables'} "
                                    f"{seen[i]}")
        seen[i] = number
    network = [i for i, c in enumerate(full.cables) if c.medium not in IN_HOST_MEDIA]
    left_out = [i for i in network if i not in seen]
    if left_out:
        first = full.cables[left_out[0]]
        raise InputError(where, f"lacks {len(left_out):,} of the {len(network):,} cables of "
                                f"{words}, e.g. {first.a_device} {first.a_port} - "
                                f"{first.b_device} {first.b_port}")
    return subset(full, network)


def subset(plan: CablingPlan, rows: list[int]) -> CablingPlan:
    """The plan with only the cables ``rows`` (in that order)."""
    return CablingPlan(fabric=plan.fabric, template=plan.template, options=plan.options,
                       cables=[plan.cables[i] for i in rows], link=plan.link[rows],
                       a_node=plan.a_node[rows], b_node=plan.b_node[rows],
                       link_class=[plan.link_class[i] for i in rows],
                       network=plan.network[rows])


__all__ = ["Cable", "fabric_words", "parse_words", "plan_csv", "plan_json", "read_plan"]
