"""Running a :class:`~hpnsim.sweep.spec.Sweep`: points on a process pool or on Ray, one row per
point appended to ``rows.jsonl``, resumable.

Each finished point is one JSON line written with a single ``write`` then ``fsync``, so a
sweep killed at any moment leaves whole lines (and at worst a torn last line, which
:func:`read_rows` skips and a resumed sweep cuts off before appending). ``--resume``
runs only the points whose key is not in ``rows.jsonl`` yet; ``sweep.json`` records the
base scenario's hash so a folder is never resumed with a different base.

A row is ``point``, ``key``, the point's overrides (by path), then its headline figures
(:func:`headline`): per job ``JOB.iteration_time_s``, ``JOB.slowdown`` (None unless the
scenario compares with running alone), ``JOB.mfu``; per collective ``NAME.avg_busbw_GBps``
(mean bus bandwidth over its sizes, GB/s); and ``makespan_s``.

Examples
--------
>>> import tempfile
>>> from hpnsim.sweep.spec import parse_sweep
>>> s = parse_sweep({"base": {"fabric": {"template": "fat_tree", "k": 4},
...                           "collectives": [{"sizes": "1M", "algo": "ring"}]},
...                  "grid": {"routing": ["ecmp", "precise"]}})
>>> r = run_sweep(s, tempfile.mkdtemp(), workers=1)
>>> [(row["routing"], round(row["collective0.avg_busbw_GBps"], 2)) for row in r.rows]
[('ecmp', 11.72), ('precise', 11.72)]
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hpnsim.errors import InputError
from hpnsim.frames import to_frame
from hpnsim.jsonable import to_jsonable
from hpnsim.results import write_csv, write_json
from hpnsim.sweep.spec import Sweep, point_key

__all__ = ["SweepResult", "append_row", "headline", "read_rows", "run_point", "run_sweep"]

BACKENDS = ("local", "ray")


def headline(result) -> dict:
    """The headline figures of a :class:`~hpnsim.results.RunResult` (see the module doc)."""
    row = {}
    for job in result.jobs:
        row[f"{job.name}.iteration_time_s"] = job.iteration_time
        row[f"{job.name}.slowdown"] = job.slowdown
        row[f"{job.name}.mfu"] = sum(it.mfu for it in job.iterations) / len(job.iterations)
    for run in result.collectives:
        row[f"{run.name}.avg_busbw_GBps"] = run.avg_busbw / 1e9
    row["makespan_s"] = result.makespan
    return to_jsonable(row)


def run_point(scenario: dict) -> dict:
    """Run one point's scenario and return its headline figures (what a worker does)."""
    from hpnsim.scenario.runner import run

    return headline(run(scenario))


