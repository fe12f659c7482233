"""The memory-bound kernels TransformerEngine's ring attention runs around its attention steps.

With context parallelism (``cp > 1``) Megatron-Core's ``TEDotProductAttention`` (``sbhd``
tensors) runs TransformerEngine's ``AttnFuncWithCP`` (NVIDIA/TransformerEngine v1.9, e79d915a,
``transformer_engine/pytorch/attention.py``; NeMo 24.07's TE): the causal, load-balanced P2P
ring of keys and values, with cuDNN's fused attention (``NVTE_F16_arbitrary_seqlen``) for each
step. :mod:`~hpnsim.training.compute.layer` times the steps' attention kernels; this module
lists the elementwise kernels around them, per layer, micro-batch and CP rank, in launch order.

A rank holds ``s_l = s / cp`` tokens of each of ``b`` sequences as two chunks of ``s_l / 2``;
with ``H`` query heads, ``G`` key/value heads and head size ``d`` on the GPU, ``q = b s_l H d``
and ``k = b s_l G d`` elements (BF16, 2 bytes), and the softmax statistics cuDNN returns are
``l = b H s_l`` FP32 values (``[b, H, s_l, 1]``). Rank ``r`` of ``c`` gets, at step ``i``,
the keys and values of rank ``r - i``: step 0 is its causal diagonal, steps ``1 <= i <= r``
attend all its queries to the first half of those keys, steps ``i > r`` its second half of
queries to all of them. Each kernel reads and writes once (no cache reuse):

=========================  =====================================  =========  =============
kernel (v1.9 line)         tensors                                bytes      how many
=========================  =====================================  =========  =============
forward
``torch.cat`` K, V (1276)  read k, v; write the P2P buffer          8k         1
half-KV copy (1388)        ``kv[:, 0].contiguous()``: KV's first  4k         ``r``
                           chunk (``q[1]`` is already contiguous
                           in ``sbhd``, 1475: no kernel)
``out`` zero-init (1629)   write ``out`` [s_l, b, H, d]            2q         1
LSE clone, ``.double()``   read, write FP32; read FP32, write     8l + 12l   1 + 1
(1630)                     FP64
LSE correction (1637,      ``jit_fuser`` (``torch.compile``, one  20l, 10l   ``r``, ``c-1-r``
1646; defined 1175)        kernel): read LSE (FP64) and the
                           step's (FP32), write LSE; step ``i >
                           r`` on its second half
LSE ``.float()`` (1655)    read FP64, write FP32                  12l        1
out correction (1668,      read ``out`` and the step's output     6q + 8l,   ``r+1``,
1688; defined 1166)        (BF16), both LSEs (FP32); write        3q + 4l    ``c-1-r``
                           ``out``; steps ``i > r`` on its second
                           half
backward
second-half LSE (1779)     ``softmax_lse[..., 1, :].contiguous``  4l         1
KV into the buffer (1796)  ``p2p_comm_buffers[0][0].copy_(kv)``   8k         1
half-KV copy (1917)        as forward, steps ``a <= i < c-1``     4k         ``r``
                           (``a = c-1-r``; ``q``, ``out``,
                           ``dout[1]`` contiguous, 2000: none)
``dq`` accumulation        ``dq.add_`` 6q; ``dq[1].add_`` 3q;     see below  1 a step
(2152-2183)                ``dq.copy_`` 4q; ``dq[1].copy_`` 2q;   (2 at
                           at step ``a`` (``r < c-1``)            step ``a``)
                           ``dq[0].copy_`` 2q and ``dq[1].add_``
                           3q
``dkv`` ``torch.cat``      read ``dk_``, ``dv_``; write ``dkv_``  8k, 4k     1 a step
(2207)                     (half at ``a <= i < c-1``)
``dkv`` accumulation       ``dkv.add_`` 12k, ``dkv.copy_`` 8k;    see below  1 a step
(2227-2256)                half-buffer ``add_`` 6k, ``copy_``     (2 at the
                           4k; the last step on rank 0:           last on
                           ``add_`` 6k and ``copy_`` 4k           rank 0)
=========================  =====================================  =========  =============

``dq``: step ``i > a`` adds the full ``dq_`` (6q); step ``a`` copies it (4q) on the last rank,
else copies its first half and adds its second (2q + 3q); earlier steps copy (step 0, 2q) or
add (3q) into ``dq``'s second half. ``dkv``: step 0 copies (``a > 0``: 8k; on the last rank
into the first half, 4k); the last step adds all (12k), on rank 0 adds the first half and
copies the second (6k + 4k); steps ``a <= i < c-1`` add into the first half (6k), the others
add all (12k).

Ranks differ (the later the rank, the more of its steps see whole queries and half keys);
each ring step waits for the neighbour's keys and values, so a pass runs at its busiest rank:
:func:`cp_attention_passes` gives, per direction, the kernels of the rank moving the most bytes
(rank ``c - 1`` in both directions).
Two things the kernels' own times leave out: the LSE corrections and half-KV copies run on the
two streams TE alternates between steps and may overlap a step's attention; and the ``v``
copy TE makes to get contiguous ``q, k, v`` (``get_qkv_layout``) is not CP's: it runs without
CP too.

TransformerEngine 2.x (HEAD d0067d0da, ``pytorch/attention/dot_product_attention/
context_parallel.py``, ``AttnFuncWithCPAndKVP2P``) keeps K and V apart in the P2P buffer, so
in ``sbhd`` the half-KV slices are contiguous (no copies), drops the ``dkv`` ``torch.cat``
(``dk``, ``dv`` accumulated separately, the same bytes in twice the launches), the zero-init
(``flash_attn_fwd_out_correction_init`` writes step 0's corrected output) and the FP64 LSE.
For Llama 3 8B at 8192 tokens, CP2 (rank 1) that is 197 MiB forward instead of 280, 256 MiB
backward instead of 320: a quarter fewer bytes, about 0.7% of the published NeMo row's step
(these kernels add 2.8% to it); hpnsim times the v1.9 form, NeMo 24.07's, which that run used.

>>> fwd, bwd = cp_attention_passes(1, 8192, 32, 8, 128, 2)
>>> [p.name for p in fwd]
['attention_cp_kv_cat', 'attention_cp_kv_half', 'attention_cp_out_zero', 'attention_cp_lse_clone', 'attention_cp_lse_double', 'attention_cp_lse_correction', 'attention_cp_lse_float', 'attention_cp_out_correction', 'attention_cp_out_correction']
>>> round(sum(p.bytes for p in fwd) / 2**20), round(sum(p.bytes for p in bwd) / 2**20)
(280, 320)
"""

