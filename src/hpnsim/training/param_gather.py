"""The distributed optimizer's parameter all-gather overlapped with the next forward
(Megatron-Core's ``overlap_param_gather``).

Without it (Megatron-Core 0.20's default) the updated 16-bit parameters are all-gathered bucket
by bucket right after the optimizer step. With it (which needs the distributed optimizer and
``overlap_grad_reduce``, as Megatron asserts), the gathers wait for the next iteration's first
forward: the forward pre-hook of a module whose bucket has not arrived dispatches that bucket's
all-gather, waits for it, and dispatches the next bucket's (one ahead). Buckets are gathered in
forward order, each model chunk's on its own. An iteration here starts with the gathers of the
previous step's update, which gives the same steady-state iteration time.

:func:`forward_buckets` says which buckets each forward block of a chunk needs.
"""

from __future__ import annotations

from itertools import accumulate


def forward_buckets(block_params, buckets) -> list[list[int]]:
    """For each block in *forward* order, the indices (in forward order) of the buckets that
    hold its parameters.

    Parameters
    ----------
    block_params : sequence of float
        Parameters of each block in *backward* order (as :attr:`StageCost.blocks`).
    buckets : sequence of (float, int)
        The chunk's buckets in launch (backward) order, ``(parameters, block index)`` as
        :meth:`TrainJob.buckets` gives them.

    Returns
    -------
    list of list of int

    Examples
    --------
    >>> # backward order: head 2, layer1 4, layer0 4, embedding 2; buckets of 5 (and 2);
    >>> # forward order: the embedding needs the last bucket, layer1 straddles two
    >>> forward_buckets([2, 4, 4, 2], [(5, 1), (5, 2), (2, 3)])
    [[0], [1], [1, 2], [2]]
    """
    n = len(buckets)
    bucket_ends = list(accumulate(size for size, _ in buckets))
    block_ends = list(accumulate(block_params))
    needs = []
    start = 0.0
    for end in block_ends:
        needed = [b for b, stop in enumerate(bucket_ends)
                  if stop > start and (b == 0 or bucket_ends[b - 1] < end)] if end > start else []
        start = end
        needs.append(sorted(n - 1 - b for b in needed))
    return needs[::-1]
