"""Which transformer layers each virtual pipeline stage holds (Megatron-Core semantics).

A job with ``pp`` stages and ``v`` model chunks per stage has ``pp * v`` *virtual stages*,
numbered as Megatron-Core's ``pipeline_model_parallel_layout`` numbers them: virtual stage
``u = k * pp + s`` is chunk ``k`` of stage ``s``, and layers are dealt to virtual stages in
order of ``u``, contiguously. The embedding always sits on virtual stage 0, the final norm
and output head on the last; a virtual stage may hold no transformer layer at all (an
embedding-only first stage, a head-only last stage).

:func:`split_layers` gives the layer count of every virtual stage from the options
Megatron-Core 0.20 offers (``megatron/core/transformer/transformer_block.py``,
``get_num_layers_to_build``):

- nothing: an even split (``layers / (pp * v)`` each);
- ``num_layers_in_first_pipeline_stage`` / ``..._last_...`` (``first`` / ``last`` here): the
  first or last stage gets that many layers (split over its ``v`` chunks), the others share
  the rest evenly;
- ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``
  (``embedding`` / ``loss``): the embedding (the loss with the output head) counts as one
  layer in the split, so the first (last) virtual stage builds one transformer layer fewer;
- an explicit list (Megatron's ``pipeline_model_parallel_layout``, reduced to counts):
  ``given[u]`` layers on virtual stage ``u``, summing to the model's layers.

Megatron-Core's defaults are all off (an even split), and so are hpnsim's.

Examples
--------
>>> split_layers(32, 4)
(8, 8, 8, 8)
>>> split_layers(30, 4, embedding=True, loss=True)      # 32 "layers" over 4 stages
(7, 8, 8, 7)
>>> split_layers(30, 4, first=6, last=6)
(6, 9, 9, 6)
>>> split_layers(8, 2, 2, given=(1, 3, 3, 1))
(1, 3, 3, 1)
"""

from __future__ import annotations

from hpnsim.errors import InputError


def split_layers(layers: int, pp: int, vpp: int = 1, *, first: int | None = None,
                 last: int | None = None, embedding: bool = False, loss: bool = False,
                 given=None, field: str = "stage_layers") -> tuple[int, ...]:
    """Transformer layers of each virtual stage ``u = k * pp + s`` (see the module docstring).

    Parameters
    ----------
    layers : int
        Transformer layers of the model.
    pp, vpp : int
        Pipeline stages and model chunks per stage.
    first, last : int, optional
        Layers of the first / last pipeline stage (Megatron-Core's
        ``num_layers_in_first_pipeline_stage`` / ``num_layers_in_last_pipeline_stage``).
    embedding, loss : bool
        Count the embedding / the loss as a layer in the split (Megatron-Core's
        ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``).
    given : sequence of int, optional
        Layers per virtual stage, ``pp * vpp`` of them; excludes every other option.
    field : str
        The name errors about ``given`` carry (the flag or key the user wrote).

    Returns
    -------
    tuple of int
        ``pp * vpp`` counts summing to ``layers``.

    Raises
    ------
    InputError
        When the counts do not fit (one line naming the option).

    Examples
    --------
    >>> split_layers(32, 4, 2, first=4, last=4)
    (2, 6, 6, 2, 2, 6, 6, 2)
    >>> split_layers(32, 4, given=(8, 8, 8, 7))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: stage_layers: 8+8+8+7 = 31 layers; the model has 32
    """
    chunks = pp * vpp
    if given is not None:
        counts = tuple(given)
        if first is not None or last is not None or embedding or loss:
            raise InputError(field, "an explicit list excludes the first/last stage layers and "
                                    "the embedding/loss accounting options")
        if len(counts) != chunks:
            raise InputError(field, f"needs pp*virtual_stages = {pp}*{vpp} = {chunks} counts "
                                    f"(one per virtual stage), got {len(counts)}")
        if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
            raise InputError(field, f"counts must be integers >= 0, got {list(counts)}")
        if sum(counts) != layers:
            raise InputError(field, f"{'+'.join(map(str, counts))} = {sum(counts)} layers; "
                                    f"the model has {layers}")
        return counts
    if first is not None or last is not None:
        if embedding or loss:
            raise InputError("first_stage_layers", "excludes account_for_embedding and "
                                                   "account_for_loss (as in Megatron-Core)")
        per_stage = _uneven_ends(layers, pp, first, last)
    else:
        total = layers + int(embedding) + int(loss)
        if total % pp:
            raise InputError("pp", f"must divide the {total} layers to split "
                                   f"({layers} + embedding/loss counted as layers), got {pp}")
        per_stage = [total // pp] * pp
    out = []
    for _ in range(vpp):
        for s in range(pp):
            if per_stage[s] % vpp:
                raise InputError("virtual_stages", f"must divide stage {s}'s {per_stage[s]} "
                                                   f"layers, got {vpp}")
            out.append(per_stage[s] // vpp)
    if embedding:
        out[0] -= 1
    if loss:
        out[-1] -= 1
    if min(out) < 0:
        raise InputError("pp", "too few layers for the embedding/loss accounting: a virtual "
                               "stage would hold fewer than none")
    return tuple(out)


def _uneven_ends(layers: int, pp: int, first: int | None, last: int | None) -> list[int]:
    """Layers per stage with a given first and/or last stage (Megatron-Core's rules)."""
    for name, value in (("first_stage_layers", first), ("last_stage_layers", last)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 0):
            raise InputError(name, f"must be an integer >= 0, got {value!r}")
    if pp < 2:
        raise InputError("first_stage_layers", "needs pp >= 2")
    rest, left = layers, pp
    for value in (first, last):
        if value is not None:
            rest -= value
            left -= 1
    if rest < 0 or (left == 0 and rest != 0):
        raise InputError("first_stage_layers", f"first/last stage layers ({first}, {last}) do "
                                               f"not fit the {layers} layers over pp={pp}")
    if left and rest % left:
        raise InputError("first_stage_layers", f"the {rest} layers left must divide evenly "
                                               f"over the {left} middle stages")
    middle = rest // left if left else 0
    per_stage = [middle] * pp
    if first is not None:
        per_stage[0] = first
    if last is not None:
        per_stage[-1] = last
    return per_stage


def layer_ranges(counts) -> list[range]:
    """The layer indices of each virtual stage, from its counts.

    >>> [list(r) for r in layer_ranges((1, 3, 0))]
    [[0], [1, 2, 3], []]
    """
    out, start = [], 0
    for c in counts:
        out.append(range(start, start + c))
        start += c
    return out
