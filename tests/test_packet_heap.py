"""The packet engine's event heap and state layout (issue 30 item 5: the kernel at 448 GPUs).

The heap must pop in exactly (time, insertion) order, whatever its arity: a run's events,
and so its results, are then the same as with the binary heap it replaced. Checked against
Python's heapq on the same pushes (brute force), with many equal times. The state rows must
start on cache lines and the packet pool keep its records and arrival times when it grows.
"""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from hpnsim.packet import heap, pool
from hpnsim.packet.kinds import Ms, Pkt


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heap_pops_in_time_then_insertion_order(seed):
    rng = np.random.default_rng(seed)
    ht, hk, ms = heap.new_heap(4096)
    ref, popped, expected = [], [], []
    seq = 0
    for _ in range(6000):
        if ref and rng.random() < 0.45:
            t, ident, kind = heap.pop(ht, hk, ms)
            popped.append((t, ident, kind))
            rt, _, rid, rkind = heapq.heappop(ref)
            expected.append((rt, rid, rkind))
        else:
            t = float(rng.integers(0, 40)) * 1e-6      # few distinct times: many ties
            ident, kind = int(rng.integers(0, 10**6)), int(rng.integers(0, 13))
            heap.push(ht, hk, ms, t, ident, kind)
            heapq.heappush(ref, (t, seq, ident, kind))
            seq += 1
        assert ms[Ms.HEAP_N] == len(ref)
        if ref:
            assert ht[0] == ref[0][0]                  # the kernel reads the root's time
    while ref:
        popped.append(heap.pop(ht, hk, ms))
        rt, _, rid, rkind = heapq.heappop(ref)
        expected.append((rt, rid, rkind))
    assert popped == expected


def test_state_rows_start_on_cache_lines():
    for dtype, cols in ((np.int32, 22), (np.float64, 10), (np.float64, 15), (np.int32, 12)):
        a = pool.rows(5, cols, dtype, fill=-1)
        assert a.shape == (5, cols) and a.ctypes.data % 64 == 0
        assert a.strides[0] % 64 == 0 and a.strides[0] >= cols * np.dtype(dtype).itemsize
        assert np.all(a == -1)


def test_pool_grows_with_its_records_and_times():
    ms = np.zeros(len(Ms), dtype=np.int64)
    pk, pt = pool.new_pool(4, ms)
    taken = [pool.alloc(pk, ms, flow, 100 + flow) for flow in range(3)]
    for p in taken:
        pt[p] = 1e-6 * (p + 1)
    assert pk.ctypes.data % 64 == 0 and pk.strides[0] == 64
    pk2, pt2 = pool.grow(pk, pt, ms)
    assert pk2.shape == (8, pk.shape[1]) and ms[Ms.FREE_N] == 5
    assert [int(pk2[p, Pkt.SIZE]) for p in taken] == [100, 101, 102]
    assert [float(pt2[p]) for p in taken] == [1e-6, 2e-6, 3e-6]
    pt2[taken[0]] = 7.0                                # the times live in the records
    assert pk2.view(np.float64)[taken[0], pool.TIME_SLOT] == 7.0
    free, p = [], ms[Ms.FREE_HEAD]
    while p >= 0:                                      # the free list: old spare, new ones
        free.append(int(p))
        p = pk2[p, Pkt.NEXT]
    assert sorted(free) == [3, 4, 5, 6, 7]
