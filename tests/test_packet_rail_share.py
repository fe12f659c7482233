"""One rail simulated for all (hpnsim.collectives.packet.rails): against the run of every
rail, on a hand-built pair of rails and on HPN NVLS-tree all-reduces, and where the rails
must not be shared (DCN+'s shared ToR buffers, a link down on one rail, a watched port)."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from hpnsim.cli.main import app
from hpnsim.collectives.packet.rails import rail_share
from hpnsim.collectives.packet.run import PacketRun
from hpnsim.collectives.packet.tree import run_tree_packet
from hpnsim.collectives.planning.plan import plan_collective
from hpnsim.fabrics import FabricState, dcn_plus, hpn7
from hpnsim.packet import PacketParams
from hpnsim.packet.pipeline import Hop, simulate_pipeline

PLAIN = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=np.inf, header_bytes=0,
                     framing_bytes=0)
C, D, MTU = 10e9, 1e-6, 4096.0


def _two_rails(shared: int) -> list[list[Hop]]:
    """Per rail r, a chain of two hops: over its own link 2r, then over link ``shared``
    (both rails: the one NVLink link both rails' packets cross) or its own 4 + 2r."""
    one = np.ones(1)
    return [[Hop([([2 * r],)], one, (), (1,)),
             Hop([([shared if shared >= 0 else 4 + 2 * r],)], one, (0,), ())]
            for r in range(2)]


def _run(capacity, hops, size=2**22, chunk=2**19):
    return simulate_pipeline(capacity, D, hops, size, chunk, 8, PLAIN, window=False,
                             switch_of=[-1] * len(capacity))


def _joined(rails):
    """Every rail's hops in one pipeline (rail r's needs shifted past the rails before)."""
    out = []
    for hops in rails:
        base = len(out)
        out += [Hop(h.legs, h.weight, tuple(base + i for i in h.needs),
                    tuple(base + i for i in h.consumers)) for h in hops]
    return out


@pytest.mark.parametrize("shared", [4, -1])
def test_two_rails_on_one_link_run_as_one_rail_at_half_its_rate(shared):
    """Two rails that meet on link 4 (it carries both: the one-rail run gives it C/2) and
    two that never meet: the one-rail run finishes when both rails do, within a packet's
    time, and lays the same bytes on every link."""
    cap = [C] * 8
    rails = _two_rails(shared)
    share = rail_share(rails, cap, D, [-1] * 8, [False] * 8)
    assert share is not None and share.rails == 2
    if shared >= 0:
        assert share.copies[share.links == 4].tolist() == [2]
        assert share.capacity(cap)[4] == C / 2
    one = _run(share.capacity(cap), share.hops(rails[0]))
    full = _run(cap, _joined(rails))
    assert one.time == pytest.approx(full.time, abs=MTU / C)
    if shared >= 0:                       # 2 rails x 4 MiB over link 4 at C: by hand
        assert full.time >= 2 * 2**22 / C
    np.testing.assert_allclose(share.expand(one.result).tx_bytes, full.result.tx_bytes)


def test_a_buffered_link_two_rails_cross_is_not_shared():
    """The one-rail run cannot stand for two rails' packets in one switch queue."""
    switch_of = [-1] * 4 + [0] * 4
    assert rail_share(_two_rails(4), [C] * 8, D, switch_of, [False] * 8) is None
    assert rail_share(_two_rails(-1), [C] * 8, D, switch_of, [False] * 8) is None  # one switch
    assert rail_share(_two_rails(-1), [C] * 8, D, [-1] * 4 + [0, 0, 1, 1], [False] * 8)


def test_rails_with_different_rates_are_not_shared():
    cap = [C] * 8
    cap[6] = C / 2                        # rail 1's second link is slower than rail 0's
    assert rail_share(_two_rails(-1), cap, D, [-1] * 8, [False] * 8) is None


@pytest.fixture(scope="module")
def four_hosts():
    f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    plan = plan_collective(f, "allreduce", range(32), 2**28, algo="nvlstree",
                           protocol="simple", routing="hpn_dual_plane")
    return f, plan, {share: run_tree_packet(f, plan, 2**28, "hpn_dual_plane",
                                            PacketRun(share_rails=share))
                     for share in (True, False)}


def test_one_rail_of_an_hpn_nvlstree_stands_for_all_eight(four_hosts):
    """NVLS-tree over 4 HPN hosts, 256 MiB, ConnectX DCQCN, ECN, PFC: one rail simulated
    (rail_copies 8, an eighth of the events or fewer) finishes within 0.2% of all 8 rails
    simulated (the rails stay in lockstep where the whole run's drift by tie order) and
    puts the whole run's bytes on every link, NVLink and network."""
    _, _, runs = four_hosts
    one, full = runs[True], runs[False]
    assert (one.rail_copies, full.rail_copies) == (8, 1)
    assert one.events < full.events / 7
    assert one.busbw == pytest.approx(full.busbw, rel=0.002)
    np.testing.assert_allclose(one.link_bytes, full.link_bytes, rtol=1e-9, atol=1.0)
    assert (one.ecn_marks, one.pfc_pauses) == (full.ecn_marks, full.pfc_pauses) == (0, 0)


def test_a_link_down_on_one_rail_makes_the_rails_differ(four_hosts):
    """A NIC port down on one rail (its traffic moves to the host's other port): that rail no
    longer runs as the others do, so every rail is simulated."""
    f, plan, _ = four_hosts
    state = FabricState(f)
    port = int(f.gpu_access_link[3, 0])
    state.set_down([port, port ^ 1])
    plan = plan_collective(f, "allreduce", range(32), 2**26, algo="nvlstree",
                           protocol="simple", routing="hpn_dual_plane", state=state)
    r = run_tree_packet(f, plan, 2**26, "hpn_dual_plane", PacketRun(), state=state)
    assert r.rail_copies == 1


def test_dcn_plus_rails_share_tor_buffers_so_every_rail_runs():
    """DCN+ puts every rail of a host on the same ToR pair: their queues share its buffer,
    so the rails are simulated one by one."""
    f = dcn_plus(segments=1, hosts_per_segment=4)
    plan = plan_collective(f, "allreduce", range(32), 2**26, algo="nvlstree",
                           protocol="simple", routing="ecmp")
    assert run_tree_packet(f, plan, 2**26, "ecmp", PacketRun()).rail_copies == 1


def test_a_watched_port_runs_every_rail(four_hosts):
    f, plan, _ = four_hosts
    small = plan_collective(f, "allreduce", range(32), 2**24, algo="nvlstree",
                            protocol="simple", routing="hpn_dual_plane")
    r = run_tree_packet(f, small, 2**24, "hpn_dual_plane", PacketRun(watch=(0,)))
    assert r.rail_copies == 1


def test_cli_refuses_no_share_rails_on_the_flow_engine():
    out = CliRunner().invoke(app, ["collective", "--fabric", "hpn7", "--gpus", "16",
                                   "--no-share-rails"])
    assert out.exit_code == 2
    assert "--no-share-rails" in out.output and "Traceback" not in out.output


def test_scenario_share_rails_sets_the_packet_run_and_is_refused_on_the_flow_engine():
    from pydantic import ValidationError

    from hpnsim.scenario.engine import EngineSpec

    with pytest.raises(ValidationError, match="share_rails"):
        EngineSpec(kind="flow", share_rails=False)
    f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    assert EngineSpec(kind="packet", share_rails=False).packet_run(f).share_rails is False
