"""The PFC headroom refusal names the ports and bytes that do not fit (issue 18)."""

import pytest

from hpnsim.errors import InputError
from hpnsim.packet import PacketParams
from hpnsim.packet.api import simulate_flows


def test_headroom_refusal_names_the_ports_and_the_bytes():
    # 3 senders into one switch (ingress links 0,1,2) out of link 3: each ingress reserves
    # 3 x 2 x d x C + 2 x (4096 + 62) bytes; C = 1e9 B/s, d = 1e-3 s -> 6 MB + 8,316 B
    cap, delay = [1e9] * 4, [1e-3] * 4
    p = PacketParams(buffer_bytes=16e6)
    with pytest.raises(InputError) as e:
        simulate_flows(cap, delay, [[0, 3], [1, 3], [2, 3]], [4096] * 3,
                       switch_of=[-1, -1, -1, 0], params=p)
    need = 3 * (3 * 2 * 1e-3 * 1e9 + 2 * (4096 + 62))
    assert "3 lossless ingress ports" in str(e.value)
    assert f"({need / 2**20:.3g} MiB" in str(e.value)
