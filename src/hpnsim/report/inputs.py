"""What ``hpnsim report DIR`` reads: the ``results.json`` of ``hpnsim run --out DIR`` or the
``demo.json`` of ``hpnsim demo``, checked to be ours before anything is drawn."""

from __future__ import annotations

import json
from pathlib import Path

from hpnsim.errors import InputError

#: keys every ``RunResult.to_dict()`` has (``results.json``)
RUN_KEYS = frozenset({"scenario", "fabric", "jobs", "collectives", "makespan"})
#: keys every ``DemoResult.to_dict()`` has (``demo.json``)
DEMO_KEYS = frozenset({"config", "fabrics", "allreduce", "training"})


def load_results(folder: str | Path) -> tuple[str, dict]:
    """``("run", dict)`` from ``folder/results.json`` or ``("demo", dict)`` from
    ``folder/demo.json``; :class:`~hpnsim.errors.InputError` on field ``DIR`` when the folder
    is missing, holds neither, or holds a file that is not an hpnsim result.

    Examples
    --------
    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "demo.json"), "w").write(json.dumps(
    ...     {"config": {}, "fabrics": [], "allreduce": [], "training": []}))
    >>> load_results(d)[0]
    'demo'
    >>> _ = open(os.path.join(d, "results.json"), "w").write('{"rows": []}')
    >>> try:
    ...     load_results(d)
    ... except InputError as e:
    ...     print(e.field, "not an hpnsim result" in e.message)
    DIR True
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("DIR", f"{folder} is not a folder; give the --out folder of "
                                "`hpnsim run` or `hpnsim demo`")
    for name, kind, keys in (("results.json", "run", RUN_KEYS), ("demo.json", "demo", DEMO_KEYS)):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise InputError("DIR", f"{path} is not JSON ({error})") from None
        if not isinstance(data, dict) or not keys <= set(data):
            lacks = (f"it lacks {', '.join(sorted(keys - set(data)))}"
                     if isinstance(data, dict) else "not a JSON object")
            raise InputError("DIR", f"{path} is not an hpnsim result: {lacks}")
        return kind, data
    raise InputError("DIR", f"{folder} holds neither results.json (`hpnsim run --out DIR`) "
                            "nor demo.json (`hpnsim demo --out DIR`)")
