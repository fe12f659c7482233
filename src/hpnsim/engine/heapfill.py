"""Progressive filling driven by an indexed heap of link fair shares, for large classes.

Local-minimum rounds (``maxmin.fill_class``) rescan every unfrozen variable each round; on a
large dense problem (1e6 flows on a k=56 fat-tree) that is ~70 rounds over most variables.
Here the link with the smallest fair share is always taken next (it is a local minimum, so
this is exact progressive filling) and its variables are frozen at that share. The heap
holds one entry per link (an indexed heap, small and cache-resident). Links whose share
rose are only marked stale: a stale key is a lower bound, so it is refreshed when it
reaches the top, and the top is final once it is fresh. O(nnz + pops log n_links).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _less(key, a, b):
    return key[a] < key[b] or (key[a] == key[b] and a < b)


@njit(cache=True)
def _sift_down(heap, pos, key, i, n):
    # callers pass np.int64 indices: a literal 0 would compile another specialisation
    item = heap[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(key, heap[c + 1], heap[c]):
            c += 1
        if _less(key, heap[c], item):
            heap[i] = heap[c]
            pos[heap[i]] = i
            i = c
        else:
            break
    heap[i] = item
    pos[item] = i


@njit(cache=True)
def _two_sum(a, b):
    """a + b as (rounded sum, exact rounding error): keeps running differences exact."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(cache=True)
def fill_class_heap(act, n_act, ptr, links, usage, weight, rate, ws):
    """Water-fill variables ``act[:n_act]`` on the workspace's ``rem`` (reduced in place)."""
    rem, rem_lo, lidx = ws[0], ws[1], ws[9]
    nnz = 0
    for i in range(n_act):
        v = act[i]
        nnz += ptr[v + 1] - ptr[v]
    loc_links = np.empty(nnz, dtype=np.int64)
    nl = 0
    for i in range(n_act):
        v = act[i]
        for e in range(ptr[v], ptr[v + 1]):
            lk = links[e]
            if lidx[lk] < 0:
                lidx[lk] = nl
                loc_links[nl] = lk
                nl += 1
    # local link -> positions in act (CSR), and weight sums
    lv_ptr = np.empty(nl + 1, dtype=np.int64)
    lv_ptr[:] = 0
    for i in range(n_act):
        v = act[i]
        for e in range(ptr[v], ptr[v + 1]):
            lv_ptr[lidx[links[e]] + 1] += 1
    for j in range(nl):
        lv_ptr[j + 1] += lv_ptr[j]
    fill = lv_ptr[:-1].copy()
    lv_pos = np.empty(nnz, dtype=np.int64)
    denom = np.empty(nl)
    denom[:] = 0.0
    denom_lo = np.empty(nl)
    denom_lo[:] = 0.0
    for i in range(n_act):
        v = act[i]
        w = weight[v]
        for e in range(ptr[v], ptr[v + 1]):
            j = lidx[links[e]]
            lv_pos[fill[j]] = i
            fill[j] += 1
            denom[j], err = _two_sum(denom[j], usage[e] * w)
            denom_lo[j] += err
    # loops, not np.diff / np.arange: numba's versions compile their error reporting
    # (string formatting) on a fresh install, seconds for a few lines (issue 21)
    cnt = np.empty(nl, dtype=np.int64)
    key = np.empty(nl)
    heap = np.empty(nl, dtype=np.int64)
    pos = np.empty(nl, dtype=np.int64)
    for j in range(nl):
        cnt[j] = lv_ptr[j + 1] - lv_ptr[j]
        heap[j] = j
        pos[j] = j
        lk = loc_links[j]
        key[j] = max(rem[lk] + rem_lo[lk], 0.0) / (denom[j] + denom_lo[j])
    for i in range(nl // 2 - 1, -1, -1):
        _sift_down(heap, pos, key, np.int64(i), np.int64(nl))
    stale = np.empty(nl, dtype=np.bool_)
    stale[:] = False
    frozen = np.empty(n_act, dtype=np.bool_)
    frozen[:] = False
    hn = nl
    while hn > 0:
        j = heap[0]
        if stale[j]:
            # keys only rise, so a stale key is a lower bound: refresh it lazily, only when
            # it reaches the top
            stale[j] = False
            if cnt[j] == 0:
                key[j] = np.inf
            else:
                lk = loc_links[j]
                key[j] = max(rem[lk] + rem_lo[lk], 0.0) / (denom[j] + denom_lo[j])
            _sift_down(heap, pos, key, np.int64(0), np.int64(hn))
            continue
        s = key[j]
        if s == np.inf:
            break
        hn -= 1
        if hn > 0:
            heap[0] = heap[hn]
            pos[heap[0]] = 0
            _sift_down(heap, pos, key, np.int64(0), np.int64(hn))
        for k in range(lv_ptr[j], lv_ptr[j + 1]):
            i = lv_pos[k]
            if frozen[i]:
                continue
            frozen[i] = True
            v = act[i]
            w = weight[v]
            r = w * s
            rate[v] = r
            for e in range(ptr[v], ptr[v + 1]):
                lk = links[e]
                jj = lidx[lk]
                rem[lk], err = _two_sum(rem[lk], -usage[e] * r)
                rem_lo[lk] += err
                denom[jj], err = _two_sum(denom[jj], -usage[e] * w)
                denom_lo[jj] += err
                cnt[jj] -= 1
                stale[jj] = True
    for j in range(nl):
        lidx[loc_links[j]] = -1
