"""NVLS-tree all-reduce as NCCL 2.18.3 runs it: chunk streams, loops and the pipeline's fill.

NCCL's NVLS-tree (``runNvlsTree`` in ``src/collectives/device/all_reduce.h``, v2.18.3-1) runs
on ``nvlsChannels`` channels (``NCCL_NVLS_NCHANNELS``, default 16, ``src/transport/nvls.cc``),
each with ``nHeads`` = the host's GPUs as heads: every loop moves one chunk per (channel,
head), ``loopSize = nChannels x nHeads x chunkSize``. The chunk is one Simple slot (4 MiB
buffer / ``NCCL_STEPS`` = 512 KiB), capped at 256, 128, 64, 32 KiB when the buffer is under
32, 16, 4, 1 x (nChannels x nHeads x chunk) (``computeColl`` in ``src/enqueue.cc``). Within a
channel, warps split the roles (20 warps of ``NCCL_MAX_NTHREADS`` 640: scatter 6, gather 5,
reduce 5, broadcast 4 on a host with a tree parent), so the stages of different chunks run at
once.

A chunk walks the stages: scatter to its head and the NVSwitch reduction (NVLink out), up
the tree over hosts (``dtree_depth(H)`` network hops), down again, the NVSwitch multicast and
the gather (NVLink in). With ``loops`` loops the all-reduce takes the fill (every stage once,
each at its own rate: one loop's bytes over NVLink, or a head's share over its NIC) plus
``loops - 1`` times the steady per-loop time, set by the busiest resource when all stages
run: NVLink carries (k+1)/k of the loop each way at ``nvls_efficiency`` of its rate, the NIC
the double binary tree's load (:func:`~hpnsim.collectives.closed_form.forms.nvls_time`). At
56 hosts and 64 MiB that is 4 loops against a fill of 2 NVLink stages and 12 network hops:
what caps NVLS-tree below the NVLink bound at the paper's sizes. Once the pipeline is full
(each further loop costs one steady per-loop time) the busbw of the extra bytes is the
closed-form cap, :func:`nvlstree_cap_busbw`.

Examples
--------
>>> from hpnsim.collectives.closed_form.shape import GroupShape
>>> from hpnsim.collectives.nccl.params import NcclParams
>>> shape = GroupShape(56, 8, 164.8e9, 49e9, nic_ports=2, nvls=True)
>>> p = nvlstree_pipeline(shape, 64 * 2**20, NcclParams.for_gpu("h800"))
>>> p.chunk_bytes / 1024, p.loops, p.stages
(128.0, 4, 14)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hpnsim.collectives.closed_form.shape import GroupShape
from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.collectives.nccl.steps import BUFFER_BYTES, NCCL_STEPS
from hpnsim.collectives.schedules.nvls import nvls_loads
from hpnsim.collectives.schedules.tree import dtree_depth, dtree_load
from hpnsim.errors import InputError

__all__ = ["NVLS_CHANNELS", "NvlsTreePipeline", "nvlstree_cap_busbw", "nvlstree_chunk",
           "nvlstree_fill", "nvlstree_pipeline"]

#: channels of NVLS and NVLS-tree (``NCCL_PARAM(NvlsChannels, "NVLS_NCHANNELS", 16)``,
#: src/transport/nvls.cc, v2.18.3-1)
NVLS_CHANNELS = 16
#: (buffer under this many loops of the current chunk, cap the chunk at) for NVLS-tree,
#: computeColl in src/enqueue.cc v2.18.3-1, applied in order
_CHUNK_CAPS = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))


def nvlstree_chunk(size: float, streams: int) -> float:
    """Bytes of one NVLS-tree chunk: one Simple slot (512 KiB), capped for small buffers.

    Parameters
    ----------
    size : float
        The all-reduce buffer, bytes.
    streams : int
        Chunks per loop: NCCL's channels x heads.

    Returns
    -------
    float

    Examples
    --------
    >>> [nvlstree_chunk(s, 128) / 1024 for s in (2**26, 2**28, 2**30, 2**32)]
    [128.0, 128.0, 256.0, 512.0]
    """
    if not size > 0 or not math.isfinite(size):
        raise InputError("size", f"must be finite and > 0, got {size!r}")
    chunk = float(BUFFER_BYTES["simple"] // NCCL_STEPS)
    for loops, cap in _CHUNK_CAPS:
        if size < loops * streams * chunk and chunk > cap:
            chunk = float(cap)
    return chunk


@dataclass(frozen=True)
class NvlsTreePipeline:
    """One NVLS-tree all-reduce as NCCL's chunk pipeline (bandwidth part, no latencies).

    Attributes
    ----------
    chunk_bytes : float
        Bytes of one chunk (:func:`nvlstree_chunk`).
    streams : int
        Chunks per loop (channels x heads).
    loops : int
        Loops over the buffer.
    stages : int
        Stages a chunk walks: NVLS reduction, ``dtree_depth(H)`` hops up, as many down,
        NVLS multicast.
    fill : float
        Seconds for the first loop to walk every stage.
    per_loop : float
        Seconds of each further loop, when every stage is busy.
    time : float
        ``fill + (loops - 1) x per_loop``.
    """

    chunk_bytes: float
    streams: int
    loops: int
    stages: int
    fill: float
    per_loop: float
    time: float


def _rates(shape: GroupShape, nccl: NcclParams) -> tuple[float, float]:
    return shape.bw_intra * nccl.nvls_efficiency, shape.bw_inter


def nvlstree_pipeline(shape: GroupShape, size: float, nccl: NcclParams, *,
                      channels: int = NVLS_CHANNELS) -> NvlsTreePipeline:
    """NCCL 2.18.3's NVLS-tree pipeline of a ``size``-byte all-reduce on ``shape``.

    Per loop of ``L = channels x k x chunk`` bytes: the NVLS stages move L over each GPU's
    NVLink (out on the way up, in on the way down) at ``bw_intra x nvls_efficiency``; a
    network hop moves a head's L/k over its NIC at ``bw_inter``. Steady state: NVLink
    carries (k+1)/k L each way, the NIC ``dtree_load(H)`` / 2 x L/k (the double binary
    tree: a host interior in one tree sends 3 halves and receives as many).

    Parameters
    ----------
    shape : GroupShape
        Hosts (two or more) and GPUs per host; ``bw_intra`` and ``bw_inter`` as NCCL moves
        payload.
    size : float
        The all-reduce buffer, bytes.
    nccl : NcclParams
        Its ``nvls_efficiency`` scales NVLink.
    channels : int
        NCCL's NVLS channels (default 16).

    Returns
    -------
    NvlsTreePipeline

    Examples
    --------
    >>> shape = GroupShape(2, 8, 164.8e9, 49e9, nic_ports=2, nvls=True)
    >>> p = nvlstree_pipeline(shape, 2**30, NcclParams.for_gpu("h800"))
    >>> p.loops, p.stages, round(p.time * 1e3, 3)
    (32, 4, 9.004)
    """
    if shape.hosts < 2:
        raise InputError("algo", "nvlstree runs across hosts; use nvls inside one")
    if isinstance(channels, bool) or int(channels) != channels or channels < 1:
        raise InputError("channels", f"must be a positive integer, got {channels!r}")
    k, hosts = shape.gpus_per_host, shape.hosts
    streams = channels * k
    chunk = nvlstree_chunk(size, streams)
    loop = streams * chunk
    loops = math.ceil(size / loop)
    nvlink, nic = _rates(shape, nccl)
    depth = dtree_depth(hosts)
    stage_nv = loop / nvlink                  # one loop through a GPU's NVLink, one way
    hop = loop / k / nic                      # a head's share of one loop over its NIC
    # the first loop carries the whole buffer when it is smaller than a loop (an 8-byte
    # all-reduce fills nothing: its chunks are the buffer's, not 32 KiB slots)
    fill = (2 * stage_nv + 2 * depth * hop) * min(size, loop) / loop
    per_loop = max(max(nvls_loads("allreduce", k)) * stage_nv,
                   dtree_load(hosts) / 2 * hop)
    return NvlsTreePipeline(chunk, streams, loops, 2 + 2 * depth, fill, per_loop,
                            fill + (loops - 1) * per_loop)


def nvlstree_cap_busbw(shape: GroupShape, nccl: NcclParams) -> float:
    """Busbw (bytes/s) of NVLS-tree once its pipeline is full: 2(n-1)/n x the algbw of the
    busier of NVLink (k/(k+1) x ``bw_intra x nvls_efficiency``) and the NIC
    (2k/dtree_load(H) x ``bw_inter``).

    Examples
    --------
    >>> shape = GroupShape(56, 8, 164.8e9, 49e9, nic_ports=2, nvls=True)
    >>> round(nvlstree_cap_busbw(shape, NcclParams.for_gpu("h800")) / 1e9, 1)   # NVLink
    248.5
    """
    n, k = shape.n, shape.gpus_per_host
    nvlink, nic = _rates(shape, nccl)
    algbw = min(nvlink / max(nvls_loads("allreduce", k)), 2 * k * nic / dtree_load(shape.hosts))
    return 2 * (n - 1) / n * algbw


def nvlstree_fill(shape: GroupShape, size: float, nccl: NcclParams, *,
                  channels: int = NVLS_CHANNELS) -> float:
    """Seconds the pipeline adds to the steady-rate time ``size / L x per_loop``: the fill,
    less the one loop it stands for, plus the last loop's rounding up. The flow engine and
    :func:`~hpnsim.collectives.closed_form.forms.nvls_time` move the bytes at the steady
    rate from the start and add this.

    Examples
    --------
    >>> shape = GroupShape(56, 8, 164.8e9, 49e9, nic_ports=2, nvls=True)
    >>> h800 = NcclParams.for_gpu("h800")
    >>> round(nvlstree_fill(shape, 2**26, h800) * 1e6, 1), round(nvlstree_fill(shape, 2**32,
    ...                                                          h800) * 1e6, 1)
    (618.4, 2473.5)
    """
    p = nvlstree_pipeline(shape, size, nccl, channels=channels)
    return max(0.0, p.time - size / (p.streams * p.chunk_bytes) * p.per_loop)
