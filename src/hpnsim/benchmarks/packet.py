"""Packet-engine benchmarks: events per second, and a 16-GPU ring all-reduce on HPN 7.0.

* ``incast``: 8 senders at 400 Gb/s into one 400 Gb/s port, 50 MB each, ConnectX DCQCN and
  SimAI's 400G ECN/PFC settings, CNPs as packets on the reverse links: the event rate of
  the whole NIC/switch/DCQCN path.
* ``lossy incast``: the same without CC, PFC and buffer limit: the bare link/queue path.
* ``ring``: 256 MiB all-reduce over the 16 GPUs of two hosts of one HPN 7.0 segment
  (published segment: 128 hosts, 200G NIC ports), 8 NCCL channels (one per rail, PXN),
  512 KiB chunks, hpn_dual_plane routing: windowed (target 1.2 s) and every step.

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


def run(quick: bool = False) -> list[Measurement]:
    """Event rates on incasts and the 16-GPU ring all-reduce (quick: smaller sizes).

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
    return out
