"""How a collective runs: one :class:`CollectiveOptions`, built once at the edge (the CLI, a
scenario, a public function's keywords) and carried unchanged down to planning.

The options are what a user chooses about a collective (algorithm, protocol, routing, ...),
not what it is (op, GPUs, size) nor where it goes (fabric, task graph, dependencies). Their
defaults are written here only; a variation for one call is :func:`dataclasses.replace`.

Examples
--------
>>> from dataclasses import replace
>>> base = CollectiveOptions(routing="hpn_dual_plane", seed=3)
>>> replace(base, algo="ring").algo, base.algo
('ring', 'auto')
>>> CollectiveOptions.build(base, qps=2) == replace(base, qps=2)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from hpnsim.collectives.ops import AUTO

__all__ = ["CollectiveOptions"]


@dataclass(frozen=True)
class CollectiveOptions:
    """How to run a collective: every choice a caller can make, with its default.

    Attributes
    ----------
    algo : str
        ring, tree, hd, hier, nvls, nvlstree, direct or ``auto`` (the fastest predicted on
        the actual group, NCCL-style).
    protocol : str
        ll, ll128, simple or ``auto``; its efficiency scales wire bytes and picks the latency
        table.
    routing : str
        Routing policy of :func:`hpnsim.routing.route` (ecmp, hpn_dual_plane, precise,
        spray, ...).
    channels : int or None
        Parallel rings/trees, each its own connections (None: one per NIC port and rail,
        :func:`~hpnsim.collectives.schedules.algorithms.default_channels`).
    qps : int or None
        Queue pairs per connection, each its own hashed flow carrying 1/qps of the bytes
        (None: ``nccl.qps_per_connection``, NCCL_IB_QPS_PER_CONNECTION).
    seed : int
        Seeds the connections' source ports (ECMP entropy) and the routing policy.
    root : int
        Rank index of the broadcast/reduce root.
    pxn : bool
        Relay cross-rail hops over NVLink (NCCL's PXN) on rail-optimized fabrics.
    routing_options : mapping or None
        Extra keywords of the routing policy (compared by value, not hashed: they may hold
        arrays).
    nccl : NcclParams, dict or None
        Protocol and link efficiencies, latencies, channels per NIC, QPs per connection
        (:class:`~hpnsim.collectives.nccl.params.NcclParams`; a dict is parsed into one; None:
        NCCL's defaults). Links carry payload / (protocol efficiency x link efficiency).

    Notes
    -----
    ``nccl`` is an option: it describes the NCCL build the collective runs on, is fixed for a
    whole run like the algorithm (it comes from the same edge, a scenario's ``calibration``),
    supplies the default of ``qps`` and is part of what a plan is cached on.

    The :class:`~hpnsim.fabrics.state.FabricState` of a run through faults is *not*: it is
    the fabric's condition at one moment, it changes while the options stay the same (a run
    re-plans the same collectives under each new state) and it also sets the capacities the
    engine runs on, so it travels beside the fabric (the ``state`` argument of
    :func:`~hpnsim.collectives.run_collective` and the planning functions).

    Examples
    --------
    >>> o = CollectiveOptions(algo="hier", nccl={"eff_ll": 0.4})
    >>> o.protocol, o.nccl.eff_ll          # a dict is parsed into NcclParams
    ('auto', 0.4)
    >>> hash(o) == hash(CollectiveOptions(algo="hier", nccl={"eff_ll": 0.4}))
    True
    """

    algo: str = AUTO
    protocol: str = AUTO
    routing: str = "ecmp"
    channels: int | None = None
    qps: int | None = None
    seed: int = 0
    root: int = 0
    pxn: bool = True
    routing_options: Mapping[str, Any] | None = field(default=None, hash=False)
    nccl: Any = None

    def __post_init__(self) -> None:
        if isinstance(self.nccl, dict):   # hashable and checked once, not at every plan
            from hpnsim.collectives.nccl.params import resolve_nccl

            object.__setattr__(self, "nccl", resolve_nccl(self.nccl))

    @classmethod
    def build(cls, options: CollectiveOptions | None = None,
              **keywords: Any) -> CollectiveOptions:
        """``options`` (default: all defaults) with the fields named in ``keywords`` replaced:
        how every public function turns its keywords into options.

        Raises
        ------
        TypeError
            When a keyword is not a field of :class:`CollectiveOptions`.

        Examples
        --------
        >>> CollectiveOptions.build(algo="ring").algo
        'ring'
        >>> CollectiveOptions.build(algorithm="ring")
        Traceback (most recent call last):
        ...
        TypeError: 'algorithm' is not a collective option (algo, protocol, routing, channels, qps, seed, root, pxn, routing_options, nccl)
        """
        if options is None:
            options = cls()
        elif not isinstance(options, CollectiveOptions):
            raise TypeError(f"options must be CollectiveOptions or None, got "
                            f"{type(options).__name__}")
        if not keywords:
            return options
        names = [f.name for f in fields(cls)]
        for name in keywords:
            if name not in names:
                raise TypeError(f"{name!r} is not a collective option ({', '.join(names)})")
        return replace(options, **keywords)
