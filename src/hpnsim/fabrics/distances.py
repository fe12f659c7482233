"""Hop counts between switches, over all switch-to-switch links or over a subset of them.

:class:`SwitchDistances` gives :class:`~hpnsim.fabrics.fabric.Fabric` its cached
``switch_nodes`` / ``switch_row`` / ``switch_graph`` / ``switch_distance``;
:func:`switch_distance_matrix` computes the same matrix over the links a mask keeps (the
links that are up in a :class:`~hpnsim.fabrics.state.FabricState`), which is what routing
under failures uses.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

#: hop count stored in :attr:`Fabric.switch_distance` when a switch cannot reach another
UNREACHABLE = np.iinfo(np.int16).max


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array`` (the caller's array stays writeable).

    >>> a = frozen(np.zeros(2))
    >>> a.flags.writeable
    False
    """
    view = array.view()
    view.flags.writeable = False
    return view


def switch_graph_of(fabric, link_mask: np.ndarray | None = None):
    """scipy.sparse CSR (switch rows x switch rows): links from one switch to another.

    ``link_mask`` (bool, ``n_links``) keeps only some links, e.g. those that are up.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> int(switch_graph_of(f).sum()), int(switch_graph_of(f, f.link_kind != 4).sum())
    (64, 32)
    """
    from scipy.sparse import csr_matrix

    rows = fabric.switch_row
    between = (rows[fabric.link_src] >= 0) & (rows[fabric.link_dst] >= 0)
    if link_mask is not None:
        between &= np.asarray(link_mask, dtype=bool)
    n = len(fabric.switch_nodes)
    graph = csr_matrix((np.ones(int(between.sum()), dtype=np.float32),
                        (rows[fabric.link_src[between]], rows[fabric.link_dst[between]])),
                       shape=(n, n))
    for array in (graph.data, graph.indices, graph.indptr):
        array.flags.writeable = False
    return graph


def switch_distance_matrix(fabric, link_mask: np.ndarray | None = None) -> np.ndarray:
    """Hop counts between all switches (int16, read-only) over the links ``link_mask`` keeps.

    Rows and columns follow ``fabric.switch_row``; :data:`UNREACHABLE` where no path.

    >>> from hpnsim.fabrics import fat_tree
    >>> f = fat_tree(4)
    >>> edge = f.switch_row[f.gpu_tor[0, 0]]
    >>> up = np.ones(f.n_links, dtype=bool)
    >>> up[f.link_ids([f.gpu_tor[0, 0]] * 2, f.neighbors(f.gpu_tor[0, 0])[-2:])] = False
    >>> int(switch_distance_matrix(f)[edge].max()), int(switch_distance_matrix(f, up)[edge].max())
    (4, 32767)
    """
    from scipy.sparse.csgraph import shortest_path

    graph = fabric.switch_graph if link_mask is None else switch_graph_of(fabric, link_mask)
    n = graph.shape[0]
    out = np.empty((n, n), dtype=np.int16)
    chunk = 512
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        dist = shortest_path(graph, method="D", unweighted=True,
                             indices=np.arange(start, stop))
        dist[~np.isfinite(dist)] = UNREACHABLE
        out[start:stop] = dist
    return frozen(out)


class SwitchDistances:
    """Switch hop counts of a fabric, computed on first use and cached (mixin of Fabric)."""

    @cached_property
    def switch_nodes(self) -> np.ndarray:
        """Switch node ids; row ``i`` of :attr:`switch_distance` is ``switch_nodes[i]``."""
        return frozen(self.switches())

    @cached_property
    def switch_row(self) -> np.ndarray:
        """Per node, its row in :attr:`switch_distance` (-1 for non-switches)."""
        row = np.full(self.n_nodes, -1, dtype=np.int32)
        row[self.switch_nodes] = np.arange(len(self.switch_nodes), dtype=np.int32)
        return frozen(row)

    @cached_property
    def switch_graph(self):
        """scipy.sparse CSR (switch rows x switch rows): number of links from one to the other."""
        return switch_graph_of(self)

    def switch_distance_from(self, switch: int) -> np.ndarray:
        """Hop counts from one switch node to every switch row (int16), without the full matrix."""
        from scipy.sparse.csgraph import breadth_first_order

        graph = self.switch_graph
        dist = np.full(graph.shape[0], UNREACHABLE, dtype=np.int16)
        source = int(self.switch_row[switch])
        order, parent = breadth_first_order(graph, source, directed=True)
        dist[source] = 0
        for node in order[1:]:  # BFS order: parents come first
            dist[node] = dist[parent[node]] + 1
        return dist

    @cached_property
    def switch_distance(self) -> np.ndarray:
        """Hop counts between switches over switch-to-switch links only (int16, read-only).

        ``switch_distance[switch_row[a], switch_row[b]]``; :data:`UNREACHABLE` when there is
        no path. Computed on first use by breadth-first search (scipy.sparse.csgraph).

        >>> from hpnsim.fabrics import fat_tree
        >>> f = fat_tree(4)
        >>> int(f.switch_distance.max())   # edge -> agg -> core -> agg -> edge
        4
        """
        return switch_distance_matrix(self)
