"""Packet-engine benchmarks: events per second, rings of 16 and 128 GPUs on HPN 7.0, and the
HPN paper's 448-GPU points.

* ``incast``: 8 senders at 400 Gb/s into one 400 Gb/s port, 50 MB each, ConnectX DCQCN and
  SimAI's 400G ECN/PFC settings, CNPs as packets on the reverse links: the event rate of
  the whole NIC/switch/DCQCN path.
* ``lossy incast``: the same without CC, PFC and buffer limit: the bare link/queue path.
* ``ring``: 256 MiB all-reduce over the 16 GPUs of two hosts of one HPN 7.0 segment
  (published segment: 128 hosts, 200G NIC ports), 8 NCCL channels (one per rail, PXN),
  512 KiB chunks, hpn_dual_plane routing: windowed (target 1.2 s) and every step.
* ``128 GPUs``: the same kind of ring at 128 H800 GPUs (2 HPN segments of 8 hosts, NCCL's
  H800 parameters, what ``hpnsim collective --gpu h800 --algo ring`` runs: LL128, 16
  channels), windowed: its step time repeats with period 8, so the window settles on block
  means (:func:`hpnsim.packet.ring.steady_rate`).
* ``448 GPUs``: the HPN paper's scale (56 H800 hosts; ``experiments/hpn_paper.py``'s
  fabrics): all-gather as a ring on HPN 7.0, the Multi-AllReduce (8 rail rings at once) on
  DCN+ under ECMP, and the NVLS-tree all-reduce on HPN 7.0, 1 GiB each (quick: 64 MiB), the
  whole ``run_collective_packet`` call (plan, routing, flows, packets), windowed.

Each figure carries the events processed, events/s on process CPU time (the machine is
shared, so CPU time is the fairer rate) and the simulated time. Numba compilation is done
(and timed) once up front on tiny inputs; run times exclude it. Timings never go into tests.
"""

from __future__ import annotations

import time

import numpy as np

from hpnsim.benchmarks import Measurement, peak_rss_mib
from hpnsim.benchmarks import timed as _timed

LINE_RATE = 50e9  # 400 Gb/s in bytes/s


def timed(name, func, target_seconds=None, **details):
    """:func:`hpnsim.benchmarks.timed` plus process CPU seconds."""
    cpu = time.process_time()
    m, result = _timed(name, func, target_seconds, **details)
    m.details["cpu_seconds"] = round(time.process_time() - cpu, 3)
    return m, result


def _rate(m: Measurement, events: int, simulated_s: float) -> Measurement:
    cpu = max(m.details["cpu_seconds"], 1e-9)
    m.details.update(events=events, events_per_s_cpu=round(events / cpu),
                     events_per_s_wall=round(events / m.seconds), simulated_ms=round(
                         simulated_s * 1e3, 4))
    return m


def _warm_up() -> float:
    from hpnsim.packet import PacketParams, simulate_flows
    from hpnsim.packet.ring import simulate_ring

    start = time.perf_counter()
    simulate_flows([1e9, 1e9, 1e9], 1e-6, [[0, 2], [1, 2]], 1e5, switch_of=[-1, -1, 0])
    simulate_ring(np.full(3, 1e9), 1e-6, [[[0], [1], [2]]], 3e4, params=PacketParams(),
                  switch_of=[-1] * 3, window=False, histograms=False)
    return time.perf_counter() - start


def _incast(n: int, size: float, lossless: bool):
    from hpnsim.packet import PacketParams, simulate_flows

    p = PacketParams() if lossless else PacketParams(cc=False, ecn=False, pfc=False,
                                                     buffer_bytes=np.inf)
    # links 0..n-1 senders -> switch, n switch -> receiver; n+1..2n+1 their reverses, which
    # carry the CNPs (and NACKs) back as packets
    paths = [[i, n] for i in range(n)]
    reverse = np.concatenate([np.arange(n + 1, 2 * (n + 1)), np.arange(n + 1)])
    return lambda: simulate_flows(np.full(2 * (n + 1), LINE_RATE), 0.5e-6, paths, size,
                                  params=p, switch_of=[-1] * n + [0] * (n + 1) + [-1],
                                  reverse=reverse, histograms=False)


def fabric_rings(fabric, gpus, channels: int, *, policy: str | None = None,
                 pxn: bool = True, seed: int = 0) -> list[list[np.ndarray]]:
    """NCCL's rings over ``gpus`` (one per channel, :func:`hpnsim.collectives.schedules.ring.ring_order`:
    channel c leaves each host from rail c) routed on ``fabric``; ``rings[c][r]`` is the
    packet path from rank r to rank r+1 (:func:`hpnsim.packet.adapter.network_legs`), for
    :func:`hpnsim.packet.ring.simulate_ring`. (It lives here, above routing and collectives
    in the layering, until the packet engine is wired into the collective runner.)

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> rings = fabric_rings(f, range(16), 2)
    >>> len(rings), len(rings[0]), [len(p) for p in rings[1]][6:9]   # NVLink, NVLink, network
    (2, 16, [2, 2, 2])
    """
    from hpnsim.collectives.schedules.ring import ring_order
    from hpnsim.packet.adapter import network_legs
    from hpnsim.routing import native_policy, route

    gpus = np.asarray(list(gpus), dtype=np.int64)
    rings = []
    for c in range(channels):
        order, _ = ring_order(gpus, int(fabric.gpus_per_host), c, pxn)
        paths = route(fabric, order, np.roll(order, -1), policy or native_policy(fabric),
                      conn=np.full(order.size, c), seed=seed, pxn=pxn)
        rings.append(network_legs(fabric, paths))
    return rings


