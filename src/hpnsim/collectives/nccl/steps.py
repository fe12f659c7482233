"""NCCL's step pipeline: what one step of a ring carries at n ranks, and what each step costs.

A ring collective of ``n`` ranks is ``2(n-1)`` steps (all-reduce) or ``n-1`` (all-gather,
reduce-scatter) per channel: each step moves one chunk from a rank to the next, and a step
can start only when the chunk of the step before it has arrived. NCCL cuts a channel's share
of the buffer into loops of ``n`` chunks; one chunk is at most one chunk of slots of the
connection's FIFO. Sources, NCCL v2.18.3-1 (the HPN paper's version; the same in v2.29.7-1):

- ``NCCL_STEPS`` = 8 slots per connection (``src/include/devcomm.h``).
- Buffer per connection (``src/init.cc``): Simple ``DEFAULT_BUFFSIZE`` 4 MiB (1 MiB on Arm);
  LL ``NCCL_LL_LINES_PER_THREAD`` 8 x ``NCCL_LL_MAX_NTHREADS`` 512 x 8 slots x 16-byte lines
  = 512 KiB; LL128 ``NCCL_LL128_ELEMS_PER_THREAD`` 120 x ``NCCL_LL128_MAX_NTHREADS`` 640 x 8
  slots x 8 bytes = 4.69 MiB. One slot (step) is buffer / ``NCCL_STEPS``.
- Simple rings take ``ALLREDUCE_CHUNKSTEPS`` = ``NCCL_STEPS/2`` slots per chunk, sent as
  ``ALLREDUCE_SLICESTEPS`` = ``NCCL_STEPS/4`` slot slices (all-gather and reduce-scatter the
  same; ``src/include/collectives.h``); LL and LL128 one slot per chunk
  (``computeColl`` in ``src/enqueue.cc``).
- Payload per wire line: LL 8 of 16 bytes (a 4-byte flag per 4 data bytes), LL128 120 of 128
  (``NCCL_LL128_DATAELEMS`` 15 of ``NCCL_LL128_LINEELEMS`` 16 eight-byte words).
- Loops: ``nLoops = ceil(size / (channels x n x chunk payload))`` (``computeColl``).

Per-step cost, as NCCL's tuner charges it (``ncclTopoTuneModel`` in ``src/graph/tuning.cc``):
a step inside a host costs the NVLink hop latency of the protocol, a step across hosts the
network hop latency; in a ring that spans hosts every step costs at least the proxy's
network post overhead (``getNetOverhead``: 1 µs on Intel and non-x86 hosts, 2 µs on AMD,
times 3 for Simple; "Inter-node rings still have to launch nsteps * net overhead"), since
each step of such a ring is paced by the slowest of its hops. Every rank's chunk walks its
steps from its own rank, and a step waits for the step before it on the rank before, so
the ring ends with the walk whose steps cost most: the one that crosses hosts most times
(2 x hosts for an all-reduce with three or more GPUs per host; hosts for an all-gather; NCCL
2.18.3's tuner counts ``2 nNodes`` and ``nNodes - 1``, v2.29.7-1's ``2 (nNodes - 1)`` and
``nNodes - 1``). The latency of the whole ring is the base latency plus the sum over that
walk's steps (:func:`ring_step_latencies`); its chunks
only set how much each step carries (:func:`ring_step_bytes`), since the flow engine moves
the bytes at the links' rates. The NIC's message rate does not bind here: one message per
step and channel is a few million messages per second at most (see docs/experiments.md).

Examples
--------
>>> round(ring_step_bytes("allreduce", "simple", 256 * 2**20, ranks=448, channels=16))
37449
>>> [float(t * 1e6) for t in ring_step_latencies("allgather", "ll", ranks=4, hosts=2)]
[2.7, 1.0, 2.7]
"""

from __future__ import annotations

import math

import numpy as np

from hpnsim.collectives.nccl.params import NcclParams, resolve_nccl
from hpnsim.collectives.ops import PROTOCOLS
from hpnsim.errors import InputError

__all__ = ["BUFFER_BYTES", "NCCL_STEPS", "PAYLOAD_PER_WIRE_BYTE", "chunk_payload",
           "ring_loops", "ring_step_bytes", "ring_step_latencies", "ring_steps"]

#: slots per connection FIFO (``#define NCCL_STEPS 8``, src/include/devcomm.h)
NCCL_STEPS = 8
#: bytes of one connection's buffer per protocol (src/init.cc DEFAULT_LL_BUFFSIZE,
#: DEFAULT_LL128_BUFFSIZE, DEFAULT_BUFFSIZE on x86)
BUFFER_BYTES = {"ll": 8 * 512 * NCCL_STEPS * 16, "ll128": 120 * 640 * NCCL_STEPS * 8,
                "simple": 1 << 22}
#: payload per wire byte of a protocol's lines (LL: 8 data bytes per 16-byte line; LL128: 15
#: of 16 eight-byte words; Simple: all)
PAYLOAD_PER_WIRE_BYTE = {"ll": 0.5, "ll128": 15 / 16, "simple": 1.0}
#: slots per chunk of a Simple ring (ALLREDUCE/ALLGATHER/REDUCESCATTER_CHUNKSTEPS)
SIMPLE_RING_CHUNK_STEPS = NCCL_STEPS // 2
_RING_OPS = ("allreduce", "allgather", "reducescatter")


