"""A bonded NIC's QPs on its two ports (hpnsim.routing.lag) and a ring with one port down.

Independent derivations: each NIC's per-port QP counts by counting (round-robin, remap to
the live port); the ring's busbw by closed form (every QP of a ring moves in lockstep, so
it runs at the rate of the QP on the most loaded port: a NIC with C channels of q QPs whose
busiest port carries m of them moves C*q/m QP shares of one port's payload rate); the hash
mode's ports against ECMP's bond hash (another policy's code path); the packet engine
against the flow engine.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.collectives.planning.run import run_collective
from hpnsim.errors import InputError
from hpnsim.fabrics import FabricState, hpn7
from hpnsim.routing import route

RING = [0, 8, 16, 24]          # rail 0 of four hosts: one NIC per rank, every channel on it
DEGRADED_GPU = 8
PORT_RATE = 200e9 / 8          # HPN: 2 x 200 Gb/s per NIC
PAYLOAD = NcclParams().network_efficiency


@pytest.fixture(scope="module")
def fabric():
    return hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
                aggs_per_plane=2)


@pytest.fixture(scope="module")
def port_down(fabric):
    link = int(fabric.gpu_access_link[DEGRADED_GPU, 0])
    return FabricState(fabric).set_down([link, link ^ 1])


def ring_flows(qps_per_nic: int):
    """Every rank's ``qps_per_nic`` QPs to its ring successor, in creation order."""
    src = np.repeat(RING, qps_per_nic)
    dst = np.repeat(RING[1:] + RING[:1], qps_per_nic)
    return src, dst


