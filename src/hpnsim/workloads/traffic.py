"""Bytes that real collective algorithms move for one training iteration (and one epoch).

Per call of a collective on ``n`` GPUs with buffer ``S`` bytes (nccl-tests convention: the
full reduced / gathered buffer), each GPU *sends*:

- ring all-reduce ``2(n-1)/n * S`` (double binary tree moves the same total), naive
  all-reduce (every GPU sends its whole buffer to every other, as the article assumes)
  ``(n-1) * S``;
- all-gather and reduce-scatter ``(n-1)/n * S``; all-to-all ``(n-1)/n * S`` of its send
  buffer (uniform routing); a pipeline send ``S``.

Per iteration of a Megatron-style job (``m`` micro-batches of ``b`` sequences of ``s`` tokens,
hidden ``h``, 2-byte activations; ``L/pp`` layers per pipeline rank):

- TP: 2 all-reduces of ``b*(s/cp)*h*2`` bytes per layer in forward and 2 in backward (with
  sequence parallelism, all-gather + reduce-scatter pairs moving the same bytes);
- CP: ring attention passes K and V around the CP ring, ``cp-1`` chunks per layer forward and
  twice that backward (K, V and their gradients);
- PP: one send of the micro-batch's hidden states per stage boundary forward, one of its
  gradient backward (``pp*vpp-1`` boundaries per micro-batch; divided by ``tp`` with SP);
- EP: dispatch and combine all-to-alls per MoE layer forward, two more backward;
- DP: the gradient shard ``P/(tp*pp)`` once per iteration over the DP x CP group — all-reduce
  (ZeRO-0), reduce-scatter + all-gather of parameters (ZeRO-1/2, same bytes), and for ZeRO-3 /
  FSDP two parameter all-gathers (forward, backward) and one gradient reduce-scatter *per
  micro-batch*. Routed-expert gradients reduce over the expert-data-parallel group instead.

The embedding's vocab-parallel all-reduce and the loss's small all-reduces are left out
(under 1% of TP bytes for the catalog models).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from hpnsim.errors import InputError
from hpnsim.workloads.layout import Layout, check_layout
from hpnsim.workloads.models import ModelSpec
from hpnsim.workloads.models import get as get_model
from hpnsim.workloads.placement import Placement, place

#: how the traffic calculator counts a collective's bytes (ring algorithms, or naive)
TRAFFIC_ALGORITHMS = ("ring", "naive")


def bytes_sent_per_gpu(op: str, n: int, size: float, algorithm: str = "ring") -> float:
    """Bytes one GPU sends in one collective of ``n`` GPUs on a buffer of ``size`` bytes.

    Examples
    --------
    >>> bytes_sent_per_gpu("allreduce", 8, 800.0)
    1400.0
    >>> bytes_sent_per_gpu("allreduce", 8, 800.0, "naive")
    5600.0
    >>> bytes_sent_per_gpu("allgather", 4, 400.0), bytes_sent_per_gpu("sendrecv", 2, 5.0)
    (300.0, 5.0)
    """
    if algorithm not in TRAFFIC_ALGORITHMS:
        raise InputError("algorithm", f"one of {', '.join(TRAFFIC_ALGORITHMS)}, got "
                                      f"{algorithm!r}")
    if n <= 1:
        return 0.0
    if op == "allreduce":
        return (n - 1) * size if algorithm == "naive" else 2.0 * (n - 1) / n * size
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n * size
    if op == "sendrecv":
        return float(size)
    raise InputError("op", f"one of allreduce, allgather, reducescatter, alltoall, sendrecv, got {op!r}")


@dataclass(frozen=True)
class TrafficRow:
    """One kind of collective of one dimension in one phase, per iteration.

    ``bytes_per_gpu`` is what one member GPU sends per iteration (the busiest member for PP);
    ``total_bytes`` sums the sends of all GPUs of the job; ``network_fraction`` is the share of
    those bytes that leaves the host (the rest stays on NVLink), from the placement.
    """

    dimension: str
    phase: str
    op: str
    group_size: int
    buffer_bytes: float
    calls_per_iteration: int
    bytes_per_gpu: float
    total_bytes: float
    network_fraction: float

    @property
    def network_bytes(self) -> float:
        """Bytes per iteration that cross the network (leave a host)."""
        return self.total_bytes * self.network_fraction

    def to_dict(self) -> dict:
        """Fields plus network bytes."""
        return {**asdict(self), "network_bytes": self.network_bytes}


@dataclass(frozen=True)
class TrafficReport:
    """Per-iteration traffic of a job, by dimension, and the epoch scaling.

    ``collectives`` holds one :class:`TrafficRow` per kind of collective of a dimension in a
    phase (``to_dict()["rows"]``); :meth:`rows` sums them per dimension.
    ``iterations_per_epoch = dataset_tokens / (global_batch * seq_len)``.
    """

    model: str
    layout: Layout
    seq_len: int
    algorithm: str
    collectives: tuple[TrafficRow, ...]
    iterations_per_epoch: float

    def by_dimension(self) -> dict[str, dict[str, float]]:
        """``{dim: {bytes_per_gpu, total_bytes, network_bytes, per_epoch_bytes, calls}}``."""
        out: dict[str, dict[str, float]] = {}
        for row in self.collectives:
            d = out.setdefault(row.dimension, {"bytes_per_gpu": 0.0, "total_bytes": 0.0,
                                               "network_bytes": 0.0, "calls": 0})
            d["bytes_per_gpu"] += row.bytes_per_gpu
            d["total_bytes"] += row.total_bytes
            d["network_bytes"] += row.network_bytes
            d["calls"] += row.calls_per_iteration
        for d in out.values():
            d["per_epoch_bytes"] = d["total_bytes"] * self.iterations_per_epoch
        return out

    @property
    def total_bytes(self) -> float:
        """Bytes sent by all GPUs per iteration."""
        return float(sum(r.total_bytes for r in self.collectives))

    @property
    def per_epoch_bytes(self) -> float:
        """Bytes sent by all GPUs per epoch."""
        return self.total_bytes * self.iterations_per_epoch

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {"model": self.model, "layout": self.layout.to_dict(), "seq_len": self.seq_len,
                "algorithm": self.algorithm, "iterations_per_epoch": self.iterations_per_epoch,
                "total_bytes_per_iteration": self.total_bytes,
                "total_bytes_per_epoch": self.per_epoch_bytes,
                "dimensions": self.by_dimension(),
                "rows": [r.to_dict() for r in self.collectives]}

    def rows(self) -> list[dict]:
        """One row per dimension (in order of first appearance): ``dimension`` and the sums
        of :meth:`by_dimension` (bytes per iteration, ``per_epoch_bytes`` per epoch).

        Examples
        --------
        >>> rep = iteration_traffic("llama3-8b", Layout(tp=8, pp=2, dp=2, global_batch=8))
        >>> [row["dimension"] for row in rep.rows()]
        ['tp', 'pp', 'dp']
        >>> rep.rows()[0]["total_bytes"] == rep.by_dimension()["tp"]["total_bytes"]
        True
        """
        return [{"dimension": dim, **sums} for dim, sums in self.by_dimension().items()]

    def to_frame(self):
        """:meth:`rows` as a pandas DataFrame (pandas: the optional ``frames`` extra)."""
        from hpnsim.frames import to_frame

        return to_frame(self.rows(), columns=["dimension", "bytes_per_gpu", "total_bytes",
                                               "network_bytes", "calls", "per_epoch_bytes"])


def _ring_network_fraction(placement: Placement, groups: np.ndarray) -> float:
    """Share of ring hops (member i -> i+1, last -> first) that join different hosts."""
    if groups.shape[1] < 2:
        return 0.0
    hosts = placement.host_of(groups)
    return float((hosts != np.roll(hosts, -1, axis=1)).mean())


def _pair_network_fraction(placement: Placement, groups: np.ndarray) -> float:
    """Share of ordered member pairs of an all-to-all on different hosts."""
    n = groups.shape[1]
    if n < 2:
        return 0.0
    hosts = placement.host_of(groups)
    cross = (hosts[:, :, None] != hosts[:, None, :]).sum(axis=(1, 2))
    return float(cross.sum() / (groups.shape[0] * n * (n - 1)))


def iteration_traffic(model: ModelSpec | str, layout: Layout, *, seq_len: int | None = None,
                      gpus_per_host: int = 8, placement: Placement | None = None,
                      algorithm: str = "ring", grad_bytes: float = 2.0,
                      recompute: bool = False, dataset_tokens: float = 0.0,
                      allow_cross_host_tp: bool = False) -> TrafficReport:
    """Bytes each dimension moves per iteration with real collective algorithms.

    Parameters
    ----------
    model, layout
        The job; the layout is validated against the model.
    seq_len : int, optional
        Tokens per sequence (default the model's).
    gpus_per_host : int
        Host size, for the placement (NVLink versus network bytes).
    placement : Placement, optional
        Default :func:`~hpnsim.workloads.placement.place` of ``layout``.
    algorithm : {"ring", "naive"}
        How all-reduces move data (``naive``: full buffer to every peer, as the article).
    grad_bytes : float
        Bytes per gradient value in the DP reduction (2 for BF16, 4 for FP32).
    recompute : bool
        Full activation recomputation repeats the forward TP/CP collectives in backward.
    dataset_tokens : float
        Tokens per epoch, for ``iterations_per_epoch`` (0 leaves it 0).

    Examples
    --------
    >>> lay = Layout(tp=8, pp=8, dp=16, global_batch=2048)
    >>> rep = iteration_traffic("llama3-70b", lay, dataset_tokens=156e9)
    >>> tp = rep.by_dimension()["tp"]
    >>> tp["bytes_per_gpu"] == 128 * 10 * 4 * 2 * 7 / 8 * (8192 * 8192 * 2)   # m*L/pp*4 ARs
    True
    >>> round(rep.iterations_per_epoch)
    9298
    """
    if algorithm not in TRAFFIC_ALGORITHMS:
        raise InputError("algorithm", f"one of {', '.join(TRAFFIC_ALGORITHMS)}, got "
                                      f"{algorithm!r}")
    if isinstance(dataset_tokens, bool) or not isinstance(dataset_tokens, int | float) \
            or not 0 <= dataset_tokens < float("inf"):
        raise InputError("dataset-tokens", f"must be a finite number >= 0 (tokens per epoch; 0 "
                                           f"leaves iterations per epoch 0), got {dataset_tokens!r}")
    model = get_model(model)
    check_layout(layout, model, gpus_per_host=gpus_per_host if placement is None else None,
                 allow_cross_host_tp=allow_cross_host_tp)
    if placement is None:
        placement = place(layout, gpus_per_host, allow_cross_host_tp=allow_cross_host_tp)
    if grad_bytes <= 0:
        raise InputError("grad_bytes", f"must be > 0, got {grad_bytes!r}")
    lay = layout
    seq = model.seq_len if seq_len is None else int(seq_len)
    if seq <= 0 or seq % lay.cp:
        raise InputError("seq_len", f"must be a positive multiple of cp={lay.cp}, got {seq}")
    n, m = lay.n_gpus, lay.num_microbatches
    rows: list[TrafficRow] = []

    def add(dim, phase, op, group, buffer, calls, fraction, *, senders=None, busiest=None):
        # senders: GPUs that issue this call (default all); busiest: bytes of the busiest GPU
        per_call = bytes_sent_per_gpu(op, group, buffer, algorithm)
        senders = n if senders is None else senders
        total = per_call * calls * senders
        per_gpu = per_call * calls if busiest is None else busiest
        if total > 0:
            rows.append(TrafficRow(dim, phase, op, group, float(buffer), int(calls),
                                   float(per_gpu), float(total), float(fraction)))

    transformer = model.kind == "transformer"
    if transformer:
        layers_here = model.layers // lay.pp
        tokens = lay.micro_batch * (seq // lay.cp)
        hidden_bytes = tokens * model.hidden * model.dtype_bytes
        if lay.tp > 1:
            frac = _ring_network_fraction(placement, placement.groups("tp"))
            ops = (("reducescatter", "allgather") if lay.sequence_parallel else ("allreduce",))
            fwd_calls = m * layers_here * 2
            bwd_calls = fwd_calls * (2 if recompute else 1)
            for op in ops:
                add("tp", "forward", op, lay.tp, hidden_bytes, fwd_calls, frac)
                add("tp", "backward", op, lay.tp, hidden_bytes, bwd_calls, frac)
        if lay.cp > 1:
            frac = _ring_network_fraction(placement, placement.groups("cp"))
            kv_width = model.kv_heads * model.head_dim // min(lay.tp, model.kv_heads)
            chunk = 2 * tokens * kv_width * model.dtype_bytes  # K and V of this rank's tokens
            fwd_calls = m * layers_here * (2 if recompute else 1)
            # ring attention: cp-1 hops of one chunk forward; K,V and dK,dV backward
            add("cp", "forward", "sendrecv", lay.cp, chunk * (lay.cp - 1), fwd_calls, frac)
            add("cp", "backward", "sendrecv", lay.cp, 2 * chunk * (lay.cp - 1),
                m * layers_here, frac)
        if lay.pp > 1:
            pairs = placement.pp_neighbours()
            hosts = placement.host_of(pairs)
            frac = float((hosts[:, 0] != hosts[:, 1]).mean())
            message = hidden_bytes / (lay.tp if lay.sequence_parallel else 1)
            sends = m * (lay.pp * lay.vpp - 1)   # per pipeline: one per boundary per micro-batch
            for phase in ("forward", "backward"):
                add("pp", phase, "sendrecv", 2, message, sends, frac,
                    senders=n // lay.pp, busiest=m * lay.vpp * message)
        if model.is_moe and lay.ep > 1:
            frac = _pair_network_fraction(placement, placement.groups("ep"))
            moe_here = model.moe_layers // lay.pp
            routed = tokens // (lay.tp if lay.sequence_parallel else 1)
            buffer = routed * model.top_k * model.hidden * model.dtype_bytes
            calls = m * moe_here * 2
            add("ep", "forward", "alltoall", lay.ep, buffer, calls, frac)
            add("ep", "backward", "alltoall", lay.ep, buffer, calls * (2 if recompute else 1), frac)

    _add_data_parallel(add, model, lay, placement, grad_bytes)
    tokens_per_iteration = lay.global_batch * (seq if transformer else 1)
    return TrafficReport(model.name, lay, seq, algorithm, tuple(rows),
                         float(dataset_tokens) / tokens_per_iteration)


def _add_data_parallel(add, model: ModelSpec, lay: Layout, placement: Placement,
                       grad_bytes: float) -> None:
    shards = lay.tp * lay.pp
    dense = (model.num_parameters() - model.expert_parameters()) / shards
    expert = model.expert_parameters() / (shards * lay.ep)
    m = lay.num_microbatches
    # expert gradients: replicas of an expert shard are the EDP ranks (times CP)
    groups = (("dp", dense, lay.dp * lay.cp, "dp_cp"), ("edp", expert, lay.edp * lay.cp, "edp"))
    for dim, params, size, kind in groups:
        if params <= 0 or size <= 1:
            continue
        members = placement.groups(kind)
        frac = _ring_network_fraction(placement, members)
        grads = params * grad_bytes
        weights = params * model.dtype_bytes
        if lay.zero == 0:
            add(dim, "step", "allreduce", size, grads, 1, frac)
        elif lay.zero in (1, 2):
            add(dim, "step", "reducescatter", size, grads, 1, frac)
            add(dim, "step", "allgather", size, weights, 1, frac)
        else:  # ZeRO-3 / FSDP: parameters re-gathered every micro-batch, forward and backward
            add(dim, "forward", "allgather", size, weights, m, frac)
            add(dim, "backward", "allgather", size, weights, m, frac)
            add(dim, "backward", "reducescatter", size, grads, m, frac)
