"""The reference article's naive per-epoch traffic formulas, reproduced as printed.

The article (see ``shared/reference/traffic.md`` and ``docs/traffic.md``) estimates, per epoch,
the bytes each parallel mode moves, with BF16 (2 bytes per value), ``P`` parameters, ``T``
tokens, ``L`` layers, hidden size ``H``, ``G`` GPUs in the group and ``N`` mini-batches:

=====  ========================  ====================  ======  ===================  ========
mode   pattern                   backward total        syncs   forward total        passes
=====  ========================  ====================  ======  ===================  ========
DP     all-reduce                2·N·P·G·(G−1)         1       0                    0
FSDP   all-gather + all-reduce   2·N·P·(G−1)           L       2·N·P·(G−1)          L
TP     all-reduce                4·N·P·L·(G−1)         2·L     4·L·T·H·(G−1)·G      2·L·T
PP     point-to-point            2·T·H·(G−1)           G−1     2·T·H·(G−1)          G−1
=====  ========================  ====================  ======  ===================  ========

and for 3D parallelism ``G_tp × G_pp × G_dp``: backward
``2·N·P·G_dp·[2·L·(G_tp−1)/G_pp + (G_dp−1)] + 2·T·H·(G_pp−1)``, forward
``2·T·H·(2·L·G_tp·(G_tp−1) + (G_pp−1))``. This module evaluates them verbatim; what real
collectives move is :mod:`hpnsim.workloads.traffic`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hpnsim.errors import InputError
from hpnsim.workloads.models import ModelSpec
from hpnsim.workloads.models import get as get_model

#: C4 (en) as the article uses it: tokens and samples (documents) per epoch.
C4_TOKENS = 156e9
C4_SAMPLES = 364.6e6
#: The article's batch: 2048 samples per mini-batch.
ARTICLE_BATCH = 2048
MODES = ("dp", "fsdp", "tp", "pp")


@dataclass(frozen=True)
class ArticleInputs:
    """The symbols of the article's formulas.

    Examples
    --------
    >>> a = article_inputs("llama3-70b")
    >>> a.parameters, a.layers, a.hidden, round(a.batches)
    (70000000000.0, 80, 8192, 178027)
    """

    parameters: float          # P
    tokens: float              # T, tokens per epoch
    layers: int                # L
    hidden: int                # H
    batches: float             # N, mini-batches per epoch
    bytes_per_value: float = 2.0


@dataclass(frozen=True)
class ModeTraffic:
    """One line of the article's table: per-epoch bytes and the sync/pass counts it prints."""

    mode: str
    pattern: str
    group: str
    backward_bytes: float
    backward_syncs: float
    forward_bytes: float
    forward_passes: float

    @property
    def total_bytes(self) -> float:
        """Backward plus forward bytes per epoch."""
        return self.backward_bytes + self.forward_bytes

    def to_dict(self) -> dict:
        """Fields plus the total."""
        return {**asdict(self), "total_bytes": self.total_bytes}


def article_inputs(model: ModelSpec | str, *, dataset_tokens: float = C4_TOKENS,
                   dataset_samples: float | None = None, batch: int = ARTICLE_BATCH,
                   seq_len: int | None = None, parameters: float | None = None) -> ArticleInputs:
    """Derive ``P, T, L, H, N`` as the article does.

    ``P`` defaults to the model's nominal size (70e9 for Llama-3 70B, as the article's figures
    imply). ``N`` is samples per epoch over ``batch``: samples come from ``dataset_samples``,
    else from ``dataset_tokens / seq_len`` when ``seq_len`` is given, else from C4's average
    document length (156e9 tokens / 364.6e6 samples ≈ 428 tokens).

    Examples
    --------
    >>> round(article_inputs("llama3-70b", seq_len=8192).batches)   # packed 8K sequences
    9298
    """
    model = get_model(model)
    if model.kind != "transformer":
        raise InputError("model", f"the article's formulas need a transformer, got {model.name}")
    for name, value in (("dataset-tokens", dataset_tokens), ("batch", batch)):
        if not value or value <= 0:
            raise InputError(name, f"must be > 0, got {value!r}")
    if dataset_samples is not None:
        if dataset_samples <= 0:
            raise InputError("dataset-samples", f"must be > 0, got {dataset_samples!r}")
        samples = dataset_samples
    elif seq_len is not None:
        if seq_len <= 0:
            raise InputError("seq-len", f"must be > 0, got {seq_len!r}")
        samples = dataset_tokens / seq_len
    else:
        samples = dataset_tokens * (C4_SAMPLES / C4_TOKENS)
    p = model.nominal_size if parameters is None else float(parameters)
    if p <= 0:
        raise InputError("parameters", f"must be > 0, got {parameters!r}")
    return ArticleInputs(parameters=p, tokens=float(dataset_tokens), layers=model.layers,
                         hidden=model.hidden, batches=samples / batch,
                         bytes_per_value=float(model.dtype_bytes))


