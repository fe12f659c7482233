"""Planning and running a collective on the flow engine.

``options`` (:class:`CollectiveOptions`: how a collective runs), ``plan`` (choose the
algorithm and protocol, build the schedule, route it; cached), ``paths`` (routes of the
members' transfers), ``compile`` (into a TaskGraph), ``run`` (one collective alone, measured
like nccl-tests) and ``concurrent`` (several collectives at once).
"""
