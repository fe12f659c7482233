"""Algorithm schedules: which GPU sends what to whom, stage by stage, before any routing.

``schedule`` (the :class:`Schedule` of :class:`Stage` s every algorithm builds), ``ring``
(rings and the pipelined hierarchical collective), ``tree`` (double binary tree,
halving-doubling), ``nvls`` (NVSwitch multicast/reduction, NVLS-tree), ``p2p`` (send/recv,
direct all-to-all) and ``algorithms`` (:func:`build_schedule`: an operation and algorithm name
to its schedule).
"""
