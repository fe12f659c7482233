"""The receive side of HPN dual-plane routing and precise path selection (issue 12).

Every count here is read off the routed paths by the test: a flow's send port is the
NIC -> ToR link on its path, its receive port the ToR -> NIC link into its destination.
"""

import numpy as np
import pytest

from hpnsim.fabrics import FabricState, dcn_plus, hpn7
from hpnsim.routing import route


@pytest.fixture(scope="module")
def fabric():
    return hpn7(segments=2, hosts_per_segment=4, backup_hosts=0, tor_uplinks=4,
                aggs_per_plane=4)


def port_counts(f, paths):
    """(sent, received): per GPU and NIC port, the flows whose path holds that port's
    NIC -> ToR (sent) or ToR -> NIC (received) link."""
    sent = np.zeros((f.n_gpus, 2), dtype=int)
    received = np.zeros((f.n_gpus, 2), dtype=int)
    for i in range(paths.n_flows):
        links = set(paths.path(i).tolist())
        s, d = int(paths.src[i]), int(paths.dst[i])
        for p in range(2):
            if int(f.gpu_access_link[s, p]) in links:
                sent[s, p] += 1
            into = f.link_ids([f.gpu_tor[d, p]], [f.gpu_nic[d]])[0]
            if int(into) in links:
                received[d, p] += 1
    return sent, received


# GPU 0 and GPU 1 (rails 0 and 1 of host 0) send one connection each to GPU 8 (host 1,
# rail 0); GPU 16 (host 2, rail 0) sends two.
HAND_SRC, HAND_DST = [0, 1, 16, 16], [8, 8, 8, 8]


def test_send_only_round_robin_would_split_the_receiver_3_to_1(fabric):
    # the round-robin's ports, by hand: each sender's k-th connection on port k mod 2
    rr = [0, 0, 0, 1]
    _, received = port_counts(fabric, route(fabric, HAND_SRC, HAND_DST, "ecmp", port=rr))
    assert received[8].tolist() == [3, 1]


def test_dual_plane_splits_the_receiver_2_to_2(fabric):
    p = route(fabric, HAND_SRC, HAND_DST, "hpn_dual_plane")
    sent, received = port_counts(fabric, p)
    assert received[8].tolist() == [2, 2]
    assert sent[16].tolist() == [1, 1]          # the two-connection sender stays balanced
    assert p.port.tolist() == [0, 1, 0, 1]


def test_dual_plane_arrives_on_the_port_it_left(fabric):
    rng = np.random.default_rng(3)
    src = rng.integers(0, fabric.n_gpus, 400)
    dst = rng.integers(0, fabric.n_gpus, 400)
    p = route(fabric, src, dst, "hpn_dual_plane", seed=5)
    for i in np.flatnonzero(p.port >= 0)[:50]:
        d, port = int(dst[i]), int(p.port[i])
        into = int(fabric.link_ids([fabric.gpu_tor[d, port]], [fabric.gpu_nic[d]])[0])
        assert into in p.path(i).tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dual_plane_balances_every_send_and_receive_port(fabric, seed):
    rng = np.random.default_rng(seed)
    # skewed: a few hot destinations each receive from many senders
    src = rng.integers(0, fabric.n_gpus, 600)
    dst = rng.choice([8, 17, 40, 63], 600)
    sent, received = port_counts(fabric, route(fabric, src, dst, "hpn_dual_plane"))
    assert np.abs(sent[:, 0] - sent[:, 1]).max() <= 1
    assert np.abs(received[:, 0] - received[:, 1]).max() <= 1
    # ECMP's bond hash leaves them where it puts them
    _, ecmp_received = port_counts(fabric, route(fabric, src, dst, "ecmp"))
    assert np.abs(ecmp_received[:, 0] - ecmp_received[:, 1]).max() > 1


def test_a_ring_keeps_the_round_robin(fabric):
    # every GPU sends two connections to the next: round-robin gives ports 0, 1 each
    n = fabric.n_gpus
    src = np.repeat(np.arange(n), 2)
    dst = (src + 8) % n
    p = route(fabric, src, dst, "hpn_dual_plane")
    assert p.port.tolist() == [0, 1] * n


def test_a_dead_receive_port_takes_no_flow_and_the_rest_stays_balanced(fabric):
    into8 = fabric.link_ids([fabric.gpu_tor[8, 0]], [fabric.gpu_nic[8]])[0]
    state = FabricState(fabric).set_down(into8)
    src = [0, 1, 16, 16, 0, 24]
    dst = [8, 8, 8, 8, 9, 9]
    sent, received = port_counts(fabric, route(fabric, src, dst, "hpn_dual_plane",
                                               state=state))
    assert received[8].tolist() == [0, 4]      # the only way in
    assert received[9].tolist() == [1, 1]
    assert sent[0].tolist() == [1, 1]          # 0 -> 8 forced onto port 1, 0 -> 9 on port 0


def test_a_fabric_without_planes_keeps_the_send_round_robin():
    f = dcn_plus(pods=1, segments=2, hosts_per_segment=4)
    src = [0, 1, 2, 2, 2]
    dst = [40, 40, 40, 41, 42]
    p = route(f, src, dst, "hpn_dual_plane")
    assert p.port.tolist() == [0, 0, 0, 1, 0]   # k-th connection of a NIC on port k mod 2


def test_precise_counts_the_receive_port(fabric):
    # same-rail flows inside a segment cross one ToR: the only network choice is the port.
    # 0 -> 8 takes port 0 (all idle); 16 -> 8 on port 0 would share GPU 8's port 0, so
    # port 1; 24 -> 8 finds both receive ports loaded once; its second connection then
    # sees port 0 at 2 and port 1 at 1 on the receive side (plus its own send port).
    src, dst = [0, 16, 24, 24], [8, 8, 8, 8]
    sent, received = port_counts(fabric, route(fabric, src, dst, "precise"))
    assert received[8].tolist() == [2, 2]
    assert sent[24].tolist() == [1, 1]
