"""CollectiveOptions: the one carrier of a collective's choices, from the edge to planning.

The keywords of the public functions and an options object are two spellings of the same
plan; defaults live in the dataclass only; FabricState stays beside the options.
"""

from __future__ import annotations

import inspect
from dataclasses import FrozenInstanceError, fields, replace

import pytest

from hpnsim.collectives import (
    CollectiveOptions,
    compile_collective,
    compile_into,
    plan_collective,
    run_collective,
)
from hpnsim.collectives.nccl.calibrate import calibrate
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.fabrics import FabricState, hpn7
from hpnsim.training import (
    build_iteration_graph,
    compile_program,
    simulate_aicb,
    simulate_aicb_file,
    simulate_iteration,
)

FIELDS = ("algo", "protocol", "routing", "channels", "qps", "seed", "root", "pxn",
          "routing_options", "nccl")


@pytest.fixture(scope="module")
def fabric():
    return hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2)


def test_the_eleven_keywords_are_ten_fields_and_state_beside_them():
    assert tuple(f.name for f in fields(CollectiveOptions)) == FIELDS
    assert "state" not in {f.name for f in fields(CollectiveOptions)}
    defaults = CollectiveOptions()
    assert (defaults.algo, defaults.protocol, defaults.routing, defaults.channels,
            defaults.qps, defaults.seed, defaults.root, defaults.pxn) == (
        "auto", "auto", "ecmp", None, None, 0, 0, True)


@pytest.mark.parametrize("function", [plan_collective, compile_into, compile_collective,
                                      run_collective, compile_program, build_iteration_graph,
                                      simulate_iteration, simulate_aicb, simulate_aicb_file,
                                      calibrate])
def test_no_public_function_redeclares_an_option(function):
    parameters = inspect.signature(function).parameters
    assert not set(FIELDS) & set(parameters), function.__name__
    assert "options" in parameters


def test_frozen_hashable_and_replace_makes_variations():
    base = CollectiveOptions(routing="spray", seed=3)
    with pytest.raises(FrozenInstanceError):
        base.algo = "ring"  # type: ignore[misc]
    ring = replace(base, algo="ring")
    assert (ring.algo, ring.routing, ring.seed, base.algo) == ("ring", "spray", 3, "auto")
    assert len({base, replace(base), ring}) == 2
    with_arrays = CollectiveOptions(routing_options={"weights": [1, 2]})
    assert hash(with_arrays) == hash(CollectiveOptions())   # routing options are not hashed
    assert with_arrays != CollectiveOptions()


def test_build_is_the_one_conversion():
    base = CollectiveOptions(algo="hier")
    assert CollectiveOptions.build() == CollectiveOptions()
    assert CollectiveOptions.build(base) is base
    assert CollectiveOptions.build(base, qps=2) == replace(base, qps=2)
    with pytest.raises(TypeError, match="'state' is not a collective option"):
        CollectiveOptions.build(state=None)
    with pytest.raises(TypeError, match="options must be CollectiveOptions"):
        CollectiveOptions.build({"algo": "ring"})
    assert CollectiveOptions(nccl={"eff_ll": 0.4}).nccl == NcclParams(eff_ll=0.4)


def test_keywords_and_options_give_the_same_plan(fabric):
    a = plan_collective(fabric, "allreduce", range(16), 3e6, algo="ring", routing="spray",
                        seed=5)
    options = CollectiveOptions(algo="ring", routing="spray", seed=5)
    assert plan_collective(fabric, "allreduce", range(16), 3e6, options) is a
    assert plan_collective(fabric, "allreduce", range(16), 3e6, replace(options, algo="hd"),
                           algo="ring") is a    # a keyword wins over the options
    s = FabricState(fabric).set_down(fabric.gpu_access_link[0, 0])
    assert plan_collective(fabric, "allreduce", range(16), 3e6, options, state=s) is not a


def test_run_collective_reads_everything_from_the_options(fabric):
    options = CollectiveOptions(algo="hier", protocol="simple", routing="hpn_dual_plane")
    by_keywords = run_collective(fabric, "allreduce", range(16), 2**24, algo="hier",
                                 protocol="simple", routing="hpn_dual_plane")
    by_options = run_collective(fabric, "allreduce", range(16), 2**24, options)
    assert by_options.to_dict() == by_keywords.to_dict()
    assert (by_options.algo, by_options.protocol, by_options.routing) == (
        "hier", "simple", "hpn_dual_plane")


def test_training_takes_the_options_and_replaces_the_algorithm_per_dimension(fabric):
    from hpnsim.training import TrainJob

    job = TrainJob("llama3-8b", tp=8, dp=2, global_batch=2)
    options = CollectiveOptions(routing="hpn_dual_plane", seed=2)
    it = build_iteration_graph(job, fabric, options, dp_algo="ring")
    assert (it.routing, it.seed) == ("hpn_dual_plane", 2)
    assert {r.algo for r in it.routes if r.op != "p2p"} == {"ring"}
    same = build_iteration_graph(job, fabric, dp_algo="ring", routing="hpn_dual_plane", seed=2)
    assert [(r.op, r.algo, r.first, r.end) for r in same.routes] == [
        (r.op, r.algo, r.first, r.end) for r in it.routes]
    a = simulate_iteration(job, fabric, options)
    b = simulate_iteration(job, fabric, routing="hpn_dual_plane", seed=2)
    assert a.iteration_time == b.iteration_time
