"""docs/tour.md runs top to bottom as written (every example and its output)."""

from __future__ import annotations

import doctest
from pathlib import Path

TOUR = Path(__file__).resolve().parents[1] / "docs" / "tour.md"


def test_the_tour_runs_as_written():
    failures, tried = doctest.testfile(str(TOUR), module_relative=False,
                                       optionflags=doctest.ELLIPSIS)
    assert tried > 20 and failures == 0
