"""Fault events: what fails, when, for how long; and which links that takes down.

A :class:`Fault` names a component and a time window. Kinds:

``link``           a cable (both directions): a link name (``a->b[port0]``) or
                   ``gpuN.portP``, the access link of GPU N's NIC port P;
``nic_port``       a NIC port (``gpuN.portP``): the same cable, named by the port;
``flap``           a link that goes down for ``down`` seconds every ``period`` seconds,
                   ``count`` times from ``at`` (its duration is ``count * period``);
``tor_crash``      a ToR (node name, e.g. ``pod0/seg0/tor-r5-p1``), every link of it;
``tor_dataplane``  a ToR whose data plane dies while its control plane lives (what the ToR
                   design does about it: :mod:`hpnsim.faults.failover`);
``agg``            an aggregation switch and every link of it;
``core_link``      a link between an Agg and a core switch (a link name).

The CLI form is ``kind:target@start+duration`` (:func:`parse_fault`), e.g.
``link:gpu17.port0@30s+120s`` or ``flap:gpu3.port1@10s+1s/5s*4`` (down 1 s every 5 s,
4 times).

Examples
--------
>>> f = parse_fault("link:gpu17.port0@30s+120s")
>>> f.kind, f.target, f.at, f.duration, f.end
('link', 'gpu17.port0', 30.0, 120.0, 150.0)
>>> parse_fault("flap:gpu3.port1@10s+1s/5s*4").windows()
[(10.0, 11.0), (15.0, 16.0), (20.0, 21.0), (25.0, 26.0)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.faults.names import FAULT_KINDS as KINDS
from hpnsim.units import parse_time

#: kinds whose target is a cable (both directed links)
CABLE_KINDS = ("link", "nic_port", "flap", "core_link")
_PORT_NAME = re.compile(r"^gpu(\d+)\.port(\d+)$", re.IGNORECASE)
_SPEC = re.compile(r"^(?P<kind>[a-z_]+):(?P<target>[^@]+)@(?P<at>[^+]+)\+(?P<rest>.+)$")

__all__ = ["CABLE_KINDS", "KINDS", "Fault", "parse_fault", "resolve_links"]


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` on ``target`` from ``at`` for ``duration`` seconds.

    A flap (``kind="flap"``) is down ``down`` seconds every ``period`` seconds, ``count``
    times; its ``duration`` is ``count * period``. ``field`` names the fault in errors
    (``faults[0]`` in a scenario, ``--fault`` on the command line).

    >>> Fault("agg", "pod0/agg-p0-0", at=5.0, duration=60.0).windows()
    [(5.0, 65.0)]
    """

    kind: str
    target: str
    at: float
    duration: float = 0.0
    period: float = 0.0
    down: float = 0.0
    count: int = 0
    field: str = "fault"

    def __post_init__(self):
        def bad(key, message):
            raise InputError(f"{self.field}.{key}" if self.field else key, message)

        if self.kind not in KINDS:
            bad("kind", f"must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for key in ("at", "duration", "period", "down"):
            value = getattr(self, key)
            if not np.isfinite(value) or value < 0:
                bad(key, f"must be a time >= 0, got {value!r}")
        if self.kind == "flap":
            if isinstance(self.count, bool) or int(self.count) != self.count or self.count < 1:
                bad("count", f"a flap goes down a whole number >= 1 of times, got {self.count!r}")
            if self.down <= 0:
                bad("down", f"a flap's down time must be > 0, got {self.down!r}")
            if self.period < self.down:
                bad("period", f"must be at least the down time ({self.down:g} s), got "
                              f"{self.period:g} s")
            object.__setattr__(self, "duration", self.period * self.count)
        elif self.duration <= 0:
            bad("duration", f"must be a time > 0, got {self.duration!r}")

    @property
    def end(self) -> float:
        """When the fault is over (repair, or the end of the last flap period)."""
        return self.at + self.duration

    def windows(self) -> list[tuple[float, float]]:
        """The ``(down, up)`` time windows of the fault (several for a flap)."""
        if self.kind != "flap":
            return [(self.at, self.end)]
        return [(self.at + k * self.period, self.at + k * self.period + self.down)
                for k in range(int(self.count))]


def parse_fault(text: str, field: str = "--fault") -> Fault:
    """A :class:`Fault` from ``kind:target@start+duration`` (a flap:
    ``flap:target@start+down/period*count``); times take units (``30s``, ``2min``, ``1h``).

    >>> parse_fault("tor_crash:pod0/seg0/tor-r1-p0@1s+2s").windows()
    [(1.0, 3.0)]
    >>> parse_fault("link:gpu1.port0@-1s+2s")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --fault: start: must be a time >= 0, got '-1s'
    """
    match = _SPEC.match(str(text).strip())
    if not match:
        raise InputError(field, f"use kind:target@start+duration (e.g. link:gpu17.port0@30s+"
                                f"120s; a flap: flap:gpu17.port0@30s+1s/10s*5), got {text!r}")
    kind = match["kind"].lower()

    def seconds(value, key):
        value = value.strip()
        if value.startswith("-"):
            raise InputError(field, f"{key}: must be a time >= 0, got {value!r}")
        try:
            return parse_time(value, key)
        except InputError as exc:
            raise InputError(field, f"{key}: {exc.message}") from None

    at = seconds(match["at"], "start")
    rest = match["rest"]
    if kind == "flap":
        flap = re.match(r"^([^/]+)/([^*]+)\*(\d+)$", rest.strip())
        if not flap:
            raise InputError(field, f"a flap is flap:target@start+down/period*count (e.g. "
                                    f"flap:gpu3.port1@10s+1s/5s*4), got {text!r}")
        return Fault("flap", match["target"].strip(), at, down=seconds(flap[1], "down"),
                     period=seconds(flap[2], "period"), count=int(flap[3]), field=field)
    return Fault(kind, match["target"].strip(), at, seconds(rest, "duration"), field=field)


def _port_links(fabric, target: str, field: str) -> np.ndarray:
    match = _PORT_NAME.match(target)
    gpu, port = int(match[1]), int(match[2])
    if gpu >= fabric.n_gpus:
        raise InputError(field, f"no GPU {gpu} (the fabric has {fabric.n_gpus}), got {target!r}")
    access = np.asarray(fabric.gpu_access_link)
    if port >= access.shape[1] or access[gpu, port] < 0:
        raise InputError(field, f"GPU {gpu}'s NIC has ports 0..{access.shape[1] - 1}, got "
                                f"{target!r}")
    link = int(access[gpu, port])
    return np.array(sorted((link, link ^ 1)), dtype=np.int64)


def resolve_links(fabric, fault: Fault) -> np.ndarray:
    """Ids of the directed links ``fault`` takes down (ascending): both directions of a
    cable, or every link of a switch. Unknown or wrong components raise
    :class:`InputError` named ``<fault field>.target``.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> resolve_links(f, parse_fault("link:gpu17.port0@0+1")).tolist()
    [162, 163]
    >>> resolve_links(f, parse_fault("agg:pod0/seg0/tor-r1-p0@0+1"))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: --fault.target: agg needs an Agg switch name (e.g. ...
    """
    from hpnsim.fabrics.fabric import LinkKind, NodeKind

    field = f"{fault.field}.target" if fault.field else "target"
    target = fault.target
    if _PORT_NAME.match(target):
        if fault.kind not in ("link", "nic_port", "flap"):
            raise InputError(field, f"{fault.kind} names a switch or a core link, got the NIC "
                                    f"port {target!r}")
        return _port_links(fabric, target, field)
    if fault.kind == "nic_port":
        raise InputError(field, f"a NIC port is gpuN.portP (e.g. gpu17.port0), got {target!r}")
    kinds = {"tor_crash": NodeKind.TOR, "tor_dataplane": NodeKind.TOR, "agg": NodeKind.AGG}
    if fault.kind in kinds:
        want = kinds[fault.kind]
        example = fabric.node_name(int(np.flatnonzero(fabric.node_kind == want)[0])) \
            if (fabric.node_kind == want).any() else "none in this fabric"
        try:
            node = fabric.find_node(target)
        except InputError:
            node = -1
        if node < 0 or fabric.node_kind[node] != want:
            raise InputError(field, f"{fault.kind} needs {'a ToR' if want == NodeKind.TOR else 'an Agg switch'} "
                                    f"name (e.g. {example!r}), got {target!r}")
        return np.flatnonzero((fabric.link_src == node) | (fabric.link_dst == node)).astype(
            np.int64)
    if "->" not in target:
        raise InputError(field, f"{fault.kind} needs a link name (a->b, or gpuN.portP for an "
                                f"access link), got {target!r}")
    from hpnsim.fabrics.state import FabricState

    try:
        ids = FabricState(fabric).links(target)
    except InputError:
        raise InputError(field, f"no link named {target!r} (e.g. "
                                f"{fabric.link_name(int(fabric.gpu_access_link[0, 0]))!r})") from None
    if fault.kind == "core_link" and not (fabric.link_kind[ids] == LinkKind.CORE).all():
        raise InputError(field, f"core_link needs an Agg-core link, got {target!r}")
    return np.unique(np.concatenate([ids, ids ^ 1])).astype(np.int64)
