"""Progressive filling driven by an indexed heap of link fair shares, for large classes.

Local-minimum rounds (``maxmin.fill_class``) rescan every unfrozen variable each round; on a
large dense problem (1e6 flows on a k=56 fat-tree) that is ~70 rounds over most variables.
Here the link with the smallest fair share is always taken next (it is a local minimum, so
this is exact progressive filling), its variables are frozen at that share, and only the
links they cross get their share raised in the heap: O(nnz log n_links) in all. The heap
holds one entry per link (an indexed heap), so it stays small and cache-resident.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _less(key, a, b):
    return key[a] < key[b] or (key[a] == key[b] and a < b)


@njit(cache=True)
def _sift_down(heap, pos, key, i, n):
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
    lv_ptr = np.zeros(nl + 1, dtype=np.int64)
    for i in range(n_act):
        v = act[i]
        for e in range(ptr[v], ptr[v + 1]):
            lv_ptr[lidx[links[e]] + 1] += 1
    for j in range(nl):
        lv_ptr[j + 1] += lv_ptr[j]
    fill = lv_ptr[:-1].copy()
    lv_pos = np.empty(nnz, dtype=np.int64)
    denom = np.zeros(nl)
    denom_lo = np.zeros(nl)
    for i in range(n_act):
        v = act[i]
        w = weight[v]
        for e in range(ptr[v], ptr[v + 1]):
            j = lidx[links[e]]
            lv_pos[fill[j]] = i
            fill[j] += 1
            denom[j], err = _two_sum(denom[j], usage[e] * w)
            denom_lo[j] += err
    cnt = np.diff(lv_ptr)
    key = np.empty(nl)
    heap = np.arange(nl)
    pos = np.arange(nl)
    for j in range(nl):
        lk = loc_links[j]
        key[j] = max(rem[lk] + rem_lo[lk], 0.0) / (denom[j] + denom_lo[j])
    for i in range(nl // 2 - 1, -1, -1):
        _sift_down(heap, pos, key, i, nl)
    dirty = np.full(nl, -1, dtype=np.int64)
    dirty_list = np.empty(nl, dtype=np.int64)
    frozen = np.zeros(n_act, dtype=np.bool_)
    hn = nl
    step = 0
    while hn > 0:
        j = heap[0]
        s = key[j]
        hn -= 1
        if hn > 0:
            heap[0] = heap[hn]
            pos[heap[0]] = 0
            _sift_down(heap, pos, key, 0, hn)
        pos[j] = -1
        if cnt[j] == 0:
            continue
        step += 1
        n_dirty = 0
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
                if pos[jj] >= 0 and dirty[jj] != step:
                    dirty[jj] = step
                    dirty_list[n_dirty] = jj
                    n_dirty += 1
        for d in range(n_dirty):
            jj = dirty_list[d]
            if cnt[jj] == 0:
                key[jj] = np.inf
            else:
                lk = loc_links[jj]
                key[jj] = max(rem[lk] + rem_lo[lk], 0.0) / (denom[jj] + denom_lo[jj])
            # shares only rise as others freeze, so the entry only moves down
            _sift_down(heap, pos, key, pos[jj], hn)
    for j in range(nl):
        lidx[loc_links[j]] = -1
