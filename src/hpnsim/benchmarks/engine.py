"""Engine benchmarks on a k-ary fat-tree with random up-down ECMP paths.

The fat-tree link ids and paths are made by index arithmetic here, so the engine suite does
not depend on the fabric builders. k=56 gives 43,904 hosts and 263,424 directed links.
Numba compilation is done (and timed) once up front, on a tiny problem, so the figures are
run times.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from hpnsim.benchmarks import Measurement, peak_rss_mib
from hpnsim.benchmarks import timed as _timed

LINE_RATE = 50e9  # 400 Gbps in bytes/s


class FatTreeIds:
    """Directed link ids of a k-ary fat-tree: host<->edge, edge<->agg, agg<->core.

    >>> ft = FatTreeIds(4)
    >>> ft.n_hosts, ft.n_links
    (16, 96)
    >>> p = ft.paths(np.array([0]), np.array([15]), np.random.default_rng(0))
    >>> len(p[1])   # up to the core and down: six links
    6
    """

    def __init__(self, k: int):
        self.k = k
        self.half = k // 2
        self.n_hosts = k * self.half * self.half
        self.n_edges = k * self.half
        self.n_aggs = k * self.half
        h, e = self.n_hosts, self.n_edges * self.half
        self.host_up, self.host_down = 0, h
        self.edge_up, self.edge_down = 2 * h, 2 * h + e
        self.agg_up, self.agg_down = 2 * h + 2 * e, 2 * h + 3 * e
        self.n_links = 2 * h + 4 * e

    def paths(self, src: np.ndarray, dst: np.ndarray, rng: np.random.Generator):
        """CSR (ptr, links) of random up-down ECMP paths from hosts ``src`` to ``dst``."""
        half = self.half
        n = src.size
        e1, e2 = src // half, dst // half
        pod1, pod2 = e1 // half, e2 // half
        agg_j = rng.integers(0, half, n)
        core_c = rng.integers(0, half, n)
        a1, a2 = pod1 * half + agg_j, pod2 * half + agg_j
        hops = np.full(n, 6)
        hops[pod1 == pod2] = 4
        hops[e1 == e2] = 2
        table = np.stack([
            self.host_up + src,
            self.edge_up + e1 * half + agg_j,
            self.agg_up + a1 * half + core_c,
            self.agg_down + a2 * half + core_c,
            self.edge_down + e2 * half + agg_j,
            self.host_down + dst,
        ], axis=1)
        keep = np.ones((n, 6), dtype=bool)
        keep[hops < 6, 2:4] = False
        keep[hops < 4, 1:5] = False
        ptr = np.zeros(n + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(hops)
        return ptr, table[keep].astype(np.int64)


def timed(name, func, target_seconds=None, **details):
    """:func:`hpnsim.benchmarks.timed`, plus the process CPU seconds (other load inflates
    wall time on a shared machine)."""
    cpu = time.process_time()
    m, result = _timed(name, func, target_seconds, **details)
    m.details["cpu_seconds"] = round(time.process_time() - cpu, 3)
    return m, result


class _Paths:
    def __init__(self, ptr, links):
        self.ptr, self.links, self.weight = ptr, links, np.ones(links.size)


def _random_pairs(ft: FatTreeIds, n: int, rng):
    src = rng.integers(0, ft.n_hosts, n)
    dst = (src + rng.integers(1, ft.n_hosts, n)) % ft.n_hosts
    return src, dst


def _warm_up() -> float:
    from hpnsim.engine import TaskGraph, maxmin_rates, run_flows, simulate

    start = time.perf_counter()
    maxmin_rates([1.0, 2.0], sp.csr_matrix([[1.0, 1.0], [0.0, 1.0]]), priority=[0, 1])
    run_flows([1.0], [[0], [0]], [1.0, 2.0])
    g = TaskGraph()
    g.add_delay(1.0, deps=[g.add_transfer([0], 1.0, 1.0, priority=1)])
    g.add_transfer([0], 1.0, 1.0)
    simulate(g, [1.0], capacity_events=[(0.5, 0, 0.0), (0.7, 0, 1.0)])
    return time.perf_counter() - start


def _solve(ft, n_flows, seed):
    from hpnsim.engine import maxmin_rates

    rng = np.random.default_rng(seed)
    src, dst = _random_pairs(ft, n_flows, rng)
    ptr, links = ft.paths(src, dst, rng)
    usage = sp.csr_matrix((np.ones(links.size), links, ptr), shape=(n_flows, ft.n_links))
    capacity = np.full(ft.n_links, LINE_RATE)
    return lambda: maxmin_rates(capacity, usage)


def _flows(ft, n_flows, seed):
    from hpnsim.engine import run_flows

    rng = np.random.default_rng(seed)
    src, dst = _random_pairs(ft, n_flows, rng)
    ptr, links = ft.paths(src, dst, rng)
    sizes = rng.choice([64e3, 1e6, 16e6, 256e6], n_flows)
    capacity = np.full(ft.n_links, LINE_RATE)
    return lambda: run_flows(capacity, _Paths(ptr, links), sizes)


def _group_chain(ft, members, steps, seed):
    from hpnsim.engine import TaskGraph, simulate

    rng = np.random.default_rng(seed)
    ring = rng.permutation(ft.n_hosts)[:members]
    capacity = np.full(ft.n_links, LINE_RATE)

    def build_and_run():
        graph = TaskGraph()
        prev = ()
        for step in range(steps):
            ptr, links = ft.paths(ring, np.roll(ring, -1), rng)
            prev = [graph.add_transfer_paths(_Paths(ptr, links), 16e6, latency=5e-6,
                                             deps=prev, name=f"step{step}")]
        return simulate(graph, capacity)

    return build_and_run


def run(quick: bool) -> list[Measurement]:
    """Solve, run_flows and group-chain figures (k=56 full, k=16 quick)."""
    k = 16 if quick else 56
    ft = FatTreeIds(k)
    out = [Measurement("engine: numba compile + warm-up (tiny inputs)", _warm_up(),
                       peak_rss_mib=peak_rss_mib())]
    topo = dict(k=k, hosts=ft.n_hosts, links=ft.n_links)
    for n_flows, target in ((10**4, None), (10**5, None), (10**6, 5.0)):
        if quick and n_flows > 10**5:
            continue
        m, rates = timed(f"engine: max-min solve, {n_flows:,} flows", _solve(ft, n_flows, 1),
                         None if quick else target, flows=n_flows, **topo)
        m.details["min_rate"] = float(rates.min())
        out.append(m)
    n_flows = 2000 if quick else 15360
    m, finish = timed(f"engine: run_flows, {n_flows:,} flows, mixed sizes",
                      _flows(ft, n_flows, 2), None if quick else 2.0,
                      flows=n_flows, sizes="64KB/1MB/16MB/256MB", **topo)
    m.details["makespan_s"] = float(finish.max())
    out.append(m)
    members, steps = (1024, 8) if quick else (15360, 32)
    m, result = timed(f"engine: chain of {steps} transfer groups x {members:,} members",
                      _group_chain(ft, members, steps, 3), None,
                      members=members, steps=steps, **topo)
    m.details["makespan_s"] = result.makespan
    out.append(m)
    return out
