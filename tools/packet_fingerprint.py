#!/usr/bin/env python3
"""Record or compare fingerprints of packet-engine runs, to show a kernel change altered none.

Every ``PacketSim.result()`` of a case is hashed (SHA-256 of every array of its
``PacketResult``, the raw per-port queue histograms, the events and end time), beside its
events, ECN marks, PFC pauses and drops. The cases: NVLS-tree all-reduces of 16 HPN 7.0 hosts
and of 8 DCN+ hosts (ECN marks) at 256 MiB, 16 DCN+ rail rings at 64 MiB (marks, every step),
a lossy 4:1 incast and the lossy DCN+ ring of tests/test_packet_report_transport.py (drops and
go-back-N), and a PFC run with three priorities on shared switch ports, without and with
DCQCN (pauses per priority).

    PYTHONPATH=src python tools/packet_fingerprint.py record before.json   # before the change
    PYTHONPATH=src python tools/packet_fingerprint.py compare before.json  # exit 1 on a difference
"""
from __future__ import annotations

import hashlib
import json
import sys
import time

import numpy as np

from hpnsim.packet import api

RUNS: list[dict] = []
_result = api.PacketSim.result


def _recorded(self):
    r = _result(self)
    h = hashlib.sha256()
    for name, v in sorted(vars(r).items()):
        if isinstance(v, np.ndarray):
            h.update(name.encode() + np.ascontiguousarray(v).tobytes())
    h.update(np.ascontiguousarray(self.state[15]).tobytes())          # the histograms
    h.update(repr((r.events, r.end_time)).encode())
    RUNS.append({"events": int(r.events), "marks": int(r.marks.sum()),
                 "pauses": int(r.pauses.sum()), "drops": int(r.drops.sum()),
                 "digest": h.hexdigest()})
    return r


api.PacketSim.result = _recorded


def _nvls(fabric, routing, gpus):
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    run_collective_packet(fabric, "allreduce", gpus, 2**28, algo="nvlstree", protocol="simple",
                          routing=routing, seed=0, nccl=NcclParams.for_gpu("h800"),
                          run=PacketRun(max_packets=2e8, max_watch=8))


def nvls_hpn():
    from hpnsim.fabrics import hpn7
    _nvls(hpn7(segments=2), "hpn_dual_plane", range(128))


def nvls_dcn():
    from hpnsim.fabrics import dcn_plus
    _nvls(dcn_plus(pods=1), "ecmp", range(64))


def dcn_rails():
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.collectives.packet.groups import run_groups_packet
    from hpnsim.collectives.packet.run import PacketRun
    from hpnsim.collectives.planning.concurrent import rail_groups
    from hpnsim.fabrics import dcn_plus
    gpus = np.concatenate([np.arange(64), 128 + np.arange(64)])
    groups = [g.tolist() for g in rail_groups(gpus, 8)]
    run_groups_packet(dcn_plus(pods=1), "allreduce", groups, 2**26, algo="ring",
                      routing="ecmp", seed=0, nccl=NcclParams.for_gpu("h800"),
                      run=PacketRun(window=False, max_packets=1e9))


def lossy_incast():
    from hpnsim.packet import PacketParams, simulate_flows
    p = PacketParams(cc=False, ecn=False, pfc=False, buffer_bytes=1.5e6)
    simulate_flows(np.full(5, 25e9), 2e-6, [[i, 4] for i in range(4)], 4e6, params=p,
                   switch_of=[-1] * 4 + [0], watch=[4], sample_interval=1e-6)


def lossy_ring():
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    from hpnsim.fabrics import build_fabric
    from hpnsim.packet import PacketParams
    f = build_fabric("dcn_plus", {"segments": 2, "hosts_per_segment": 2, "tor_uplinks": 2,
                                  "aggs_per_pod": 2, "uplink_speed": "200G"})
    params = PacketParams(pfc=False, cc=False, ecn=False, buffer_bytes=200e3)
    run_collective_packet(f, "allreduce", list(range(8)) + list(range(16, 24)), 2**24,
                          algo="ring", seed=1, run=PacketRun(params=params))


def pfc_priorities(cc: bool = False):
    from hpnsim.packet import PacketParams, simulate_flows
    paths = [[i, 6, 7] for i in range(6)] + [[8, 7], [9, 7]]
    p = PacketParams(cc=cc, ecn=cc, buffer_bytes=2e6, kmin_bytes=20e3, kmax_bytes=200e3)
    simulate_flows(np.full(10, 50e9), 0.5e-6, paths,
                   [3e6, 2e6, 1e6, 2.5e6, 1.5e6, 4e6, 3e6, 2e6], [0, 1e-6, 2e-6, 0, 5e-6, 3e-6, 0, 1e-6],
                   params=p, switch_of=[-1] * 6 + [0, 1, -1, -1],
                   priority=[1, 3, 5, 1, 3, 5, 3, 1], watch=[6, 7], sample_interval=0.5e-6)


CASES = {"nvls_hpn": nvls_hpn, "nvls_dcn": nvls_dcn, "dcn_rails": dcn_rails,
         "lossy_incast": lossy_incast, "lossy_ring": lossy_ring,
         "pfc_priorities": pfc_priorities, "pfc_priorities_cc": lambda: pfc_priorities(True)}


def fingerprints() -> dict:
    out = {}
    for name, case in CASES.items():
        RUNS.clear()
        start = time.process_time()
        case()
        out[name] = list(RUNS)
        print(f"{name:18s} {time.process_time() - start:6.1f} s CPU  "
              f"{sum(r['events'] for r in RUNS):>11,d} events", file=sys.stderr)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    now = fingerprints()
    if argv[0] == "record":
        with open(argv[1], "w") as fh:
            json.dump(now, fh, indent=1)
        return 0
    with open(argv[1]) as fh:
        before = json.load(fh)
    differ = [k for k in before if before[k] != now.get(k)]
    for k in before:
        print(f"{k:18s} {'DIFFERS' if k in differ else 'identical'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