def _ring(size: float, window: bool):
    from hpnsim.fabrics import hpn7
    from hpnsim.packet.adapter import fabric_links
    from hpnsim.packet.ring import simulate_ring

    fabric = hpn7(segments=1)
    rings = fabric_rings(fabric, range(16), 8)
    links = fabric_links(fabric)
    return lambda: simulate_ring(fabric.link_capacity, fabric.link_latency, rings, size,
                                 window=window, histograms=False, **links)


def _h800_ring(n_gpus: int, size: float):
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.collectives.packet.run import PacketRun, run_collective_packet
    from hpnsim.fabrics import hpn7

    fabric = hpn7(segments=2, hosts_per_segment=n_gpus // 16, backup_hosts=0)
    return lambda: run_collective_packet(fabric, "allreduce", range(n_gpus), size,
                                         run=PacketRun(max_packets=1e9), algo="ring",
                                         routing="hpn_dual_plane",
                                         nccl=NcclParams.for_gpu("h800"))


#: the 448-GPU rows: label -> (fabric builder, routing, operation, algorithm, per rail)
SCALE_448 = {
    "all-gather, ring, HPN 7.0": ("hpn7", "hpn_dual_plane", "allgather", "ring", False),
    "Multi-AllReduce (8 rail rings), DCN+": ("dcn_plus", "ecmp", "allreduce", "ring", True),
    "all-reduce, NVLS-tree, HPN 7.0": ("hpn7", "hpn_dual_plane", "allreduce", "nvlstree",
                                       False),
}


def _paper_448(label: str, size: float):
    """The HPN paper's 448-GPU point ``label`` of :data:`SCALE_448` (its fabrics as
    ``experiments/hpn_paper.py`` builds them: ``hpn7(segments=2)``, ``dcn_plus(pods=1)``)."""
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.collectives.packet.run import (
        PacketRun,
        run_collective_packet,
        run_together_packet,
    )
    from hpnsim.collectives.planning.concurrent import rail_groups
    from hpnsim.fabrics import dcn_plus, hpn7

    name, routing, op, algo, rails = SCALE_448[label]
    fabric = hpn7(segments=2) if name == "hpn7" else dcn_plus(pods=1)
    options = dict(algo=algo, routing=routing, seed=0, nccl=NcclParams.for_gpu("h800"))
    run = PacketRun(max_packets=2e8, max_watch=8)     # a window that does not settle stops
    if rails:
        groups = [g.tolist() for g in rail_groups(np.arange(448), 8)]
        return lambda: run_together_packet(fabric, op, groups, size, run=run, **options)
    return lambda: run_collective_packet(fabric, op, range(448), size, run=run, **options)


def _collective_row(m: Measurement, r, size: float) -> Measurement:
    _rate(m, r.events, r.time)
    m.details.update(algo=f"{r.algo}/{r.protocol}", busbw_GBps=round(r.busbw / 1e9, 2),
                     steps_simulated=f"{r.steps_simulated}/{r.steps:g}",
                     extrapolated_share=round(r.extrapolated, 3), stable=bool(r.stable),
                     ecn_marks=int(r.ecn_marks), pfc_pauses=int(r.pfc_pauses),
                     rail_copies=int(r.rail_copies))
    return m


def run(quick: bool = False) -> list[Measurement]:
    """Event rates on incasts and rings, and the 448-GPU points (quick: smaller sizes).

    >>> [m.name for m in run(quick=True)][:1]  # doctest: +SKIP
    ['packet: numba compile + warm-up (tiny inputs)']
    """
    out = [Measurement("packet: numba compile + warm-up (tiny inputs)", _warm_up(),
                       peak_rss_mib=peak_rss_mib())]
    size = 5e6 if quick else 50e6
    for lossless, label in ((True, "DCQCN+ECN+PFC"), (False, "no CC, infinite buffer")):
        m, r = timed(f"packet: 8:1 incast at 400G, {size / 1e6:g} MB each, {label}",
                     _incast(8, size, lossless), None)
        out.append(_rate(m, r.events, r.end_time))
    ring_size = 32 * 2**20 if quick else 256 * 2**20
    for window in (True, False):
        label = "windowed" if window else "every step"
        m, run_ = timed(f"packet: ring all-reduce {ring_size / 2**20:g} MiB, 16 GPUs, "
                        f"HPN segment, {label}", _ring(ring_size, window),
                        1.2 if window and not quick else None)
        _rate(m, run_.result.events, run_.time)
        algbw = ring_size / run_.time
        m.details.update(steps_simulated=f"{run_.steps_simulated}/{run_.steps}",
                         extrapolated_share=round(run_.extrapolated, 3),
                         busbw_GBps=round(algbw * 2 * 15 / 16 / 1e9, 2))
        out.append(m)
    size_128 = 32 * 2**20 if quick else 256 * 2**20
    m, r = timed(f"packet: ring all-reduce {size_128 / 2**20:g} MiB, 128 H800 GPUs, 2 HPN "
                 "segments of 8 hosts, windowed", _h800_ring(128, size_128), None)
    out.append(_collective_row(m, r, size_128))
    size_448 = 64 * 2**20 if quick else 2**30
    for label in SCALE_448:
        m, r = timed(f"packet: 448 H800 GPUs, {label}, {size_448 / 2**20:g} MiB, windowed",
                     _paper_448(label, size_448), None)
        out.append(_collective_row(m, r, size_448))
    return out