from __future__ import annotations

from typing import NamedTuple

from hpnsim.errors import InputError
from hpnsim.training.compute.precision import positive_int

_ACT = 2      # q, k, v, out, their gradients: BF16
_LSE = 4      # cuDNN's softmax statistics: FP32
_LSE64 = 8    # the running LSE of the forward: FP64 (v1.9 line 1630)

#: kernel names for the HBM efficiency (:func:`~hpnsim.training.compute.memory_ops.hbm_efficiency`;
#: none is measured, so all get ``HBM_EFFICIENCY``)
COPY, ACCUMULATE, CORRECTION = "cp_copy", "cp_accumulate", "cp_correction"


class CpPass(NamedTuple):
    """One kernel: its op name, the HBM bytes it reads and writes, its kernel name."""

    name: str
    bytes: float
    kernel: str


def cp_attention_passes(batch: int, seq_len: int, heads: int, kv_heads: int, head_dim: int,
                        cp: int, rank: int | None = None) -> tuple[list[CpPass], list[CpPass]]:
    """(forward, backward) kernels of ``AttnFuncWithCP`` outside its attention steps, on CP
    rank ``rank`` (default: in each direction the rank that moves the most bytes); none
    with ``cp == 1``.

    Parameters
    ----------
    batch, seq_len : int
        Sequences per micro-batch and their (whole, unsharded) length.
    heads, kv_heads, head_dim : int
        Query and key/value heads on the GPU (after TP), head size.
    cp : int
        Context-parallel size.
    rank : int, optional
        The CP rank (0 to ``cp - 1``).

    Examples
    --------
    >>> cp_attention_passes(1, 4096, 32, 8, 128, 1)
    ([], [])
    >>> fwd, _ = cp_attention_passes(1, 16, 1, 1, 8, 2, rank=0)
    >>> [(p.name, p.bytes) for p in fwd][:3]
    [('attention_cp_kv_cat', 512.0), ('attention_cp_out_zero', 128.0), ('attention_cp_lse_clone', 64.0)]
    """
    cp = positive_int("cp", cp)
    seq_len = positive_int("seq_len", seq_len)
    if seq_len % (2 * cp):
        raise InputError("seq_len", f"{seq_len} is not divisible by 2 * cp = {2 * cp}: "
                                    "load-balanced causal CP splits it into 2 * cp chunks")
    if cp == 1:
        return [], []
    if rank is not None and not 0 <= rank < cp:
        raise InputError("rank", f"must be in 0..{cp - 1}, got {rank!r}")
    tokens = positive_int("batch", batch) * seq_len // cp
    heads, kv_heads = positive_int("heads", heads), positive_int("kv_heads", kv_heads)
    d = positive_int("head_dim", head_dim)
    q, k, lse = float(tokens * heads * d), float(tokens * kv_heads * d), float(tokens * heads)
    ranks = range(cp) if rank is None else (rank,)
    forward = max((_forward(q, k, lse, cp, r) for r in ranks), key=_total)
    backward = max((_backward(q, k, lse, cp, r) for r in ranks), key=_total)
    return forward, backward


