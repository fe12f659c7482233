"""Rails that run alike, simulated once: one rail's pipeline stands for all of them.

An NVLS-tree all-reduce runs one set of trees per rail (NCCL's heads, one per NIC:
:func:`~hpnsim.collectives.packet.tree.nvlstree_streams`). Inside one HPN segment the rails'
network legs are disjoint: each rail has its own NIC ports, ToRs and switch buffers, and its
trees are the other rails' with every GPU renamed. The rails meet only on each host's NVLink
links to its NVSwitch, which carry every rail's NVLS reduction and multicast and have no
buffer and no congestion control in the packet engine (:mod:`hpnsim.packet.adapter`).

:func:`rail_share` proves that for a given run, link by link: rail r's hops must be rail 0's
with every link renamed, the renaming one-to-one and keeping capacity, latency, framing and
cable pairs (a link and its reverse, where control packets return), and no switch buffer
may hold two rails' queues. Then the whole run is R copies of rail 0 laid over each other,
and a link l of the whole run carries, at every instant, the copies of rail 0's packets on
the links that rail r renames to l, for every r: rail 1's reduction on GPU 3's NVLink is a
copy of rail 0's on GPU 2's. So the one-rail run joins those links of rail 0 into one (a
*class*: all 8 GPU-to-NVSwitch links of a host are one, as are the 8 links back), of l's
capacity divided by how many copies of each member l carries (1 on HPN). Its flows then
share it as they share l in the whole run: the rails start alike and stay in lockstep. The
whole run lets them drift apart only by the order in which it breaks ties between rails'
packets (a deterministic order, not a physical one): measured, the one-rail run is 0.02-1.2%
slower (docs/benchmarks.md, "One rail for all"). Links rail 0 has to itself (every network
link) stay as they are.

:meth:`RailShare.expand` lays the copies back over each other: every link of the whole run
gets the counters and queues of its class in the one-rail run (times the copies it carries),
a flow's are its rail-0 twin's. tests/test_packet_rail_share.py checks the one-rail run against
the whole run where both run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["RailShare", "rail_of", "rail_share"]

_RAIL = re.compile(r"/rail(\d+)/")


def rail_of(stage_name: str) -> int | None:
    """The rail a planned stage belongs to, from its name (None: not a per-rail stage).

    >>> rail_of("allreduce/nvlstree/rail3/tree0/ch1"), rail_of("allreduce/nvls")
    (3, None)
    """
    m = _RAIL.search(stage_name)
    return None if m is None else int(m.group(1))


@dataclass
class RailShare:
    """Rail 0's links, their images on every rail and the class each runs in
    (:func:`rail_share`).

    Attributes
    ----------
    links : int64 (k,): the links rail 0's flows and their control packets cross.
    images : int64 (R, k): ``images[r, i]`` is the link of rail r that plays ``links[i]``
        (row 0 is ``links``).
    joined : int64 (k,): the link the one-rail run puts ``links[i]``'s packets on: its
        class's (the member with the lowest id of the class ``links[i]`` belongs to, or its
        reverse's pair), itself where rail 0 has it to itself.
    copies : int64 (k,): copies of each member of its class that every image carries.
    """

    links: np.ndarray
    images: np.ndarray
    joined: np.ndarray
    copies: np.ndarray

    @property
    def rails(self) -> int:
        """The rails one simulated rail stands for."""
        return int(self.images.shape[0])

    def capacity(self, capacity) -> np.ndarray:
        """Per link, the rate the one-rail run gives it: a class's joined link its image's
        rate over the copies of each member that image carries.

        >>> s = RailShare(np.array([0, 2]), np.array([[0, 2], [2, 0]]), np.array([0, 0]),
        ...               np.array([1, 1]))
        >>> s.capacity([10.0, 10.0, 10.0]).tolist()
        [10.0, 10.0, 10.0]
        """
        cap = np.array(capacity, dtype=np.float64)
        cap[self.joined] = cap[self.links] / self.copies
        return cap

    def hops(self, hops: list) -> list:
        """Rail 0's hops with every link on its class's joined link."""
        to = np.arange(int(max(self.links.max(), self.joined.max())) + 1)
        to[self.links] = self.joined
        return [replace(h, legs=[tuple(to[np.asarray(part, dtype=np.int64)] for part in leg)
                                 for leg in h.legs]) for h in hops]

    def expand(self, res):
        """The :class:`~hpnsim.packet.PacketResult` of all rails from the one-rail run's:
        every image of a rail-0 link gets its joined link's counters and queues (times the
        copies it carries; first XOFF and first pause as they are), every flow and QP one
        copy per rail after rail 0's; samples and events as simulated.

        >>> from hpnsim.packet import PacketParams, simulate_flows
        >>> r = simulate_flows([1e9] * 4, 1e-6, [[0], [2]], [4096.0, 4096.0], [0.0, 0.0],
        ...                    PacketParams(cc=False, ecn=False, pfc=False),
        ...                    switch_of=[-1] * 4)
        >>> s = RailShare(np.array([0, 2]), np.array([[0, 2], [2, 0]]), np.array([0, 0]),
        ...               np.array([1, 1]))
        >>> e = s.expand(r)        # links 0 and 2 each carry both rails' packets
        >>> e.tx_bytes.tolist() == [r.tx_bytes[0], 0.0, r.tx_bytes[0], 0.0]
        True
        >>> e.finish.size, e.events == r.events
        (4, True)
        """
        n = res.tx_bytes.size
        to, src = self.images.ravel(), np.tile(self.joined, self.rails)
        times = np.tile(self.copies, self.rails)

        def spread(a, scale: bool, empty: float = 0.0):
            a = np.asarray(a)
            out = np.full((n,) + a.shape[1:], empty, dtype=np.float64)
            grow = times.reshape((-1,) + (1,) * (a.ndim - 1)) if scale else 1
            out[to] = a[src] * grow
            return out.astype(a.dtype) if a.dtype.kind in "iu" else out

        def tiled(a):
            return np.tile(np.asarray(a), self.rails) if np.asarray(a).size else a

        per_link = {f: spread(getattr(res, f), True) for f in (
            "packets", "marks", "drops", "pauses", "paused_time", "headroom_max", "tx_bytes",
            "q_max", "q_mean", "q_pct")}
        per_link.update({f: spread(getattr(res, f), False, np.inf)
                         for f in ("first_xoff", "first_paused")})
        per_flow = {f: tiled(getattr(res, f)) for f in (
            "finish", "received", "cnps", "resent", "rewinds", "timeouts", "discards",
            "first_cnp", "qp_rate", "qp_alpha")}
        return replace(res, **per_link, **per_flow)


def _links(hops: list) -> np.ndarray:
    """Every link the hops' legs cross, in order (hop, member, part, position)."""
    return np.asarray([link for h in hops for leg in h.legs for part in leg for link in part],
                      dtype=np.int64)


