"""The GPU allocators by name, as data: what the YAML/CLI edge may say and what each
picks, in one line (:func:`hpnsim.workloads.allocation.allocate` dispatches on them).

This module imports nothing, so a scenario is validated against these names without
loading the allocators.

>>> ALLOCATORS
('packed', 'topology_aware', 'random', 'given')
"""

#: allocator name -> which hosts it gives a job, in one line
ALLOCATOR_DESCRIPTIONS: dict[str, str] = {
    "packed": "the lowest-numbered free hosts",
    "topology_aware": "the fewest ToR groups, then the fewest Agg groups",
    "random": "uniformly random free hosts (seeded), in host order",
    "given": "the job's explicit GPU list (gpus or hosts), validated",
}
#: the allocator names, in the order messages list them
ALLOCATORS: tuple[str, ...] = tuple(ALLOCATOR_DESCRIPTIONS)

__all__ = ["ALLOCATORS", "ALLOCATOR_DESCRIPTIONS"]
