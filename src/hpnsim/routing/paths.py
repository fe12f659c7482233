"""`Paths`: the routes of a set of flows as flat CSR arrays (what routing hands the engine).

Flow ``i`` crosses links ``links[ptr[i]:ptr[i+1]]`` (in order, from source to destination),
loading each with ``weight`` times its rate: 1.0 for a single path, the fraction of its
packets for spraying (a sprayed flow lists every link any of its packets may cross).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from hpnsim.errors import InputError


def _ints(values, dtype, n: int) -> np.ndarray:
    if values is None:
        return np.full(n, -1, dtype=dtype)
    return np.asarray(values, dtype=dtype).reshape(n)


@dataclass(eq=False)
class Paths:
    """Routes of ``n_flows`` flows in CSR form.

    Attributes
    ----------
    ptr : int64 ``(n_flows + 1,)``; flow i owns entries ``ptr[i]:ptr[i+1]``.
    links : int32 link ids, source to destination.
    weight : float64, one per entry (1.0 except for spraying).
    src, dst : int32 GPU indices of each flow (-1 if unknown).
    port : int8 NIC port each flow leaves on (-1 inside a host or when sprayed over ports).
    sport : int32 UDP source port hashed by ECMP (-1 inside a host).
    policy : name of the routing policy that produced the paths.

    Examples
    --------
    >>> p = Paths.from_lists([[4, 7, 9], [4, 8]])
    >>> p.n_flows, p.path(1).tolist(), p.hop_counts().tolist()
    (2, [4, 8], [3, 2])
    >>> p.link_load(10).tolist()
    [0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    """

    ptr: np.ndarray
    links: np.ndarray
    weight: np.ndarray
    src: np.ndarray = field(default=None)
    dst: np.ndarray = field(default=None)
    port: np.ndarray = field(default=None)
    sport: np.ndarray = field(default=None)
    policy: str = ""

    def __post_init__(self):
        self.ptr = np.asarray(self.ptr, dtype=np.int64)
        self.links = np.asarray(self.links, dtype=np.int32)
        self.weight = np.asarray(self.weight, dtype=np.float64)
        n = self.ptr.shape[0] - 1
        if n < 0 or self.ptr[0] != 0 or self.ptr[-1] != self.links.shape[0]:
            raise InputError("ptr", "must start at 0 and end at len(links)")
        if self.weight.shape != self.links.shape:
            raise InputError("weight", "must have one entry per link entry")
        self.src = _ints(self.src, np.int32, n)
        self.dst = _ints(self.dst, np.int32, n)
        self.port = _ints(self.port, np.int8, n)
        self.sport = _ints(self.sport, np.int32, n)

    # --- construction -----------------------------------------------------------------
    @classmethod
    def from_lists(cls, paths: Sequence[Sequence[int]], weights=None, **attrs) -> Paths:
        """Build from a list of link lists (tests, hand-made routes).

        >>> Paths.from_lists([[1], [], [2, 3]]).ptr.tolist()
        [0, 1, 1, 3]
        """
        lengths = np.array([len(p) for p in paths], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(lengths)])
        links = np.concatenate([np.asarray(p, dtype=np.int32) for p in paths]) \
            if len(paths) else np.zeros(0, np.int32)
        weight = np.ones(links.shape[0]) if weights is None else \
            np.concatenate([np.asarray(w, dtype=np.float64) for w in weights])
        return cls(ptr, links, weight, **attrs)

    @classmethod
    def from_padded(cls, table: np.ndarray, **attrs) -> Paths:
        """Build from an ``(n_flows, width)`` table of link ids padded with -1.

        >>> Paths.from_padded(np.array([[3, -1, 5], [-1, -1, -1]])).links.tolist()
        [3, 5]
        """
        table = np.asarray(table)
        mask = table >= 0
        ptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))])
        links = table[mask]
        return cls(ptr, links, np.ones(links.shape[0]), **attrs)

    @classmethod
    def concat(cls, parts: Sequence[Paths]) -> Paths:
        """Concatenate path sets (flows of ``parts[0]`` first).

        >>> a = Paths.from_lists([[1, 2]]); b = Paths.from_lists([[3]])
        >>> Paths.concat([a, b]).ptr.tolist()
        [0, 2, 3]
        """
        if not parts:
            return cls.from_lists([])
        offsets = np.cumsum([0] + [p.links.shape[0] for p in parts[:-1]])
        ptr = np.concatenate([[0]] + [p.ptr[1:] + off for p, off in zip(parts, offsets,
                                                                         strict=True)])
        joined = {name: np.concatenate([getattr(p, name) for p in parts])
                  for name in ("links", "weight", "src", "dst", "port", "sport")}
        policies = {p.policy for p in parts}
        return cls(ptr, policy=policies.pop() if len(policies) == 1 else "mixed", **joined)

    # --- access ---------------------------------------------------------------------------
    @property
    def n_flows(self) -> int:
        return self.ptr.shape[0] - 1

    def __len__(self) -> int:
        return self.n_flows

    def path(self, i: int) -> np.ndarray:
        """Link ids of flow ``i``, source to destination."""
        return self.links[self.ptr[i]:self.ptr[i + 1]]

    def path_weight(self, i: int) -> np.ndarray:
        """Weights of flow ``i``'s entries."""
        return self.weight[self.ptr[i]:self.ptr[i + 1]]

    def hop_counts(self) -> np.ndarray:
        """Number of link entries of each flow."""
        return np.diff(self.ptr)

    def flow_of_entry(self) -> np.ndarray:
        """Flow index of every entry of ``links``.

        >>> Paths.from_lists([[1, 2], [3]]).flow_of_entry().tolist()
        [0, 0, 1]
        """
        return np.repeat(np.arange(self.n_flows, dtype=np.int64), self.hop_counts())

    def subset(self, flows) -> Paths:
        """The paths of the selected flows (index array or boolean mask), in that order.

        >>> Paths.from_lists([[1], [2, 3], [4]]).subset([2, 1]).links.tolist()
        [4, 2, 3]
        """
        flows = np.arange(self.n_flows)[np.asarray(flows)]
        lengths = self.hop_counts()[flows]
        ptr = np.concatenate([[0], np.cumsum(lengths)])
        starts = np.repeat(self.ptr[flows] - ptr[:-1], lengths)
        entries = starts + np.arange(ptr[-1])
        return Paths(ptr, self.links[entries], self.weight[entries], self.src[flows],
                     self.dst[flows], self.port[flows], self.sport[flows], self.policy)

    # --- loads ----------------------------------------------------------------------------
    def link_load(self, n_links: int, sizes=None) -> np.ndarray:
        """Load of every link: sum of ``weight`` (flows) or ``weight * sizes[flow]`` (bytes).

        >>> Paths.from_lists([[0, 1], [1]]).link_load(3, sizes=[10.0, 5.0]).tolist()
        [10.0, 15.0, 0.0]
        """
        w = self.weight
        if sizes is not None:
            sizes = np.broadcast_to(np.asarray(sizes, dtype=np.float64), (self.n_flows,))
            w = w * sizes[self.flow_of_entry()]
        return np.bincount(self.links, weights=w, minlength=n_links).astype(np.float64)

    def link_usage(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct links and the summed weight on each: a transfer group's usage vector.

        >>> links, usage = Paths.from_lists([[5, 2], [5]]).link_usage()
        >>> links.tolist(), usage.tolist()
        ([2, 5], [1.0, 2.0])
        """
        links, inverse = np.unique(self.links, return_inverse=True)
        return links.astype(np.int32), np.bincount(inverse, weights=self.weight,
                                                   minlength=links.shape[0])

    def usage_matrix(self, n_links: int) -> sp.csr_matrix:
        """Flows x links sparse usage (duplicate entries summed), for the max-min solver.

        >>> Paths.from_lists([[0, 2], [2]]).usage_matrix(3).toarray().tolist()
        [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
        """
        matrix = sp.csr_matrix((self.weight, self.links, self.ptr),
                               shape=(self.n_flows, n_links))
        matrix.sum_duplicates()
        return matrix

    def same_routes(self, other: Paths) -> bool:
        """True when both sets have identical links and weights for every flow."""
        return (np.array_equal(self.ptr, other.ptr) and np.array_equal(self.links, other.links)
                and np.array_equal(self.weight, other.weight))

    def to_dict(self) -> dict:
        """Plain lists, for JSON."""
        return {"policy": self.policy, "ptr": self.ptr.tolist(), "links": self.links.tolist(),
                "weight": self.weight.tolist(), "src": self.src.tolist(),
                "dst": self.dst.tolist(), "port": self.port.tolist(),
                "sport": self.sport.tolist()}
