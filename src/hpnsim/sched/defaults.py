"""The shared cluster's default budgets, as data: the scenario's ``cluster:`` section and the
driver read them from here, so each default is written once and validating a scenario loads
no scheduler code.

>>> CLUSTER_CANDIDATES, PATH_CANDIDATES, MAX_PROBE_SIZE
(4, 8, 1000000)
"""

#: source ports tried per connection by :func:`hpnsim.sched.paths.select_paths`
PATH_CANDIDATES = 8
#: routing seeds tried per job by the shared-cluster driver (a candidate there is a whole
#: compiled iteration, so it tries fewer than :data:`PATH_CANDIDATES`)
CLUSTER_CANDIDATES = 4
#: a compute budget, not a physical constant: a component is probed task by task only if
#: that can be stable within this many tasks plus link entries
#: (:func:`hpnsim.sched.cluster.steady.task_level_cost`; the engine takes about a
#: microsecond of CPU per task or entry)
MAX_PROBE_SIZE = 1_000_000

__all__ = ["CLUSTER_CANDIDATES", "MAX_PROBE_SIZE", "PATH_CANDIDATES"]
