"""Timed operations and lists of them, with totals per class and direction.

An :class:`Op` is one kernel of a training step: its name, class (``gemm``, ``attention`` or
``memory``; ``gaps`` for the time between a pass's kernels, :mod:`.overhead`), phase (``forward``, ``input_grad``, ``weight_grad``, or ``optimizer`` for the
once-per-iteration work after the backward), shape, dtype, FLOPs, HBM bytes and modelled
seconds. An :class:`OpList` is what a layer (or the head, or the optimizer step) runs; its
totals split forward, backward (input- plus weight-gradient) and optimizer time by class.

>>> ops = OpList((Op("fc1", "gemm", "forward", (8, 4, 2), "bf16", 128.0, 96.0, 1e-6),
...               Op("fc1", "gemm", "weight_grad", (4, 2, 8), "bf16", 128.0, 96.0, 2e-6)))
>>> ops.seconds(kind="gemm"), ops.backward_seconds
(3e-06, 2e-06)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hpnsim.errors import InputError

KINDS = ("gemm", "attention", "memory", "gaps")
PHASES = ("forward", "input_grad", "weight_grad", "optimizer")
_BACKWARD = ("input_grad", "weight_grad")


@dataclass(frozen=True)
class Op:
    """One timed kernel.

    Attributes
    ----------
    name : str
        What it computes (``"qkv"``, ``"attention"``, ``"input_norm"``...).
    kind : str
        ``"gemm"``, ``"attention"``, ``"memory"`` or ``"gaps"`` (the time between a pass's
        kernels, :mod:`~hpnsim.training.compute.overhead`).
    phase : str
        ``"forward"``, ``"input_grad"``, ``"weight_grad"`` or ``"optimizer"``.
    shape : tuple of int
        GEMM: ``(M, N, K)`` or ``(M, N, K, groups)``; fused attention: ``(batch, heads, seq,
        head_dim)`` (unfused attention: its GEMMs' and memory kernels' shapes); memory:
        ``(bytes,)``; gaps: ``(kernels,)``.
    dtype : str
        Input dtype.
    flops, bytes, seconds : float
        FLOPs (0 for memory ops), HBM bytes, modelled time.
    """

    name: str
    kind: str
    phase: str
    shape: tuple[int, ...]
    dtype: str
    flops: float
    bytes: float
    seconds: float

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InputError("kind", f"one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.phase not in PHASES:
            raise InputError("phase", f"one of {', '.join(PHASES)}, got {self.phase!r}")


@dataclass(frozen=True)
class OpList:
    """The operations of a layer (or of the head, or of the optimizer step), in issue order."""

    ops: tuple[Op, ...]

    def __add__(self, other: OpList) -> OpList:
        return OpList(self.ops + other.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def select(self, *, kind: str | None = None, phase: str | None = None) -> tuple[Op, ...]:
        """Ops of one class and/or phase (``phase="backward"`` means both gradient phases).

        >>> OpList(()).select(kind="conv")
        Traceback (most recent call last):
        ...
        hpnsim.errors.InputError: kind: one of gemm, attention, memory, gaps, got 'conv'
        """
        if kind is not None and kind not in KINDS:
            raise InputError("kind", f"one of {', '.join(KINDS)}, got {kind!r}")
        phases = _BACKWARD if phase == "backward" else (phase,)
        if phase is not None and phase != "backward" and phase not in PHASES:
            raise InputError("phase", f"one of {', '.join(PHASES)} or backward, got {phase!r}")
        return tuple(op for op in self.ops
                     if (kind is None or op.kind == kind)
                     and (phase is None or op.phase in phases))

    def seconds(self, *, kind: str | None = None, phase: str | None = None) -> float:
        """Total modelled time of the selected ops."""
        return sum(op.seconds for op in self.select(kind=kind, phase=phase))

    def flops(self, *, kind: str | None = None, phase: str | None = None) -> float:
        """Total FLOPs of the selected ops."""
        return sum(op.flops for op in self.select(kind=kind, phase=phase))

    @property
    def forward_seconds(self) -> float:
        """Time of the forward ops."""
        return self.seconds(phase="forward")

    @property
    def backward_seconds(self) -> float:
        """Time of the input- and weight-gradient ops."""
        return self.seconds(phase="backward")

    def totals(self) -> dict[str, dict[str, float]]:
        """Seconds per direction (``forward``, ``backward``, ``optimizer``) and class, plus
        ``all``.

        >>> OpList(()).totals()["forward"]
        {'gemm': 0, 'attention': 0, 'memory': 0, 'gaps': 0, 'all': 0}
        """
        out = {}
        for direction in ("forward", "backward", "optimizer"):
            row = {kind: self.seconds(kind=kind, phase=direction) for kind in KINDS}
            row["all"] = sum(row.values())
            out[direction] = row
        return out

    def to_rows(self) -> list[dict]:
        """One plain dict per op (for a table or a DataFrame)."""
        return [asdict(op) for op in self.ops]
