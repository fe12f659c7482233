"""The one-collective training program the cluster tests run on the ``tiny`` fixture
(tests/conftest.py)."""

from hpnsim.training.program import Collective, Compute, Layout, Pass, Program


def program(compute: float, size: float, dp: int = 2) -> Program:
    """Compute, then a blocking DP all-reduce of ``size`` bytes per GPU."""
    return Program(Layout(dp=dp), [[Pass("F", 0, 0), Compute(compute),
                                    Collective("allreduce", "dp", size)]])
