"""Benchmarks run by ``hpnsim bench``; figures are recorded in docs/benchmarks.md.

Each module here (``fabric``, ``engine``, ...) defines ``run(quick: bool) -> list[Measurement]``.
``quick`` shrinks the problem so the benchmark doubles as a smoke run; the recorded figures
come from full runs. Timings never go into tests.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

#: benchmark name -> module under hpnsim.benchmarks
SUITES = ("fabric", "engine", "routing", "collective", "train", "scenario", "faults", "cluster",
          "packet")


@dataclass
class Measurement:
    """One benchmark figure: what was run, how long it took, peak memory, target."""

    name: str
    seconds: float
    target_seconds: float | None = None
    peak_rss_mib: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def meets_target(self) -> bool | None:
        return None if self.target_seconds is None else self.seconds <= self.target_seconds

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["meets_target"] = self.meets_target
        return out


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def timed(name: str, func: Callable[[], Any], target_seconds: float | None = None,
          **details: Any) -> tuple[Measurement, Any]:
    """Run ``func`` once, return its :class:`Measurement` and its result.

    >>> m, value = timed("sum", lambda: sum(range(10)))
    >>> value, m.name
    (45, 'sum')
    """
    start = time.perf_counter()
    result = func()
    seconds = time.perf_counter() - start
    return Measurement(name, seconds, target_seconds, peak_rss_mib(), dict(details)), result
