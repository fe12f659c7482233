"""Faults: iterations built as copies of one compiled template run bit-identically to
iterations compiled one by one (through rerouting, checkpoints and a restart), and the
template's alone run is the iteration time of ``simulate_iteration``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hpnsim.fabrics import hpn7
from hpnsim.faults.events import parse_fault
from hpnsim.faults.runner import FaultRun, JobPlan, RecoveryPolicy, simulate_with_faults
from hpnsim.training import simulate_iteration
from hpnsim.training.job import TrainJob


def fabric(mode):
    return hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2, dual_tor=mode)


def jobs():
    # a pipeline job (PP messages between hosts 0 and 1) and a DP job arriving later
    return [JobPlan("pp", TrainJob("llama3-8b", tp=8, pp=2, dp=1, global_batch=8),
                    np.arange(16), iterations=6),
            JobPlan("dp", TrainJob("llama3-8b", tp=8, dp=2, global_batch=8),
                    np.arange(16, 32), iterations=5, arrival=0.3)]


def both_builds(*args, **kwargs):
    out = []
    for copies in (True, False):
        timelines = FaultRun(*args, copy_iterations=copies, **kwargs).run()
        out.append([(t.to_dict(), [dataclasses.asdict(it) for it in t.iterations])
                    for t in timelines])
    return out


CASES = {
    # dual ToR: both failures reroute the jobs' unfinished transfers (the PP job's messages,
    # the DP job's gradient all-reduces) and back after the repairs; checkpoints every ~2 s
    "reroute": ("nonstacked", ["link:gpu8.port0@1.5s+2s", "link:gpu16.port1@2s+1s"],
                RecoveryPolicy(checkpoint_interval=2.2, checkpoint_write=0.1)),
    # single ToR: the PP job is cut off, times out and restarts from its checkpoint
    "restart": ("single", ["link:gpu8.port0@2.5s+20s"],
                RecoveryPolicy(timeout=1.0, restart_time=2.0, checkpoint_interval=2.2,
                               checkpoint_write=0.1)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_copied_iterations_run_exactly_like_compiled_ones(case):
    mode, faults, recovery = CASES[case]
    copies, compiled = both_builds(fabric(mode), jobs(),
                                   [parse_fault(x) for x in faults],
                                   routing="hpn_dual_plane", recovery=recovery)
    assert copies == compiled        # every row, restart, checkpoint and accounting, bit for bit
    [(pp, _), (dp, _)] = copies
    # the scenario does what it is meant to exercise
    assert pp["checkpoints"] >= 1 and len(pp["timeline"]) >= 6
    if case == "reroute":     # iterations in flight at the failure ran slower, none failed
        assert any(r["iteration_time"] > pp["nominal_iteration_time"] * (1 + 1e-9)
                   for r in pp["timeline"])
        assert pp["restarts"] == [] and dp["restarts"] == []
    else:                     # a second attempt, itself built from copies
        assert len(pp["restarts"]) == 1 and dp["restarts"] == []
        assert {r["attempt"] for r in pp["timeline"]} == {0, 1}


def test_template_alone_is_the_simulated_iteration_bit_for_bit():
    f = fabric("nonstacked")
    timelines = simulate_with_faults(f, jobs(), [], routing="hpn_dual_plane")
    for t, plan in zip(timelines, jobs(), strict=True):
        alone = simulate_iteration(plan.job, f, routing="hpn_dual_plane", gpus=plan.gpus)
        assert t.nominal == alone.iteration_time
        # with nothing failing every iteration takes exactly that long
        assert all(r["iteration_time"] == pytest.approx(t.nominal, rel=1e-12) for r in t.rows)
