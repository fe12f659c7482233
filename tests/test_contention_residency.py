"""NCCL kernels beside compute are charged for the time they run (training/compile.py): a
compute op's ``beside`` seconds count in the share of its time that the DP collectives
dispatched before it hold their SMs, each for its time alone on one group, one after another.
"""

import pytest

from hpnsim.collectives import run_collective
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.engine import TaskGraph
from hpnsim.fabrics import hpn7
from hpnsim.training.compile import compile_program
from hpnsim.training.program import Collective, Compute, Layout, Pass, Program

SIZE = 64 * 2**20
BESIDE = 0.5e-3


@pytest.fixture(scope="module")
def host():
    return hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)


def _contention(fabric, ops) -> list[float]:
    """The ``contention`` seconds of each compute element of the program's one stage."""
    it = compile_program(Program(Layout(dp=8), [ops]), TaskGraph(), fabric)
    return [e.nominal.get("contention", 0.0) for p in it.passes[0] for e in p.elements
            if e.nominal is not None]


def _alone(fabric) -> float:
    """One 64 MiB all-reduce over the host's 8 GPUs, on its own (the independent figure)."""
    return run_collective(fabric, "allreduce", list(range(8)), SIZE, nccl=NcclParams()).time


def test_a_short_collective_charges_its_share(host):
    t = _alone(host)
    span = 4 * t                       # the compute beside it lasts four times as long
    ops = [Pass("B", 0, 0), Compute(1e-3), Collective("allreduce", "dp", SIZE, blocking=False,
                                                      after=(1,)),
           Compute(span, after=(1,), beside=BESIDE)]
    assert _contention(host, ops)[-1] == pytest.approx(_slowed_extra(span, BESIDE, t), rel=1e-9)


def _slowed_extra(seconds, beside, held):
    """By hand: compute of ``seconds`` runs at ``1 / r`` of its pace (r = 1 + beside /
    seconds) for the ``held`` seconds the collective holds the SMs, from its start: all of
    ``beside`` if it ends within them, else what the held time did not get done."""
    r = 1 + beside / seconds
    return beside if seconds * r <= held else held * (1 - 1 / r)


def test_a_long_collective_charges_everything(host):
    t = _alone(host)
    ops = [Pass("B", 0, 0), Compute(1e-3), Collective("allreduce", "dp", SIZE, blocking=False,
                                                      after=(1,)),
           Compute(t / 4, after=(1,), beside=t / 8)]   # 1.5x slower: 3/8 t, within t
    assert _contention(host, ops)[-1] == pytest.approx(t / 8, rel=1e-9)
    assert _slowed_extra(t / 4, t / 8, t) == t / 8


def test_chained_collectives_hold_the_sms_one_after_another(host):
    t = _alone(host)
    span = 5 * t
    ops = [Pass("B", 0, 0), Compute(1e-3),
           Collective("allreduce", "dp", SIZE, blocking=False, after=(1,)),
           Collective("allreduce", "dp", SIZE, blocking=False, after=(1,), follows=2),
           Compute(span, after=(1,), beside=BESIDE)]
    assert _contention(host, ops)[-1] == pytest.approx(_slowed_extra(span, BESIDE, 2 * t),
                                                       rel=1e-9)


def test_compute_after_the_collective_ended_pays_nothing(host):
    t = _alone(host)
    ops = [Pass("B", 0, 0), Compute(1e-3),
           Collective("allreduce", "dp", SIZE, blocking=False, after=(1,)),
           Compute(2 * t, after=(1,)),                 # the collective runs beside this one
           Compute(1e-3, beside=BESIDE)]               # and is over by this one
    assert _contention(host, ops)[-1] == 0.0
