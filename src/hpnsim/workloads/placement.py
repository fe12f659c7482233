"""Rank -> GPU placement and the communication groups of each parallel dimension.

Ranks are numbered Megatron-style with TP fastest, then CP, then DP, then PP
(``order=("tp", "cp", "dp", "pp")``), and rank ``r`` runs on ``gpus[r]`` (by default GPU index
``r``; GPU index ``g = host * gpus_per_host + local``, see docs/design.md). With TP filling a
host this puts TP inside the host (NVLink) and PP and DP across hosts, and every DP group
shares one local index, i.e. one rail (rail-aligned). When TP (x CP) is smaller than a host,
the default order puts PP next, so that a host holds several pipeline stages and DP peers
still sit ``gpus_per_host`` apart on the same rail. A layout's ``rank_order`` ``tp-cp-pp-dp``
(Megatron-Core's ``--use-tp-pp-dp-mapping``) numbers PP before DP: a pipeline's stages sit
on consecutive hosts, and a DP group spans the pipelines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpnsim.errors import InputError
from hpnsim.workloads.layout import Layout

DIMENSIONS = ("tp", "cp", "dp", "pp")
GROUP_KINDS = ("tp", "cp", "dp", "pp", "ep", "edp", "dp_cp")


def default_order(layout: Layout, gpus_per_host: int) -> tuple[str, ...]:
    """Dimension order (fastest first) that keeps TP in a host and DP groups on one rail.

    >>> default_order(Layout(tp=8, pp=2, dp=2), 8)
    ('tp', 'cp', 'dp', 'pp')
    >>> default_order(Layout(tp=4, pp=2, dp=2), 8)
    ('tp', 'cp', 'pp', 'dp')
    """
    inner = layout.tp * layout.cp
    if inner % gpus_per_host and (inner * layout.pp) % gpus_per_host == 0:
        return ("tp", "cp", "pp", "dp")
    return ("tp", "cp", "dp", "pp")


@dataclass(frozen=True)
class Placement:
    """Where each rank of a :class:`Layout` runs, and its communication groups.

    Build with :func:`place`. ``gpu_of_rank[r]`` is rank ``r``'s GPU index; ``coord[d][r]`` its
    coordinate along dimension ``d``.

    Examples
    --------
    >>> pl = place(Layout(tp=2, pp=2, dp=2), gpus_per_host=2)
    >>> pl.groups("tp").tolist()
    [[0, 1], [2, 3], [4, 5], [6, 7]]
    >>> pl.groups("dp").tolist()
    [[0, 2], [1, 3], [4, 6], [5, 7]]
    >>> pl.groups("pp").tolist()
    [[0, 4], [1, 5], [2, 6], [3, 7]]
    >>> pl.rail_aligned
    True
    """

    layout: Layout
    gpus_per_host: int
    order: tuple[str, ...]
    gpu_of_rank: np.ndarray
    coord: dict[str, np.ndarray] = field(repr=False)
    _grid: np.ndarray = field(repr=False)  # ranks as an array indexed [pp, dp, cp, tp]

    @property
    def n_ranks(self) -> int:
        """Number of ranks (= GPUs) of the job."""
        return int(self.gpu_of_rank.size)

    def host_of(self, gpus) -> np.ndarray:
        """Host index of GPU indices."""
        return np.asarray(gpus) // self.gpus_per_host

    def local_of(self, gpus) -> np.ndarray:
        """Local index (rail) of GPU indices inside their host."""
        return np.asarray(gpus) % self.gpus_per_host

    def groups(self, kind: str) -> np.ndarray:
        """GPU-index groups of one dimension, shape ``(n_groups, group_size)``, int32.

        ``kind``: ``tp``, ``cp``, ``dp``, ``pp`` (a pipeline, stage order), ``ep`` (expert
        parallel: ``ep`` consecutive DP ranks), ``edp`` (replicas of one expert shard:
        DP ranks with the same EP rank), ``dp_cp`` (gradient reduction group: DP x CP).
        Members are in rank order, which is the ring order collectives should use. Rows are
        ordered by the other coordinates, slowest first in ``(pp, dp, cp, tp)`` order
        (e.g. ``groups("pp")`` reshapes to ``(dp, cp, tp, pp)``) — a stable contract.

        >>> place(Layout(dp=4, ep=2), gpus_per_host=4).groups("ep").tolist()
        [[0, 1], [2, 3]]
        >>> place(Layout(dp=4, ep=2), gpus_per_host=4).groups("edp").tolist()
        [[0, 2], [1, 3]]
        """
        lay = self.layout
        grid = self._grid  # axes: pp, dp, cp, tp
        if kind in ("tp", "cp", "dp", "pp"):
            axis = {"pp": 0, "dp": 1, "cp": 2, "tp": 3}[kind]
            ranks = np.moveaxis(grid, axis, -1).reshape(-1, grid.shape[axis])
        elif kind in ("ep", "edp"):
            split = grid.reshape(lay.pp, lay.edp, lay.ep, lay.cp, lay.tp)
            axis = 2 if kind == "ep" else 1
            ranks = np.moveaxis(split, axis, -1).reshape(-1, split.shape[axis])
        elif kind == "dp_cp":
            ranks = np.moveaxis(grid, 3, 1).reshape(lay.pp * lay.tp, lay.dp * lay.cp)
        else:
            raise InputError("group", f"one of {', '.join(GROUP_KINDS)}, got {kind!r}")
        return self.gpu_of_rank[ranks].astype(np.int32)

    def pp_neighbours(self) -> np.ndarray:
        """Forward send pairs ``(src_gpu, dst_gpu)`` between consecutive pipeline stages.

        With virtual stages (interleaved) the last rank also sends to the first (next chunk).

        >>> place(Layout(pp=3, global_batch=3), gpus_per_host=1).pp_neighbours().tolist()
        [[0, 1], [1, 2]]
        """
        pipes = self.groups("pp")
        pairs = [pipes[:, :-1], pipes[:, 1:]]
        src, dst = (p.reshape(-1) for p in pairs)
        if self.layout.vpp > 1:
            src = np.concatenate([src, pipes[:, -1]])
            dst = np.concatenate([dst, pipes[:, 0]])
        return np.stack([src, dst], axis=1).astype(np.int32)

    @property
    def tp_in_host(self) -> bool:
        """True when every TP group sits inside one host."""
        hosts = self.host_of(self.groups("tp"))
        return bool((hosts == hosts[:, :1]).all())

    @property
    def rail_aligned(self) -> bool:
        """True when every DP group's members share one local index (rail)."""
        local = self.local_of(self.groups("dp"))
        return bool((local == local[:, :1]).all())

    def to_dict(self) -> dict:
        """Placement summary plus the group arrays."""
        out = {"order": list(self.order), "gpus_per_host": self.gpus_per_host,
               "gpu_of_rank": self.gpu_of_rank, "tp_in_host": self.tp_in_host,
               "rail_aligned": self.rail_aligned}
        for kind in GROUP_KINDS:
            out[f"{kind}_groups"] = self.groups(kind)
        return out


