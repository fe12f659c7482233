"""Collectives in closed form on a group of hosts.

``shape`` (:class:`GroupShape`: the group as the closed forms see it, and NCCL's channel
count on it), ``cost`` (alpha-beta and NCCL's own tuning model), ``forms`` (each algorithm's
time), ``nvlstree`` (NVLS-tree's chunk pipeline as NCCL 2.18.3 runs it) and ``model`` (the fastest algorithm and protocol, NCCL's ``auto``).
"""
