"""Collectives in closed form on a group of hosts.

``shape`` (:class:`GroupShape`: the group as the closed forms see it, and NCCL's channel
count on it), ``cost`` (alpha-beta and NCCL's own tuning model), ``forms`` (each algorithm's
time) and ``model`` (the fastest algorithm and protocol, NCCL's ``auto``).
"""
