"""`FabricState`: what changes about a fabric during a run (links down, degraded capacity).

A :class:`~hpnsim.fabrics.fabric.Fabric` never changes; a FabricState layered on it says
which directed links are down and which carry a capacity other than the fabric's. Routing
(``route(..., state=)``) never picks a down link where it has a choice, the engine takes
:attr:`FabricState.capacity` (0 on down links), and every cache keyed on a fabric also
keys on :attr:`FabricState.fingerprint`, equal for equal states whatever their history.

Links are named by id (a cable is two directed links, ``l`` and ``l ^ 1``), by a boolean
mask, by a node name (:meth:`Fabric.find_node`: every link into or out of that node, so a
switch goes down with all its links) or by a link name (:meth:`Fabric.link_name`).
"""

from __future__ import annotations

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.distances import frozen
from hpnsim.fabrics.fabric import capacity_values


class FabricState:
    """Links up or down and capacity overrides on one fabric; a mutable companion of it.

    Parameters
    ----------
    fabric : the :class:`~hpnsim.fabrics.fabric.Fabric` (every link up, its capacities).

    Attributes
    ----------
    version : int, bumped by every call that changes the state.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0, tor_uplinks=2,
    ...          aggs_per_plane=2)
    >>> s = FabricState(f)
    >>> uplink = int(f.link_ids([f.gpu_tor[0, 0]], [f.switch_nodes[-4]])[0])
    >>> s.set_down([uplink, uplink ^ 1]).down_links.size, s.version
    (2, 1)
    >>> float(s.capacity[uplink]), bool(s.up[uplink])
    (0.0, False)
    >>> before = s.fingerprint
    >>> s.set_up([uplink, uplink ^ 1]).fingerprint == FabricState(f).fingerprint
    True
    >>> s.set_capacity("pod0/seg0/tor-r0-p0", "100G").version, s.fingerprint == before
    (3, False)
    """

    def __init__(self, fabric):
        self.fabric = fabric
        self._up = np.ones(fabric.n_links, dtype=bool)
        self._capacity = np.array(fabric.link_capacity, dtype=np.float64)
        self.version = 0
        self._memo: dict[str, object] = {}

    def __repr__(self) -> str:
        return (f"FabricState({self.fabric!r}: {self.down_links.size} links down, "
                f"{self._overridden().size} capacities changed, version {self.version})")

    # ------------------------------------------------------------------ naming
    def links(self, links) -> np.ndarray:
        """Link ids (int64, ascending, unique) named by ``links`` (see the module docstring).

        >>> from hpnsim.fabrics import fat_tree
        >>> s = FabricState(fat_tree(4))
        >>> s.links("pod0/seg0/tor").size        # 2 hosts + 2 aggs, both directions
        8
        >>> s.links([3, 2, 3]).tolist()
        [2, 3]
        """
        if isinstance(links, str):
            return self._named(links)
        if isinstance(links, list | tuple) and any(isinstance(x, str) for x in links):
            parts = [self.links(x) for x in links]
            return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        return np.unique(self.fabric.check_link_ids(links))

    def _named(self, name: str) -> np.ndarray:
        f = self.fabric
        if "->" not in name:
            node = f.find_node(name)
            return np.flatnonzero((f.link_src == node) | (f.link_dst == node)).astype(np.int64)
        src, _, dst = name.partition("->")
        port = -1
        if dst.endswith("]") and "[port" in dst:
            dst, _, tail = dst.partition("[port")
            port = int(tail[:-1])
        a, b = f.find_node(src), f.find_node(dst)
        found = np.flatnonzero((f.link_src == a) & (f.link_dst == b)
                               & ((f.link_port == port) | (port < 0)))
        if not found.size:
            raise InputError("links", f"no link named {name!r}")
        return found.astype(np.int64)

    # --------------------------------------------------------------- changes
    def _changed(self) -> FabricState:
        self.version += 1
        self._memo.clear()
        return self

    def set_down(self, links) -> FabricState:
        """Take ``links`` down (capacity 0, routing avoids them); returns the state."""
        ids = self.links(links)
        if self._up[ids].any():
            self._up[ids] = False
            self._changed()
        return self

    def set_up(self, links) -> FabricState:
        """Bring ``links`` back up (at their current capacity); returns the state."""
        ids = self.links(links)
        if not self._up[ids].all():
            self._up[ids] = True
            self._changed()
        return self

    def set_capacity(self, links, bytes_per_s) -> FabricState:
        """Give ``links`` capacity ``bytes_per_s`` (a number >= 0, one per link, or a unit
        string such as ``"100G"``); a down link keeps it for when it comes back up.

        ``set_capacity(links, fabric.link_capacity[links])`` undoes an override.
        """
        ids = self.links(links)
        value = capacity_values(bytes_per_s, ids.size)
        if not np.array_equal(self._capacity[ids], value):
            self._capacity[ids] = value
            self._changed()
        return self

    def copy(self) -> FabricState:
        """An independent state with the same links down, capacities and version."""
        other = FabricState.__new__(FabricState)
        other.fabric = self.fabric
        other._up = self._up.copy()
        other._capacity = self._capacity.copy()
        other.version = self.version
        other._memo = {}
        return other

    # ---------------------------------------------------------------- views
    def _memoized(self, name: str, make):
        if name not in self._memo:
            self._memo[name] = make()
        return self._memo[name]

    @property
    def up(self) -> np.ndarray:
        """Read-only bool mask over links: True where the link is up."""
        return self._memoized("up", lambda: frozen(self._up.copy()))

    @property
    def down_links(self) -> np.ndarray:
        """Ids of the down links (int64, ascending, read-only)."""
        return self._memoized("down", lambda: frozen(np.flatnonzero(~self._up)))

    @property
    def capacity(self) -> np.ndarray:
        """Read-only capacity of every link (bytes/s): its override or the fabric's, 0 where
        down. What the engine should run on."""
        return self._memoized("capacity",
                              lambda: frozen(np.where(self._up, self._capacity, 0.0)))

    def _overridden(self) -> np.ndarray:
        return self._memoized("overridden", lambda: np.flatnonzero(
            self._capacity != self.fabric.link_capacity))

    @property
    def all_up(self) -> bool:
        """True when no link is down and no capacity differs from the fabric's."""
        return not self.down_links.size and not self._overridden().size

    @property
    def fingerprint(self) -> tuple:
        """Hashable summary, equal for equal states of the fabric whatever their history:
        the down link ids and the (link, capacity) pairs that differ from the fabric."""
        def make():
            changed = self._overridden()
            return (self.fabric.n_links, self.down_links.tobytes(), changed.tobytes(),
                    self._capacity[changed].tobytes())
        return self._memoized("fingerprint", make)
