"""The scenario's ``engine:`` key: which engine runs its collectives, and the packet engine's
settings.

``engine: flow`` (the default) shares bandwidth max-min fairly (:mod:`hpnsim.engine`);
``engine: packet`` runs each collective as packets (:mod:`hpnsim.packet`, through
:func:`hpnsim.collectives.packet.run.run_collective_packet`) and the jobs' iterations as
their task graph moved as packets (:mod:`hpnsim.scenario.packet_jobs`). The mapping form sets
the packet engine's options::

    engine:
      kind: packet
      params: packet.yaml       # PacketParams overrides (optional preset:), see docs/packet.md
      window: true              # windowed steady state (false: every ring step)
      max_packets: 5e7          # refuse a run estimated beyond this many packet hops
      watch: [pod0/seg0/tor-r0-p0->pod0/seg0/host0/nic-r0[port0]]   # ports to sample

Faults and cluster traces run on the flow engine only; a scenario with them and
``engine: packet`` is refused.

>>> EngineSpec.model_validate("packet").kind
'packet'
>>> EngineSpec.model_validate({"kind": "packet", "max_packets": 1e6}).packet_run().max_packets
1000000.0
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hpnsim.errors import InputError

__all__ = ["ENGINES", "EngineSpec", "FAULTS_ON_FLOW"]

#: the engines a collective or a job can run on
ENGINES = ("flow", "packet")
#: why faults refuse the packet engine
FAULTS_ON_FLOW = ("faults run on the flow engine only (a failure re-routes and re-plans "
                  "collectives mid-run); drop --fault or --engine packet")


class EngineSpec(BaseModel):
    """The ``engine:`` key (a name, or a mapping with ``kind`` and the packet options)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal[ENGINES] = Field("flow", description="flow (max-min, default) or packet")
    params: str | None = Field(None, description="YAML file of packet parameters (an "
                                                 "optional preset: and field overrides)")
    window: bool = Field(True, description="packet: windowed steady state (false: simulate "
                                           "every ring step)")
    share_rails: bool = Field(True, description="packet: a tree or NVLS-tree whose rails run "
                                                "alike simulates one rail for all (false: "
                                                "every rail)")
    max_packets: float = Field(5e7, gt=0, description="packet: refuse a run estimated "
                                                      "beyond this many packet hops")
    watch: list[str] = Field(default_factory=list, description="packet: port (link) names "
                                                               "whose queues are sampled")

    @model_validator(mode="before")
    @classmethod
    def _name(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"kind": value}
        return value

    @model_validator(mode="after")
    def _params(self) -> EngineSpec:
        if self.kind == "flow" and (self.params or self.watch or not self.window
                                    or not self.share_rails):
            raise ValueError("kind: params, window, share_rails and watch set the packet "
                             "engine; add kind: packet or leave them out")
        if self.params is not None:
            self.packet_params()          # a bad file fails here, before anything runs
        return self

    def packet_params(self):
        """The :class:`~hpnsim.packet.PacketParams` in effect (the file's, else the
        defaults); errors are named ``params`` (their field inside the file follows)."""
        import yaml

        from hpnsim.packet import PacketParams, load_params

        if self.params is None:
            return PacketParams()
        try:
            return load_params(self.params)
        except InputError as exc:
            raise ValueError(f"params: {self.params}: {exc}") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"params: {self.params} is not YAML: {exc}") from None
        except OSError as exc:
            raise ValueError(f"params: cannot read {self.params}: {exc.strerror}") from None

    def packet_run(self, fabric=None):
        """The :class:`~hpnsim.collectives.packet.run.PacketRun` of these settings; ``watch``
        names resolved on ``fabric`` (an unknown name is an :class:`InputError` named
        ``engine.watch``)."""
        from hpnsim.collectives.packet.run import PacketRun

        watch = ()
        if self.watch:
            names = {fabric.link_name(k): k for k in range(fabric.n_links)}
            missing = [w for w in self.watch if w not in names]
            if missing:
                raise InputError("engine.watch", f"no link named {missing[0]!r} (a link "
                                                 f"name such as {fabric.link_name(0)!r})")
            watch = tuple(int(names[w]) for w in self.watch)
        return PacketRun(params=self.packet_params(), window=self.window,
                         max_packets=float(self.max_packets), watch=watch,
                         share_rails=self.share_rails)
