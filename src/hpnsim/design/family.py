"""The design family: which mechanisms a design uses, and the designs to enumerate.

A plain Clos is a single ToR per GPU group, not rail-optimized, one plane, any-to-any tier 2.
Each mechanism changes one thing (HPN paper, Table 2 and 4):

- ``dual_tor``: the NIC's two ports go to two ToRs (a ToR serves twice the GPUs at half the
  bandwidth each; no single ToR is a single point of failure).
- ``rail_optimized``: GPU ``r`` of every host goes to the ToRs of rail ``r`` (a segment is
  ``rails`` ToR groups; cross-rail traffic first crosses NVLink).
- ``dual_plane``: the ToRs of side ``p`` link only to the Aggs of plane ``p`` (an Agg sees
  half the ToRs of a segment; one hash decision per flow in a pod).
- ``rail_only``: the ToRs of rail ``r`` link only to the Aggs of rail ``r`` (an Agg sees one
  ToR of a segment; no cross-rail path through the network).
- ``tiers``: 2 (one pod, the Agg's core ports reserved) or 3 (pods joined by a core).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mechanisms:
    """One member of the family."""

    tiers: int = 2
    dual_tor: bool = False
    rail_optimized: bool = False
    dual_plane: bool = False
    rail_only: bool = False

    @property
    def name(self) -> str:
        """``2tier-dualtor-rail-dualplane`` (HPN 7.0's pod); ``2tier-singletor`` (plain Clos).

        >>> Mechanisms(2, True, True, True).name
        '2tier-dualtor-rail-dualplane'
        """
        parts = [f"{self.tiers}tier", "dualtor" if self.dual_tor else "singletor"]
        parts += [token for on, token in ((self.rail_optimized, "rail"),
                                          (self.dual_plane, "dualplane"),
                                          (self.rail_only, "railonly")) if on]
        return "-".join(parts)

    def labels(self) -> list[str]:
        """The mechanisms in use, as the JSON lists them."""
        return [label for on, label in ((self.dual_tor, "dual_tor"),
                                        (self.rail_optimized, "rail_optimized"),
                                        (self.dual_plane, "dual_plane"),
                                        (self.rail_only, "rail_only_tier2")) if on]


def family() -> list[Mechanisms]:
    """Every valid combination: dual plane needs dual ToR, rail-only needs rail-optimized.

    >>> len(family()), family()[0].name
    (18, '2tier-singletor')
    """
    out = []
    for tiers in (2, 3):
        for dual_tor in (False, True):
            for rail in (False, True):
                for plane in ((False, True) if dual_tor else (False,)):
                    for only in ((False, True) if rail else (False,)):
                        out.append(Mechanisms(tiers, dual_tor, rail, plane, only))
    return out
