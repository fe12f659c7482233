"""The cluster schedulers by name, as data: what the YAML/CLI edge may say and what each
does in one line (:func:`hpnsim.sched.policies.schedule` maps each name to its policy).

This module imports nothing, so a scenario is validated against these names without
loading the schedulers.

>>> SCHEDULERS[:4]
('none', 'crux-pa', 'crux-ps-pa', 'crux')
"""

#: scheduler name -> what it does, in one line (reference/crux.md)
SCHEDULER_DESCRIPTIONS: dict[str, str] = {
    "none": "ECMP paths, one class (max-min sharing)",
    "crux-pa": "Crux priority assignment only: ECMP paths, one class per job by P_j",
    "crux-ps-pa": "Crux path selection by intensity, then priorities on the chosen paths",
    "crux": "Crux path selection, priorities, and compression of the order into K classes",
    "sincronia": "Sincronia's BSSI order; the top K-1 jobs a class each, the rest the lowest",
    "taccl": "TACCL*: least congested paths in arrival order; farther traffic a higher class",
    "cassini": "ECMP paths, one class; per-job time offsets that interleave communication",
    "varys": "smallest effective bottleneck first, cut into K equal blocks",
}
#: the scheduler names, in the order messages and ``--compare`` list them
SCHEDULERS: tuple[str, ...] = tuple(SCHEDULER_DESCRIPTIONS)

__all__ = ["SCHEDULERS", "SCHEDULER_DESCRIPTIONS"]