def _check(op: str, protocol: str, ranks: int, hosts: int = 1) -> None:
    if op not in _RING_OPS:
        raise InputError("op", f"ring steps are defined for {', '.join(_RING_OPS)}, got {op!r}")
    if protocol not in PROTOCOLS:
        raise InputError("protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if isinstance(ranks, bool) or int(ranks) != ranks or ranks < 1:
        raise InputError("gpus", f"need at least 1 rank, got {ranks!r}")
    if isinstance(hosts, bool) or int(hosts) != hosts or not 1 <= hosts <= ranks:
        raise InputError("hosts", f"must be an integer in 1..{ranks}, got {hosts!r}")


def ring_steps(op: str, ranks: int, hosts: int = 1) -> tuple[int, int]:
    """``(steps, steps across hosts)`` of one channel of a ring over ``hosts`` hosts with the
    ranks of a host next to each other (NCCL's rings: ``2(n-1)`` and ``2(hosts-1)`` for
    all-reduce, ``n-1`` and ``hosts-1`` for all-gather and reduce-scatter).

    Examples
    --------
    >>> ring_steps("allreduce", 16, 2), ring_steps("allgather", 448, 56)
    ((30, 2), (447, 55))
    """
    _check(op, "simple", ranks, hosts)
    rounds = 2 if op == "allreduce" else 1
    return rounds * (ranks - 1), rounds * (hosts - 1)


def chunk_payload(protocol: str) -> float:
    """Most payload bytes one ring step carries per channel: a chunk of slots, less the
    protocol's flags (Simple 4 slots of 512 KiB = 2 MiB; LL one 64 KiB slot carrying 32 KiB;
    LL128 one 600 KiB slot carrying 562.5 KiB).

    Examples
    --------
    >>> chunk_payload("simple") / 2**20, chunk_payload("ll") / 2**10
    (2.0, 32.0)
    """
    if protocol not in PROTOCOLS:
        raise InputError("protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    slots = SIMPLE_RING_CHUNK_STEPS if protocol == "simple" else 1
    return BUFFER_BYTES[protocol] / NCCL_STEPS * slots * PAYLOAD_PER_WIRE_BYTE[protocol]


def ring_loops(op: str, protocol: str, size: float, *, ranks: int, channels: int) -> int:
    """Loops of a channel: ``ceil(size / (channels x ranks x chunk payload))``.

    Examples
    --------
    >>> ring_loops("allreduce", "simple", 4 * 2**30, ranks=448, channels=16)
    1
    >>> ring_loops("allreduce", "simple", 4 * 2**30, ranks=16, channels=16)
    8
    """
    _check(op, protocol, ranks)
    if not size > 0 or not math.isfinite(size):
        raise InputError("size", f"must be finite and > 0, got {size!r}")
    if isinstance(channels, bool) or int(channels) != channels or channels < 1:
        raise InputError("channels", f"must be a positive integer, got {channels!r}")
    return max(1, math.ceil(size / (channels * ranks * chunk_payload(protocol))))


def ring_step_bytes(op: str, protocol: str, size: float, *, ranks: int, channels: int) -> float:
    """Payload bytes one step of one channel carries: the buffer's share per channel, rank
    and loop, ``size / (channels x ranks x loops)`` (at most :func:`chunk_payload`). At
    hundreds of ranks even a 4 GiB buffer fits in one loop and its steps are small.

    Examples
    --------
    >>> ring_step_bytes("allgather", "simple", 2**30, ranks=8, channels=16) / 2**20
    2.0
    >>> round(ring_step_bytes("allgather", "simple", 2**30, ranks=448, channels=16) / 2**10, 1)
    146.3
    """
    loops = ring_loops(op, protocol, size, ranks=ranks, channels=channels)
    return size / (channels * ranks * loops)


def ring_step_latencies(op: str, protocol: str, *, ranks: int, hosts: int = 1,
                        nccl: NcclParams | dict | None = None) -> np.ndarray:
    """Seconds each step of the slowest walk of a ring channel costs in latency, in order.

    The ring visits the ranks of a host one after another; the step that leaves a host's
    last rank crosses the network. Every rank's chunk walks ``steps`` consecutive edges
    (:func:`ring_steps`) from its own rank, a step starting when the step before it on the
    rank before has arrived, so the ring ends with the walk of the largest latency (one
    starting at a host's third rank for an all-reduce, its second for an all-gather, so the
    edges it leaves out stay inside a host). Inside a host a step costs the protocol's NVLink
    hop latency, across hosts the network hop latency (NCCL's ring table,
    :meth:`NcclParams.latencies`); when the ring spans hosts every step costs at least the
    proxy's post overhead (``nccl.net_overhead_us``, times 3 for Simple). The ring's latency
    is ``base`` plus the sum.

    Examples
    --------
    >>> lat = ring_step_latencies("allreduce", "simple", ranks=16, hosts=2)
    >>> len(lat), round(float(lat.sum()) * 1e6, 1)         # 26 x 3.4 + 4 x 14
    (30, 144.4)
    """
    _check(op, protocol, ranks, hosts)
    if ranks % hosts:
        raise InputError("hosts", f"{ranks} ranks do not split evenly over {hosts} hosts")
    nccl = resolve_nccl(nccl)
    _, nvlink, net = nccl.latencies("ring", protocol, multi_host=hosts > 1)
    local = ranks // hosts
    steps, _ = ring_steps(op, ranks, hosts)
    # edge e leaves ring position e; it crosses hosts when it leaves a host's last rank
    edge = np.where((np.arange(ranks) % local == local - 1) & (hosts > 1), net, nvlink)
    walks = np.array([edge[(start + np.arange(steps)) % ranks].sum() for start in range(ranks)])
    start = int(np.argmax(walks))
    return edge[(start + np.arange(steps)) % ranks]
