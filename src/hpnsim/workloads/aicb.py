"""Reader for SimAI / AICB workload files (the text format SimAI's ``Workload.cc`` consumes).

Format::

    HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 32 checkpoints: 0 checkpoint_initiates: 0
    <number of layers>
    <name> <dependency> <fwd compute> <fwd comm type> <fwd bytes> <input-grad compute> <type> <bytes> <weight-grad compute> <type> <bytes> <update time>
    ...

The first line is the parallelization policy followed by ``key: value`` pairs
(``model_parallel_NPU_group`` is the TP size; ``checkpoints:`` and ``checkpoint_initiates:``
are a count followed by that many layer indices; ``pp_comm`` is the pipeline message size).
Compute times are simulator ticks, nanoseconds in SimAI. A comm type is ``NONE``,
``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``, ``ALLTOALL`` or ``ALLREDUCEALLTOALL``,
optionally suffixed ``_EP`` (expert-parallel group) or ``_DP_EP`` (expert-data-parallel group);
without a suffix the forward and input-gradient collectives run on the TP group and the
weight-gradient one on the DP group. ``HYBRID_CUSTOMIZED`` files carry a 13th field per layer
(the layer's own policy).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpnsim.errors import InputError, read_user_text
from hpnsim.workloads.layout import Layout

AICB_POLICIES = ("DATA", "HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_DLRM",
                 "HYBRID_DLRM_ENHANCED", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA",
                 "HYBRID_CUSTOMIZED", "MICRO", "DISTRIBUTED_INFERENCE")
COMM_KINDS = {"ALLREDUCE": "allreduce", "ALLGATHER": "allgather",
              "REDUCESCATTER": "reducescatter", "ALLTOALL": "alltoall",
              "ALLREDUCEALLTOALL": "allreduce_alltoall"}
_SUFFIX_GROUPS = {"_EP": "ep", "_DP_EP": "edp"}
_INT_KEYS = {"model_parallel_NPU_group": "tp", "ep": "ep", "pp": "pp", "vpp": "vpp", "ga": "ga",
             "all_gpus": "all_gpus", "pp_comm": "pp_comm", "DLRM_LAST_BOTTOM_LAYER": "dlrm_last_bottom_layer"}
_LIST_KEYS = {"checkpoints": "checkpoints", "checkpoint_initiates": "checkpoint_initiates"}
PHASES = ("forward", "input_grad", "weight_grad")


def _check_sizes(where: str, *, tp: int = 1, pp: int = 1, ep: int = 1, vpp: int = 1, ga: int = 1,
                 all_gpus: int | None = None, **_other) -> None:
    """The header-size rules of :class:`Workload` (the one place they live)."""
    if all_gpus is not None and all_gpus % (tp * pp):
        raise InputError(where, f"all_gpus={all_gpus} is not a multiple of tp*pp = "
                                f"{tp}*{pp} = {tp * pp}")
    if ep > 1 and all_gpus is None:
        raise InputError(where, f"ep={ep} needs all_gpus: ep must divide "
                                f"dp = all_gpus/(tp*pp), and dp is unknown without it")
    if ep > 1 and (all_gpus // (tp * pp)) % ep:
        raise InputError(where, f"ep={ep} must divide dp={all_gpus // (tp * pp)} (dp = "
                                f"all_gpus/(tp*pp) = {all_gpus}/({tp}*{pp}); experts are "
                                f"spread over DP ranks)")
    if pp > 1 and vpp > 1 and ga % pp:
        raise InputError(where, f"an interleaved pipeline (pp={pp}, vpp={vpp}) needs ga "
                                f"(micro-batches) to be a multiple of pp={pp}, got ga={ga}")


@dataclass(frozen=True)
class CommOp:
    """One collective of a layer phase: ``kind`` (None = no communication), group, bytes."""

    kind: str | None
    group: str
    size: float


@dataclass(frozen=True)
class WorkloadLayer:
    """One layer line: compute times in seconds and the collective after each phase."""

    name: str
    dependency: int
    forward_compute: float
    forward_comm: CommOp
    input_grad_compute: float
    input_grad_comm: CommOp
    weight_grad_compute: float
    weight_grad_comm: CommOp
    update_time: float
    line: int
    policy: str | None = None

    def comm(self, phase: str) -> CommOp:
        """The collective of ``phase`` (forward, input_grad, weight_grad)."""
        return getattr(self, f"{phase}_comm")

    def compute(self, phase: str) -> float:
        """Compute seconds of ``phase``."""
        return getattr(self, f"{phase}_compute")


@dataclass(frozen=True)
class Workload:
    """A parsed SimAI/AICB workload: header sizes and the per-layer lines.

    The header sizes are checked when the object is made (so every consumer -- the ``aicb``
    summary, ``train --workload``, :meth:`to_layout` -- sees the same validation); a violation
    raises :class:`~hpnsim.errors.InputError` naming ``"<source> line <header_line>"``:

    * ``all_gpus`` must be a multiple of ``tp * pp`` (``dp = all_gpus / (tp * pp)`` exactly);
    * ``ep`` must divide ``dp`` (Megatron carves expert parallelism out of the DP ranks);
      ``ep > 1`` needs ``all_gpus``, since without it ``dp`` is unknown (taken as 1);
    * with an interleaved pipeline (``pp > 1`` and ``vpp > 1``) ``ga`` (the micro-batch
      count) must be a multiple of ``pp``, as Megatron's interleaved 1F1B requires.

    Expert parallelism and the layer lines are independent: ``ep > 1`` without any ``_EP``
    collective is accepted (the file simply lists no expert traffic; ``ep`` still shapes the
    ``ep`` and ``edp`` groups of ``_DP_EP`` collectives), and an ``_EP`` collective with
    ``ep == 1`` is accepted too: it runs on one-GPU groups, so it moves nothing and costs
    no time.

    Examples
    --------
    >>> w = load_aicb(example_path())
    >>> w.tp, w.dp, w.ga, len(w.layers)
    (2, 2, 2, 7)
    >>> w.layers[1].forward_comm
    CommOp(kind='allreduce', group='tp', size=8388608.0)
    """

    policy: str
    layers: tuple[WorkloadLayer, ...]
    tp: int = 1
    ep: int = 1
    pp: int = 1
    vpp: int = 1
    ga: int = 1
    all_gpus: int | None = None
    pp_comm: float = 0.0
    checkpoints: tuple[int, ...] = ()
    checkpoint_initiates: tuple[int, ...] = ()
    extra: dict = field(default_factory=dict)
    source: str = "<string>"
    header_line: int = 1

    def __post_init__(self):
        _check_sizes(f"{self.source} line {self.header_line}", tp=self.tp, pp=self.pp,
                     ep=self.ep, vpp=self.vpp, ga=self.ga, all_gpus=self.all_gpus)

    @property
    def dp(self) -> int:
        """Data-parallel size ``all_gpus / (tp * pp)`` (1 when ``all_gpus`` is absent)."""
        return (self.all_gpus // (self.tp * self.pp)) if self.all_gpus else 1

    def compute_time(self, phase: str | None = None) -> float:
        """Total compute seconds of one pass over the layers (one phase, or all three).

        >>> round(load_aicb(example_path()).compute_time("forward") * 1e6)
        3029
        """
        phases = PHASES if phase is None else (phase,)
        return float(sum(layer.compute(p) for layer in self.layers for p in phases))

    def comm_bytes(self, group: str | None = None, phase: str | None = None) -> float:
        """Summed collective buffer sizes (per call, once per layer line), filtered by group/phase.

        >>> load_aicb(example_path()).comm_bytes(group="tp")
        83886080.0
        """
        phases = PHASES if phase is None else (phase,)
        return float(sum(op.size for layer in self.layers for p in phases
                         if (op := layer.comm(p)).kind and (group is None or op.group == group)))

    def to_layout(self) -> Layout:
        """The :class:`Layout` the header describes (``ga`` micro-batches of one sequence).

        AICB writes ``vpp`` even without pipelining; it is ignored when ``pp == 1``. The sizes
        were checked when the workload was made, so only a missing ``all_gpus`` fails here.

        >>> load_aicb(example_path()).to_layout().num_microbatches
        2
        """
        if self.all_gpus is None:
            raise InputError(f"{self.source} line {self.header_line}",
                             "all_gpus is needed to derive the layout")
        dp = self.dp
        return Layout(tp=self.tp, pp=self.pp, dp=dp, ep=self.ep,
                      vpp=self.vpp if self.pp > 1 else 1, global_batch=dp * self.ga)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        out = asdict(self)
        out["dp"] = self.dp
        return out


def _int(token: str, where: str, what: str) -> int:
    try:
        value = int(token)
    except ValueError:
        try:
            number = float(token)
        except ValueError:
            raise InputError(where, f"{what} must be an integer, got {token!r}") from None
        if not number.is_integer():
            raise InputError(where, f"{what} must be an integer, got {token!r}") from None
        value = int(number)
    return value


def _count(token: str, where: str, what: str) -> float:
    value = _int(token, where, what)
    if value < 0:
        raise InputError(where, f"{what} must be >= 0, got {token!r}")
    return float(value)


def _comm(token: str, size: float, default_group: str, where: str, what: str) -> CommOp:
    if token == "NONE":
        return CommOp(None, default_group, size)
    for suffix, group in _SUFFIX_GROUPS.items():
        if token.endswith(suffix) and token[: -len(suffix)] in COMM_KINDS:
            return CommOp(COMM_KINDS[token[: -len(suffix)]], group, size)
    if token in COMM_KINDS:
        return CommOp(COMM_KINDS[token], default_group, size)
    kinds = ", ".join(["NONE", *COMM_KINDS])
    raise InputError(where, f"{what} must be one of {kinds} (optionally _EP or _DP_EP), got {token!r}")


def _header(tokens: list[str], where: str) -> dict:
    if not tokens:
        raise InputError(where, "empty header; expected a policy such as HYBRID_TRANSFORMER_FWD_IN_BCKWD")
    if tokens[0] not in AICB_POLICIES:
        raise InputError(where, f"unknown policy {tokens[0]!r}; one of "
                                f"{', '.join(AICB_POLICIES)}")
    out: dict = {"policy": tokens[0], "extra": {}}
    i = 1
    while i < len(tokens):
        key = tokens[i].rstrip(":")
        if i + 1 >= len(tokens):
            raise InputError(where, f"{key} has no value")
        if key in _LIST_KEYS:
            n = _int(tokens[i + 1], where, f"{key} count")
            values = tokens[i + 2: i + 2 + n]
            if n < 0 or len(values) != n:
                raise InputError(where, f"{key} announces {n} layer indices, found {len(values)}")
            out[_LIST_KEYS[key]] = tuple(_int(v, where, f"{key} entry") for v in values)
            i += 2 + n
            continue
        if key in _INT_KEYS:
            value = _int(tokens[i + 1], where, key)
            if value < (0 if key in ("pp_comm", "DLRM_LAST_BOTTOM_LAYER") else 1):
                raise InputError(where, f"{key} must be positive, got {tokens[i + 1]!r}")
            out[_INT_KEYS[key]] = value
        else:
            out["extra"][key] = tokens[i + 1]
        i += 2
    if "pp_comm" in out:
        out["pp_comm"] = float(out["pp_comm"])
    out.pop("dlrm_last_bottom_layer", None)
    return out


def parse_aicb(text: str, source: str = "<string>", time_unit: float = 1e-9) -> Workload:
    """Parse the text of a SimAI/AICB workload file; errors name ``source`` and the line.

    Header sizes that do not fit together (``all_gpus`` not a multiple of ``tp * pp``, ``ep``
    not dividing ``dp``, ...; see :class:`Workload`) are reported on the header line.

    Parameters
    ----------
    text : str
    source : str
        Name used in error messages (the file path).
    time_unit : float
        Seconds per compute tick (SimAI: 1 ns).

    Examples
    --------
    >>> w = parse_aicb("MICRO\\n1\\nar -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 1048576 1\\n")
    >>> w.layers[0].weight_grad_comm
    CommOp(kind='allreduce', group='dp', size=1048576.0)
    >>> parse_aicb("MICRO\\n2\\nar -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\\n")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: <string> line 2: announces 2 layers, the file has 1
    """
    lines = text.splitlines()
    numbered = [(i + 1, line.split()) for i, line in enumerate(lines)]
    numbered = [(n, tokens) for n, tokens in numbered if tokens]
    if not numbered:
        raise InputError(source, "empty workload file (no line to read)")
    header_line, header_tokens = numbered[0]
    header = _header(header_tokens, f"{source} line {header_line}")
    _check_sizes(f"{source} line {header_line}", **header)  # before the layers: file order
    if len(numbered) < 2:
        raise InputError(source, f"the file ends after the header (line {header_line}); "
                                 "expected the number of layers next")
    count_line, count_tokens = numbered[1]
    where = f"{source} line {count_line}"
    if len(count_tokens) != 1:
        raise InputError(where, f"expected the number of layers alone, got {' '.join(count_tokens)!r}")
    count = _int(count_tokens[0], where, "the number of layers")
    if count < 1:
        raise InputError(where, f"the number of layers must be >= 1, got {count}")
    body = numbered[2:]
    customized = header["policy"] == "HYBRID_CUSTOMIZED"
    width = 13 if customized else 12
    layers = []
    for number, tokens in body[:count]:
        where = f"{source} line {number}"
        if len(tokens) != width:
            raise InputError(where, f"a layer line has {width} fields (name, dependency, then compute, "
                                    f"comm type, bytes for forward, input-grad, weight-grad, then "
                                    f"update time), got {len(tokens)}")
        t = tokens
        comms = []
        for phase, (ti, si), default in zip(PHASES, ((3, 4), (6, 7), (9, 10)), ("tp", "tp", "dp"),
                                            strict=True):
            size = _count(t[si], where, f"{phase} bytes")
            comms.append(_comm(t[ti], size, default, where, f"{phase} comm type"))
        times = [_count(t[i], where, f"{name} time") * time_unit for i, name in
                 ((2, "forward compute"), (5, "input-grad compute"), (8, "weight-grad compute"),
                  (11, "update"))]
        layers.append(WorkloadLayer(
            name=t[0], dependency=_int(t[1], where, "dependency"),
            forward_compute=times[0], forward_comm=comms[0],
            input_grad_compute=times[1], input_grad_comm=comms[1],
            weight_grad_compute=times[2], weight_grad_comm=comms[2],
            update_time=times[3], line=number, policy=t[12] if customized else None))
    if len(body) < count:
        raise InputError(f"{source} line {count_line}",
                         f"announces {count} layers, the file has {len(body)}")
    if len(body) > count:
        raise InputError(f"{source} line {body[count][0]}",
                         f"the header announces {count} layers; unexpected extra line")
    return Workload(layers=tuple(layers), source=source, header_line=header_line, **header)


def load_aicb(path: str | Path, time_unit: float = 1e-9) -> Workload:
    """Read and parse a SimAI/AICB workload file (see :func:`parse_aicb`)."""
    path = Path(path)
    text = read_user_text(path, "workload-file", "workload file")
    return parse_aicb(text, source=str(path), time_unit=time_unit)


def example_path() -> Path:
    """Path of the small example workload shipped with hpnsim (TP 2 x DP 2, 2 layers).

    >>> example_path().name
    'aicb_example.txt'
    """
    return Path(__file__).parent / "catalog" / "aicb_example.txt"
