"""A training job as a cluster scheduler sees it: GPUs, computation, and bytes per link.

Crux (SIGCOMM 2024, reference/crux.md) reduces a job to what decides its share of the
network: it does ``W_j`` of computation per iteration (its GPU count times its compute
time, in GPU-seconds here) and puts ``M_{j,e}`` bytes per iteration on each link ``e``. On
links of bandwidth ``B_e`` its uncontended transfer time is ``t_j = max_e M_{j,e} / B_e``
(the bottleneck link), and its *GPU intensity* is ``I_j = W_j / t_j``: the computation the
cluster gets back per second of this job's communication.

A job's communication per iteration is modelled as one coupled transfer (as fast as its
slowest link, like a ring collective): it may start once a fraction ``comm_start`` of the
compute is done (1.0: after compute; 0.5: half-way through, overlapping the second half)
and the next iteration starts when both compute and communication are done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hpnsim.errors import InputError


def _positive(value, name: str, *, allow_zero: bool = False) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError) as exc:
        raise InputError(name, f"must be a number, got {value!r}") from exc
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InputError(name, f"must be finite and {bound}, got {value!r}")
    return value


@dataclass(frozen=True)
class SchedJob:
    """One job's per-iteration demand, as schedulers see it.

    Attributes
    ----------
    name : str
    gpus : int
        GPUs the job holds.
    compute_time : float
        Seconds of computation per iteration.
    links : int64 array
        Link ids its communication crosses (each once).
    link_bytes : float64 array
        ``M_{j,e}``: bytes per iteration on ``links[i]``.
    comm_start : float
        Fraction of the compute after which communication may start (1.0: after it).
    flows : Paths or None
        The connections behind ``link_bytes`` (source/destination GPUs), for path selection.
    flow_bytes : float64 array
        Bytes per iteration of each flow of ``flows``.

    Examples
    --------
    Worked example 1 of the Crux paper, job 1: 10 GPUs, 2 s of compute, 2 s of transfer on
    a 1 B/s link (2 bytes):

    >>> j = SchedJob("job1", gpus=10, compute_time=2.0, links=[0], link_bytes=[2.0])
    >>> j.work, j.transfer_time([1.0]), j.intensity([1.0])
    (20.0, 2.0, 10.0)
    """

    name: str
    gpus: int
    compute_time: float
    links: np.ndarray
    link_bytes: np.ndarray
    comm_start: float = 1.0
    flows: object = None
    flow_bytes: np.ndarray = field(default=None)

    def __post_init__(self):
        label = f"job {self.name!r}"
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int | np.integer) \
                or self.gpus < 1:
            raise InputError("gpus", f"{label}: must be an integer >= 1, got {self.gpus!r}")
        object.__setattr__(self, "gpus", int(self.gpus))
        object.__setattr__(self, "compute_time",
                           _positive(self.compute_time, "compute_time", allow_zero=True))
        start = _positive(self.comm_start, "comm_start", allow_zero=True)
        if start > 1.0:
            raise InputError("comm_start", f"{label}: a fraction of the compute in [0, 1], "
                                           f"got {start!r}")
        object.__setattr__(self, "comm_start", start)
        links = np.atleast_1d(np.asarray(self.links, dtype=np.int64))
        size = np.atleast_1d(np.asarray(self.link_bytes, dtype=np.float64))
        if links.shape != size.shape or links.ndim != 1:
            raise InputError("link_bytes", f"{label}: needs one value per link "
                                           f"({links.size}), got {size.size}")
        if size.size and (not np.all(np.isfinite(size)) or size.min() < 0):
            raise InputError("link_bytes", f"{label}: must be finite and >= 0")
        if links.size and links.min() < 0:
            raise InputError("links", f"{label}: link ids are >= 0, got {int(links.min())}")
        if np.unique(links).size != links.size:   # merge repeated links
            links, inverse = np.unique(links, return_inverse=True)
            size = np.bincount(inverse, weights=size, minlength=links.size)
        keep = size > 0
        links, size = links[keep], size[keep]
        links.setflags(write=False)
        size.setflags(write=False)
        object.__setattr__(self, "links", links)
        object.__setattr__(self, "link_bytes", size)
        if self.flow_bytes is not None:
            fb = np.asarray(self.flow_bytes, dtype=np.float64)
            fb.setflags(write=False)
            object.__setattr__(self, "flow_bytes", fb)

    @classmethod
    def from_paths(cls, name: str, gpus: int, compute_time: float, paths, flow_bytes,
                   n_links: int, comm_start: float = 1.0) -> SchedJob:
        """A job whose flows (``Paths``, one per connection) each carry ``flow_bytes``.

        ``M_{j,e}`` is the sum over the flows crossing ``e`` of their bytes (times the
        path weight, for sprayed flows).

        >>> from hpnsim.routing import Paths
        >>> p = Paths.from_lists([[0, 1], [1, 2]], src=[0, 1], dst=[2, 3])
        >>> j = SchedJob.from_paths("a", 2, 1.0, p, [4.0, 6.0], n_links=3)
        >>> j.links.tolist(), j.link_bytes.tolist()
        ([0, 1, 2], [4.0, 10.0, 6.0])
        """
        sizes = np.broadcast_to(np.asarray(flow_bytes, dtype=np.float64), (paths.n_flows,))
        load = paths.link_load(n_links, sizes=sizes)
        links = np.flatnonzero(load)
        return cls(name, gpus, compute_time, links, load[links], comm_start,
                   flows=paths, flow_bytes=np.array(sizes))

    def with_paths(self, paths, n_links: int) -> SchedJob:
        """The same job with its flows moved to ``paths`` (same flows, same bytes).

        >>> from hpnsim.routing import Paths
        >>> j = SchedJob.from_paths("a", 1, 1.0, Paths.from_lists([[0]]), [5.0], 2)
        >>> j.with_paths(Paths.from_lists([[1]]), 2).links.tolist()
        [1]
        """
        if self.flows is None:
            raise InputError("flows", f"job {self.name!r} was built without flows")
        if paths.n_flows != self.flows.n_flows:
            raise InputError("paths", f"job {self.name!r}: needs {self.flows.n_flows} "
                                      f"paths, got {paths.n_flows}")
        return SchedJob.from_paths(self.name, self.gpus, self.compute_time, paths,
                                   self.flow_bytes, n_links, self.comm_start)

    @property
    def work(self) -> float:
        """``W_j``: computation per iteration in GPU-seconds (GPUs x compute time)."""
        return self.gpus * self.compute_time

    def transfer_time(self, capacity) -> float:
        """``t_j = max_e M_{j,e} / B_e`` (seconds; 0 for a job with no traffic).

        >>> SchedJob("a", 1, 1.0, [0, 1], [6.0, 6.0]).transfer_time([3.0, 2.0])
        3.0
        """
        if not self.links.size:
            return 0.0
        cap = np.asarray(capacity, dtype=np.float64)[self.links]
        if np.any(cap <= 0):
            return math.inf
        return float(np.max(self.link_bytes / cap))

    def bottleneck(self, capacity) -> int:
        """The link id of ``t_j`` (-1 for a job with no traffic).

        >>> SchedJob("a", 1, 1.0, [4, 7], [6.0, 6.0]).bottleneck([1.0] * 8 )
        4
        """
        if not self.links.size:
            return -1
        cap = np.asarray(capacity, dtype=np.float64)[self.links]
        return int(self.links[np.argmax(self.link_bytes / cap)])

    def intensity(self, capacity) -> float:
        """``I_j = W_j / t_j`` (GPU-seconds of computation per second of transfer).

        A job with no traffic has infinite intensity (it never waits for the network).

        >>> SchedJob("b", 10, 1.0, [0], [1.0]).intensity([1.0])
        10.0
        """
        t = self.transfer_time(capacity)
        return math.inf if t == 0 else self.work / t

    def iteration_time(self, capacity) -> float:
        """Uncontended iteration time: ``max(compute, comm_start x compute + t_j)``.

        >>> SchedJob("b", 2, 4.0, [0], [1.0], comm_start=0.5).iteration_time([1.0])
        4.0
        """
        t = self.transfer_time(capacity)
        if t == 0:
            return self.compute_time
        return max(self.compute_time, self.comm_start * self.compute_time + t)

    def total_bytes(self) -> float:
        """Bytes per iteration summed over links (how Crux picks the reference job).

        >>> SchedJob("b", 2, 4.0, [0, 1], [1.0, 2.0]).total_bytes()
        3.0
        """
        return float(self.link_bytes.sum())


def job_array(jobs, field_name: str = "jobs") -> list[SchedJob]:
    """Validate a sequence of :class:`SchedJob` (non-empty, distinct names).

    >>> len(job_array([SchedJob("a", 1, 1.0, [], [])]))
    1
    """
    jobs = list(jobs)
    for j in jobs:
        if not isinstance(j, SchedJob):
            raise InputError(field_name, f"must be SchedJob objects, got {type(j).__name__}")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(field_name, f"job names must be distinct, {dup!r} repeats")
    return jobs
