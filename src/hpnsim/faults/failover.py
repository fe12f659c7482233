"""What each ToR design does about a fault: when links stop carrying traffic (physically),
and when routing learns it and moves traffic away.

A fault takes links down at once (capacity 0: flows on them stall). Routing changes only
after a detection delay that depends on the ToR design (``fabric.meta["dual_tor"]``):

``nonstacked`` (HPN)
    A ToR that loses a host link withdraws the host's /32 route in BGP; the host's bond stops
    using the dead port. Traffic moves to the sibling port and ToR after
    ``convergence_delay``. A ToR whose data plane dies with a live control plane is taken as
    a crash detected the same way (BFD runs in the data plane and fails with it, so the BGP
    sessions drop and the routes are withdrawn). Agg and core failures: ECMP rehashes after
    the same delay; HPN's fixed Agg/core mapping falls back to hashing.
``stacked`` (M-LAG)
    The host's LACP bond drops a dead member after ``lacp_delay``; a crashed ToR likewise.
    A ToR whose data plane dies while its control plane lives takes the whole pair down with
    probability ``pair_down_probability`` (a seeded draw per fault): the peer shuts itself
    down and the rack's hosts are cut off (hpn.md, Dual ToR); otherwise the pair isolates
    the failed ToR after ``lacp_delay``.
``single``
    A host whose access link or ToR is gone has no other way: routing keeps the dead link
    and the host's jobs stall (what a stalled job does: :mod:`hpnsim.faults.runner`).

When a fault ends the links come back and routes return at once (the restored path is
usable immediately; traffic meanwhile was flowing on the sibling, so no stall comes from
re-convergence).

Examples
--------
>>> from hpnsim.fabrics import hpn7
>>> from hpnsim.faults.events import parse_fault
>>> f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)
>>> [(c.time, c.layer.value, c.up) for c in fault_changes(f, [parse_fault("link:gpu17.port0@30s+120s")],
...                                                  FailoverPolicy())]
[(30.0, 'physical', False), (30.3, 'routed', False), (150.0, 'physical', True), (150.0, 'routed', True)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.faults.events import Fault, resolve_links
from hpnsim.faults.layers import Layer

DESIGNS = ("single", "stacked", "nonstacked")

#: BFD at 100 ms x 3 detects a failure in 300 ms (Cisco IOS XE BFD configuration, e.g.
#: "bfd interval 100 min_rx 100 multiplier 3"); the /32 withdrawal is one BGP update
#: after it, taken as immediate.
CONVERGENCE_DELAY = 0.3
#: IEEE 802.1AX LACP short timeout: 3 missed PDUs at the fast rate of 1 s.
LACP_DELAY = 3.0
#: hpn.md reports that a stacked pair *may* shut itself down when one ToR's data plane dies
#: with a live control plane, without a rate: the default is the worst case it describes.
PAIR_DOWN_PROBABILITY = 1.0

__all__ = ["DESIGNS", "Change", "FailoverPolicy", "fault_changes", "tor_design"]


@dataclass(frozen=True)
class FailoverPolicy:
    """Parameters of failover (delays in seconds, a probability, a seed).

    >>> FailoverPolicy().convergence_delay, FailoverPolicy().lacp_delay
    (0.3, 3.0)
    """

    convergence_delay: float = CONVERGENCE_DELAY
    lacp_delay: float = LACP_DELAY
    pair_down_probability: float = PAIR_DOWN_PROBABILITY
    seed: int = 0

    def __post_init__(self):
        for key in ("convergence_delay", "lacp_delay"):
            value = getattr(self, key)
            if not np.isfinite(value) or value < 0:
                raise InputError(key, f"must be a time >= 0, got {value!r}")
        if not 0 <= self.pair_down_probability <= 1:
            raise InputError("pair_down_probability", f"must be in [0, 1], got "
                                                      f"{self.pair_down_probability!r}")


@dataclass(frozen=True)
class Change:
    """At ``time``, ``links`` go down or come ``up`` in one :class:`Layer`: ``PHYSICAL`` (what
    the engine carries) or ``ROUTED`` (what routing avoids). ``host_level`` marks faults a spare
    host can replace (an access link or NIC port); ``fault`` indexes the fault list."""

    time: float
    layer: Layer
    up: bool
    links: np.ndarray
    fault: int
    host_level: bool


def tor_design(fabric) -> str:
    """The fabric's ToR design: its ``dual_tor``, else ``nonstacked`` when NICs have two
    ports (dual-homed, as DCN+), else ``single``.

    >>> from hpnsim.fabrics import hpn7, fat_tree
    >>> tor_design(hpn7(segments=1, dual_tor="single")), tor_design(fat_tree(4))
    ('single', 'single')
    """
    design = fabric.meta.get("dual_tor")
    if design in DESIGNS:
        return design
    return "nonstacked" if int(fabric.ports_per_nic) >= 2 else "single"


def _sibling_tor(fabric, tor: int) -> int:
    """The other ToR of ``tor``'s pair: where the other port of its hosts' NICs goes."""
    access = np.asarray(fabric.gpu_access_link)
    on = np.flatnonzero((np.asarray(fabric.link_dst)[access] == tor).any(axis=1))
    if not on.size or access.shape[1] < 2:
        return -1
    dst = np.asarray(fabric.link_dst)[access[on[0]]]
    others = dst[dst != tor]
    return int(others[0]) if others.size else -1


def fault_changes(fabric, faults: list[Fault], policy: FailoverPolicy) -> list[Change]:
    """Every physical and routing change the ``faults`` cause on ``fabric`` under its ToR
    design (see the module docstring), sorted by time (physical before routed at a time).
    """
    from hpnsim.fabrics.fabric import LinkKind

    design = tor_design(fabric)
    rng = np.random.default_rng(policy.seed)
    kinds = np.asarray(fabric.link_kind)
    out: list[Change] = []
    for i, fault in enumerate(faults):
        links = resolve_links(fabric, fault)
        access = bool((kinds[links] == LinkKind.ACCESS).all())
        host_level = fault.kind in ("link", "nic_port", "flap") and access
        at_host = access or fault.kind in ("tor_crash", "tor_dataplane")
        delay = policy.lacp_delay if design == "stacked" and at_host else \
            policy.convergence_delay
        if fault.kind == "tor_dataplane" and design == "stacked" \
                and rng.random() < policy.pair_down_probability:
            tor = int(fabric.find_node(fault.target))
            sibling = _sibling_tor(fabric, tor)
            if sibling >= 0:
                both = (np.isin(fabric.link_src, [tor, sibling])
                        | np.isin(fabric.link_dst, [tor, sibling]))
                links = np.flatnonzero(both).astype(np.int64)
        for down, up in fault.windows():
            out.append(Change(down, Layer.PHYSICAL, False, links, i, host_level))
            if down + delay < up:
                out.append(Change(down + delay, Layer.ROUTED, False, links, i, host_level))
                out.append(Change(up, Layer.ROUTED, True, links, i, host_level))
            out.append(Change(up, Layer.PHYSICAL, True, links, i, host_level))
    out.sort(key=lambda c: (c.time, c.layer.rank(), c.up))
    return out
