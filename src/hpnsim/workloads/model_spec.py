"""The architecture of one model, :class:`ModelSpec`, with its parameter, FLOP and activation counts.

A :class:`ModelSpec` is the architecture only (no parallelism). Counts follow the usual
conventions so they can be checked against published sizes:

- parameters: embeddings, per-layer attention (grouped-query aware), MLP (SwiGLU has three
  matrices, a plain MLP two), norms and biases, the output head unless tied;
- FLOPs: 2 per multiply-add of every matrix product a token goes through, plus the attention
  score and value products, ``4 * seq_len * heads * head_dim`` per token per layer in the
  forward pass (Megatron-LM / PaLM convention: the full square, no causal halving);
  training is 3x forward (backward = 2x forward), 4x with full activation recomputation;
- activations: Korthikanti et al. 2022 ("Reducing Activation Recomputation"), 16-bit.

The named models are in :mod:`hpnsim.workloads.models` (the catalog and its lookups).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hpnsim.errors import InputError

_KINDS = ("transformer", "cnn")
_NORMS = ("rmsnorm", "layernorm")
_RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one model.

    MoE layers are layers ``i >= moe_first_layer`` with ``(i - moe_first_layer) % moe_every == 0``
    when ``experts > 0``; their MLP is ``experts`` routed experts of width ``expert_ffn``
    (defaults to ``ffn``) plus ``shared_experts`` always-active ones, ``top_k`` routed per token.

    Examples
    --------
    >>> m = ModelSpec("tiny", layers=2, hidden=64, heads=4, ffn=256, vocab=1000, seq_len=128)
    >>> m.num_parameters()
    259392
    >>> m.head_dim, m.kv_heads
    (16, 4)
    """

    name: str
    layers: int = 0
    hidden: int = 0
    heads: int = 0
    ffn: int = 0
    vocab: int = 0
    seq_len: int = 2048
    kv_heads: int | None = None
    head_dim: int | None = None
    gated_mlp: bool = True
    tied_embeddings: bool = False
    learned_positions: bool = False
    bias: bool = False
    norm: str = "rmsnorm"
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    expert_ffn: int | None = None
    moe_first_layer: int = 0
    moe_every: int = 1
    extra_parameters: int = 0
    kind: str = "transformer"
    fixed_parameters: int | None = None
    forward_flops_per_sample: float | None = None
    dtype_bytes: int = 2
    published_parameters: float | None = None
    published_active_parameters: float | None = None
    nominal_parameters: float | None = None

    def __post_init__(self):
        _validate(self)
        if self.kind == "transformer":
            if self.kv_heads is None:
                object.__setattr__(self, "kv_heads", self.heads)
            if self.head_dim is None:
                object.__setattr__(self, "head_dim", self.hidden // self.heads)
            if self.expert_ffn is None:
                object.__setattr__(self, "expert_ffn", self.ffn)

    # ----- structure -------------------------------------------------------------------
    @property
    def nominal_size(self) -> float:
        """The size quoted in the model's name (e.g. 70e9 for Llama-3 70B), else the exact count.

        >>> from hpnsim.workloads.models import get
        >>> get("llama3-70b").nominal_size
        70000000000.0
        """
        return float(self.nominal_parameters or self.num_parameters())

    @property
    def is_moe(self) -> bool:
        """True when some layers are mixture-of-experts layers."""
        return self.experts > 0

    def is_moe_layer(self, layer: int) -> bool:
        """Whether transformer layer ``layer`` (0-based) is an MoE layer.

        >>> from hpnsim.workloads.models import get
        >>> get("deepseek-moe-16b").is_moe_layer(0), get("deepseek-moe-16b").is_moe_layer(1)
        (False, True)
        """
        return (self.is_moe and layer >= self.moe_first_layer
                and (layer - self.moe_first_layer) % self.moe_every == 0)

    @property
    def moe_layers(self) -> int:
        """Number of MoE layers.

        >>> from hpnsim.workloads.models import get
        >>> get("mixtral-8x7b").moe_layers
        32
        """
        return sum(self.is_moe_layer(i) for i in range(self.layers))

    # ----- parameters ------------------------------------------------------------------
    def attention_weights(self) -> int:
        """Weight-matrix parameters of one attention block (Q, K, V, O; no biases)."""
        self._need_transformer()
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        return self.hidden * q + 2 * self.hidden * kv + q * self.hidden

    def attention_parameters(self) -> int:
        """Parameters of one attention block (Q, K, V, O and their biases)."""
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        biases = (q + 2 * kv + self.hidden) if self.bias else 0
        return self.attention_weights() + biases

    def mlp_weights(self, width: int | None = None) -> int:
        """Weight-matrix parameters of one dense MLP (or one expert) of inner size ``width``
        (default ``ffn``; no biases)."""
        self._need_transformer()
        width = self.ffn if width is None else width
        return (3 if self.gated_mlp else 2) * self.hidden * width

    def mlp_parameters(self, width: int | None = None) -> int:
        """Parameters of one dense MLP (or one expert) of inner size ``width`` (default ``ffn``)."""
        width = self.ffn if width is None else width
        matrices = 3 if self.gated_mlp else 2
        biases = (width * (matrices - 1) + self.hidden) if self.bias else 0
        return self.mlp_weights(width) + biases

    def _norm_parameters(self) -> int:
        return 2 * self.hidden if self.norm == "layernorm" else self.hidden

    def layer_parameters(self, layer: int = 0, active: bool = False) -> int:
        """Parameters of transformer layer ``layer``; ``active=True`` counts only the experts a token uses.

        >>> from hpnsim.workloads.models import get
        >>> get("llama3-70b").layer_parameters()
        855654400
        """
        attention = self.attention_parameters() + 2 * self._norm_parameters()
        if not self.is_moe_layer(layer):
            return attention + self.mlp_parameters()
        routed = self.top_k if active else self.experts
        experts = (routed + self.shared_experts) * self.mlp_parameters(self.expert_ffn)
        return attention + experts + self.hidden * self.experts  # + router

    def embedding_parameters(self) -> int:
        """Token (and learned position) embeddings, the untied output head, the final norm."""
        self._need_transformer()
        table = self.vocab * self.hidden
        positions = self.seq_len * self.hidden if self.learned_positions else 0
        head = 0 if self.tied_embeddings else table
        return table + positions + head + self._norm_parameters() + self.extra_parameters

    def num_parameters(self, active: bool = False) -> int:
        """Total parameters; ``active=True`` gives the parameters one token uses (MoE).

        >>> from hpnsim.workloads.models import get
        >>> round(get("llama3-70b").num_parameters() / 1e9, 2)
        70.55
        >>> round(get("mixtral-8x7b").num_parameters(active=True) / 1e9, 2)
        12.88
        """
        if self.kind == "cnn":
            return int(self.fixed_parameters)
        layers = sum(self.layer_parameters(i, active) for i in range(self.layers))
        return layers + self.embedding_parameters()

    def active_parameters(self) -> int:
        """Parameters used per token (equals :meth:`num_parameters` for dense models)."""
        return self.num_parameters(active=True)

    def expert_parameters(self) -> int:
        """Parameters in routed experts (synchronized over the expert-data-parallel group).

        >>> from hpnsim.workloads.models import get
        >>> get("llama3-8b").expert_parameters()
        0
        """
        if not self.is_moe:
            return 0
        return self.moe_layers * self.experts * self.mlp_parameters(self.expert_ffn)

    # ----- FLOPs -----------------------------------------------------------------------
    def layer_forward_flops_per_token(self, layer: int = 0, seq_len: int | None = None) -> float:
        """Forward FLOPs of one token through layer ``layer`` (matmuls + attention scores).

        >>> from hpnsim.workloads.models import get
        >>> m = get("gpt3-175b")
        >>> m.layer_forward_flops_per_token() == 24 * 12288**2 + 4 * 2048 * 12288
        True
        """
        seq = self.seq_len if seq_len is None else seq_len
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        projections = 2 * (2 * self.hidden * q + 2 * self.hidden * kv)
        scores = 4 * seq * q
        matrices = 3 if self.gated_mlp else 2
        if self.is_moe_layer(layer):
            used = self.top_k + self.shared_experts
            mlp = 2 * matrices * self.hidden * self.expert_ffn * used + 2 * self.hidden * self.experts
        else:
            mlp = 2 * matrices * self.hidden * self.ffn
        return float(projections + scores + mlp)

    def head_forward_flops_per_token(self) -> float:
        """Forward FLOPs of the output projection (logits) per token."""
        self._need_transformer()
        return float(2 * self.vocab * self.hidden)

    def forward_flops_per_token(self, seq_len: int | None = None) -> float:
        """Forward FLOPs per token (per sample for a CNN).

        >>> from hpnsim.workloads.models import get
        >>> f = get("llama3-8b").forward_flops_per_token()
        >>> round(f / (2 * get("llama3-8b").num_parameters()), 2)   # ~2N plus attention
        1.2
        """
        if self.kind == "cnn":
            return float(self.forward_flops_per_sample)
        layers = sum(self.layer_forward_flops_per_token(i, seq_len) for i in range(self.layers))
        return layers + self.head_forward_flops_per_token()

    def training_flops_per_token(self, seq_len: int | None = None, recompute: bool = False) -> float:
        """Forward + backward FLOPs per token: 3x forward, 4x with full recomputation.

        >>> from hpnsim.workloads.models import get
        >>> m = get("gpt3-175b")
        >>> m.training_flops_per_token() == 3 * m.forward_flops_per_token()
        True
        """
        return (4.0 if recompute else 3.0) * self.forward_flops_per_token(seq_len)

    # ----- activations -----------------------------------------------------------------
    def hidden_state_bytes(self, micro_batch: int, seq_len: int | None = None) -> float:
        """Bytes of one ``b x s x h`` hidden-state tensor: a TP all-reduce buffer, a PP message.

        >>> from hpnsim.workloads.models import get
        >>> get("llama3-70b").hidden_state_bytes(1)
        134217728.0
        """
        self._need_transformer()
        seq = self.seq_len if seq_len is None else seq_len
        return float(micro_batch * seq * self.hidden * self.dtype_bytes)

    def activation_bytes_per_layer(self, micro_batch: int, seq_len: int | None = None, *,
                                   tp: int = 1, sequence_parallel: bool = False,
                                   recompute: str = "none") -> float:
        """Activation memory per layer per micro-batch per GPU (Korthikanti et al. 2022).

        ``s*b*h*(34 + 5*a*s/h)`` without parallelism; TP divides the parts it shards,
        sequence parallelism the rest; ``selective`` recomputation drops the ``5as/h`` term,
        ``full`` keeps only the layer input (``2sbh``).

        >>> m = ModelSpec("t", layers=1, hidden=1024, heads=16, ffn=4096, vocab=10, seq_len=512)
        >>> m.activation_bytes_per_layer(1) == 512 * 1024 * (34 + 5 * 16 * 512 / 1024)
        True
        """
        self._need_transformer()
        if recompute not in _RECOMPUTE:
            raise InputError("recompute", f"one of {', '.join(_RECOMPUTE)}, got {recompute!r}")
        seq = self.seq_len if seq_len is None else seq_len
        sbh = seq * micro_batch * self.hidden
        if recompute == "full":
            return 2.0 * sbh / (tp if sequence_parallel else 1)
        attention = 0.0 if recompute == "selective" else 5.0 * self.heads * seq / self.hidden / tp
        base = 34.0 / tp if sequence_parallel else 10.0 + 24.0 / tp
        return float(sbh * (base + attention))

    # ----- misc ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Fields plus derived counts, for JSON output."""
        out = dataclasses.asdict(self)
        out["parameters"] = self.num_parameters()
        if self.is_moe:
            out["active_parameters"] = self.active_parameters()
        out["forward_flops_per_token"] = self.forward_flops_per_token()
        return out

    def _need_transformer(self) -> None:
        if self.kind != "transformer":
            raise InputError("model", f"{self.name} is a {self.kind}: only its parameter and "
                                      "FLOP counts are modelled, not its layers")


def _validate(m: ModelSpec) -> None:
    if m.kind not in _KINDS:
        raise InputError("kind", f"one of {', '.join(_KINDS)}, got {m.kind!r}")
    if m.kind == "cnn":
        if not m.fixed_parameters or not m.forward_flops_per_sample:
            raise InputError(m.name, "a cnn needs fixed_parameters and forward_flops_per_sample")
        return
    for field in ("layers", "hidden", "heads", "ffn", "vocab", "seq_len", "dtype_bytes"):
        value = getattr(m, field)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InputError(f"{m.name}.{field}", f"must be a positive integer, got {value!r}")
    if m.norm not in _NORMS:
        raise InputError(f"{m.name}.norm", f"one of {', '.join(_NORMS)}, got {m.norm!r}")
    if m.head_dim is None and m.hidden % m.heads:
        raise InputError(f"{m.name}.heads", f"must divide hidden={m.hidden}, got {m.heads}")
    kv = m.heads if m.kv_heads is None else m.kv_heads
    if kv <= 0 or m.heads % kv:
        raise InputError(f"{m.name}.kv_heads", f"must divide heads={m.heads}, got {kv}")
    if m.experts < 0 or m.top_k < 0 or m.shared_experts < 0:
        raise InputError(f"{m.name}.experts", "experts, top_k and shared_experts must be >= 0")
    if m.experts and not 1 <= m.top_k <= m.experts:
        raise InputError(f"{m.name}.top_k", f"must be in 1..experts={m.experts}, got {m.top_k}")
    if m.moe_every < 1 or m.moe_first_layer < 0:
        raise InputError(f"{m.name}.moe_every", "moe_every must be >= 1, moe_first_layer >= 0")