def _total(passes: list[CpPass]) -> float:
    return sum(p.bytes for p in passes)


def _forward(q: float, k: float, lse: float, cp: int, r: int) -> list[CpPass]:
    """Rank ``r``'s forward kernels (v1.9 lines 1276-1700), ``q``, ``k``, ``lse`` in
    elements."""
    out = [CpPass("attention_cp_kv_cat", 4 * k * _ACT, COPY)]
    for i in range(1, cp):
        if i <= r:   # all queries against the first chunk of rank r - i's keys and values
            out.append(CpPass("attention_cp_kv_half", 2 * k * _ACT, COPY))
        if i == 1:
            out += [CpPass("attention_cp_out_zero", q * _ACT, COPY),
                    CpPass("attention_cp_lse_clone", 2 * lse * _LSE, COPY),
                    CpPass("attention_cp_lse_double", lse * (_LSE + _LSE64), COPY)]
        else:
            out.append(_lse_correction(lse, i - 1 <= r))
    out.append(_lse_correction(lse, cp - 1 <= r))
    out.append(CpPass("attention_cp_lse_float", lse * (_LSE64 + _LSE), COPY))
    for i in range(cp):
        part = 1.0 if i <= r else 0.5      # steps i > r: the second half of the queries
        out.append(CpPass("attention_cp_out_correction",
                          part * (3 * q * _ACT + 2 * lse * _LSE), CORRECTION))
    return out


def _lse_correction(lse: float, whole: bool) -> CpPass:
    part = 1.0 if whole else 0.5
    return CpPass("attention_cp_lse_correction", part * lse * (2 * _LSE64 + _LSE), CORRECTION)


def _backward(q: float, k: float, lse: float, cp: int, r: int) -> list[CpPass]:
    """Rank ``r``'s backward kernels (v1.9 lines 1743-2260), ``q``, ``k``, ``lse`` in
    elements."""
    a = cp - 1 - r   # the first step whose keys come from a rank at or before r
    kv = 2 * k       # the K and V of a rank, elements
    out = [CpPass("attention_cp_lse_half", 2 * (lse / 2) * _LSE, COPY),
           CpPass("attention_cp_kv_buffer", 2 * kv * _ACT, COPY)]
    for i in range(cp):
        half_kv = a <= i < cp - 1
        if half_kv:
            out.append(CpPass("attention_cp_kv_half", kv * _ACT, COPY))
        out += _dq(q, cp, r, a, i)
        out.append(CpPass("attention_cp_dkv_cat", (kv if half_kv else 2 * kv) * _ACT, COPY))
        out += _dkv(kv, cp, r, a, i)
    return out


def _copy(name: str, elements: float) -> CpPass:
    return CpPass(name, 2 * elements * _ACT, COPY)


def _add(name: str, elements: float) -> CpPass:
    return CpPass(name, 3 * elements * _ACT, ACCUMULATE)


def _dq(q: float, cp: int, r: int, a: int, i: int) -> list[CpPass]:
    if i > a:
        return [_add("attention_cp_dq_add", q)]
    if i == a:
        if r == cp - 1:
            return [_copy("attention_cp_dq_copy", q)]
        return [_copy("attention_cp_dq_copy", q / 2), _add("attention_cp_dq_add", q / 2)]
    if i > 0:
        return [_add("attention_cp_dq_add", q / 2)]
    return [_copy("attention_cp_dq_copy", q / 2)]


def _dkv(kv: float, cp: int, r: int, a: int, i: int) -> list[CpPass]:
    if i == cp - 1:
        if r == 0:
            return [_add("attention_cp_dkv_add", kv / 2), _copy("attention_cp_dkv_copy", kv / 2)]
        return [_add("attention_cp_dkv_add", kv)]
    if i >= a:
        if i == 0 and r == cp - 1:
            return [_copy("attention_cp_dkv_copy", kv / 2)]
        return [_add("attention_cp_dkv_add", kv / 2)]
    if i > 0:
        return [_add("attention_cp_dkv_add", kv)]
    return [_copy("attention_cp_dkv_copy", kv)]