def place(layout: Layout, gpus_per_host: int = 8, *, gpus=None, order=None,
          allow_cross_host_tp: bool = False) -> Placement:
    """Map the ranks of ``layout`` to GPU indices.

    Parameters
    ----------
    layout : Layout
    gpus_per_host : int
        GPUs per host of the fabric (its NVLink domain).
    gpus : array of int, optional
        GPU indices the job occupies, in rank order (default ``0 .. n_gpus-1``).
    order : sequence of str, optional
        Rank numbering, fastest dimension first, a permutation of ``tp, cp, dp, pp``
        (default: the layout's ``rank_order``, else :func:`default_order`).
    allow_cross_host_tp : bool
        Accept TP groups that span hosts.

    Examples
    --------
    >>> pl = place(Layout(tp=8, pp=8, dp=16, global_batch=2048))
    >>> pl.groups("dp").shape, pl.groups("dp")[0, :3].tolist()
    ((64, 16), [0, 8, 16])
    >>> pl.tp_in_host, pl.rail_aligned
    (True, True)
    >>> pl = place(Layout(tp=8, pp=4, dp=2, rank_order="tp-cp-pp-dp"))
    >>> pl.groups("pp")[0].tolist(), pl.groups("dp")[0].tolist()
    ([0, 8, 16, 24], [0, 32])
    >>> place(Layout(tp=4, dp=2), gpus_per_host=2)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: tp: TP group [0, 1, 2, 3] spans hosts [0, 1] (2 GPUs per host); use tp <= 2 or allow_cross_host_tp
    """
    if not isinstance(gpus_per_host, int | np.integer) or gpus_per_host < 1:
        raise InputError("gpus_per_host", f"must be a positive integer, got {gpus_per_host!r}")
    if order is None:
        order = (tuple(layout.rank_order.split("-")) if layout.rank_order
                 else default_order(layout, gpus_per_host))
    order = tuple(order)
    if sorted(order) != sorted(DIMENSIONS):
        raise InputError("order", f"a permutation of {', '.join(DIMENSIONS)}, got {order!r}")
    n = layout.n_gpus
    if gpus is None:
        gpus = np.arange(n, dtype=np.int64)
    gpus = np.asarray(gpus, dtype=np.int64)
    if gpus.shape != (n,):
        raise InputError("gpus", f"need exactly {n} GPU indices (tp*cp*pp*dp), got {gpus.size}")
    if gpus.min(initial=0) < 0 or np.unique(gpus).size != n:
        raise InputError("gpus", "GPU indices must be distinct and >= 0")

    sizes = {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp, "pp": layout.pp}
    ranks = np.arange(n, dtype=np.int64)
    coord, stride = {}, 1
    for dim in order:
        coord[dim] = (ranks // stride) % sizes[dim]
        stride *= sizes[dim]
    grid = np.empty((layout.pp, layout.dp, layout.cp, layout.tp), dtype=np.int64)
    grid[coord["pp"], coord["dp"], coord["cp"], coord["tp"]] = ranks
    placement = Placement(layout, int(gpus_per_host), order, gpus, coord, grid)
    if not allow_cross_host_tp:
        tp_groups = placement.groups("tp")
        hosts = placement.host_of(tp_groups)
        bad = np.flatnonzero((hosts != hosts[:, :1]).any(axis=1))
        if bad.size:
            group = tp_groups[bad[0]]
            raise InputError("tp", f"TP group {group.tolist()} spans hosts "
                                   f"{np.unique(hosts[bad[0]]).tolist()} ({gpus_per_host} GPUs per "
                                   f"host); use tp <= {gpus_per_host} or allow_cross_host_tp")
    return placement
