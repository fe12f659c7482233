"""hpnsim.sweep: a scenario over a grid or list of overrides, run on local processes or Ray.

Modules: ``spec`` (the sweep file: :class:`Sweep`, :func:`load_sweep`, :func:`parse_sweep`,
overrides) and ``execute`` (:func:`run_sweep`, the backends, resumable rows). Names load on
first use.
"""

import importlib

__all__ = ["Sweep", "SweepPoint", "SweepResult", "load_sweep", "parse_sweep", "run_sweep"]


def __getattr__(name: str):
    for home in ("spec", "execute"):
        module = importlib.import_module(f"hpnsim.sweep.{home}")
        if hasattr(module, name):
            value = getattr(module, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'hpnsim.sweep' has no attribute {name!r}")