def _shape(hop) -> tuple:
    """What a renaming must keep of a hop: its waits, packet size, weights and leg layout."""
    return (hop.needs, hop.consumers, hop.packet, tuple(np.asarray(hop.weight).tolist()),
            tuple(tuple(len(part) for part in leg) for leg in hop.legs))


def _pairs(a_hops: list, b_hops: list) -> tuple[np.ndarray, np.ndarray] | None:
    """(rail 0's link, rail r's link) of every leg's links, position by position, or None
    where the two rails' hops differ in shape."""
    if len(a_hops) != len(b_hops) or any(_shape(a) != _shape(b)
                                         for a, b in zip(a_hops, b_hops, strict=True)):
        return None
    return _links(a_hops), _links(b_hops)


def _function(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray | None:
    """Per link id below ``n``, its image under the pairs ``a -> b`` (-1: not in ``a``), or
    None where a link has two images or two links one image."""
    image = np.full(n, -1, dtype=np.int64)
    image[a] = b
    if not np.array_equal(image[a], b):
        return None
    keys = np.unique(a)
    if np.unique(image[keys]).size != keys.size:
        return None
    return image


def _classes(images: np.ndarray, n: int) -> np.ndarray:
    """Per rail-0 link (column of ``images``), the lowest column it lands on a link with,
    directly or through others: its class."""
    k = images.shape[1]
    label = np.arange(k)
    while True:
        low = np.full(n, k)
        np.minimum.at(low, images.ravel(), np.tile(label, images.shape[0]))
        new = np.minimum(label, low[images].min(axis=0))
        if np.array_equal(new, label):
            return label
        label = new


def rail_share(rail_hops: list, capacity, delay, switch_of, framed) -> RailShare | None:
    """Whether the rails' pipelines are alike (the module docstring says what is checked) and,
    if so, rail 0's links, their images on every rail and the classes the one-rail run joins.

    Parameters
    ----------
    rail_hops : per rail, its :class:`~hpnsim.packet.pipeline.Hop` list (rail 0 first).
    capacity, delay, switch_of, framed : per link (the packet engine's rates and keywords,
        :func:`~hpnsim.packet.adapter.fabric_links`); links come in cable pairs ``l``,
        ``l ^ 1``.

    Returns
    -------
    RailShare, or None where the rails are not alike (or there is one rail).

    Examples
    --------
    Two rails, each a flow over its own link (0 and 2) and then over the other's partner's
    (4 and 6), as two GPUs' reductions cross each other's NVLink:

    >>> from hpnsim.packet.pipeline import Hop
    >>> hop = lambda own, far: Hop(legs=[([own], [far])], weight=np.ones(1))
    >>> cap, none = [1e9] * 8, [-1] * 8
    >>> s = rail_share([[hop(0, 4)], [hop(2, 6)]], cap, [1e-6] * 8, none, [False] * 8)
    >>> s.links.tolist(), s.joined.tolist(), s.copies.tolist()
    ([0, 1, 4, 5], [0, 1, 4, 5], [1, 1, 1, 1])
    >>> s = rail_share([[hop(0, 4)], [hop(2, 4)]], cap, [1e-6] * 8, none, [False] * 8)
    >>> s.joined.tolist(), s.copies.tolist()      # both rails on link 4: two copies of it
    ([0, 1, 4, 5], [1, 1, 2, 2])

    A buffered link two rails cross is refused (its queue would hold both rails' packets):

    >>> rail_share([[hop(0, 4)], [hop(2, 4)]], cap, [1e-6] * 8, [-1] * 4 + [0] * 4,
    ...            [False] * 8) is None
    True
    """
    if len(rail_hops) < 2:
        return None
    cap = np.asarray(capacity, dtype=np.float64)
    lat = np.broadcast_to(np.asarray(delay, dtype=np.float64), cap.shape)
    buf = np.asarray(switch_of, dtype=np.int64)
    framed = np.asarray(framed, dtype=bool)
    n = cap.size
    own = _links(rail_hops[0])
    links = np.unique(np.concatenate([own, own ^ 1]))
    images = [links]
    for hops in rail_hops[1:]:
        pairs = _pairs(rail_hops[0], hops)
        if pairs is None:
            return None
        a, b = pairs
        image = _function(np.concatenate([a, a ^ 1]), np.concatenate([b, b ^ 1]), n)
        if image is None:
            return None
        mapped = image[links]
        if not all(np.array_equal(x[mapped], x[links]) for x in (cap, lat, framed, buf >= 0)):
            return None
        images.append(mapped)
    images = np.stack(images)
    k = links.size
    label = _classes(images, n)
    size = np.bincount(label, minlength=k)
    keys, count = np.unique(images.ravel() * k + np.tile(np.arange(k), len(images)),
                            return_counts=True)
    land, member = keys // k, keys % k
    copies = np.zeros(k, dtype=np.int64)
    copies[member] = count
    if not (np.bincount(land, minlength=n)[land] == size[label[member]]).all() \
            or not (copies == copies[label]).all():
        return None                     # an image that carries its class unevenly
    joined = links[label]
    if not np.array_equal(joined ^ 1, links[label[np.searchsorted(links, links ^ 1)]]):
        return None                     # classes that do not pair up as cables do
    to = np.arange(n)
    to[links] = joined
    if any(np.unique(to[np.asarray(part, dtype=np.int64)]).size != len(part)
           for h in rail_hops[0] for leg in h.legs for part in leg):
        return None                     # a leg that would cross its joined link twice
    shared = (size[label] > 1) | (copies > 1)
    if (buf[links][shared] >= 0).any():
        return None                     # a buffered queue two rails would share
    switches = buf[images[:, buf[links] >= 0]]
    if switches.size and any(np.intersect1d(switches[r], switches[q]).size
                             for r in range(len(images)) for q in range(r)):
        return None                     # a shared buffer two rails would fill
    return RailShare(links, images, joined, copies)