def append_row(path: str | Path, row: dict) -> None:
    """Append ``row`` as one JSON line: one ``write`` of the whole line, then ``fsync``."""
    line = (json.dumps(to_jsonable(row), separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, line)
        if written != len(line):   # a regular file takes it whole; say so if it did not
            raise OSError(f"short write to {path}: {written} of {len(line)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def read_rows(path: str | Path, cut_torn_tail: bool = False) -> list[dict]:
    """The rows of a ``rows.jsonl``; a last line without its newline (a write cut off) is
    skipped, and with ``cut_torn_tail`` removed from the file so appends start clean.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "rows.jsonl")
    >>> _ = open(p, "w").write('{"key": "a"}\\n{"key": "b", "x')
    >>> read_rows(p, cut_torn_tail=True), open(p).read()
    ([{'key': 'a'}], '{"key": "a"}\\n')
    """
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if cut_torn_tail and len(whole) < len(data):
        with open(path, "r+b") as handle:
            handle.truncate(len(whole))
            handle.flush()
            os.fsync(handle.fileno())
    rows = []
    for number, line in enumerate(whole.decode("utf-8").splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise InputError("--resume", f"{path} line {number} is not a JSON row; the "
                                         f"file was edited, give another --out") from None
    return rows


@dataclass
class SweepResult:
    """A finished sweep: one row per point, by point index; ``resumed`` rows came from an
    earlier run; ``files`` lists what was written into the output folder."""

    name: str
    parameters: list[str]
    rows: list[dict]
    resumed: int = 0
    files: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "parameters": list(self.parameters), "rows": self.rows,
                "resumed": self.resumed}

    def to_frame(self):
        return to_frame(self.rows)

    def metric(self) -> str | None:
        """The headline column: the first job's iteration time, else the first
        collective's bus bandwidth (None when the points run neither)."""
        columns = list(dict.fromkeys(k for row in self.rows for k in row))
        for suffix in (".iteration_time_s", ".avg_busbw_GBps"):
            for column in columns:
                if column.endswith(suffix) and column not in self.parameters:
                    return column
        return None

    def table_rows(self) -> list[dict]:
        """Rows with every column (None where a point has none), non-scalars as JSON."""
        columns = list(dict.fromkeys(k for row in self.rows for k in row))
        return [{c: json.dumps(v) if isinstance(v := row.get(c), dict | list) else v
                 for c in columns} for row in self.rows]


def check_backend(backend: str) -> None:
    """Refuse an unknown backend, or Ray when it is not installed, before any work."""
    if backend not in BACKENDS:
        raise InputError("--backend", f"must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InputError("--backend", "ray is not installed; pip install "
                                          "'hpnsim[ray]'") from None


def _die_with_parent(parent: int, poll_s: float = 1.0) -> None:
    """Worker initializer: end this worker when the sweep that started it dies, even by
    SIGKILL (which lets the parent clean nothing up). On Linux the kernel sends SIGKILL at the
    parent's death (``prctl(PR_SET_PDEATHSIG)``, PR_SET_PDEATHSIG = 1 in linux/prctl.h);
    everywhere a daemon thread checks every ``poll_s`` seconds that the parent is still the
    parent (an orphan is adopted by another process)."""
    import signal
    import sys
    import threading
    import time

    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    if os.getppid() != parent:   # died before the prctl took hold
        os._exit(1)
    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def _local(tasks: list, workers: int) -> Iterator[tuple[int, dict]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn: a forked child would inherit the progress display's thread and its locks
    pool = ProcessPoolExecutor(max_workers=workers,
                               mp_context=multiprocessing.get_context("spawn"),
                               initializer=_die_with_parent, initargs=(os.getpid(),))
    try:
        futures = {pool.submit(run_point, data): i for i, data in tasks}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _ray(tasks: list, workers: int | None, address: str | None) -> Iterator[tuple[int, dict]]:
    import ray

    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1)(run_point)
        pending = {remote.remote(data): i for i, data in tasks}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)
    finally:
        if started:
            ray.shutdown()


def grid_fingerprint(sweep: Sweep) -> str:
    """A hash of the sweep's base and its points in order: two sweeps with the same
    fingerprint number the same points the same way, so one may resume the other."""
    return point_key({"base": sweep.base_hash, "points": [p.key for p in sweep.points]})


def prepare_out(sweep: Sweep, out: str | Path, resume: bool) -> list[dict]:
    """Check the output folder and return the rows already finished there (with
    ``resume``); refuse to mix sweeps: a resume into a folder of another grid (another
    :func:`grid_fingerprint`) is refused."""
    out = Path(out)
    rows_path, meta_path = out / "rows.jsonl", out / "sweep.json"
    if out.exists() and not out.is_dir():
        raise InputError("--out", f"{out} is a file; give a folder")
    if not resume:
        if rows_path.exists() and rows_path.stat().st_size:
            raise InputError("--out", f"{rows_path} holds rows of an earlier sweep; pass "
                                      f"--resume to finish it, or give another folder")
        return []
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("base_hash") != sweep.base_hash:
            raise InputError("--resume", f"{out} holds a sweep of another base scenario; "
                                         f"give another --out")
        if meta.get("grid_hash", grid_fingerprint(sweep)) != grid_fingerprint(sweep):
            raise InputError("--resume", f"{out} holds a sweep of another grid (its points "
                                         f"differ, or are in another order); give another "
                                         f"--out, or resume with the grid that made it")
    return read_rows(rows_path, cut_torn_tail=True)


def run_sweep(sweep: Sweep, out: str | Path, *, backend: str = "local",
              workers: int | None = None, address: str | None = None, resume: bool = False,
              progress: Callable[[int, int], None] | None = None) -> SweepResult:
    """Run every point of ``sweep`` not finished yet; rows go to ``OUT/rows.jsonl`` as
    they finish, then ``OUT/summary.csv`` (by point index) is written.

    Parameters
    ----------
    sweep : Sweep
        From :func:`~hpnsim.sweep.spec.load_sweep` or :func:`~hpnsim.sweep.spec.parse_sweep`.
    out : path
        Output folder (created if missing).
    backend : {"local", "ray"}
        A process pool of ``workers`` processes (default: the CPU count), or Ray tasks on
        the cluster at ``address`` (or a local Ray instance of ``workers`` CPUs).
    resume : bool
        Skip the points whose key is already in ``rows.jsonl``.
    progress : callable, optional
        Called with (points done, points in all) at the start and after each point.
    """
    check_backend(backend)
    out = Path(out)
    finished = {row["key"]: row for row in prepare_out(sweep, out, resume)}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "sweep.json", {"name": sweep.name, "base_hash": sweep.base_hash,
                                    "grid_hash": grid_fingerprint(sweep),
                                    "parameters": sweep.parameters,
                                    "points": [{"point": p.index, "key": p.key,
                                                "overrides": p.overrides}
                                               for p in sweep.points]})
    by_key = {p.key: p for p in sweep.points}
    rows = {by_key[k].index: row for k, row in finished.items() if k in by_key}
    resumed = len(rows)
    tasks = [(p.index, p.scenario) for p in sweep.points if p.index not in rows]
    say = progress or (lambda done, total: None)
    say(len(rows), len(sweep.points))
    if tasks:
        workers = workers or os.cpu_count() or 1
        results = _local(tasks, min(workers, len(tasks))) if backend == "local" \
            else _ray(tasks, workers, address)
        for index, figures in results:
            point = sweep.points[index]
            row = {"point": index, "key": point.key, **point.overrides, **figures}
            append_row(out / "rows.jsonl", row)
            rows[index] = row
            say(len(rows), len(sweep.points))
    result = SweepResult(sweep.name, sweep.parameters,
                         [{**rows[i], "point": i} for i in sorted(rows)], resumed)
    result.files = [out / "rows.jsonl", write_csv(out / "summary.csv", result.table_rows())]
    return result
