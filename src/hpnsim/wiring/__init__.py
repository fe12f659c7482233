"""Wiring: a fabric as a cabling plan, checked against what was built, and what a miswire costs.

Modules: ``names`` (hostnames and port names), ``plan`` (the cables of a fabric),
``planfile`` (plan CSV/JSON written and read back against its fabric), ``lldp`` (lldpd's
neighbour tables), ``diff`` (the plan against what was seen: missing, unexpected, swaps,
each with its class), ``hops`` (observed hop lists against the planned routes),
``asbuilt`` (the fabric as found) and ``impact`` (a collective on the plan and as built).
See docs/wiring.md.

>>> from hpnsim.fabrics import fat_tree
>>> from hpnsim.wiring.plan import cabling_plan
>>> len(cabling_plan(fat_tree(4), "fat_tree", {"k": "4"}).cables)
48
"""
