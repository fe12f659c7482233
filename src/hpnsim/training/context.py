"""Context parallelism: ring attention's key/value exchange, overlapped with attention.

Megatron-Core's context parallelism runs TransformerEngine's ``AttnFuncWithCPAndKVP2P``
(``cp_comm_type="p2p"``, Megatron-Core 0.20's default): each of the ``cp`` ranks holds
``s / cp`` tokens of the sequence (two chunks of ``s / 2cp``, so that causal masking gives
every rank the same work), and attention runs in ``cp`` steps. In step ``i`` a rank attends
its queries to the keys and values it holds while sending them to the next rank of the CP
ring and receiving the previous rank's (``send/recv``, one hop of the ring): step 0 uses its
own KV, the last step sends nothing. The backward circulates the KV again together with the
accumulated KV gradients, twice the bytes.

With ``g`` seconds of attention per step and ``c`` per exchange, a pass takes
``g + (cp - 1) max(c, g)``: of ``(cp - 1) c`` communication, ``min(c, g)`` per step is
hidden. Only the score/value part of attention (what ``cp`` splits) overlaps; the QKV and
output projections run before and after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpnsim.training.program import Collective, Compute


@dataclass(frozen=True)
class Ring:
    """Attention of ``seconds`` in ``steps`` equal steps, ``size`` bytes passed around the
    CP ring before every step but the first; the steps that run while an exchange is in
    flight (all but the last) are ``slowdown`` times longer beside its NCCL kernels."""

    size: float
    seconds: float
    label: str
    steps: int
    slowdown: float = 1.0


def expand_ring(builder, ring: Ring, after: tuple[int, ...]) -> None:
    """Append the ops of ``ring`` to ``builder`` (a stage builder with ``add``, ``last`` and
    ``recv_op``); the first step also waits for ``after``.

    The exchange feeding step ``i`` leaves when the one feeding step ``i - 1`` has arrived
    (a rank forwards what it received); step ``i`` waits for its exchange.
    """
    entry = tuple(t for t in (builder.last, builder.recv_op, *after) if t >= 0)
    g = ring.seconds / ring.steps
    moving = -1
    if ring.steps > 1:
        moving = builder.add(Collective("sendrecv", "cp", ring.size, blocking=False,
                                        after=entry))
    beside = g * (ring.slowdown - 1.0)
    builder.add(Compute(g, ring.label, after=after,            # step 0: the rank's own KV
                        contention=beside if ring.steps > 1 else 0.0))
    for i in range(1, ring.steps):
        arrived = moving
        if i < ring.steps - 1:
            moving = builder.add(Collective("sendrecv", "cp", ring.size, blocking=False,
                                            after=(arrived,)))
        builder.add(Compute(g, ring.label, after=(arrived,),
                            contention=beside if i < ring.steps - 1 else 0.0))