def article_table(inputs: ArticleInputs, gpus: int = 8) -> dict[str, ModeTraffic]:
    """The article's single-mode table for a group of ``gpus`` GPUs, evaluated verbatim.

    The leading ``2`` of every formula is the BF16 byte count (``bytes_per_value``).

    Examples
    --------
    >>> t = article_table(article_inputs("llama3-70b"), gpus=8)
    >>> round(t["dp"].backward_bytes / 1e15), round(t["pp"].forward_bytes / 1e15, 1)
    (1396, 17.9)
    """
    if not isinstance(gpus, int) or gpus < 1:
        raise InputError("gpus", f"must be a positive integer, got {gpus!r}")
    a, g = inputs, gpus
    two, n, p, t, lay, h = a.bytes_per_value, a.batches, a.parameters, a.tokens, a.layers, a.hidden
    return {
        "dp": ModeTraffic("dp", "all-reduce", f"G={g}", two * n * p * g * (g - 1), 1, 0.0, 0),
        "fsdp": ModeTraffic("fsdp", "all-gather + all-reduce", f"G={g}", two * n * p * (g - 1),
                            lay, two * n * p * (g - 1), lay),
        "tp": ModeTraffic("tp", "all-reduce", f"G={g}", 2 * two * n * p * lay * (g - 1), 2 * lay,
                          2 * two * lay * t * h * (g - 1) * g, 2 * lay * t),
        "pp": ModeTraffic("pp", "point-to-point", f"G={g}", two * t * h * (g - 1), g - 1,
                          two * t * h * (g - 1), g - 1),
    }


def article_3d(inputs: ArticleInputs, tp: int, pp: int, dp: int) -> ModeTraffic:
    """The article's 3D-parallel line for ``tp x pp x dp`` GPUs, evaluated verbatim.

    Examples
    --------
    >>> line = article_3d(article_inputs("llama3-70b"), tp=8, pp=8, dp=16)
    >>> round(line.total_bytes / 1e18, 1)          # the article's "about 85 EB"
    84.7
    """
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp)):
        if not isinstance(value, int) or value < 1:
            raise InputError(name, f"must be a positive integer, got {value!r}")
    a = inputs
    two, n, p, t, lay, h = a.bytes_per_value, a.batches, a.parameters, a.tokens, a.layers, a.hidden
    backward = (two * n * p * dp * (2 * lay * (tp - 1) / pp + (dp - 1))
                + two * t * h * (pp - 1))
    forward = two * t * h * (2 * lay * tp * (tp - 1) + (pp - 1))
    nan = float("nan")  # the article gives no sync or pass counts for 3D
    return ModeTraffic("3d", "all-reduce + point-to-point", f"TP{tp} x PP{pp} x DP{dp}",
                       backward, nan, forward, nan)


def switch_days(total_bytes: float, switch_bps: float = 51.2e12) -> dict[str, float]:
    """Days one switch needs to carry ``total_bytes``, at its capacity read as bits/s and as bytes/s.

    The article's "about 20 days" for 85 EB on a 51.2T switch only follows when 51.2 T is read
    as bytes per second; in bits per second (a 51.2 Tbps switch) it is 8x longer.

    >>> d = switch_days(84.75e18)
    >>> round(d["as_bits_per_second"]), round(d["as_bytes_per_second"], 1)
    (153, 19.2)
    """
    day = 86400.0
    return {"as_bits_per_second": total_bytes * 8 / switch_bps / day,
            "as_bytes_per_second": total_bytes / switch_bps / day}