def port_counts(paths, src) -> dict[int, list[int]]:
    return {g: np.bincount(paths.port[src == g], minlength=2).tolist() for g in RING}


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_queue_affinity_alternates_then_moves_to_the_live_port(fabric, port_down, k):
    src, dst = ring_flows(k)
    healthy = port_counts(route(fabric, src, dst, "hpn_dual_plane", lag="queue_affinity"), src)
    assert all(counts == [math.ceil(k / 2), k // 2] for counts in healthy.values())
    degraded = port_counts(route(fabric, src, dst, "hpn_dual_plane", lag="queue_affinity",
                                 state=port_down), src)
    assert degraded[DEGRADED_GPU] == [0, k]          # the dead port's QPs on the live one
    # the sender into the degraded NIC reaches it only through plane 1 (docs/failures.md)
    assert degraded[0] == [0, k]
    assert degraded[16] == healthy[16] and degraded[24] == healthy[24]


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_balanced_equals_queue_affinity_on_a_ring(fabric, port_down, k):
    src, dst = ring_flows(k)
    for state in (None, port_down):
        a = route(fabric, src, dst, "hpn_dual_plane", state=state)
        b = route(fabric, src, dst, "hpn_dual_plane", lag="queue_affinity", state=state)
        assert a.port.tolist() == b.port.tolist()


def test_hash_mode_is_the_bond_hash(fabric, port_down):
    src, dst = ring_flows(6)
    for state in (None, port_down):
        lag = route(fabric, src, dst, "hpn_dual_plane", lag="hash", seed=3, state=state)
        bond = route(fabric, src, dst, "ecmp", seed=3, state=state)
        assert lag.port.tolist() == bond.port.tolist()


def test_hash_mode_with_flows_inside_a_host(fabric):
    """Flows that stay on NVLink take no port; the others still get the bond hash."""
    src, dst = [0, 0, 1, 8, 9], [8, 1, 9, 9, 17]
    lag = route(fabric, src, dst, "hpn_dual_plane", lag="hash")
    bond = route(fabric, src, dst, "ecmp")
    assert lag.port.tolist() == bond.port.tolist()
    assert lag.port[1] == -1 and lag.port[3] == -1


def closed_form_busbw(counts: dict[int, list[int]], qps_per_nic: int) -> float:
    """busbw of a ring whose QPs share their NIC ports fairly and move in lockstep."""
    busiest = max(max(c) for c in counts.values())
    return PORT_RATE * PAYLOAD * qps_per_nic / busiest


@pytest.mark.parametrize("mode", ["balanced", "queue_affinity"])
@pytest.mark.parametrize(("channels", "qps"), [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2)])
def test_ring_keeps_ceil_half_over_all(fabric, port_down, mode, channels, qps):
    kw = dict(algo="ring", protocol="simple", routing="hpn_dual_plane", channels=channels,
              qps=qps, routing_options={"lag": mode})
    size = 2**30                 # latency under 1% of the time
    healthy = run_collective(fabric, "allreduce", RING, size, **kw).busbw
    degraded = run_collective(fabric, "allreduce", RING, size, state=port_down, **kw).busbw
    k = channels * qps
    assert healthy == pytest.approx(PORT_RATE * PAYLOAD * k / math.ceil(k / 2), rel=0.01)
    assert degraded == pytest.approx(PORT_RATE * PAYLOAD, rel=0.01)   # one port, all QPs
    assert degraded / healthy == pytest.approx(math.ceil(k / 2) / k, rel=0.01)


def test_hash_mode_ring_runs_at_its_busiest_port(fabric, port_down):
    from hpnsim.collectives.planning.plan import plan_collective

    channels, qps = 2, 2
    kw = dict(algo="ring", protocol="simple", routing="hpn_dual_plane", channels=channels,
              qps=qps, routing_options={"lag": "hash"})
    plan = plan_collective(fabric, "allreduce", RING, 2**30, **kw)
    counts = {g: [0, 0] for g in RING}
    for paths in (w for w in plan.wire_paths if w is not None):
        # each QP's port is the bond hash of its own 5-tuple (ECMP's NIC choice)
        bond = route(fabric, paths.src, paths.dst, "ecmp", sport=paths.sport)
        assert paths.port.tolist() == bond.port.tolist()
        for g, port in zip(paths.src.tolist(), paths.port.tolist(), strict=True):
            counts[g][port] += 1
    assert max(max(c) for c in counts.values()) > channels * qps // 2   # a collision
    healthy = run_collective(fabric, "allreduce", RING, 2**30, **kw).busbw
    degraded = run_collective(fabric, "allreduce", RING, 2**30, state=port_down, **kw).busbw
    assert healthy == pytest.approx(closed_form_busbw(counts, channels * qps), rel=0.01)
    assert degraded == pytest.approx(PORT_RATE * PAYLOAD, rel=0.01)


def test_unknown_mode_is_named(fabric):
    with pytest.raises(InputError) as err:
        route(fabric, [0], [8], "hpn_dual_plane", lag="round_robin")
    assert err.value.field == "lag"


SMALL = ["collective", "--fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "4",
         "--backup-hosts", "0", "--tor-uplinks", "2", "--aggs-per-plane", "2",
         "--gpus", "0,8,16,24", "--algo", "ring", "--sizes", "1M"]


@pytest.mark.parametrize(("args", "flag"), [
    (["--routing", "hpn_dual_plane", "--lag", "round_robin"], "--lag"),
    (["--lag", "hash"], "--lag"),                          # ecmp: the bond hashes anyway
    (["--routing", "hpn_dual_plane", "--qps", "0"], "--qps"),
    (["--routing", "hpn_dual_plane", "--qps", "129"], "--qps"),
])
def test_bad_input_exits_2_naming_the_flag(args, flag):
    result = CliRunner().invoke(app, [*SMALL, *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and flag in lines[0], result.output


def test_cli_lag_changes_the_placement():
    rows = {}
    for mode in ("queue_affinity", "hash"):
        result = CliRunner().invoke(app, [*SMALL, "--routing", "hpn_dual_plane", "--qps",
                                          "2", "--channels", "2", "--lag", mode, "--json"])
        assert result.exit_code == 0, result.output
        rows[mode] = json.loads(result.output)[0]["busbw"]
    assert rows["hash"] < rows["queue_affinity"]     # seed 0 puts 3 of a NIC's 4 QPs on a port


@pytest.mark.parametrize(("channels", "qps"), [(1, 2), (3, 1)])
def test_packet_engine_agrees_with_the_flow_engine(fabric, port_down, channels, qps):
    from hpnsim.collectives.packet.run import run_collective_packet

    kw = dict(algo="ring", protocol="simple", routing="hpn_dual_plane", channels=channels,
              qps=qps, routing_options={"lag": "queue_affinity"})
    busbw = {}
    for name, state in (("healthy", None), ("degraded", port_down)):
        flow = run_collective(fabric, "allreduce", RING, 2**28, state=state, **kw).busbw
        packet = run_collective_packet(fabric, "allreduce", RING, 2**28, state=state,
                                       **kw).busbw
        assert packet == pytest.approx(flow, rel=0.02)
        busbw[name] = packet
    k = channels * qps
    assert busbw["degraded"] / busbw["healthy"] == pytest.approx(math.ceil(k / 2) / k,
                                                                  rel=0.02)


def test_fault_run_keeps_the_lag_mode_across_the_reroute(fabric):
    """A DP-only job through the port going down: under queue affinity (= balanced on a
    ring) the DP ring halves; under hash mode this seed already puts a NIC's two channels
    on one port, so the job's nominal iteration is the degraded one and nothing is lost."""
    from hpnsim.faults.events import parse_fault
    from hpnsim.faults.runner import JobPlan, simulate_with_faults
    from hpnsim.training.job import TrainJob

    job = TrainJob("llama3-8b", tp=1, dp=4, global_batch=4)
    plan = JobPlan("dp", job, np.array(RING), iterations=4)
    fault = [parse_fault(f"link:gpu{DEGRADED_GPU}.port0@0.01s+100s")]
    times = {}
    for mode in ("balanced", "queue_affinity", "hash"):
        [t] = simulate_with_faults(fabric, [plan], fault, routing="hpn_dual_plane",
                                   routing_options={"lag": mode})
        times[mode] = (t.nominal, t.rows[-1]["end"] - t.rows[-1]["start"])
    assert times["balanced"] == pytest.approx(times["queue_affinity"])
    nominal, degraded = times["queue_affinity"]
    assert degraded > nominal * 1.05                       # the ring at half on the network
    src, dst = ring_flows(2)
    hashed = port_counts(route(fabric, src, dst, "ecmp"), src)
    assert max(max(c) for c in hashed.values()) == 2       # a NIC with both QPs on a port
    assert times["hash"][0] == pytest.approx(degraded, rel=0.01)
    assert times["hash"][1] == pytest.approx(degraded, rel=0.01)


def test_train_lag_flag_is_checked():
    result = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--tp", "8", "--dp",
                                      "2", "--global-batch", "2", "--routing",
                                      "hpn_dual_plane", "--lag", "per_packet"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--lag" in lines[0], result.output


@pytest.mark.parametrize(("changes", "says"), [
    ({"lag": "bogus"}, "'balanced', 'queue_affinity' or 'hash'"),
    ({"lag": "hash", "routing": "ecmp"}, "routing hpn_dual_plane"),
])
def test_scenario_lag_is_named(changes, says):
    from pathlib import Path

    import yaml

    from hpnsim.scenario.runner import run as run_scenario

    data = yaml.safe_load((Path(__file__).parent.parent / "examples" / "failure.yaml")
                          .read_text())
    with pytest.raises(InputError) as err:
        run_scenario({**data, **changes})
    assert err.value.field == "lag" and says in err.value.message
