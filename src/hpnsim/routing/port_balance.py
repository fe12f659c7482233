"""NIC port choice that balances both ends of every connection (HPN dual plane).

On a dual-plane fabric a flow that leaves its NIC on port p stays in plane p and arrives on
port p of the destination NIC, so one port choice fixes a send port and a receive port.
Giving each NIC's outgoing connections to its ports in turn balances the send side only: a
NIC receiving from several senders can get 3 flows on port 0 and 1 on port 1 (or all of
them on one port when every sender has a single connection).

The rule here treats the flows as the edges of a bipartite multigraph (send side of every
NIC, receive side of every NIC) and colours the edges with ports:

1. **greedy, flows in order**: a flow takes, among its usable ports, the one its source
   has sent least on; ties go to the port its destination has received least on; ties
   again to the first usable port. The send side is therefore exactly as balanced as the
   round-robin (every prefix of a NIC's flows within one flow per port), and when the
   destination counts tie too the choice *is* the round-robin's.
2. **repair (two ports)**: while some destination receives two or more flows more on one
   port than on the other, walk an alternating trail from it: move one of its flows on the
   heavy port to the light one; if that flow's source is now off by two, move one of the
   source's flows the other way, and so on, until a NIC whose counts stay within one (the
   Kempe-chain argument of de Werra's equitable edge colouring of bipartite graphs: such
   a trail exists). A trail that cannot be completed is undone, so repair never makes a
   count worse.

Flows whose usable ports number fewer than two (a dead access link, a plane cut off) keep
the port they have and never move. With more than two ports only the greedy step runs.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _greedy(src, dst, usable, n_nics):
    n, m = usable.shape
    sent = np.empty((n_nics, m), np.int64)
    sent[:] = 0
    received = np.empty((n_nics, m), np.int64)
    received[:] = 0
    port = np.empty(n, np.int64)
    port[:] = 0
    for i in range(n):
        s, d = src[i], dst[i]
        best = -1
        for p in range(m):
            if not usable[i, p]:
                continue
            if best < 0 or sent[s, p] < sent[s, best] or (
                    sent[s, p] == sent[s, best] and received[d, p] < received[d, best]):
                best = p
        if best < 0:
            best = 0
        port[i] = best
        sent[s, best] += 1
        received[d, best] += 1
    return port, sent, received


@njit(cache=True)
def _incidence(keys, n_nics, movable):
    """CSR lists of the movable flows per NIC (``keys``: a NIC per flow)."""
    counts = np.empty(n_nics + 1, np.int64)
    counts[:] = 0
    for i in range(keys.shape[0]):
        if movable[i]:
            counts[keys[i] + 1] += 1
    ptr = counts  # running sum in place (numba's np.cumsum costs a compile: issue 21)
    for j in range(n_nics):
        ptr[j + 1] += ptr[j]
    fill = ptr[:-1].copy()
    flows = np.empty(ptr[-1], np.int64)
    for i in range(keys.shape[0]):
        if movable[i]:
            flows[fill[keys[i]]] = i
            fill[keys[i]] += 1
    return ptr, flows


@njit(cache=True)
def _repair(src, dst, port, movable, sent, received, n_nics):
    s_ptr, s_flows = _incidence(src, n_nics, movable)
    r_ptr, r_flows = _incidence(dst, n_nics, movable)
    used = np.empty(port.shape[0], np.bool_)
    used[:] = False
    trail = np.empty(port.shape[0], np.int64)
    for start in range(n_nics):
        while abs(received[start, 0] - received[start, 1]) >= 2:
            heavy = 0 if received[start, 0] > received[start, 1] else 1
            v, on_receive, length, done = start, True, 0, False
            while length < port.shape[0]:
                ptr, flows = (r_ptr, r_flows) if on_receive else (s_ptr, s_flows)
                pick = -1
                for k in range(ptr[v], ptr[v + 1]):
                    f = flows[k]
                    if not used[f] and port[f] == heavy:
                        pick = f
                        break
                if pick < 0:
                    break
                used[pick] = True
                trail[length] = pick
                length += 1
                light = 1 - heavy
                port[pick] = light
                sent[src[pick], heavy] -= 1
                sent[src[pick], light] += 1
                received[dst[pick], heavy] -= 1
                received[dst[pick], light] += 1
                v = src[pick] if on_receive else dst[pick]
                on_receive = not on_receive
                counts = received[v] if on_receive else sent[v]
                if abs(counts[0] - counts[1]) <= 1:
                    done = True
                    break
                heavy = light       # v now has two too many on the port just filled
            for k in range(length):
                f = trail[k]
                used[f] = False
                if not done:        # undo the whole trail
                    old = 1 - port[f]
                    sent[src[f], port[f]] -= 1
                    sent[src[f], old] += 1
                    received[dst[f], port[f]] -= 1
                    received[dst[f], old] += 1
                    port[f] = old
            if not done:
                break
    return port


def balanced_ports(src: np.ndarray, dst: np.ndarray, usable: np.ndarray,
                   n_nics: int) -> np.ndarray:
    """Port of each flow ``src[i] -> dst[i]`` (NIC ids below ``n_nics``) among the True
    columns of ``usable[i]``, balancing every NIC's send and receive counts (module
    docstring).

    Examples
    --------
    Senders 0 and 1 with one connection each and sender 2 with two, all to NIC 3: the
    round-robin puts 0, 1 and the first of 2 on port 0 (3:1); here NIC 3 gets 2:2.

    >>> both = np.ones((4, 2), dtype=bool)
    >>> balanced_ports(np.array([0, 1, 2, 2]), np.array([3, 3, 3, 3]), both, 4).tolist()
    [0, 1, 0, 1]
    """
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    usable = np.ascontiguousarray(usable, dtype=np.bool_)
    port, sent, received = _greedy(src, dst, usable, int(n_nics))
    if usable.shape[1] == 2 and src.size:
        movable = usable.all(axis=1)
        port = _repair(src, dst, port, movable, sent, received, int(n_nics))
    return port
