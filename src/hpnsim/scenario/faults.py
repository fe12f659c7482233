"""Faults in a scenario: the ``faults:`` list (:class:`FaultSpec`) and the ``failover:``
parameters (:class:`FailoverSpec`: detection delays, collective timeout, checkpoints,
restart). Targets are checked against the built fabric (:func:`check_faults`) before any
simulation; errors are named by YAML path (``faults[0].target``) with the line.

Examples
--------
>>> f = FaultSpec.model_validate({"kind": "link", "target": "gpu17.port0", "at": "30s",
...                               "duration": "2min"})
>>> f.fault(0).end
150.0
>>> FaultSpec.model_validate({"kind": "flap", "target": "gpu1.port0", "at": 0,
...                           "down": "2s", "period": "1s", "count": 3})
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for FaultSpec
...
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from hpnsim.errors import InputError
from hpnsim.faults.names import FAULT_KINDS
from hpnsim.scenario.yaml import located, seconds_field

__all__ = ["FailoverSpec", "FaultSpec", "check_faults"]


def _seconds(value: Any) -> Any:
    if isinstance(value, str) and value.strip().startswith("-"):
        raise ValueError(f"must be a time >= 0, got {value!r}")
    return seconds_field(value)


Seconds = Annotated[float, BeforeValidator(_seconds), Field(ge=0, allow_inf_nan=False)]


class FaultSpec(BaseModel):
    """One fault: ``kind`` on ``target`` at ``at`` for ``duration`` (a flap: ``down`` every
    ``period``, ``count`` times). See :mod:`hpnsim.faults.events` for kinds and targets."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal[FAULT_KINDS]
    target: str
    at: Seconds = 0.0
    duration: Seconds | None = None
    period: Seconds | None = None
    down: Seconds | None = None
    count: Annotated[int, Field(ge=1, strict=True)] | None = None

    @model_validator(mode="after")
    def _shape(self) -> FaultSpec:
        if self.kind == "flap":
            for key in ("period", "down", "count"):
                if getattr(self, key) is None:
                    raise ValueError(f"{key}: required for a flap (down every period, count "
                                     f"times)")
            if self.duration is not None:
                raise ValueError("duration: a flap lasts count * period; give no duration")
            if self.down <= 0:
                raise ValueError(f"down: must be > 0, got {self.down!r}")
            if self.period < self.down:
                raise ValueError(f"period: must be at least the down time ({self.down:g} s), "
                                 f"got {self.period:g} s")
        else:
            if self.duration is None:
                raise ValueError("duration: required (how long until the repair)")
            if self.duration <= 0:
                raise ValueError(f"duration: must be > 0, got {self.duration!r}")
            extra = [k for k in ("period", "down", "count") if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"{extra[0]}: only a flap has it")
        return self

    def fault(self, index: int):
        """The :class:`~hpnsim.faults.events.Fault`, named ``faults[index]`` in errors."""
        from hpnsim.faults.events import Fault

        return Fault(self.kind, self.target, self.at, self.duration or 0.0,
                     period=self.period or 0.0, down=self.down or 0.0, count=self.count or 0,
                     field=f"faults[{index}]")


class FailoverSpec(BaseModel):
    """Failover and recovery parameters (defaults and their sources:
    :mod:`hpnsim.faults.failover`, :mod:`hpnsim.faults.runner`)."""

    model_config = ConfigDict(extra="forbid")

    convergence_delay: Seconds = 0.3
    lacp_delay: Seconds = 3.0
    pair_down_probability: Annotated[float, Field(ge=0, le=1)] = 1.0
    timeout: Seconds = 120.0
    checkpoint_interval: Annotated[float, BeforeValidator(_seconds),
                                   Field(gt=0, allow_inf_nan=False)] = 3 * 3600.0
    checkpoint_write: Seconds = 100.0
    restart_time: Seconds = 100.0
    checkpoint_age: Seconds = 0.0

    def policies(self, seed: int):
        """``(FailoverPolicy, RecoveryPolicy)`` of these parameters."""
        from hpnsim.faults.failover import FailoverPolicy
        from hpnsim.faults.runner import RecoveryPolicy

        return (FailoverPolicy(self.convergence_delay, self.lacp_delay,
                               self.pair_down_probability, seed),
                RecoveryPolicy(self.timeout, self.checkpoint_interval, self.checkpoint_write,
                               self.restart_time, self.checkpoint_age))


def check_faults(scenario, fabric, lines: dict) -> list:
    """Every fault resolved against ``fabric`` (its target exists and is of the right kind);
    returns the :class:`~hpnsim.faults.events.Fault` list. Raises InputError by YAML path.
    """
    from hpnsim.faults.events import resolve_links

    out = []
    for i, spec in enumerate(scenario.faults):
        fault = spec.fault(i)
        try:
            resolve_links(fabric, fault)
        except InputError as exc:
            raise located(InputError("", exc.message), lines, ("faults", i, "target")) from None
        out.append(fault)
    return out
