"""Collectives on the packet engine (:mod:`hpnsim.packet`).

``run`` (a planned collective, or several together, as NCCL's chunked rings), ``tree``
(tree and NVLS-tree all-reduce as NCCL's chunked pipeline), ``graph`` (any task graph the
flow engine runs, as packets), ``groups`` (several ring collectives in one run, each
measured), ``ports`` (what the runs share: the ring operations, link rates, fullest ports)
and ``result`` (:class:`PacketCollectiveResult`). A scenario's packet runs
(``scenario/packet_runs.py``, ``scenario/packet_jobs.py``) stay with the scenario: they read a
``Scenario`` and answer ``results.CollectiveRun``, layers above this one.
"""
