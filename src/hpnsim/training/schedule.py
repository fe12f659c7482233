"""Pipeline schedules: the order in which each stage runs its forward and backward passes.

A schedule is, per pipeline stage, the list of operations ``(kind, micro_batch, chunk)``
the stage executes one after another (one compute stream), with ``kind`` ``"F"``, ``"B"`` or,
for the zero-bubble schedule, ``"W"``. ``chunk`` is the model chunk on that stage (always 0
except for the interleaved schedule, where stage ``s`` holds chunks ``0..v-1`` and chunk ``k``
is *virtual stage* ``k * p + s``). Data dependencies are implied: ``F`` of virtual stage ``u`` needs ``F`` of
``u - 1`` for the same micro-batch; ``B`` of ``u`` needs ``B`` of ``u + 1``, and ``B`` of the
last virtual stage needs its own ``F``.

The orders follow Megatron-LM (``forward_backward_pipelining_without_interleaving`` and
``..._with_interleaving``): 1F1B runs ``p - s - 1`` warm-up forwards, then alternates one
forward and one backward, then drains the remaining backwards.

``zb-h1`` is ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR'24): the backward
splits into ``B`` (input gradients, what the previous stage waits for) and ``W`` (weight
gradients, which nothing downstream waits for). The order is the authors' reference schedule
(``ZeroBubbleH1Pipeline`` with ``enable_zbh1_exact_semantics``, sail-sg/zero-bubble-pipeline-
parallelism): 1F1B's warm-up, then stage ``s`` defers the ``W`` of its first ``s`` backwards,
runs ``F B W`` in the steady state and the deferred ``W`` s at the end, where 1F1B leaves stage
``s`` idle. Peak activation memory stays 1F1B's (``p - s`` micro-batches in flight); ``W``
runs in micro-batch order. ``W`` of micro-batch ``j`` follows ``B`` of ``j`` on the same stage.
"""

from __future__ import annotations

from hpnsim.errors import InputError

SCHEDULES = ("1f1b", "interleaved", "gpipe", "zb-h1")

Op = tuple[str, int, int]


def pipeline_schedule(kind: str, stages: int, micro_batches: int,
                      virtual_stages: int = 1) -> list[list[Op]]:
    """Per-stage operation order of a pipeline schedule.

    Parameters
    ----------
    kind : {"1f1b", "interleaved", "gpipe", "zb-h1"}
    stages : int
        Pipeline stages ``p``.
    micro_batches : int
        Micro-batches per iteration ``m`` (per pipeline).
    virtual_stages : int
        Model chunks per stage ``v`` (interleaved only; it needs ``m % p == 0``).

    Returns
    -------
    list of lists of (kind, micro_batch, chunk)

    Examples
    --------
    >>> pipeline_schedule("1f1b", 2, 3)[0]
    [('F', 0, 0), ('F', 1, 0), ('B', 0, 0), ('F', 2, 0), ('B', 1, 0), ('B', 2, 0)]
    >>> pipeline_schedule("1f1b", 2, 3)[1]
    [('F', 0, 0), ('B', 0, 0), ('F', 1, 0), ('B', 1, 0), ('F', 2, 0), ('B', 2, 0)]
    >>> [op[2] for op in pipeline_schedule("interleaved", 2, 2, 2)[0] if op[0] == "F"]
    [0, 0, 1, 1]
    >>> " ".join(k + str(j) for k, j, _ in pipeline_schedule("zb-h1", 2, 3)[1])
    'F0 B0 F1 B1 W0 F2 B2 W1 W2'
    """
    if kind not in SCHEDULES:
        raise InputError("schedule", f"one of {', '.join(SCHEDULES)}, got {kind!r}")
    for field, value in (("pp", stages), ("micro_batches", micro_batches),
                         ("virtual_stages", virtual_stages)):
        if int(value) != value or value < 1:
            raise InputError(field, f"must be a positive integer, got {value!r}")
    if kind != "interleaved" and virtual_stages != 1:
        raise InputError("virtual_stages", f"only the interleaved schedule has virtual stages, "
                                           f"got {virtual_stages} with {kind}")
    if kind == "gpipe":
        return [[("F", j, 0) for j in range(micro_batches)]
                + [("B", j, 0) for j in range(micro_batches)] for _ in range(stages)]
    if kind == "1f1b":
        return [_one_f_one_b(s, stages, micro_batches) for s in range(stages)]
    if kind == "zb-h1":
        return [_zb_h1(s, stages, micro_batches) for s in range(stages)]
    if micro_batches % stages:
        raise InputError("micro_batches", f"the interleaved schedule needs a multiple of "
                                          f"pp={stages} micro-batches, got {micro_batches}")
    return [_interleaved(s, stages, micro_batches, virtual_stages) for s in range(stages)]


def _one_f_one_b(stage: int, stages: int, m: int) -> list[Op]:
    warmup = min(stages - stage - 1, m)
    ops: list[Op] = [("F", j, 0) for j in range(warmup)]
    for i in range(m - warmup):
        ops.append(("F", warmup + i, 0))
        ops.append(("B", i, 0))
    ops.extend(("B", j, 0) for j in range(m - warmup, m))
    return ops


def _zb_h1(stage: int, stages: int, m: int) -> list[Op]:
    ops: list[Op] = []
    f = b = w = 0
    for _ in range(min(stages - stage - 1, m)):     # warm-up, as 1F1B
        ops.append(("F", f, 0))
        f += 1
    for _ in range(stage):                          # W of the first `stage` backwards waits
        if f == m:
            break
        ops += [("F", f, 0), ("B", b, 0)]
        f, b = f + 1, b + 1
    while f < m:
        ops += [("F", f, 0), ("B", b, 0), ("W", w, 0)]
        f, b, w = f + 1, b + 1, w + 1
    while b < m:
        ops += [("B", b, 0), ("W", w, 0)]
        b, w = b + 1, w + 1
    ops += [("W", j, 0) for j in range(w, m)]        # the deferred ones fill the drain
    return ops


def _interleaved(stage: int, p: int, m: int, v: int) -> list[Op]:
    total = m * v

    def forward(i: int) -> Op:
        return ("F", (i // (p * v)) * p + i % p, (i // p) % v)

    def backward(i: int) -> Op:
        return ("B", (i // (p * v)) * p + i % p, v - 1 - (i // p) % v)

    if m == p:
        warmup = total
    else:
        warmup = min((p - stage - 1) * 2 + (v - 1) * p, total)
    ops = [forward(i) for i in range(warmup)]
    for i in range(total - warmup):
        ops.append(forward(warmup + i))
        ops.append(backward(i))
    ops.extend(backward(i) for i in range(total - warmup, total))
    return ops


def bubble_fraction(kind: str, stages: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Idle fraction of an ideal pipeline (equal stages, no communication).

    1F1B and GPipe: ``(p - 1) / (m + p - 1)``; interleaved: ``(p - 1) / (v m + p - 1)``
    (Narayanan et al., SC'21: the bubble shrinks by ``v``). ZB-H1 with ``F``, ``B`` and
    ``W`` of equal length: the bubble ``(p - 1)`` passes of 1F1B's ``3 (p - 1)`` (Qi et al.:
    a third), out of ``3 m + p - 1`` passes per stage.

    >>> bubble_fraction("1f1b", 4, 12)
    0.2
    """
    p, m, v = stages, micro_batches, virtual_stages
    if kind == "interleaved":
        return (p - 1) / (v * m + p - 1)
    if kind == "zb-h1":
        return (p - 1) / (3 * m + p - 1)
    return (p - 1) / (m + p - 1)
